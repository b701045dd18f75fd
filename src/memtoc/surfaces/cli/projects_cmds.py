"""``memtoc projects list|rename|merge``: the projects of a store (``memtoc.projects``).

A project is a repository (all its subfolders and worktrees) or a plain folder, with a stable id
every stored row carries and a readable name. ``list`` shows them with their folders and event
counts (and which one the current directory belongs to); ``rename`` changes a name, never an id;
``merge`` files one project's memory into another.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, fail, open_memory

projects_app = typer.Typer(help="Projects: list them, rename one, merge one into another.")
app.add_typer(projects_app, name="projects")


@projects_app.command("list")
def list_projects(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Every project: name, id, folders and events; * marks the current directory's."""
    with open_memory(ctx, read_only=True) as memory:
        rows = memory.projects()
        here, ws = memory.registry.for_directory(os.getcwd(), register=False)
    current = here.project if here is not None else None
    if json_out:
        emit_json(
            {
                "projects": rows,
                "current": {"directory": os.getcwd(), "root": ws.root, "project": current},
            }
        )
        return
    if not rows:
        console.print("no projects yet: ingest some sessions first")
        return
    table = Table("")
    for column in ("name", "id", "events", "folders"):  # a name or folder is never cut ("…")
        table.add_column(column, overflow="fold")
    for row in rows:
        roots = row.get("roots") or []
        table.add_row(
            "*" if row["project"] == current else "",
            escape(str(row["name"])),
            escape(str(row["project"])),
            f"{row['events']:,}",
            escape("\n".join(str(r) for r in roots) if isinstance(roots, list) else ""),
        )
    console.print(table)
    if current is None:
        console.print(f"[dim]{ws.root} belongs to no project yet[/]", highlight=False)


@projects_app.command("rename")
def rename(
    ctx: typer.Context,
    project: Annotated[str, typer.Argument(help="The project's current name or id.")],
    name: Annotated[str, typer.Argument(help="Its new name.")],
    json_out: JsonOpt = False,
) -> None:
    """Give a project a new name (its id, and every stored row, stay as they are)."""
    with open_memory(ctx) as memory:
        renamed = memory.rename_project(project, name)
    if json_out:
        emit_json(renamed)
        return
    console.print(f"project {escape(str(renamed['project']))} is now named {escape(name)!r}")


@projects_app.command("merge")
def merge(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="The project whose memory moves (name or id).")],
    target: Annotated[str, typer.Argument(help="The project it joins (name or id).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """File SOURCE's memory into TARGET: its events join TARGET, its folders file into TARGET
    from now on, and the table of contents is rebuilt there (sessions split across both, e.g. by
    a change of directory, become one). SQLite stores only."""
    with open_memory(ctx) as memory:
        src = memory.registry.require(source)
        dst = memory.registry.require(target)
        if not yes:
            if json_out:
                raise fail("--json needs --yes (there is no one to ask)")
            events = memory.store.count_events(src.project)
            typer.confirm(
                f"Merge {src.name} ({events:,} events) into {dst.name}?", abort=True, err=True
            )
        report = memory.merge_projects(src.project, dst.project)
    if json_out:
        emit_json(report.to_dict())
        return
    console.print(
        f"merged {escape(src.name)} into {escape(dst.name)}: {report.events:,} events, "
        f"{report.shared_sessions} shared sessions, {report.refiled:,} events filed again, "
        f"{report.roots_moved} folders moved",
        highlight=False,
    )
