"""Session reads: a session's events among interleaved sessions and projects (both backends), and
how SQLite serves them without a session index (session spans, migration 0007_session_spans)."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from memtoc.model import Event
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.maintenance import verify
from memtoc.store.sqlite.migrations import MIGRATIONS, _split
from memtoc.store.sqlite.sessions import session_spans

STORE_BACKENDS = ("sqlite", "postgres")
T0 = 1_700_000_000_000


def ev(i: int, session: str, project: str = "p", ts: int | None = None) -> Event:
    return Event(
        event_id=f"E{i:08d}",
        session_id=session,
        project=project,
        agent="test",
        ts_ms=T0 + i * 1000 if ts is None else ts,
        event_type="user_message",
        role="user",
        text=f"event {i} of {session}",
        metadata={"i": i},
    )


def interleaved() -> list[Event]:
    """s1 and s2 alternate in project p; s1 also has events in project q; a third session runs
    before and after them (its span covers theirs); some events share a millisecond."""
    events = [ev(i, "s1" if i % 2 else "s2") for i in range(40)]
    events += [ev(100 + i, "s1", project="q", ts=T0 + i * 1000 + 500) for i in range(10)]
    events += [ev(200, "s3", ts=T0 - 60_000), ev(201, "s3", ts=T0 + 600_000)]
    events += [ev(300 + i, "s1", ts=T0 + 41_000) for i in range(3)]  # one millisecond
    return events


def ids(events: list[Event]) -> list[str]:
    return [e.event_id for e in events]


def expected(events: list[Event], session: str, project: str | None = None) -> list[Event]:
    """The session's events in time order (ties in append order, as stored)."""
    mine = [e for e in events if e.session_id == session and project in (None, e.project)]
    return sorted(mine, key=lambda e: e.ts_ms)  # stable: append order within a millisecond


def test_session_reads_among_interleaved_sessions_and_projects(store: SqliteStore) -> None:
    events = interleaved()
    shuffled = events[:]
    random.Random(3).shuffle(shuffled)  # batches out of time order
    for k in range(0, len(shuffled), 16):
        store.append_events(shuffled[k : k + 16])
    order = {e.event_id: n for n, e in enumerate(shuffled)}  # append order breaks ts ties
    s1p = sorted(expected(events, "s1", "p"), key=lambda e: (e.ts_ms, order[e.event_id]))
    assert ids(list(store.scan_events(session_id="s1", project="p"))) == ids(s1p)
    both = list(store.scan_events(session_id="s1"))
    assert sorted(ids(both)) == sorted(ids(expected(events, "s1")))
    assert [e.ts_ms for e in both] == sorted(e.ts_ms for e in both)
    desc = list(store.scan_events(session_id="s1", project="p", descending=True, limit=4))
    assert ids(desc) == ids(s1p[::-1][:4])
    window = list(store.scan_events(session_id="s2", since_ms=T0 + 10_000, until_ms=T0 + 20_000))
    assert ids(window) == [f"E{i:08d}" for i in range(10, 20, 2)]
    assert list(store.scan_events(session_id="s2", since_ms=T0 + 100_000)) == []
    assert list(store.scan_events(session_id="nobody")) == []
    assert list(store.scan_events(session_id="s2", project="q")) == []

    middle = store.get_event("E00000021")
    before, after = store.session_neighbors(middle, before=3, after=2)
    assert ids(before) == ["E00000015", "E00000017", "E00000019"]
    assert ids(after) == ["E00000023", "E00000025"]
    first = store.get_event("E00000001")
    assert store.session_neighbors(first, before=5, after=0) == ([], [])
    tie = store.get_event("E00000301")
    before, after = store.session_neighbors(tie, before=2, after=5)
    assert ids(before) == ids(s1p[s1p.index(tie) - 2 : s1p.index(tie)])
    assert ids(after) == ids(s1p[s1p.index(tie) + 1 :])
    in_q = store.get_event("E00000105")
    before, after = store.session_neighbors(in_q, before=1, after=1)
    assert ids(before) == ["E00000104"] and ids(after) == ["E00000106"]

    rest = store.session_events_from("p", "s1", T0 + 35_000, "E00000035")
    assert [e.event_id for _, e in rest] == sorted(
        (e.event_id for e in s1p if (e.ts_ms, e.event_id) >= (T0 + 35_000, "E00000035")),
        key=lambda i: (store.get_event(i).ts_ms, i),
    )
    assert len(rest) == 6  # 35, 37, 39 and the three of one millisecond
    assert store.session_events_from("p", "s1", T0 + 99_000, "E") == []


