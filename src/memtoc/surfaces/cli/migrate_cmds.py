"""``memtoc migrate-store``: copy a SQLite store into PostgreSQL (team mode), resumably, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from memtoc.errors import MemtocError
from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, fail


@app.command("migrate-store")
def migrate_store_cmd(
    source: Annotated[Path, typer.Option("--from", help="The SQLite store (memtoc.db) to copy.")],
    target: Annotated[str, typer.Option("--to", help="The PostgreSQL URL (postgresql://…).")],
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Rows per committed batch (the resume step).")
    ] = 5_000,
    json_out: JsonOpt = False,
) -> None:
    """Copy a SQLite store into PostgreSQL: events (with their order), outbox state, TOC nodes and
    versions, grips, checkpoints, bookmarks, vectors. Re-run after an interruption to continue;
    every table is then compared (counts and content hashes) and the target verified."""
    from memtoc.store.migrate import migrate_store

    if not target.startswith(("postgresql://", "postgres://")):
        raise fail(f"--to must be a postgresql:// URL (got {target!r})")
    try:
        if json_out:
            report = migrate_store(source, target, batch_size=batch_size)
        else:
            with Progress(
                TextColumn("[bold]{task.description:<18}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=console,
            ) as bar:
                tasks: dict[str, TaskID] = {}

                def progress(table: str, done: int, total: int) -> None:
                    if table not in tasks:
                        tasks[table] = bar.add_task(table, total=total)
                    bar.update(tasks[table], completed=done, total=total)

                report = migrate_store(source, target, batch_size=batch_size, progress=progress)
    except MemtocError as exc:
        raise fail(str(exc)) from exc
    if json_out:
        emit_json(report.to_dict())
    else:
        table = Table("table", "source rows", "target rows", "copied now", "match")
        for check in report.checks:
            table.add_row(
                check.table,
                f"{check.source_rows:,}",
                f"{check.target_rows:,}",
                f"{report.copied.get(check.table, 0):,}",
                "[green]ok[/]" if check.ok else "[red]DIFFERS[/]",
            )
        console.print(table)
        for problem in report.verify_problems:
            console.print(f"[red]verify:[/] {problem}", highlight=False)
        verdict = "[green]copy verified[/]" if report.ok else "[red]copy differs[/]"
        resumed = " (resumed)" if report.resumed else ""
        console.print(f"{verdict}{resumed}: {report.source} → {report.target} in "
                      f"{report.seconds:.1f} s")  # fmt: skip
    if not report.ok:
        raise typer.Exit(1)
