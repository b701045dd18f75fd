"""Time-ordered event scans on SQLite: keyset pages of the project index, merged across projects.

The events' one time index is ``events_project_time_session`` (``project, ts_ms, session_id``,
ending in the rowid ``seq``). A scan of one project (or one session) pages through it from a
``(ts_ms, seq)`` cursor; a scan of every project runs one such scan per project and merges them on
``(ts_ms, seq)`` — the same order as one ``ORDER BY ts_ms, seq`` over the table, since ``seq`` is
unique. The projects are the index's distinct first column, found by one seek each. A separate
``(ts_ms)`` index (``0011_events_time``) served these scans too, but every append paid for it
(``0012_drop_events_time``; figures in docs/benchmarks.md, "The `events_time` index").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any

from memtoc.store.sqlite.pipeline import EVENT_COLS

Query = Callable[[str, Sequence[Any]], list[Any]]
Scope = Callable[[int | None, int | None], tuple[list[str], list[Any]] | None]
"""WHERE clauses and parameters of a page within ``since <= ts_ms < until``; None: no match."""

PAGE = 2_000
"""Rows a page of a scan reads (a scan neither holds the lock between pages nor loads all)."""
MERGE_MIN_PAGE = 64
"""A merged scan's page per project: ``PAGE`` shared by the projects, but at least this."""

_TIME_ORDER = itemgetter(2, 0)
"""A row's ``(ts_ms, seq)`` (``EVENT_COLS`` order)."""

PROJECT_IDS = (
    "WITH RECURSIVE p(project) AS ("
    " SELECT MIN(project) FROM events"
    " UNION ALL"
    " SELECT (SELECT MIN(project) FROM events WHERE project > p.project) FROM p"
    " WHERE p.project IS NOT NULL"
    ") SELECT project FROM p WHERE project IS NOT NULL"
)
"""Every project id of the events (tombstones included), in order: one index seek per project,
not a read of the whole index (``SELECT DISTINCT`` would read every entry)."""


def time_order(descending: bool = False) -> str:
    """``ORDER BY`` of a project's scan: ``(ts_ms, seq)``."""
    d = " DESC" if descending else ""
    return f"ts_ms{d}, seq{d}"


def project_ids(query: Query) -> list[str]:
    return [r[0] for r in query(PROJECT_IDS, ())]


def time_span(query: Query, projects: Sequence[str]) -> tuple[int | None, int | None]:
    """The events' first and last ``ts_ms`` (tombstones included): the two ends of each project's
    range in the index."""
    lo: int | None = None
    hi: int | None = None
    for project in projects:
        first = query("SELECT MIN(ts_ms) FROM events WHERE project = ?", (project,))[0][0]
        last = query("SELECT MAX(ts_ms) FROM events WHERE project = ?", (project,))[0][0]
        if first is not None:
            lo = first if lo is None else min(lo, first)
            hi = last if hi is None else max(hi, last)
    return lo, hi


def scan_pages(
    query: Query,
    scope: Scope,
    since_ms: int | None,
    until_ms: int | None,
    *,
    order_by: str,
    descending: bool,
    limit: int | None,
    page: int = PAGE,
) -> Iterator[Any]:
    """Rows in ``(ts_ms, seq)`` order, a page at a time (keyset on ``(ts_ms, seq)``).

    Each page is an index range that starts at the cursor's millisecond (``since``/``until`` move
    to it), so every page costs the same, and events of one millisecond keep their append order.
    """
    cmp = "<" if descending else ">"
    remaining = limit
    cursor: tuple[int, int] | None = None
    while remaining is None or remaining > 0:
        if cursor is not None and descending:
            until_ms = cursor[0] + 1
        elif cursor is not None:
            since_ms = cursor[0]
        found = scope(since_ms, until_ms)
        if found is None:
            return
        clauses, args = found
        if cursor is not None:
            clauses = [*clauses, f"(ts_ms, seq) {cmp} (?, ?)"]
            args = [*args, *cursor]
        size = page if remaining is None else min(page, remaining)
        rows = query(
            f"SELECT {EVENT_COLS} FROM events WHERE {' AND '.join(clauses)} "
            f"ORDER BY {order_by} LIMIT {size}",
            args,
        )
        yield from rows
        if len(rows) < size:
            return
        cursor = _TIME_ORDER(rows[-1])
        if remaining is not None:
            remaining -= len(rows)


def merged_scan(
    query: Query,
    project_scope: Callable[[str], Scope],
    since_ms: int | None,
    until_ms: int | None,
    *,
    descending: bool,
    limit: int | None,
) -> Iterator[Any]:
    """Rows of every project in ``(ts_ms, seq)`` order: each project's scan, merged.

    The merge holds a page per project: the pages are ``PAGE`` shared by the projects (at least
    ``MERGE_MIN_PAGE``), so a store of many projects does not hold thousands of rows for each.
    """
    projects = project_ids(query)
    page = max(MERGE_MIN_PAGE, PAGE // max(1, len(projects)))
    streams = [
        scan_pages(
            query,
            project_scope(project),
            since_ms,
            until_ms,
            order_by=time_order(descending),
            descending=descending,
            limit=limit,
            page=page,
        )
        for project in projects
    ]
    merged = heapq.merge(*streams, key=_TIME_ORDER, reverse=descending)
    return merged if limit is None else islice(merged, limit)
