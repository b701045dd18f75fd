"""``memory_status`` as an agent reads it: a few lines, problems named, nothing that says nothing.

The full status (``Memory.status`` plus who processes and the session's project) listed every
field, nested, about 570 tokens on a real store — a tenth of an agent's budget for a health
check. The text says what an agent acts on: how much memory there is and over what time, whether
new events are filed (and by whom), whether search and summaries run degraded, and which project
its calls are about; each problem (failures, stale vectors, a summariser fallback, pending
rollups, events out of range, a forget not yet scrubbed) gets a line of its own only when it is
there. ``detail=true`` gives every field; the structured content always carries them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memtoc.model import iso_ms

LEVEL_ORDER = ("year", "month", "week", "day", "segment")
FAILURES_SHOWN = 3


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "0"


def _day(ms: Any) -> str | None:
    return iso_ms(ms)[:10] if isinstance(ms, int) and not isinstance(ms, bool) else None


def _plural(n: Any, word: str) -> str:
    return f"{_n(n)} {word}{'' if n == 1 else 's'}"


def status_text(status: Mapping[str, Any]) -> str:
    """The compact text of ``status`` (``memory_status``'s data): one line per subject, then one
    per problem."""
    lines = [_memory_line(status)]
    outbox = status.get("outbox") or {}
    lines.append(
        f"queue: {_n(outbox.get('pending', 0))} pending, {_n(outbox.get('failed', 0))} failed"
    )
    lines.append(_processing_line(status.get("processing") or {}))
    nodes = status.get("nodes") or {}
    if nodes:
        levels = ", ".join(_plural(nodes[lv], lv) for lv in LEVEL_ORDER if nodes.get(lv))
        lines.append(
            f"table of contents: {levels}; {_plural(status.get('grips', 0), 'grip')}, "
            f"{_plural(status.get('bookmarks', 0), 'bookmark')}"
        )
    lines.append(_search_line(status))
    lines.append(_summaries_line(status))
    project = status.get("working_project")
    if isinstance(project, Mapping):
        lines.append(_project_line(project))
    lines += _problems(status)
    return "\n".join(lines)


def _memory_line(status: Mapping[str, Any]) -> str:
    first = _day(status.get("first_event_ms"))
    last = _day(status.get("last_event_ms"))
    span = f", {first} .. {last}" if first and last else ""
    return (
        f"memtoc: {_plural(status.get('events', 0), 'event')}, "
        f"{_plural(status.get('projects', 0), 'project')}, "
        f"{_plural(status.get('sessions', 0), 'session')}{span} ({status.get('store')})"
    )


def _processing_line(info: Mapping[str, Any]) -> str:
    by = info.get("by")
    if info.get("degraded"):
        return f"processing: {by or 'nobody'} — {info['degraded']}"
    if by == "this-server":
        worker = info.get("worker") or {}
        state = worker.get("state") or "running"
        return (
            f"processing: this server's worker (pid {info.get('pid')}), {state}; "
            f"{_n(worker.get('events_filed', 0))} events filed since it started"
        )
    if by == "other-process":
        return f"processing: {info.get('note') or 'another memtoc process'}"
    return f"processing: {by or 'unknown'}"


def _search_line(status: Mapping[str, Any]) -> str:
    vectors = status.get("vectors") or {}
    embedder = status.get("embedder")
    if embedder is None:
        why = status.get("embedder_degraded") or "no embedder configured"
        return f"search: BM25 only — {why}"
    state = vectors.get("state")
    if vectors.get("usable") is False:
        return f"search: BM25 only — {vectors.get('detail') or state}"
    note = f", {vectors.get('detail')}" if state == "behind" and vectors.get("detail") else ""
    return f"search: BM25 + vectors ({embedder}, {state}{note})"


def _summaries_line(status: Mapping[str, Any]) -> str:
    used = str(status.get("summarizer"))
    configured = status.get("summarizer_configured")
    line = f"summariser: {used}"
    if configured not in (None, "extractive") and used.startswith("extractive"):
        line += f" ({configured} configured, not available: extractive in use)"
    counter = status.get("token_counter")
    line += f"; token counter: {counter}"
    if status.get("token_counter_degraded"):
        line += " (approximate: cl100k unavailable)"
    return line


def _project_line(project: Mapping[str, Any]) -> str:
    name = project.get("name")
    where = project.get("root") or project.get("directory")
    if project.get("known"):
        return f"your project: {name} ({where}); pass project=<name> for another"
    return f"your project: {name} ({where}) has no memory yet; pass project=<name>"


def _problems(status: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    failures = status.get("failures") or {}
    failed = [*(failures.get("outbox") or []), *(failures.get("segments") or [])]
    for entry in failed[:FAILURES_SHOWN]:
        lines.append(f"failed: {entry}")
    if failed:
        more = len(failed) - FAILURES_SHOWN
        lines.append(
            (f"… {more} more; " if more > 0 else "")
            + "`memtoc process --retry-failed` retries them"
        )
    summaries = status.get("summaries") or {}
    if summaries.get("degraded"):
        lines.append(
            f"summaries degraded: {_n(summaries['degraded'])} nodes built by the extractive "
            f"fallback ({summaries.get('degraded_reason')}); {summaries.get('hint')}"
        )
    elif summaries.get("other_backend"):
        lines.append(
            f"summaries: {_n(summaries['other_backend'])} nodes not by the configured "
            f"summariser; {summaries.get('hint')}"
        )
    pending = [
        f"{level} {_n(run.get('pending'))}"
        for level, run in (status.get("rollups") or {}).items()
        if isinstance(run, Mapping) and run.get("pending")
    ]
    if pending:
        lines.append(f"rollups pending: {', '.join(pending)} (the worker rolls them up)")
    if status.get("events_out_of_range"):
        lines.append(
            f"not filed: {_n(status['events_out_of_range'])} events dated outside 1970..9999 "
            "(`memtoc verify` names them)"
        )
    if status.get("forget_scrub_pending"):
        lines.append(
            f"forget: the text of events forgotten since {status['forget_scrub_pending']} is "
            "still in the database file until its readers finish (scrubbed on the next write)"
        )
    return lines
