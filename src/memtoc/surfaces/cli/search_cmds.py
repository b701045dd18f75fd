"""``memtoc search`` (teleport: BM25 + vectors, fused; ``--drill``: drill-down through the TOC;
``--at``: the reference time for "last week") and ``memtoc rebuild`` (derived indexes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from memtoc.derived.rebuild import PARTS
from memtoc.retrieval.drill import DEFAULT_BEAM, DrillResult
from memtoc.retrieval.hybrid import SearchResult
from memtoc.retrieval.time_search import DEFAULT_TIME_MODE, TIME_MODES
from memtoc.surfaces.cli.app import (
    AllProjectsOpt,
    JsonOpt,
    ProjectsOpt,
    app,
    console,
    emit_json,
    fail,
    open_memory,
    project_scope,
)
from memtoc.surfaces.cli.time_option import AtOpt, SinceOpt, UntilOpt, time_option
from memtoc.surfaces.labels import OUTSIDE_WINDOW, after_title, outside_window
from memtoc.surfaces.mcp_text import short_reason


def render_time(
    time_range: dict[str, object] | None, spans: Iterable[tuple[int, int]] = ()
) -> None:
    if time_range is None:
        return
    expr = escape(str(time_range["expression"]))
    if time_range["start_time"] is None:
        console.print(f"[yellow]time:[/] {expr!r} could not be resolved", highlight=False)
        return
    anchor = (
        f" (after/before {escape(str(time_range['anchor']))!r})" if time_range["anchor"] else ""
    )
    console.print(
        f"time: {expr!r}{anchor} → {time_range['start_time']} … {time_range['end_time']} "
        f"({time_range['applied']})",
        highlight=False,
    )
    if outside_window(time_range, spans):
        console.print(f"[yellow]{OUTSIDE_WINDOW}[/]", highlight=False)


def _render_path(result: DrillResult) -> None:
    for step in result.path:
        chosen = ", ".join(f"{escape(c.node.node_id)} ({c.score:.2f})" for c in step.chosen)
        console.print(f"  {step.level:<8} {step.candidates:>4} → {chosen or '—'}", highlight=False)
    if result.reason:
        console.print(f"[yellow]drill dropped:[/] {escape(result.reason)}", highlight=False)
    if result.fallback:
        console.print(f"fallback: {' → '.join(result.fallback)}", highlight=False)


def _render(result: SearchResult | DrillResult) -> None:
    if isinstance(result, DrillResult):
        head = f"[bold]{escape(result.query)}[/] — drill"
    else:
        head = f"[bold]{escape(result.query)}[/] — {result.mode}"
        if result.fusion:
            head += f" ({result.fusion})"
    head += f", {len(result.items)} items, {result.tokens} tokens at {result.depth}"
    console.print(head, highlight=False)
    if result.degraded:
        console.print(degraded_line(result.degraded), highlight=False)
    render_time(result.time_range, ((i.start_ms, i.end_ms) for i in result.items))
    if isinstance(result, DrillResult):
        _render_path(result)
    if not result.items:
        console.print("no results")
        return
    if console.width < WIDE_TABLE:
        _render_list(result)
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
            _cell(item.title, item.text),
            str(item.tokens),
        )
    console.print(table)


WIDE_TABLE = 120
"""Below this many columns results are a list, not a table: in an 80-column terminal the table
left ~12 characters of text per line and folded ids across lines ("toc:segment:2025-11-17T2" /
"3:50:4e29ef"), which no one can copy."""


def _render_list(result: SearchResult | DrillResult) -> None:
    """Each result as a head line — rank, kind, the whole id, when, project, score, tokens —
    then its title and text, indented."""
    for n, item in enumerate(result.items, start=1):
        when = item.to_dict()["start_time"]
        console.print(
            f"[bold]{n}.[/] {item.kind} [cyan]{escape(item.id)}[/] [dim]{when} "
            f"{escape(item.project)} · score {item.score:.3f} · {item.tokens} tok[/]",
            highlight=False,
            soft_wrap=True,
        )
        console.print(Padding(_cell(item.title, item.text), (0, 0, 0, 3)), highlight=False)


def _cell(title: str, text: str) -> str:
    """A result's title in bold, then what its text says after it (a node's L0 and a grip's
    text open with the title: it was printed twice)."""
    rest = escape(after_title(title, text)) if title else escape(text)
    if not title:
        return rest
    return f"[bold]{escape(title)}[/]" + (f"\n{rest}" if rest else "")


def degraded_line(degraded: str) -> str:
    """A degraded mode in a few words (the whole reason, often a library's error text of
    several lines, is what `memtoc status` shows)."""
    return f"[yellow]degraded: {escape(short_reason(degraded))}[/] [dim](memtoc status says why)[/]"


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
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many items.")] = 10,
    depth: Annotated[
        str, typer.Option("--depth", help="L0 (abstract/excerpt), L1 (overview), L2 (events).")
    ] = "L0",
    project: ProjectsOpt = None,
    all_projects: AllProjectsOpt = False,
    session: Annotated[str | None, typer.Option("--session", help="Only this session.")] = None,
    role: Annotated[
        str | None, typer.Option("--role", help="Only events of this role (user, assistant …).")
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="auto (hybrid when an embedder loads), bm25, vector.")
    ] = "auto",
    at: AtOpt = None,
    time_mode: Annotated[
        str,
        typer.Option("--time", help="A time expression in the query: boost, filter or off."),
    ] = DEFAULT_TIME_MODE,
    drill: Annotated[
        bool,
        typer.Option("--drill", help="Drill down year → … → segment, then the best events there."),
    ] = False,
    beam: Annotated[
        int, typer.Option("--beam", help="--drill: candidates kept per level.")
    ] = DEFAULT_BEAM,
    json_out: JsonOpt = False,
) -> None:
    """Teleport: search nodes, grips, bookmarks and events (BM25 + vectors, fused).

    A time expression in the query ("last week", "in March", "before the migration") is resolved
    against --at (default now) and ranks the results inside it first (--time filter: only them).
    --drill navigates the table of contents instead, each level inside the periods chosen above it.
    """
    if (query is None) == (queries is None):
        raise fail("give a QUERY or --queries FILE (not both)")
    if time_mode not in TIME_MODES:
        raise fail(f"--time must be one of {', '.join(TIME_MODES)} (got {time_mode!r})")
    if drill and (
        level or kind or session or role or mode != "auto" or time_mode != DEFAULT_TIME_MODE
    ):
        raise fail("--drill takes no --level, --kind, --session, --role, --mode or --time")
    with open_memory(ctx, read_only=True) as memory:
        since_ms = time_option(memory, since, option="--since", edge="start")
        until_ms = time_option(memory, until, option="--until", edge="end")
        at_ms = time_option(memory, at, option="--at", edge="start")
        scope = project_scope(memory, project, all_projects)

        def run(text: str) -> SearchResult | DrillResult:
            if drill:
                return memory.drill(
                    text,
                    projects=scope.projects,
                    since_ms=since_ms,
                    until_ms=until_ms,
                    at_ms=at_ms,
                    beam=beam,
                    limit=limit,
                    depth=depth,
                )
            return memory.search(
                text,
                projects=scope.projects,
                level=level,
                kinds=kind or None,
                since_ms=since_ms,
                until_ms=until_ms,
                session_id=session,
                role=role,
                limit=limit,
                depth=depth,
                mode=mode,
                at_ms=at_ms,
                time_mode=time_mode,
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


def _batch(path: Path, run: Callable[[str], SearchResult | DrillResult]) -> None:
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
    all_parts: Annotated[
        bool, typer.Option("--all", help="Rebuild everything derived from events (all parts).")
    ] = False,
    segments: Annotated[
        bool,
        typer.Option("--segments", help="Re-segment every session (and rebuild what changed)."),
    ] = False,
    summaries: Annotated[
        bool,
        typer.Option(
            "--summaries",
            help="Re-summarise every segment and period with the configured summariser "
            "(new node versions where the content changes; old versions stay).",
        ),
    ] = False,
    grips: Annotated[
        bool, typer.Option("--grips", help="Re-derive every bullet's grips from its events.")
    ] = False,
    bookmarks: Annotated[
        bool, typer.Option("--bookmarks", help="Detect bookmarks again over every event.")
    ] = False,
    docs: Annotated[
        bool,
        typer.Option("--docs", help="Rewrite the search documents of nodes, grips, bookmarks."),
    ] = False,
    fts: Annotated[
        bool, typer.Option("--fts", help="Re-index events and docs for BM25 (code-aware forms).")
    ] = False,
    vectors: Annotated[
        bool, typer.Option("--vectors", help="Re-embed every event and doc (configured embedder).")
    ] = False,
    project: Annotated[
        str | None, typer.Option("--project", help="Only this project (FTS and vectors: all).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Rebuild what is derived from the stored events: by part, or everything with --all
    (default: the search indexes, --fts and --vectors). `memtoc verify` says which part to rebuild."""
    chosen = {
        name
        for name, on in (
            ("segments", segments),
            ("summaries", summaries),
            ("grips", grips),
            ("bookmarks", bookmarks),
            ("docs", docs),
            ("fts", fts),
            ("vectors", vectors),
        )
        if on
    }
    if all_parts:
        chosen = set(PARTS)
    elif not chosen:
        chosen = {"fts", "vectors"}
    with open_memory(ctx) as memory:
        if vectors and not all_parts and memory.semantic.embedder is None:
            raise fail(memory.semantic.degraded or "no embedder")
        report = memory.rebuild(sorted(chosen), project=project)
    if json_out:
        emit_json(report.to_dict())
        return
    for part, counts in report.parts.items():
        shown = ", ".join(
            f"{k} {v}" for k, v in counts.items() if k != "seconds" and v not in ([], None)
        )
        console.print(
            f"[bold]{part}[/]: {escape(shown)} ({counts.get('seconds')} s)", highlight=False
        )
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