def test_spans_are_kept_per_session_and_project(sqlite_store: SqliteStore) -> None:
    events = interleaved()
    random.Random(5).shuffle(events)
    sqlite_store.append_events(events[:30])
    sqlite_store.append_events(events[30:])
    sqlite_store.append_events(events[:10])  # duplicates only: nothing to widen
    spans = {
        (r[0], r[1]): (r[2], r[3])
        for r in sqlite_store.connection.execute("SELECT * FROM sessions")
    }
    want: dict[tuple[str, str], tuple[int, int]] = {}
    for e in events:
        lo, hi = want.get((e.session_id, e.project), (e.ts_ms, e.ts_ms))
        want[(e.session_id, e.project)] = (min(lo, e.ts_ms), max(hi, e.ts_ms))
    assert spans == want
    report = verify(sqlite_store)
    assert report.ok and "session spans" in report.checks
    sqlite_store.connection.execute("UPDATE sessions SET last_ms = first_ms")
    assert any("outside their session's span" in p for p in verify(sqlite_store).problems)


@pytest.mark.parametrize("in_order", [True, False])
def test_session_spans_of_a_batch(in_order: bool) -> None:
    rows = [
        ("E1", 5, "p", "a", "x", "t", "r", "", None, None, "{}"),
        ("E2", 7, "p", "b", "x", "t", "r", "", None, None, "{}"),
        ("E3", 9, "q", "a", "x", "t", "r", "", None, None, "{}"),
        ("E4", 12, "p", "a", "x", "t", "r", "", None, None, "{}"),
    ]
    if not in_order:
        rows = [rows[3], rows[1], rows[0], rows[2]]
    assert sorted(session_spans(rows)) == [("a", "p", 5, 12), ("a", "q", 9, 9), ("b", "p", 7, 7)]


def test_schema_has_no_session_index_and_reads_do_not_sort(sqlite_store: SqliteStore) -> None:
    conn = sqlite_store.connection
    indexes = {
        name: [c[2] for c in conn.execute(f"PRAGMA index_info({name})")]
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' "
            "AND sql IS NOT NULL"
        )
    }
    assert indexes == {
        "events_project_time_session": ["project", "ts_ms", "session_id"],
        "events_tombstones": ["project", "ts_ms"],
    }
    assert [c[1] for c in conn.execute("PRAGMA table_info(sessions)")] == [
        "session_id",
        "project",
        "first_ms",
        "last_ms",
    ]
    sqlite_store.append_events(interleaved())
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    list(sqlite_store.scan_events(session_id="s1", project="p", limit=3))
    sqlite_store.session_neighbors(sqlite_store.get_event("E00000021"), before=2, after=2)
    conn.set_trace_callback(None)
    reads = [s for s in traced if "session_id = " in s and s.startswith("SELECT seq")]
    assert len(reads) == 3
    for sql in reads:
        plan = " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "events_project_time_session" in plan and "TEMP B-TREE" not in plan, plan


def _store_before_spans(path: Path) -> None:
    """A store as memtoc wrote it before ``0007_session_spans`` (migrations 0001 to 0006)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_ms INTEGER)")
    for migration in MIGRATIONS:
        if migration.name >= "0007":
            break
        for statement in _split(migration.sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (migration.name,))
    for e in interleaved():
        conn.execute(
            "INSERT INTO events(event_id, ts_ms, project, session_id, agent, event_type, role, "
            "text, metadata) VALUES (?,?,?,?,?,?,?,?,?)",
            (e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type, e.role,
             e.text, json.dumps(dict(e.metadata))),
        )  # fmt: skip
    conn.execute(
        "INSERT INTO outbox(kind, payload, created_ms) VALUES ('events', ?, 0)",
        (json.dumps({"first_seq": 1, "last_seq": len(interleaved())}),),
    )
    conn.close()


def test_older_store_is_migrated_and_read_only_copy_still_reads(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    _store_before_spans(old)
    want = ids(expected(interleaved(), "s1", "p"))
    ro = SqliteStore(old, read_only=True)  # no sessions table yet: spans from the events
    assert not ro._spans
    assert ids(list(ro.scan_events(session_id="s1", project="p"))) == want
    ro.close()
    store = SqliteStore(old)
    assert store._spans
    assert ids(list(store.scan_events(session_id="s1", project="p"))) == want
    assert store.connection.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 4
    assert verify(store).ok
    refs = store.select_events(session_id="s1", since_ms=T0 + 30_000)
    assert {r.event_id for r in refs} == {
        e.event_id for e in interleaved() if e.session_id == "s1" and e.ts_ms >= T0 + 30_000
    }
    store.close()
