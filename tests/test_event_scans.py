"""Event scans (``scan_events``) on both stores: every event once, in ``(ts_ms, append)`` order,
across pages that split a millisecond; and every page an index range in the scan's own order —
checked on the query plans of the statements a scan runs, so a page that sorts the table (the
unscoped scan grew with the square of the store before ``events_time``) or re-reads the pages
before it fails here, whatever the machine's speed. SQLite's ``0011_events_time`` upgrades a store
made before it."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memtoc.clock import ManualClock
from memtoc.model import Event
from memtoc.store.sqlite import SqliteStore

STORE_BACKENDS = ("sqlite", "postgres")
T0 = 1_700_000_000_000
N = 4_700
"""Three 2,000-event pages, the last one short."""


def history() -> list[Event]:
    """Two projects and four sessions; events come seven to a millisecond (so the page ends at
    2,000 and 4,000 fall inside one) and in batches out of time order."""
    events = []
    for i in range(N):
        session = "s1" if i % 2 else f"s{i % 6}"  # s1: every other event, over two pages
        events.append(
            Event(
                event_id=f"E{i:06d}",
                session_id=session,
                project="big" if i % 6 else "small",
                agent="test",
                ts_ms=T0 + (i // 7) * 1000,
                event_type="user_message",
                role="user",
                text=f"event {i}",
                metadata={},
            )
        )
    return events


def fill(store: Any) -> tuple[Any, list[Event]]:
    """The store with the history appended in shuffled batches, and the history in the order a
    scan must return it: time, then append order (the storage sequence)."""
    events = history()
    batches = [events[k : k + 500] for k in range(0, N, 500)]
    random.Random(11).shuffle(batches)
    appended = [e for batch in batches for e in batch]
    for batch in batches:
        store.append_events(batch)
    place = {e.event_id: n for n, e in enumerate(appended)}
    return store, sorted(events, key=lambda e: (e.ts_ms, place[e.event_id]))


def ids(events: Iterator[Event] | list[Event]) -> list[str]:
    return [e.event_id for e in events]


def test_scans_return_every_event_once_in_order(store: Any) -> None:
    store, ordered = fill(store)
    assert ids(store.scan_events()) == ids(ordered)
    assert ids(store.scan_events(descending=True)) == ids(ordered[::-1])
    assert ids(store.scan_events(limit=2_500)) == ids(ordered[:2_500])
    assert ids(store.scan_events(descending=True, limit=4_001)) == ids(ordered[::-1][:4_001])
    lo, hi = T0 + 100_000, T0 + 600_000
    window = [e for e in ordered if lo <= e.ts_ms < hi]
    assert len(window) > 2_000
    assert ids(store.scan_events(since_ms=lo, until_ms=hi)) == ids(window)
    assert ids(store.scan_events(since_ms=lo, until_ms=hi, descending=True)) == ids(window[::-1])
    big = [e for e in ordered if e.project == "big"]
    assert ids(store.scan_events(project="big")) == ids(big)
    assert ids(store.scan_events(project="big", descending=True)) == ids(big[::-1])
    assert ids(store.scan_events(project="big", since_ms=lo)) == ids(
        [e for e in big if e.ts_ms >= lo]
    )
    s1 = [e for e in ordered if e.session_id == "s1"]
    assert ids(store.scan_events(session_id="s1")) == ids(s1)
    assert ids(store.scan_events(session_id="s1", project="big", descending=True)) == ids(s1[::-1])
    assert ids(store.scan_events(project="small", limit=5)) == ids(
        [e for e in ordered if e.project == "small"][:5]
    )


# -- SQLite: the plans of the statements a scan runs ------------------------------------------------
SCANS: list[tuple[dict[str, Any], str]] = [
    ({}, "events_time"),
    ({"descending": True}, "events_time"),
    ({"since_ms": T0 + 100_000, "until_ms": T0 + 600_000}, "events_time"),
    ({"project": "big"}, "events_project_time_session"),
    ({"project": "big", "descending": True}, "events_project_time_session"),
    ({"session_id": "s1"}, "events_project_time_session"),
    ({"session_id": "s1", "project": "big", "descending": True}, "events_project_time_session"),
]


def traced_pages(store: SqliteStore, scan: dict[str, Any]) -> list[str]:
    """The event reads a full scan runs, with their values (SQLite's expanded SQL)."""
    conn = store.connection
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    try:
        assert sum(1 for _ in store.scan_events(**scan)) > 2_000
    finally:
        conn.set_trace_callback(None)
    return [s for s in traced if s.startswith("SELECT seq, event_id")]


def assert_pages_are_index_ranges(store: SqliteStore, scan: dict[str, Any], index: str) -> None:
    pages = traced_pages(store, scan)
    assert len(pages) >= 2, (scan, pages)
    for n, sql in enumerate(pages):
        plan = " | ".join(r[3] for r in store.connection.execute(f"EXPLAIN QUERY PLAN {sql}"))
        # a sort of the rows in range would be "USE TEMP B-TREE FOR ORDER BY"; a project's scan
        # may sort the events of one millisecond ("... FOR RIGHT PART OF ORDER BY")
        assert f"USING INDEX {index}" in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
        if n:  # the next page starts at the cursor: a range in the index, not a filter
            bound = "ts_ms<" if scan.get("descending") else "ts_ms>"
            assert f"{index} (" in plan and bound in plan.split(f"{index} (")[1], (n, plan)


@pytest.mark.parametrize("statistics", [False, True], ids=["no-stats", "analyzed"])
def test_sqlite_scan_pages_are_index_ranges(sqlite_store: SqliteStore, statistics: bool) -> None:
    store, _ = fill(sqlite_store)
    if statistics:  # two projects: "project = ?" looks unselective, events_time ordered
        store.connection.execute("ANALYZE")
    for scan, index in SCANS:
        assert_pages_are_index_ranges(store, scan, index)


# -- PostgreSQL -----------------------------------------------------------------------------------
def test_postgres_scan_pages_are_index_ranges(
    pg_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether an index yields each page in order from its cursor: on a table this small a sort
    costs less, so the planner is asked with sequential scans, bitmaps and sorts priced out —
    a page that no index can serve still shows a Sort (or a scan of the table)."""
    from memtoc.store.postgres import PostgresStore

    with PostgresStore(pg_url, clock=clock, pool_size=2) as store:
        fill(store)
        for scan, _ in SCANS:
            pages = pg_pages(store, scan, monkeypatch)
            assert len(pages) >= 2, scan
            with store.transaction():
                for name in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                    store._exec(f"SET LOCAL {name} = off")
                for n, (text, params) in enumerate(pages):
                    plan = "\n".join(r[0] for r in store._query(f"EXPLAIN {text}", params))
                    assert "Index Scan" in plan and "Sort" not in plan, (scan, plan)
                    assert "Seq Scan" not in plan and "Bitmap" not in plan, (scan, plan)
                    if n:  # the cursor bounds the index range
                        assert "ROW(ts_ms, seq)" in plan.split("Index Cond:")[1], (scan, plan)


def pg_pages(store: Any, scan: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The event reads a full scan runs on PostgreSQL, with their parameters."""
    query = store._query
    pages: list[tuple[str, list[Any]]] = []

    def spy(text: str, params: Any = None) -> Any:
        if text.startswith("SELECT seq, event_id"):
            pages.append((text, list(params or ())))
        return query(text, params)

    monkeypatch.setattr(store, "_query", spy)
    try:
        assert sum(1 for _ in store.scan_events(**scan)) > 2_000
    finally:
        monkeypatch.setattr(store, "_query", query)
    return pages


# -- upgrade -------------------------------------------------------------------------------------
def as_before_events_time(path: Path) -> None:
    """Make the store at ``path`` look as one written before ``0011_events_time``."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP INDEX events_time")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0011_events_time'")
    conn.close()


def test_a_store_made_before_events_time_is_upgraded(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memtoc.db"
    with SqliteStore(path, clock=clock) as store:
        store.append_events(history())
        want = ids(store.scan_events())
    as_before_events_time(path)

    # read-only, it cannot migrate: its scan sorts, and is still right
    with SqliteStore(path, clock=clock, read_only=True) as old:
        assert ids(old.scan_events()) == want
        plan = " ".join(
            r[3] for r in old.connection.execute(f"EXPLAIN QUERY PLAN {traced_pages(old, {})[1]}")
        )
        assert "TEMP B-TREE FOR ORDER BY" in plan

    with SqliteStore(path, clock=clock) as store:
        applied = [r[0] for r in store._query("SELECT name FROM schema_migrations")]
        assert "0011_events_time" in applied
        assert ids(store.scan_events()) == want
        assert_pages_are_index_ranges(store, {}, "events_time")
        # the status span reads the two ends of the index, not all of it
        traced: list[str] = []
        store.connection.set_trace_callback(traced.append)
        stats = store.stats()
        store.connection.set_trace_callback(None)
        assert (stats["first_event_ms"], stats["last_event_ms"]) == (T0, T0 + (N - 1) // 7 * 1000)
        (span,) = [s for s in traced if "MIN(ts_ms)" in s]
        plan = [r[3] for r in store.connection.execute(f"EXPLAIN QUERY PLAN {span}")]
        assert not [p for p in plan if p.startswith("SCAN events")], plan
