"""``memtoc forget``: forget events for good, after showing what matches; ``memtoc forget-log``.

The plan is computed first (``Memory.forget(dry_run=True)``) and shown — counts, and with
``--query`` the matching events themselves — then confirmed (unless ``--yes``). What is executed is
exactly the confirmed list of event ids, never a re-run of the query. ``--query`` selects every
event whose text or metadata holds each word; more matches than ``--limit`` are refused with the
count (nothing is cut silently).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memtoc.forgetting import ForgetReport
from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, fail, open_memory
from memtoc.surfaces.cli.time_option import SinceOpt, UntilOpt, time_option

_SHOWN = 20
"""Matching events listed before the confirmation (the rest are counted)."""
QUERY_LIMIT = 1000
"""``--limit``'s default: a query matching more is refused unless the limit is raised."""


@app.command()
def forget(
    ctx: typer.Context,
    event: Annotated[
        list[str] | None, typer.Option("--event", "-e", help="An event id (repeatable).")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Every event of a session.")
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    query: Annotated[
        str | None,
        typer.Option(
            "--query", "-q", help="Every event whose text or metadata contains each word."
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            help="--query: refuse when more events than this match (all matches are forgotten "
            "otherwise; raise it to forget more).",
        ),
    ] = QUERY_LIMIT,
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="Only this project.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be forgotten; change nothing.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Forget events: tombstones, re-derived summaries, grips, vectors and bookmarks; the text is
    purged from the database file (and its WAL). Filters combine with AND. Cannot be undone."""
    if json_out and not (yes or dry_run):
        raise fail("--json needs --yes (or --dry-run): a forget is confirmed before it runs")
    if limit < 1:
        raise fail(f"--limit must be at least 1 (got {limit})")
    with open_memory(ctx) as memory:
        since_ms = time_option(memory, since, option="--since", edge="start")
        until_ms = time_option(memory, until, option="--until", edge="end")
        plan = memory.forget(
            event_ids=event,
            session_id=session,
            since_ms=since_ms,
            until_ms=until_ms,
            project=project,
            query=query,
            dry_run=True,
        )
        if dry_run:
            _show(memory, plan, json_out, list_events=True)
            return
        if query is not None and plan.events > limit:
            if not json_out:
                _show(memory, plan, False, list_events=True)
            raise fail(
                f"{plan.events} events match --query, more than --limit {limit}: nothing was "
                f"forgotten (narrow the query, or pass --limit {plan.events} to forget them all)"
            )
        if not plan.event_ids:
            _show(memory, plan, json_out, list_events=False)
            return
        if not yes:
            _show(memory, plan, False, list_events=query is not None or len(plan.event_ids) <= 5)
            if not typer.confirm(
                f"Forget {plan.events} events for good (this cannot be undone)?", default=False
            ):
                raise fail("aborted: nothing was forgotten")
        report = memory.forget(plan=plan)  # exactly the confirmed ids, audited as the user's ask
        _show(memory, report, json_out, list_events=False)
        if report.wal_truncated is False:
            raise fail(
                "old copies of the forgotten text remain (SQLite: in the WAL; PostgreSQL: row "
                "versions VACUUM had to keep): another connection kept reading a snapshot from "
                "before the forget past the wait; the next `memtoc process` (or "
                "the running daemon) removes it once that reader ends (`memtoc status`: "
                "forget_scrub_pending)"
            )


@app.command("forget-log")
def forget_log(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", help="How many entries.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """The audit log of forgets: when, which selector, which event ids and counts (no content)."""
    with open_memory(ctx) as memory:
        entries = memory.forget_audit(limit)
    if json_out:
        emit_json([e.to_dict() for e in entries])
        return
    table = Table("audit", "when", "selector", "events", "segments", "bookmarks")
    for e in entries:
        used = ", ".join(f"{k}={v}" for k, v in e.selector.items() if v not in (None, False))
        table.add_row(
            str(e.audit_id),
            iso_ms(e.forgotten_ms),
            used,
            str(len(e.event_ids)),
            str(e.counts.get("segments_removed", 0)),
            str(e.counts.get("bookmarks_removed", 0)),
        )
    console.print(table)


def _show(memory: Memory, report: ForgetReport, json_out: bool, *, list_events: bool) -> None:
    if json_out:
        emit_json(report.to_dict())
        return
    verb = "Would forget" if report.dry_run else "Forgot"
    console.print(
        f"{verb} [bold]{report.events}[/] events in {report.sessions} sessions"
        + (f" (projects: {', '.join(report.projects)})" if report.projects else "")
    )
    if report.already_forgotten:
        console.print(f"{len(report.already_forgotten)} already forgotten")
    if report.missing:
        console.print(f"not found: {', '.join(report.missing)}")
    if list_events and report.event_ids:
        table = Table("event", "time", "session", "role", "text")
        for ev in memory.store.get_events(report.event_ids[:_SHOWN]):
            head = " ".join(ev.text.split())
            table.add_row(ev.event_id, iso_ms(ev.ts_ms), ev.session_id, ev.role, head[:60])
        console.print(table)
        if report.events > _SHOWN:
            console.print(f"… and {report.events - _SHOWN} more (--dry-run --json lists every one)")
    if not report.dry_run:
        console.print(
            f"segments removed {report.segments_removed}, rebuilt {report.segments_rebuilt}; "
            f"periods re-rolled {report.periods_rerolled}, retired {report.periods_retired}; "
            f"bookmarks removed {report.bookmarks_removed}; audit #{report.audit_id}"
        )
