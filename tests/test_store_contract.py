"""The Store contract (DESIGN §3), run against every backend the `store` fixture provides."""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.errors import MigrationError, NotFoundError, QueryError
from memtoc.model import Bookmark, Bullet, Event, Grip, TocNode
from memtoc.store.base import DirtyPeriod
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.base import PAGE_SIZE

STORE_BACKENDS = ("sqlite", "postgres")
"""Every test taking ``store`` runs on both backends (conftest.pytest_generate_tests); SQLite
specifics take ``sqlite_store``, PostgreSQL specifics live in tests/test_postgres.py."""


def ev(
    i: int, *, ts: int | None = None, session: str = "s1", project: str = "p", text: str = ""
) -> Event:
    return Event(
        event_id=f"E{i:08d}",
        session_id=session,
        project=project,
        agent="test",
        ts_ms=1_700_000_000_000 + i * 1000 if ts is None else ts,
        event_type="user_message",
        role="user",
        text=text or f"event number {i}",
        metadata={"i": i, "nested": {"k": [1, "two"]}},
    )


def test_append_is_idempotent_and_announced_by_one_outbox_entry(store: SqliteStore) -> None:
    first = store.append_events([ev(i) for i in range(10)])
    assert (first.inserted, first.duplicates) == (10, 0)
    again = store.append_events([ev(i) for i in range(5, 15)])
    assert (again.inserted, again.duplicates) == (5, 5)
    assert store.count_events() == 15
    entries = store.claim_outbox("w1", 10)
    assert [e.payload for e in entries] == [
        {"first_seq": 1, "last_seq": 10},
        {"first_seq": 11, "last_seq": 15},
    ]
    nothing = store.append_events([ev(1)])
    assert nothing.outbox_entry_id is None
    assert store.outbox_counts()["pending"] == 2


def test_events_round_trip_and_scan_in_time_order(store: SqliteStore) -> None:
    events = [ev(i, ts=1_700_000_000_000 + (i * 7919) % 50 * 1000) for i in range(50)]
    store.append_events(events)
    scanned = list(store.scan_events())
    assert [e.ts_ms for e in scanned] == sorted(e.ts_ms for e in events)
    assert store.get_event("E00000003") == events[3]
    assert next(iter(store.scan_events(descending=True))).ts_ms == max(e.ts_ms for e in events)
    window = list(store.scan_events(since_ms=1_700_000_010_000, until_ms=1_700_000_020_000))
    assert {e.ts_ms for e in window} == set(range(1_700_000_010_000, 1_700_000_020_000, 1000))
    assert len(list(store.scan_events(limit=7))) == 7
    with pytest.raises(NotFoundError):
        store.get_event("nope")


def test_scan_filters_by_project_and_session(store: SqliteStore) -> None:
    store.append_events(
        [ev(i, project="a" if i % 2 else "b", session=f"s{i % 3}") for i in range(30)]
    )
    assert all(e.project == "a" for e in store.scan_events(project="a"))
    assert store.count_events("a") == 15
    assert {e.session_id for e in store.scan_events(session_id="s1")} == {"s1"}
    assert store.projects() == ["a", "b"]


