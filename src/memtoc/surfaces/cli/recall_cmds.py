"""``memtoc recall``: the best context for a question within a token budget (``Memory.recall``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from memtoc.model import iso_ms
from memtoc.retrieval.recall import DEFAULT_BUDGET, RecallResult
from memtoc.retrieval.tiers import SearchItem
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
from memtoc.surfaces.cli.search_cmds import degraded_line, render_time
from memtoc.surfaces.cli.time_option import AtOpt, time_option


def _render(result: RecallResult, roles: dict[str, str]) -> None:
    head = (
        f"[bold]{escape(result.query)}[/] — recall ({result.method}), {len(result.items)} items, "
        f"{result.tokens} of {result.budget} tokens"
    )
    if result.stepped_down:
        head += f", {result.stepped_down} stepped down"
    console.print(head, highlight=False)
    if result.truncated:
        console.print(f"[bold yellow]cut short:[/] {escape(str(result.degraded))}", highlight=False)
    elif result.degraded:
        console.print(degraded_line(result.degraded), highlight=False)
    if result.time_range is not None:
        render_time(result.time_range, ((i.start_ms, i.end_ms) for i in result.items))
    if not result.items:
        console.print("nothing recalled")
        return
    projects = {item.project for item in result.items}
    for item in result.items:
        console.print(_item_head(item, roles.get(item.id), len(projects) > 1), highlight=False)
        console.print(escape(item.text), highlight=False)


def _item_head(item: SearchItem, role: str | None, with_project: bool) -> str:
    """Who spoke and when, above a recalled item's text: an event's text does not say whether
    the user or the agent said it ('Please fix these lint errors' read like the agent's)."""
    when = iso_ms(item.start_ms)
    parts = [item.kind]
    if role:
        parts.append(f"[bold]{escape(role)}[/]")
    parts.append(f"{when[:10]} {when[11:16]} UTC")
    if with_project:
        parts.append(escape(item.project))
    parts.append(f"{item.tier} · {item.tokens} tok · {escape(item.id)}")
    return "[dim]" + " · ".join(parts) + "[/]"


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="The question (any text).")] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries", help="Batch: one query per line in, one JSON result per line out."
        ),
    ] = None,
    budget: Annotated[
        int, typer.Option("--budget", "-b", help="Most tokens the context may hold.")
    ] = DEFAULT_BUDGET,
    at: AtOpt = None,
    project: ProjectsOpt = None,
    all_projects: AllProjectsOpt = False,
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", help="Milliseconds before the best so far is returned."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Recall: bookmarks, then the best events, grips and segments, packed into --budget tokens
    (an item that does not fit steps down to its overview or abstract), in time order.

    A time expression in the query ("last week", "in March") is resolved against --at (default
    now) and boosts what happened then.
    """
    if (query is None) == (queries is None):
        raise fail("give a QUERY or --queries FILE (not both)")
    with open_memory(ctx, read_only=True) as memory:
        at_ms = time_option(memory, at, option="--at", edge="start")
        scope = project_scope(memory, project, all_projects)

        def run(text: str) -> RecallResult:
            return memory.recall(
                text, budget=budget, projects=scope.projects, at_ms=at_ms, time_limit_ms=time_limit
            )

        if queries is not None:
            try:
                lines = queries.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise fail(f"cannot read {queries}: {exc}") from None
            for line in lines:
                out = json.dumps(run(line).to_dict(), ensure_ascii=False, default=str)
                sys.stdout.write(out + "\n")
            return
        assert query is not None
        result = run(query)
        # an event item at L1 carries no event (its text is a passage): read who spoke
        events = [i.id for i in result.items if i.kind == "event"] if not json_out else []
        roles = {e.event_id: e.role for e in memory.store.get_events(events)} if events else {}
    if json_out:
        emit_json(result.to_dict())
    else:
        _render(result, roles)
