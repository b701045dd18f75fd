"""``memtoc bookmarks list|refresh``: the salient moments of a project (conclusions, resolutions,
validated understanding, foundational context)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from memtoc.model import iso_ms
from memtoc.retrieval.bookmarks import effective_importance
from memtoc.surfaces.cli.app import (
    AllProjectsOpt,
    JsonOpt,
    ProjectOpt,
    app,
    console,
    emit_json,
    open_memory,
    project_scope,
)

bookmarks_app = typer.Typer(help="Salient moments: decisions, resolutions, confirmations, context.")
app.add_typer(bookmarks_app, name="bookmarks")


@bookmarks_app.command("list")
def list_bookmarks(
    ctx: typer.Context,
    project: ProjectOpt = None,
    all_projects: AllProjectsOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """Bookmarks by importance with decay (most important first)."""
    with open_memory(ctx, read_only=True) as memory:
        scope = project_scope(memory, project, all_projects)
        marks = [] if scope.empty else memory.bookmarks(scope.project, limit)
        now = memory.clock.now_ms()
    if json_out:
        emit_json(
            {
                "bookmarks": [
                    {**b.to_dict(), "effective_importance": round(effective_importance(b, now), 4)}
                    for b in marks
                ]
            }
        )
        return
    if not marks:
        console.print("no bookmarks yet (run [bold]memtoc bookmarks refresh[/])")
        return
    table = Table("importance", "type", "created (UTC)", "content", "id")
    for b in marks:
        table.add_row(
            f"{effective_importance(b, now):.2f}",
            b.type,
            iso_ms(b.created_ms)[:16].replace("T", " "),
            escape(b.content),
            f"[dim]{b.bookmark_id}[/]",
        )
    console.print(table)


@bookmarks_app.command("refresh")
def refresh(
    ctx: typer.Context,
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="One project (default: all).")
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Delete the project's bookmarks first.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Re-scan all events for bookmarks (idempotent: a second run writes nothing)."""
    with open_memory(ctx) as memory:
        report = memory.refresh_bookmarks_report(project, rebuild=rebuild)
    if json_out:
        emit_json(report.to_dict())
        return
    console.print(
        f"scanned [bold]{report.events_scanned:,}[/] events in {report.passes:,} windows: "
        f"{report.written:,} bookmarks written, {report.deleted:,} replaced"
    )
    for reason in dict.fromkeys(report.degraded):
        console.print(f"[yellow]degraded:[/] {escape(reason)}")
