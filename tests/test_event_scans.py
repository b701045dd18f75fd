"""Event scans (``scan_events``) on both stores: every event once, in ``(ts_ms, append)`` order,
across pages that split a millisecond; and every page an index range in the scan's own order —
checked on the query plans of the statements a scan runs, so a page that sorts the table (the
unscoped scan grew with the square of the store before ``0011_events_time``) or re-reads the pages
before it fails here, whatever the machine's speed. On SQLite a scan of every project merges the
projects' scans (``store/sqlite/scans.py``): its order is checked against one ``ORDER BY`` over the
table, and ``0012_drop_events_time`` against stores made before, at and after ``0011``."""

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


# -- SQLite: every project's scan is the projects' scans merged ---------------------------------------
PROJECTS = ("p0", "p1", "p2", "p3", "p4", "gone")


def several_projects() -> list[Event]:
    """3,000 events of six projects of uneven sizes, five to a millisecond (so a millisecond holds
    events of several projects, and of one project more than once); project ``gone`` is forgotten
    whole below."""
    rng = random.Random(5)
    kinds = rng.choices(PROJECTS, weights=[50, 25, 12, 8, 1, 4], k=3_000)
    return [
        Event(
            event_id=f"M{i:05d}",
            session_id=f"{project}-s{i % 3}",
            project=project,
            agent="test",
            ts_ms=T0 + (i // 5) * 1000,
            event_type="user_message",
            role="user",
            text=f"event {i}",
            metadata={},
        )
        for i, project in enumerate(kinds)
    ]


def ordered_by_sql(store: SqliteStore, where: str = "", *, descending: bool = False) -> list[str]:
    """The scan's order written plainly: one ``ORDER BY ts_ms, seq`` over the live events."""
    d = " DESC" if descending else ""
    sql = f"SELECT event_id FROM events WHERE {store._live} {where} ORDER BY ts_ms{d}, seq{d}"
    return [r[0] for r in store.connection.execute(sql)]


@pytest.mark.parametrize("pages", ["small", "default"])
def test_sqlite_merged_scan_is_the_order_by_of_the_table(
    sqlite_store: SqliteStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, pages: str
) -> None:
    """Ties of one millisecond across projects and within one, appends out of time order, a
    forgotten project and tombstones: the merge returns what ``ORDER BY ts_ms, seq`` returns, with
    pages of 8 rows per project (page ends inside a millisecond, everywhere) and of the default."""
    from memtoc.store.sqlite import scans

    store = sqlite_store
    events = several_projects()
    batches = [events[k : k + 250] for k in range(0, len(events), 250)]
    random.Random(3).shuffle(batches)
    for batch in batches:
        store.append_events(batch)
    conn = store.connection
    dead = [r[0] for r in conn.execute("SELECT seq FROM events WHERE project = 'gone'")]
    dead += [r[0] for r in conn.execute("SELECT seq FROM events WHERE seq % 97 = 0")]
    assert store.tombstone_events(dead, clock.now_ms()) > 100
    if pages == "small":
        monkeypatch.setattr(scans, "PAGE", 40)
        monkeypatch.setattr(scans, "MERGE_MIN_PAGE", 8)
    assert store.projects() == sorted(PROJECTS)

    every = ordered_by_sql(store)
    assert len(every) > 2_500 and ids(store.scan_events()) == every
    assert ids(store.scan_events(descending=True)) == ordered_by_sql(store, descending=True)
    for limit in (1, 7, 9, 41, 1_001):
        assert ids(store.scan_events(limit=limit)) == every[:limit]
        want = ordered_by_sql(store, descending=True)[:limit]
        assert ids(store.scan_events(limit=limit, descending=True)) == want
    lo, hi = T0 + 37_000, T0 + 411_000
    window = f"AND ts_ms >= {lo} AND ts_ms < {hi}"
    assert ids(store.scan_events(since_ms=lo, until_ms=hi)) == ordered_by_sql(store, window)
    want = ordered_by_sql(store, window, descending=True)[:300]
    assert ids(store.scan_events(since_ms=lo, until_ms=hi, descending=True, limit=300)) == want
    assert ids(store.scan_events(since_ms=T0 + 10**9)) == []


# -- SQLite: the plans of the statements a scan runs ------------------------------------------------
SCANS: list[dict[str, Any]] = [
    {},
    {"descending": True},
    {"since_ms": T0 + 100_000, "until_ms": T0 + 600_000},
    {"project": "big"},
    {"project": "big", "descending": True},
    {"session_id": "s1"},
    {"session_id": "s1", "project": "big", "descending": True},
]
INDEX = "events_project_time_session"


def traced(store: SqliteStore, run: Any) -> list[str]:
    """The statements ``run()`` runs, with their values (SQLite's expanded SQL)."""
    conn = store.connection
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        run()
    finally:
        conn.set_trace_callback(None)
    return statements


def traced_pages(store: SqliteStore, scan: dict[str, Any]) -> list[str]:
    """The event reads a full scan runs."""

    def run() -> None:
        assert sum(1 for _ in store.scan_events(**scan)) > 2_000

    return [s for s in traced(store, run) if s.startswith("SELECT seq, event_id")]


def plan(store: SqliteStore, sql: str) -> str:
    return " | ".join(r[3] for r in store.connection.execute(f"EXPLAIN QUERY PLAN {sql}"))


def assert_pages_are_index_ranges(store: SqliteStore, scan: dict[str, Any]) -> None:
    """Every page reads a range of one project in the project index; a page after a cursor
    starts at it (a range in the index, not a filter); no page sorts its rows."""
    pages = traced_pages(store, scan)
    after_cursor = [sql for sql in pages if "(ts_ms, seq) " in sql]
    assert len(pages) >= 2 and after_cursor, (scan, pages)
    for sql in pages:
        shown = plan(store, sql)
        # a sort of the rows in range would be "USE TEMP B-TREE FOR ORDER BY"; a page may sort
        # the events of one millisecond ("... FOR RIGHT PART OF ORDER BY")
        assert f"USING INDEX {INDEX} (project=?" in shown, (scan, shown)
        assert "TEMP B-TREE FOR ORDER BY" not in shown, (scan, shown)
        if sql in after_cursor:
            bound = "ts_ms<" if scan.get("descending") else "ts_ms>"
            assert bound in shown.split(f"{INDEX} (")[1], (scan, shown)


@pytest.mark.parametrize("statistics", [False, True], ids=["no-stats", "analyzed"])
def test_sqlite_scan_pages_are_index_ranges(sqlite_store: SqliteStore, statistics: bool) -> None:
    store, _ = fill(sqlite_store)
    if statistics:  # two projects: "project = ?" looks unselective, a table scan cheap
        store.connection.execute("ANALYZE")
    for scan in SCANS:
        assert_pages_are_index_ranges(store, scan)


def test_sqlite_status_reads_index_ends(sqlite_store: SqliteStore) -> None:
    """``stats()`` finds the projects and the time span by seeks in the project index (one per
    project and end), not by reading the table or the whole index."""
    store, ordered = fill(sqlite_store)
    statements = traced(store, store.stats)
    stats = store.stats()
    assert (stats["first_event_ms"], stats["last_event_ms"]) == (
        ordered[0].ts_ms,
        ordered[-1].ts_ms,
    )
    assert stats["projects"] == 2
    reads = [s for s in statements if "MIN(project)" in s or "(ts_ms) FROM events" in s]
    assert len(reads) == 5, reads  # the projects, then each project's two ends
    for sql in reads:
        shown = plan(store, sql)
        assert "SCAN events" not in shown and f"COVERING INDEX {INDEX} (project" in shown, shown


def test_sqlite_forget_window_reads_project_ranges(sqlite_store: SqliteStore) -> None:
    """A forget selector's time window across projects (``select_events``) reads each project's
    range of the project index, not the table, and selects what the window holds."""
    store, ordered = fill(sqlite_store)
    lo, hi = T0 + 100_000, T0 + 130_000
    selected: list[Any] = []
    statements = traced(
        store, lambda: selected.extend(store.select_events(since_ms=lo, until_ms=hi))
    )
    assert [r.event_id for r in selected] == ids(e for e in ordered if lo <= e.ts_ms < hi)
    assert [r.event_id for r in store.select_events(since_ms=T0 + 660_000)] == ids(
        e for e in ordered if e.ts_ms >= T0 + 660_000
    )
    (sql,) = [s for s in statements if s.startswith("SELECT seq, event_id, project")]
    shown = plan(store, sql)
    assert f"USING INDEX {INDEX} (project=? AND ts_ms>? AND ts_ms<?)" in shown, shown


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
        for scan in SCANS:
            pages = pg_pages(store, scan, monkeypatch)
            assert len(pages) >= 2, scan
            with store.transaction():
                for name in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                    store._exec(f"SET LOCAL {name} = off")
                for n, (text, params) in enumerate(pages):
                    shown = "\n".join(r[0] for r in store._query(f"EXPLAIN {text}", params))
                    assert "Index Scan" in shown and "Sort" not in shown, (scan, shown)
                    assert "Seq Scan" not in shown and "Bitmap" not in shown, (scan, shown)
                    if n:  # the cursor bounds the index range
                        assert "ROW(ts_ms, seq)" in shown.split("Index Cond:")[1], (scan, shown)


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


# -- migrations: 0011 made events_time, 0012 drops it ---------------------------------------------
def time_indexes(path: Path) -> tuple[set[str], set[str]]:
    """The store's indexes named ``events_time`` and its recorded migrations about it."""
    conn = sqlite3.connect(path)
    try:
        found = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name = 'events_time'")
        }
        names = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM schema_migrations WHERE name LIKE '%events_time'"
            )
        }
    finally:
        conn.close()
    return found, names


