"""The store's own edge: what an event row must be to be stored, and what a re-appended id that
was not stored is (a duplicate, a conflict, or a row refused).

The importer validates every event before it reaches a store; these checks hold the same line
for any other caller of ``append_events`` (a library user, a future surface), so no row that
would block the pipeline or crash a read (an instant past year 9999, an unknown role) is ever
stored: SQLite's ``append_events`` and PostgreSQL's check every row in Python
(``row_problem``); SQLite's ``append_rows``, the importer's path, re-checks the instant in SQL
(``VALID_TS_SQL``).

After an append that stored fewer rows than it was given, ``classify`` reads the stored rows of
the batch's ids: a row whose content matches is a duplicate, one that differs is a conflict
(with the fields that differ), one that is not stored at all was refused (with the reason).

NUL, on every backend: an event's text keeps it exactly (PostgreSQL ``text`` cannot hold NUL, so
that store keeps the exact text beside a storable copy); identifiers holding one are refused
(``row_problem``); derived text — grip excerpts, bookmark contents, search docs, failure messages
— is stored through ``storable_text`` (NUL becomes U+FFFD), so both backends hold the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memtoc.model import (
    EVENT_TYPES,
    MAX_ID_CHARS,
    MAX_TS_MS,
    MIN_TS_MS,
    ROLES,
    AppendResult,
    ts_problem,
)

_TYPES = frozenset(EVENT_TYPES)
_ROLES = frozenset(ROLES)
COMPARED = ("timestamp", "session_id", "event_type", "role", "text")
"""What makes two events with one id the same event (project, agent, metadata and source may
differ: a re-import under another ``--project`` is still the same event)."""


VALID_TS_SQL = f"typeof(ts_ms) = 'integer' AND ts_ms BETWEEN {MIN_TS_MS} AND {MAX_TS_MS}"
"""An events row whose instant is in range, in SQL. SQLite's ``append_rows`` (the importer's
path: its rows were validated with the same bounds) checks the rows it just inserted with this
one query per batch and takes back any that fail — the poison that would block the pipeline
cannot get in even through a caller that skipped validation. The full check per row on that
path (a Python filter, a ``WHERE`` on ``INSERT … SELECT`` whose ``IN`` lists are built per row,
or the same conditions in one query after the insert) each cost a share of the insert's speed
(docs/benchmarks.md, "Figures behind design choices")."""


def split_valid(rows: Sequence[Sequence[Any]]) -> tuple[list[int], list[tuple[int, str]]]:
    """The indices of the rows (``EventRow`` order) that are valid events, and the others'
    with the reason."""
    keep: list[int] = []
    refused: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        problem = row_problem(*row[:7])
        if problem is None:
            keep.append(i)
        else:
            refused.append((i, problem))
    return keep, refused


def storable_text(text: str) -> str:
    """Derived text as every store keeps it: NUL (which PostgreSQL ``text`` cannot hold) becomes
    U+FFFD. Derived text is rebuilt from the events, which keep theirs exactly."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def row_problem(
    event_id: object,
    ts_ms: object,
    project: object,
    session_id: object,
    agent: object,
    event_type: object,
    role: object,
) -> str | None:
    """Why a row cannot be stored, or None."""
    problem = ts_problem(ts_ms)
    if problem is not None:
        return problem
    if event_type not in _TYPES:
        return f"invalid event_type {event_type!r}"
    if role not in _ROLES:
        return f"invalid role {role!r}"
    for name, value, empty_ok in (
        ("event_id", event_id, False),
        ("project", project, False),
        ("session_id", session_id, False),
        ("agent", agent, True),
    ):
        if type(value) is not str:
            return f"{name} must be a string (got {type(value).__name__})"
        if not value and not empty_ok:
            return f"{name} is empty"
        if len(value) > MAX_ID_CHARS:
            return f"{name} is longer than {MAX_ID_CHARS} characters ({len(value)})"
        if "\x00" in value:
            return f"{name} contains a NUL character"
    return None


Stored = tuple[int, str, str, str, str, bool]
"""A stored event as ``classify`` compares it: ``ts_ms, session_id, event_type, role, text`` and
whether it is live (a forgotten event's tombstone has no text to compare)."""


def classify(
    rows: Sequence[Sequence[Any]],
    fetch: Callable[[list[str]], dict[str, Stored]],
    result: AppendResult,
) -> None:
    """Sort the rows of an append that did not all go in into duplicates, conflicts and refused
    rows (``rows`` in ``EventRow`` order; ``fetch`` reads the stored rows of some ids)."""
    stored = fetch(list(dict.fromkeys(str(r[0]) for r in rows)))
    duplicates = 0
    for index, row in enumerate(rows):
        found = stored.get(row[0])
        if found is None:
            reason = row_problem(*row[:7]) or "not stored"
            result.refused.append((index, reason))
            continue
        ts_ms, session_id, event_type, role, text, live = found
        if not live:
            duplicates += 1
            continue
        given = (row[1], row[3], row[5], row[6], row[7])
        differs = tuple(
            name
            for name, a, b in zip(
                COMPARED, (ts_ms, session_id, event_type, role, text), given, strict=True
            )
            if a != b
        )
        if differs:
            result.conflicts.append((index, differs))
        else:
            duplicates += 1
    result.duplicates = duplicates - result.inserted


IN_RANGE_SQL = f"ts_ms BETWEEN {MIN_TS_MS} AND {MAX_TS_MS}"
OUT_OF_RANGE_SQL = f"NOT ({IN_RANGE_SQL})"
"""Events only an older memtoc could store: never filed, named by ``verify`` and ``status``."""


def out_of_range_problem(count: int, examples: Sequence[tuple[str, int]]) -> str | None:
    """``verify``'s words for ``count`` stored events whose instant is out of range."""
    if not count:
        return None
    from memtoc.model import iso_ms

    shown = "; ".join(f"{event_id} at {iso_ms(ts)}" for event_id, ts in examples)
    return (
        f"{count} events have an instant outside 1970-01-01..9999-12-30 (stored by an older "
        f"memtoc) and are left out of the TOC (e.g. {shown}) — remove them with "
        "`memtoc forget --event ID`"
    )


def out_of_range_count(
    query: Callable[[str], list[Any]], span: Sequence[Any], live: str = "TRUE"
) -> int:
    """How many stored (``live``) events are out of range, given the store's ``(MIN(ts_ms),
    MAX(ts_ms))``: counted only when the span says there are any (a scan otherwise saved)."""
    lo, hi = span[0], span[1]
    if lo is None or (lo >= MIN_TS_MS and hi <= MAX_TS_MS):
        return 0
    return int(query(f"SELECT COUNT(*) FROM events WHERE {OUT_OF_RANGE_SQL} AND {live}")[0][0])
