"""``memtoc context``: the session-start context an agent is given (also what the hook prints)."""

from __future__ import annotations

from typing import Annotated

import typer

from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.surfaces.cli.app import JsonOpt, ProjectOpt, app, console, emit_json, err_console, state
from memtoc.surfaces.quick import context_view


@app.command()
def context(
    ctx: typer.Context,
    project: ProjectOpt = None,
    budget: Annotated[
        int, typer.Option("--budget", min=0, help="Token budget of the context.")
    ] = DEFAULT_BUDGET,
    json_out: JsonOpt = False,
) -> None:
    """Recent days, open thread and bookmarks of a project, within a token budget."""
    view, note = context_view(state(ctx).settings, project, budget)
    if note:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    if json_out:
        emit_json(view.to_dict())
        return
    if not view.text:
        console.print("Nothing to show yet: ingest and process some sessions first.")
        return
    console.print(view.text, highlight=False, markup=False, soft_wrap=True)
    console.print(f"[dim]{view.tokens} of {budget} tokens[/]")
