"""``memtoc search`` (teleport: BM25 + vectors, fused) and ``memtoc rebuild`` (derived indexes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from memtoc.clock import SystemClock
from memtoc.retrieval.hybrid import SearchResult
from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, fail, open_memory
from memtoc.surfaces.cli.timeparse import parse_instant


def _render(result: SearchResult) -> None:
    head = f"[bold]{escape(result.query)}[/] — {result.mode}"
    if result.fusion:
        head += f" ({result.fusion})"
    head += f", {len(result.items)} items, {result.tokens} tokens at {result.depth}"
    console.print(head, highlight=False)
    if result.degraded:
        console.print(f"[yellow]degraded:[/] {escape(result.degraded)}", highlight=False)
    if not result.items:
        console.print("no results")
        return
    table = Table(show_lines=True)
    for column in ("score", "kind", "id / when", "text", "tokens"):
        table.add_column(column, overflow="fold")
    for item in result.items:
        when = item.to_dict()["start_time"]
        table.add_row(
            f"{item.score:.3f}",
            item.kind,
            f"{escape(item.id)}\n[dim]{when} {escape(item.project)}[/]",
            (f"[bold]{escape(item.title)}[/]\n" if item.title else "") + escape(item.text),
            str(item.tokens),
        )
    console.print(table)


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What to look for (any text).")] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries", help="Batch: one query per line in, one JSON result per line out."
        ),
    ] = None,
    level: Annotated[
        str | None, typer.Option("--level", help="Only TOC nodes of this level (year … segment).")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="node, grip, bookmark or event (repeatable; default: all)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From (ISO 8601, epoch ms, or an age like 7d).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Until (exclusive).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many items.")] = 10,
    depth: Annotated[
        str, typer.Option("--depth", help="L0 (abstract/excerpt), L1 (overview), L2 (events).")
    ] = "L0",
    project: Annotated[
        list[str] | None, typer.Option("--project", "-p", help="Project(s) (default: all).")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only this session.")] = None,
    role: Annotated[
        str | None, typer.Option("--role", help="Only events of this role (user, assistant …).")
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="auto (hybrid when an embedder loads), bm25, vector.")
    ] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Teleport: search nodes, grips, bookmarks and events (BM25 + vectors, fused)."""
    if (query is None) == (queries is None):
        raise fail("give a QUERY or --queries FILE (not both)")
    now = SystemClock().now_ms()
    since_ms = parse_instant(since, now_ms=now, option="--since")
    until_ms = parse_instant(until, now_ms=now, option="--until")
    with open_memory(ctx, read_only=True) as memory:

        def run(text: str) -> SearchResult:
            return memory.search(
                text,
                projects=project or None,
                level=level,
                kinds=kind or None,
                since_ms=since_ms,
                until_ms=until_ms,
                session_id=session,
                role=role,
                limit=limit,
                depth=depth,
                mode=mode,
            )

        if queries is not None:
            _batch(queries, run)
            return
        assert query is not None
        result = run(query)
    if json_out:
        emit_json(result.to_dict())
    else:
        _render(result)


def _batch(path: Path, run: Callable[[str], SearchResult]) -> None:
    """One JSON object per input line, in order (blank lines give empty results too)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc}") from None
    for line in lines:
        result = run(line)
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")


@app.command()
def rebuild(
    ctx: typer.Context,
    vectors: Annotated[
        bool, typer.Option("--vectors", help="Re-embed every event and doc (configured embedder).")
    ] = False,
    fts: Annotated[
        bool, typer.Option("--fts", help="Re-index events and docs for BM25 (code-aware forms).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Rebuild derived search data from the stored events (default: every index named here)."""
    everything = not (vectors or fts)
    out: dict[str, object] = {}
    with open_memory(ctx) as memory:
        if fts or everything:
            out["fts"] = memory.rebuild_fts()
        if vectors or everything:
            embedder = memory.semantic.embedder
            if embedder is None:
                raise fail(memory.semantic.degraded or "no embedder")
            out["vectors"] = {"embedder": embedder.name, **memory.rebuild_vectors().to_dict()}
    if json_out:
        emit_json(out)
        return
    if "fts" in out:
        console.print(f"FTS: re-indexed {out['fts']}")
    if "vectors" in out:
        console.print(f"vectors: re-embedded {out['vectors']}")
