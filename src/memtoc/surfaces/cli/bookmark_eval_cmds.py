"""``memtoc eval bookmarks``: the bookmark detector against hand-labelled moments of real sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from memtoc.eval.bookmark_eval import BookmarkEvalReport, Counts, evaluate, load_windows
from memtoc.retrieval.bookmarks import BookmarkDetector, ExtractiveDetector
from memtoc.surfaces.cli.app import JsonOpt, console, emit_json, state
from memtoc.surfaces.cli.eval_cmds import eval_app


@eval_app.command("bookmarks")
def eval_bookmarks(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="The labelled set (tests/fixtures/bookmarks/moments.jsonl).",
            exists=True,
            dir_okay=False,
        ),
    ],
    detector: Annotated[
        str,
        typer.Option(
            "--detector",
            help="extractive (default) or configured (the LLM detector when the summariser is "
            "an LLM backend).",
        ),
    ] = "extractive",
    corpus: Annotated[
        list[str] | None, typer.Option("--corpus", help="Only this corpus (repeatable).")
    ] = None,
    errors: Annotated[
        bool, typer.Option("--errors", help="List every missed moment and false bookmark.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Precision, recall and F1 of bookmark detection per corpus and overall."""
    if detector not in {"extractive", "configured"}:
        raise typer.BadParameter("extractive or configured", param_hint="--detector")
    chosen: BookmarkDetector = ExtractiveDetector()
    if detector == "configured":
        from memtoc.retrieval.bookmarks_llm import build_bookmark_detector

        chosen = build_bookmark_detector(state(ctx).settings)
    windows = load_windows(path)
    report = evaluate(windows, chosen, path=str(path), corpora=corpus)
    if json_out:
        data = report.to_dict()
        if errors:
            data["errors"] = [
                {
                    "id": o.window.id,
                    "error": o.error,
                    "label": o.window.label,
                    "types": list(o.types),
                }
                for o in report.outcomes
                if o.error
            ]
        emit_json(data)
        return
    _print(report, errors)


def _row(table: Table, name: str, c: Counts) -> None:
    typed = f"{c.typed / c.tp:.2f}" if c.tp else "-"
    table.add_row(
        name,
        str(c.windows),
        str(c.moments),
        str(c.tp),
        str(c.fp),
        str(c.fn),
        f"{c.precision:.3f}",
        f"{c.recall:.3f}",
        f"[bold]{c.f1:.3f}[/]",
        typed,
    )


def _print(report: BookmarkEvalReport, errors: bool) -> None:
    table = Table("slice", "windows", "moments", "TP", "FP", "FN", "precision", "recall", "F1",
                  "type ok", title=f"bookmark detector: {report.detector}")  # fmt: skip
    for name, counts in sorted(report.corpora.items()):
        _row(table, name, counts)
    _row(table, "overall", report.overall)
    console.print(table)
    by_label = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(report.overall.by_label.items()))
    console.print(f"recall by label: {by_label}", highlight=False)
    if report.degraded:
        console.print(f"[yellow]degraded on {len(report.degraded)} windows[/]: "
                      f"{escape(report.degraded[0])}")  # fmt: skip
    if not errors:
        return
    for o in report.outcomes:
        if o.error is None:
            continue
        w = o.window
        console.print(f"[bold]{o.error}[/] {w.id} ({w.label}) {escape(w.source)}", highlight=False)
        for i, (role, text) in enumerate(w.turns):
            mark = "*" if i == w.focus else " "
            console.print(f"  {mark}{role[0].upper()}: {escape(text[:240])}", highlight=False)
        for t, content in zip(o.types, o.contents, strict=True):
            console.print(f"  → [{t}] {escape(content)}", highlight=False)