def as_at(path: Path, *, index: bool, recorded: tuple[str, ...]) -> None:
    """Make the store at ``path`` look as one written when ``recorded`` were the last migrations
    about the time index, with or without the index; with ``ANALYZE`` statistics (of two
    projects: ``project = ?`` looks unselective, ``events_time`` ordered)."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP INDEX IF EXISTS events_time")
        if index:
            conn.execute("CREATE INDEX events_time ON events(ts_ms)")
        conn.execute(
            "DELETE FROM schema_migrations WHERE name IN ('0011_events_time', '0012_drop_events_time')"
        )
        for name in recorded:
            conn.execute("INSERT INTO schema_migrations(name, applied_ms) VALUES (?, 0)", (name,))
        conn.execute("ANALYZE")
    conn.close()


BOTH = {"0011_events_time", "0012_drop_events_time"}


def test_a_fresh_store_has_no_time_index(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memtoc.db"
    with SqliteStore(path, clock=clock) as store:
        store.append_events(history()[:10])
    assert time_indexes(path) == (set(), BOTH)


@pytest.mark.parametrize(
    ("index", "recorded"),
    [
        (True, ("0011_events_time",)),  # made by the last session's memtoc
        (False, ()),  # made before 0011
        (False, ("0011_events_time",)),  # at 0011, its index dropped by hand
    ],
    ids=["at-0011", "before-0011", "at-0011-no-index"],
)
def test_older_stores_are_upgraded(
    tmp_path: Path, clock: ManualClock, index: bool, recorded: tuple[str, ...]
) -> None:
    path = tmp_path / "memtoc.db"
    with SqliteStore(path, clock=clock) as store:
        store.append_events(history())
        want = ids(store.scan_events())
        want_desc = ids(store.scan_events(descending=True))
    as_at(path, index=index, recorded=recorded)

    # read-only, it cannot migrate: it scans right, through the project index even beside
    # events_time (a page names its project ``unlikely``)
    with SqliteStore(path, clock=clock, read_only=True) as old:
        assert ids(old.scan_events()) == want
        assert ids(old.scan_events(descending=True)) == want_desc
        assert_pages_are_index_ranges(old, {})
        assert_pages_are_index_ranges(old, {"project": "big"})

    with SqliteStore(path, clock=clock) as store:
        assert ids(store.scan_events()) == want
    assert time_indexes(path) == (set(), BOTH)
    with SqliteStore(path, clock=clock) as store:  # nothing left to run
        assert ids(store.scan_events(descending=True)) == want_desc
        assert_pages_are_index_ranges(store, {})