def test_large_scans_page_without_loss(store: SqliteStore) -> None:
    store.append_events([ev(i, ts=1_700_000_000_000 + i // 7) for i in range(5_003)])
    ids = [e.event_id for e in store.scan_events()]
    assert len(ids) == len(set(ids)) == 5_003


def test_get_events_returns_existing_in_time_order(store: SqliteStore) -> None:
    store.append_events([ev(i) for i in range(5)])
    got = store.get_events(["E00000004", "missing", "E00000001"])
    assert [e.event_id for e in got] == ["E00000001", "E00000004"]


def test_session_neighbors(store: SqliteStore) -> None:
    store.append_events([ev(i, session="s1" if i < 20 else "s2") for i in range(30)])
    before, after = store.session_neighbors(store.get_event("E00000010"), before=3, after=2)
    assert [e.event_id for e in before] == ["E00000007", "E00000008", "E00000009"]
    assert [e.event_id for e in after] == ["E00000011", "E00000012"]
    _, after_end = store.session_neighbors(store.get_event("E00000019"), before=0, after=5)
    assert after_end == []  # never crosses into another session
    before_w, _ = store.session_neighbors(
        store.get_event("E00000010"), before=10, after=0, window_ms=2500
    )
    assert [e.event_id for e in before_w] == ["E00000008", "E00000009"]


def test_session_neighbors_of_some_types_step_over_the_others(store: SqliteStore) -> None:
    """The turns of a conversation around the tool calls and outputs between them."""
    kinds = ["user_message", "tool_call", "tool_result", "assistant_message", "tool_call"]
    kinds += ["user_message", "assistant_message"]
    store.append_events([replace(ev(i), event_type=kind) for i, kind in enumerate(kinds)])
    turns = ("user_message", "assistant_message")
    before, after = store.session_neighbors(
        store.get_event("E00000003"), before=2, after=1, event_types=turns
    )
    assert [e.event_id for e in before] == ["E00000000"]
    assert [e.event_id for e in after] == ["E00000005"]
    plain_before, plain_after = store.session_neighbors(
        store.get_event("E00000003"), before=1, after=1
    )
    assert [e.event_id for e in (*plain_before, *plain_after)] == ["E00000002", "E00000004"]


def test_checkpoints_commit_with_events(store: SqliteStore) -> None:
    store.append_events([ev(1)], {"ingest:abc": {"offset": 120}})
    assert store.get_checkpoint("ingest:abc") == {"offset": 120}
    assert store.get_checkpoint("missing") is None
    store.set_checkpoint("job", [1, 2])
    assert store.get_checkpoint("job") == [1, 2]


def test_failed_append_rolls_back_events_and_checkpoint(store: SqliteStore) -> None:
    bad = Event("X", "s", "p", "a", 1, "user_message", "user", "t", {"x": {1, 2}})  # not JSON
    with pytest.raises(TypeError):
        store.append_events([ev(1), bad], {"ingest:f": {"offset": 9}})
    assert store.count_events() == 0
    assert store.get_checkpoint("ingest:f") is None
    assert store.outbox_counts()["pending"] == 0


def test_outbox_failure_quarantine_and_retry(store: SqliteStore) -> None:
    store.append_events([ev(1)])
    store.append_events([ev(2)])
    a, b = store.claim_outbox("w", 10)
    store.fail_outbox(a.entry_id, "boom at seq 1")
    store.complete_outbox([b.entry_id])
    assert store.outbox_counts() == {"pending": 0, "done": 1, "failed": 1}
    assert store.failed_outbox()[0].error == "boom at seq 1"
    assert store.retry_failed_outbox() == 1
    (again,) = store.claim_outbox("w", 10)
    assert again.entry_id == a.entry_id and again.attempts == 2


def node(node_id: str = "toc:day:2024-01-18", title: str = "Auth work", **kw: object) -> TocNode:
    base: dict[str, object] = dict(
        node_id=node_id,
        project="p",
        level=node_id.split(":")[1],
        title=title,
        start_ms=1_705_536_000_000,
        end_ms=1_705_622_400_000,
        bullets=(Bullet("Fixed the JWT refresh race", ("grip:1",)),),
        keywords=("jwt", "refresh"),
        abstract="A day of auth work.",
        overview="Auth work: fixed the refresh race.",
        parent_id="toc:week:2024-W03",
    )
    base.update(kw)
    return TocNode(**base)  # type: ignore[arg-type]


def test_nodes_are_versioned_and_unchanged_content_writes_nothing(store: SqliteStore) -> None:
    stored, written = store.put_node(node())
    assert written and stored.version == 1
    same, written = store.put_node(node())
    assert not written and same.version == 1
    changed, written = store.put_node(node(title="Auth and billing"))
    assert written and changed.version == 2
    assert store.node_versions("p", "toc:day:2024-01-18") == [1, 2]
    assert store.get_node("p", "toc:day:2024-01-18").title == "Auth and billing"
    assert store.get_node("p", "toc:day:2024-01-18", version=1).title == "Auth work"
    assert store.get_node("p", "toc:day:2024-01-18").bullets[0].grip_ids == ("grip:1",)


def test_list_and_find_nodes(store: SqliteStore) -> None:
    store.put_node(node())
    store.put_node(node("toc:day:2024-01-19", start_ms=1_705_622_400_000, end_ms=1_705_708_800_000))
    store.put_node(node("toc:week:2024-W03", parent_id="toc:month:2024-01"))
    days = store.list_nodes("p", level="day")
    assert [n.node_id for n in days] == ["toc:day:2024-01-18", "toc:day:2024-01-19"]
    assert len(store.list_nodes("p", parent_id="toc:week:2024-W03")) == 2
    assert len(store.list_nodes("p", level="day", since_ms=1_705_622_400_000)) == 1
    assert store.find_node("toc:week:2024-W03").level == "week"
    store.put_node(node(project="q"))
    with pytest.raises(QueryError):
        store.find_node("toc:day:2024-01-18")
    assert store.find_node("toc:day:2024-01-18", project="q").project == "q"
    with pytest.raises(NotFoundError):
        store.find_node("toc:day:1999-01-01")


def test_grips_indexed_by_node_and_idempotent(store: SqliteStore) -> None:
    grips = [
        Grip(
            f"grip:{i:013d}:x", "p", f"excerpt {i}", "E1", "E2", i, "segment", "toc:segment:a", "s1"
        )
        for i in range(3)
    ]
    assert store.put_grips(grips) == 3
    assert store.put_grips(grips) == 0
    assert [g.grip_id for g in store.grips_for_node("p", "toc:segment:a")] == [
        g.grip_id for g in grips
    ]
    assert store.get_grip(grips[1].grip_id) == grips[1]
    with pytest.raises(NotFoundError):
        store.get_grip("grip:none")


def test_bookmarks_round_trip(store: SqliteStore) -> None:
    b = Bookmark("bm1", "p", "We use Redis for rate limits.", ("E1", "E2"), 0.8, "conclusion", 5, 5)
    store.put_bookmark(b)
    assert store.list_bookmarks("p") == [b]
    assert store.list_bookmarks("other") == []


def test_nul_is_kept_in_event_text_and_stored_alike_in_derived_text(store: SqliteStore) -> None:
    """One NUL contract on both backends: an event's text round-trips exactly (nothing accepted is
    lost); derived text (grip excerpt, bookmark, failure message) holds U+FFFD in its place."""
    e = replace(ev(1), text="bin\x00ary\x00", metadata={"k": "v\x00"})
    store.append_events([e])
    assert store.get_event(e.event_id) == e
    grip = Grip("grip:1", "p", "ex\x00cerpt", e.event_id, e.event_id, 1, "segment", "toc:x", "s1")
    assert store.put_grips([grip]) == 1
    assert store.get_grip("grip:1").excerpt == "ex\ufffdcerpt"
    store.put_bookmark(Bookmark("bm1", "p", "the \x00 escape", (e.event_id,), 0.8, "fact", 5, 5))
    assert [b.content for b in store.list_bookmarks("p")] == ["the \ufffd escape"]
    entry = store.claim_outbox("w1", 1)[0]
    store.fail_outbox(entry.entry_id, "could not read bin\x00ary")
    assert store.failed_outbox()[0].error == "could not read bin\ufffdary"


def test_a_rollup_mark_re_set_after_it_was_read_outlives_the_readers_clear(
    store: SqliteStore,
) -> None:
    # every writer's clock says the same instant (or a skewed one says earlier): only the mark's
    # generation tells a re-marking after the read from the mark the reader saw
    mark = DirtyPeriod("p", "toc:day:2024-03-04", "day", 1_000, 5_000)
    store.mark_dirty([mark])
    (read,) = store.dirty_periods("day")
    store.mark_dirty([mark])  # another worker files a child and re-marks the day
    store.clear_dirty("p", mark.node_id, read.seq)
    (again,) = store.dirty_periods("day")
    assert again.seq > read.seq
    store.mark_dirty([replace(mark, marked_ms=4_000)])  # a writer whose clock is behind
    store.clear_dirty("p", mark.node_id, again.seq)
    (latest,) = store.dirty_periods("day")
    store.clear_dirty("p", mark.node_id, latest.seq)
    assert store.dirty_periods("day") == []
    # a fresh mark after a clear outlives a late clear by a reader of the old mark
    store.mark_dirty([mark])
    store.clear_dirty("p", mark.node_id, latest.seq)
    assert [m.node_id for m in store.dirty_periods("day")] == [mark.node_id]


def test_migrations_recorded_and_newer_store_refused(
    sqlite_store: SqliteStore, tmp_path: Path
) -> None:
    names = [r[0] for r in sqlite_store.connection.execute("SELECT name FROM schema_migrations")]
    assert names[0] == "0001_events_outbox" and len(names) >= 3
    tables = {r[0] for r in sqlite_store.connection.execute("SELECT name FROM sqlite_master")}
    assert {"events", "outbox", "toc_nodes", "grips", "events_fts", "docs_fts"} <= tables
    sqlite_store.connection.execute("INSERT INTO schema_migrations VALUES ('9999_future', 0)")
    with pytest.raises(MigrationError, match="newer memtoc"):
        SqliteStore(sqlite_store.path)


def test_store_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "private" / "memtoc.db"
    SqliteStore(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_wal_and_full_durability_by_default(sqlite_store: SqliteStore) -> None:
    assert sqlite_store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sqlite_store.connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert sqlite_store.connection.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE


def test_read_only_store_serves_reads(sqlite_store: SqliteStore) -> None:
    sqlite_store.append_events([ev(1)])
    ro = SqliteStore(sqlite_store.path, read_only=True)
    assert ro.count_events() == 1
    with pytest.raises(Exception, match=r"readonly|read-only"):
        ro.append_events([ev(2)])
    ro.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)


@settings(
    max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(
    texts=st.lists(st.text(max_size=200), min_size=1, max_size=10),
    meta=st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=5),
)
def test_round_trip_arbitrary_text_and_metadata(
    store: SqliteStore, texts: list[str], meta: dict[str, object]
) -> None:
    base = store.count_events()
    events = [
        Event(
            f"H{base + i:09d}",
            "s",
            "p",
            "a",
            1_000 + base + i,
            "assistant_message",
            "assistant",
            t.encode("utf-8", "replace").decode("utf-8"),
            meta,
        )
        for i, t in enumerate(texts)
    ]
    store.append_events(events)
    for e in events:
        assert store.get_event(e.event_id) == e


def test_concurrent_writer_waits_instead_of_failing(sqlite_store: SqliteStore) -> None:
    other = sqlite3.connect(sqlite_store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    import threading

    done = threading.Event()

    def write() -> None:
        sqlite_store.append_events([ev(99)])
        done.set()

    t = threading.Thread(target=write)
    t.start()
    assert not done.wait(0.3)  # blocked behind the other writer
    other.execute("COMMIT")
    t.join(5)
    assert done.is_set() and sqlite_store.count_events() == 1
    other.close()


def test_a_node_without_its_latest_pointer_keeps_its_versions(store: SqliteStore) -> None:
    # retired (``delete_node``) or its pointer lost: putting it again never reuses a version
    # number; the same content as its last version only gets the pointer back
    store.put_node(node())
    store.put_node(node(title="Auth and billing"))
    store.delete_node("p", "toc:day:2024-01-18")
    with pytest.raises(NotFoundError):
        store.get_node("p", "toc:day:2024-01-18")
    back, written = store.put_node(node(title="Auth and billing"))
    assert written and back.version == 2
    assert store.get_node("p", "toc:day:2024-01-18").title == "Auth and billing"
    store.delete_node("p", "toc:day:2024-01-18")
    new, written = store.put_node(node(title="Auth, billing and search"))
    assert written and new.version == 3
    assert store.node_versions("p", "toc:day:2024-01-18") == [1, 2, 3]
    assert store.get_node("p", "toc:day:2024-01-18", version=1).title == "Auth work"
