"""How the SQLite store finds a session's events without a session index.

Since migration ``0007_session_spans`` the events table has no ``(session_id, ts_ms)`` index:
session ids are UUIDs, so that index took every batch's rows at ≈ 25 random places and cost ingest
more than any other part of the insert (docs/benchmarks.md, "Figures behind design choices"). Instead:

- ``sessions(session_id, project, first_ms, last_ms)`` records each session's **span** (the first
  and last ``ts_ms`` of its events in a project), kept by :func:`session_spans` +
  :data:`SPAN_UPSERT` in the same transaction as the events (a few rows per batch: the batch's
  sessions). A span may be wider than the session's events (a duplicate's row, an event forgotten
  since), never narrower: readers only use it to bound a scan.
- ``events_project_time_session`` on ``(project, ts_ms, session_id)`` serves every time scan and,
  within a session's span, its events: the session id is compared inside the index, so only the
  session's own rows are read from the table. A read costs the project's events in the span (for
  sessions that run one after another, about the session's own; interleaved agents multiply it).

Queries name ``+session_id`` (no index may be chosen for that term; there is none, and the ``+``
keeps SQLite from treating the column as a key) and order by ``ts_ms, session_id, seq``: with the
session fixed that is ``(ts_ms, seq)``, and it is the index's own order, so ``LIMIT`` stops the
scan early instead of sorting the span.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from operator import itemgetter, le
from typing import Any

from memtoc.store.base import EventRow

SPAN_UPSERT = (
    "INSERT INTO sessions(session_id, project, first_ms, last_ms) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(session_id, project) DO UPDATE SET "
    "first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms)"
)
"""Widen (or start) a session's span; one row per session of a batch."""


def session_order(descending: bool = False) -> str:
    """``(ts_ms, seq)`` order for rows of one session, spelled as the index's own order (so
    SQLite reads it in order and a ``LIMIT`` stops early: no sort of the span)."""
    d = " DESC" if descending else ""
    return f"ts_ms{d}, session_id{d}, seq{d}"


_TS = itemgetter(1)
_KEY = itemgetter(3, 2)
"""A row's ``ts_ms`` and ``(session_id, project)`` (:data:`~memtoc.store.base.EventRow`)."""

Span = tuple[str, str, int, int]
"""``(session_id, project, first_ms, last_ms)``."""


def session_spans(rows: Sequence[EventRow]) -> list[Span]:
    """Each session's first and last time among ``rows``.

    Rows in time order (the common case: a transcript, a batch of one agent's events) take two
    dictionary builds in C: a session's last row is its latest, its first row its earliest. Other
    batches take a loop.
    """
    ts = list(map(_TS, rows))
    keys = list(map(_KEY, rows))
    if all(map(le, ts, islice(ts, 1, None))):
        last = dict(zip(keys, ts, strict=True))
        first = dict(zip(reversed(keys), reversed(ts), strict=True))
        return [(k[0], k[1], first[k], t) for k, t in last.items()]
    spans: dict[tuple[str, str], list[int]] = {}
    for key, t in zip(keys, ts, strict=True):
        span = spans.get(key)
        if span is None:
            spans[key] = [t, t]
        elif t < span[0]:
            span[0] = t
        elif t > span[1]:
            span[1] = t
    return [(k[0], k[1], s[0], s[1]) for k, s in spans.items()]


Query = Callable[[str, Sequence[Any]], list[Any]]


def spans_of(
    query: Query, session_id: str, project: str | None, *, table: bool
) -> list[tuple[str, int, int]]:
    """``(project, first_ms, last_ms)`` of the session in each project it has events in (only
    ``project`` when given); empty when it has none.

    ``table`` False: a store opened read-only before ``0007_session_spans`` ran (no ``sessions``
    table yet, but its session index): the spans are computed from the events.
    """
    where = "session_id = ?" + (" AND project = ?" if project is not None else "")
    args = (session_id,) if project is None else (session_id, project)
    if table:
        sql = f"SELECT project, first_ms, last_ms FROM sessions WHERE {where} ORDER BY project"
    else:
        sql = (
            f"SELECT project, MIN(ts_ms), MAX(ts_ms) FROM events WHERE {where} "
            "GROUP BY project ORDER BY project"
        )
    return [(r[0], r[1], r[2]) for r in query(sql, args)]


def session_scope(
    query: Query,
    session_id: str,
    project: str | None,
    since_ms: int | None,
    until_ms: int | None,
    *,
    table: bool,
) -> tuple[list[str], list[Any]] | None:
    """WHERE clauses (and their parameters) that select the session's events through
    ``(project, ts_ms, session_id)``, within ``since_ms <= ts_ms < until_ms`` when given; None
    when no event can match (unknown session, or its span outside the range)."""
    spans = spans_of(query, session_id, project, table=table)
    if not spans:
        return None
    lo = min(s[1] for s in spans)
    hi = max(s[2] for s in spans)
    if since_ms is not None:
        lo = max(lo, since_ms)
    if until_ms is not None:
        hi = min(hi, until_ms - 1)
    if lo > hi:
        return None
    projects = [s[0] for s in spans]
    if len(projects) == 1:
        clauses = ["project = ?"]
    else:
        clauses = [f"project IN ({','.join('?' * len(projects))})"]
    clauses += ["ts_ms >= ?", "ts_ms <= ?", "+session_id = ?"]
    return clauses, [*projects, lo, hi, session_id]
