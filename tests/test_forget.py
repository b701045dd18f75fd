"""Forget (memtoc.forgetting): every selector, re-derivation of the TOC, grips, vectors and
bookmarks, the bytes physically gone (database, WAL, later backups), the audit log, exactly-once
re-import, dry runs, and a crash between purge and re-derivation."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from conftest import open_backend
from memtoc import forgetting
from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError, QueryError
from memtoc.memory import Memory
from memtoc.model import LEVELS, Bookmark, Event
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder
from pipeline_support import make_events, toc_snapshot
from store_tables import relation_bytes, table_rows, tables_holding

BASE = 1_705_312_800_000  # 2024-01-15T10:00:00Z
DAY = 86_400_000
MARKER = "zqxmarker7731"
META_MARKER = "metaqvz5519"


def records() -> list[dict[str, Any]]:
    """Session s1 (8 events, one segment) holding the secret in E3; session s2 a day later."""
    out: list[dict[str, Any]] = []
    for i in range(8):
        text = f"Step {i}: we tuned the postgres vacuum settings and rebuilt index idx_{i}."
        meta: dict[str, Any] = {"n": i}
        if i == 3:
            text = f"Decision: the deploy password is {MARKER} and we rotate the vault key weekly."
            meta = {"note": META_MARKER}
        out.append(
            {
                "event_id": f"E{i}",
                "session_id": "s1",
                "timestamp": BASE + i * 60_000,
                "role": "user" if i % 2 == 0 else "assistant",
                "text": text,
                "metadata": meta,
            }
        )
    for i in range(4):
        out.append(
            {
                "event_id": f"F{i}",
                "session_id": "s2",
                "timestamp": BASE + DAY + i * 60_000,
                "role": "user",
                "text": f"The css flexbox layout of the modal dialog breaks on mobile ({i}).",
            }
        )
    return out


def _filed(store: Any, clock: ManualClock) -> Memory:
    semantic = SemanticIndex(store, embedder=HashEmbedder(64))
    mem = Memory(store, clock=clock, tz=ZoneInfo("UTC"), semantic=semantic)
    assert mem.ingest_records(records(), project="alpha").ingested == 12
    mem.process()
    mem.rollup(force=True)
    return mem


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """The two sessions filed and rolled up, on each store (forget runs on both)."""
    clock = ManualClock(BASE + 10 * DAY)
    store, close = open_backend(request.param, tmp_path / "memtoc.db", clock)
    mem = _filed(store, clock)
    yield mem
    close()


@pytest.fixture
def sqlite_memory(tmp_path: Path) -> Iterator[Memory]:
    """The same on SQLite only (its file, WAL, secure_delete and backups are checked)."""
    clock = ManualClock(BASE + 10 * DAY)
    mem = _filed(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock)
    yield mem
    mem.close()


def sqlite(memory: Memory) -> SqliteStore:
    assert isinstance(memory.store, SqliteStore)
    return memory.store


def file_hits(path: Path, needle: str) -> int:
    """Occurrences of ``needle`` in a database file and its WAL."""
    data = needle.encode()
    return sum(p.read_bytes().count(data) for p in (path, Path(f"{path}-wal")) if p.exists())


def holding(memory: Memory, needle: str) -> dict[str, int]:
    """Tables (every one the store has, read whole) with a row holding ``needle``; SQLite's FTS5
    shadow tables hold terms in their own encoding and are checked by bytes (``file_hits``)."""
    found = tables_holding(memory.store, needle)
    return {t: n for t, n in found.items() if not t.startswith(("events_fts", "docs_fts"))}


def all_nodes(memory: Memory) -> list[Any]:
    return [n for lvl in LEVELS for n in memory.store.list_nodes("alpha", level=lvl)]


def test_forget_by_id_rederives_and_purges(memory: Memory, tmp_path: Path) -> None:
    store = memory.store
    on_file = isinstance(store, SqliteStore)
    memory.bookmark_step.merge(  # as the pipeline writes them: with their search documents
        "alpha",
        [
            Bookmark(
                "bm-secret", "alpha", "Deploy password chosen.", ("E3",), 0.9, "conclusion", 1, 1
            ),
            Bookmark(
                "bm-keep", "alpha", "Vacuum settings tuned.", ("E5",), 0.5, "conclusion", 1, 1
            ),
        ],
    )
    # the secret is really there first: events, search, derived summaries, the file
    hits = memory.search(MARKER, kinds=("event",), mode="bm25").items
    assert [i.id for i in hits] == ["E3"]
    before = holding(memory, MARKER)
    assert {"events", "docs", "toc_node_versions"} <= set(before), before
    assert "events" in holding(memory, META_MARKER)
    if on_file:
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert file_hits(store.path, MARKER) > 0 and file_hits(store.path, META_MARKER) > 0
    segment = store.list_nodes("alpha", level="segment")[0]
    assert segment.event_count == 8

    report = memory.forget(event_ids=["E3"])

    assert report.event_ids == ["E3"] and report.events == 1 and not report.dry_run
    assert report.bookmarks_removed == 1 and report.segments_removed == 1
    assert report.segments_rebuilt == 1 and report.periods_rerolled == 4
    assert report.audit_id is not None and report.wal_truncated is True
    # gone from every reader, every index and every derived copy
    with pytest.raises(NotFoundError):
        store.get_event("E3")
    assert "E3" not in [e.event_id for e in memory.events()]
    assert memory.store.count_events() == 11 and memory.stats()["events"] == 11
    for mode in ("bm25", "vector", "auto"):
        result = memory.search(MARKER, mode=mode, limit=50)
        assert all(MARKER not in i.text and "E3" not in i.cites for i in result.items), mode
        assert all(e.event_id != "E3" for i in result.items for e in i.events), mode
    assert holding(memory, MARKER) == {} and holding(memory, META_MARKER) == {}
    assert [b.bookmark_id for b in memory.store.list_bookmarks("alpha")] == ["bm-keep"]
    vector_ids = {str(v) for row in table_rows(store, ("vectors",))[0] for v in row}
    assert "E3" not in vector_ids and "E5" in vector_ids
    # the segment is re-summarised from the 7 remaining events; the TOC is consistent
    rebuilt = store.list_nodes("alpha", level="segment")
    assert [n.event_count for n in rebuilt] == [7, 4]
    for node in all_nodes(memory):
        for bullet in node.bullets:
            for grip_id in bullet.grip_ids:
                grip = store.get_grip(grip_id)
                ends = store.get_events([grip.event_id_start, grip.event_id_end])
                assert len(ends) == len({grip.event_id_start, grip.event_id_end})
                assert "E3" not in (grip.event_id_start, grip.event_id_end)
    verify = memory.verify()
    assert verify.ok, verify.problems
    assert "tombstones purged" in verify.checks
    # the row stays as a tombstone: identity and place, nothing else
    (row,) = [r for r in store.select_events(event_ids=["E3"])]
    assert (row.event_id, row.session_id, row.project, row.ts_ms, row.forgotten) == (
        "E3", "s1", "alpha", BASE + 3 * 60_000, True
    )  # fmt: skip
    if not on_file:  # VACUUM FULL rewrote every table it touched: no dead row version is left
        assert relation_bytes(store, MARKER) == {} and relation_bytes(store, META_MARKER) == {}
        return
    # bytes: not in the file or the WAL now, nor in a backup taken afterwards, nor after compact
    assert file_hits(store.path, MARKER) == 0 and file_hits(store.path, META_MARKER) == 0
    backup = tmp_path / "after.db"
    memory.backup(backup)
    assert backup.read_bytes().count(MARKER.encode()) == 0
    memory.compact()
    assert file_hits(store.path, MARKER) == 0
    assert memory.verify().ok


def test_reimport_does_not_resurrect(memory: Memory, tmp_path: Path) -> None:
    memory.forget(event_ids=["E3"])
    again = memory.ingest_records(records(), project="alpha")
    assert (again.ingested, again.duplicates) == (0, 12)
    # a transcript file whose ids are derived from its bytes: forget one, re-read it all
    path = tmp_path / "t.jsonl"
    rows = [
        {"session_id": "s9", "timestamp": BASE + 3 * DAY + i * 1000, "role": "user",
         "text": f"file line {i} {MARKER if i == 1 else 'plain'}"}
        for i in range(3)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert memory.ingest([path], project="alpha").ingested == 3
    memory.process()
    victim = next(e for e in memory.events(session_id="s9") if MARKER in e.text)
    memory.forget(event_ids=[victim.event_id])
    rescan = memory.ingest([path], project="alpha", rescan=True)
    assert (rescan.ingested, rescan.duplicates) == (0, 3)
    memory.process()
    assert [e.text for e in memory.events(session_id="s9")] == [
        "file line 0 plain",
        "file line 2 plain",
    ]
    assert memory.search(MARKER, mode="bm25").items == ()
    assert memory.verify().ok


def test_dry_run_changes_nothing(memory: Memory) -> None:
    def snapshot() -> list[Any]:
        tables = ("events", "segments", "segment_events", "toc_node_versions", "grips", "docs",
                  "vectors", "forget_audit", "outbox")  # fmt: skip
        return table_rows(memory.store, tables)

    before = snapshot()
    report = memory.forget(session_id="s1", dry_run=True)
    assert report.dry_run and report.events == 8 and report.audit_id is None
    assert report.event_ids == [f"E{i}" for i in range(8)]
    assert snapshot() == before
    assert [i.id for i in memory.search(MARKER, kinds=("event",), mode="bm25").items] == ["E3"]


def test_forget_session_retires_its_day(memory: Memory) -> None:
    report = memory.forget(session_id="s2")
    assert report.event_ids == ["F0", "F1", "F2", "F3"] and report.periods_retired == 1
    store = memory.store
    assert [n.node_id for n in store.list_nodes("alpha", level="day")] == ["toc:day:2024-01-15"]
    week = store.find_node("toc:week:2024-W03", "alpha")
    assert week.child_node_ids == ("toc:day:2024-01-15",) and week.event_count == 8
    assert holding(memory, "flexbox") == {}
    assert memory.search("flexbox modal", mode="bm25").items == ()
    assert memory.verify().ok


def test_forget_time_range_and_project(memory: Memory) -> None:
    report = memory.forget(since_ms=BASE + 5 * 60_000, until_ms=BASE + 8 * 60_000, project="alpha")
    assert report.event_ids == ["E5", "E6", "E7"]
    segments = memory.store.list_nodes("alpha", level="segment")
    assert [n.event_count for n in segments] == [5, 4]
    assert memory.forget(since_ms=BASE, until_ms=BASE + DAY, project="beta").events == 0
    assert memory.verify().ok


def test_forget_by_query_and_audit_log(memory: Memory) -> None:
    plan = memory.forget(query=MARKER, dry_run=True)
    assert plan.event_ids == ["E3"] and plan.selector["query"] is True
    report = memory.forget(query=MARKER)
    assert report.event_ids == ["E3"]
    again = memory.forget(event_ids=["E3", "nope"])
    assert again.events == 0 and again.already_forgotten == ["E3"] and again.missing == ["nope"]
    (entry,) = memory.forget_audit()
    assert entry.event_ids == ("E3",) and entry.audit_id == report.audit_id
    assert entry.selector["query"] is True and entry.counts["events"] == 1
    assert entry.counts["segments_rebuilt"] == 1 and entry.counts["periods_rerolled"] == 4
    raw = table_rows(memory.store, ("forget_audit",))
    assert MARKER not in repr(raw) and "password" not in repr(raw)


def test_forget_query_takes_every_match_text_and_metadata(memory: Memory) -> None:
    """80 events hold the marker in their text (mixed case, inside words and JSON), one only in a
    metadata value, one only in a metadata key: the query selects all 82 — no ranking cut — and
    ``max_events`` refuses above it, changing nothing."""
    marker = "Lumen_Quartz%42"
    rows: list[dict[str, Any]] = []
    for i in range(80):
        text = f"note {i}: the token was x{marker.upper() if i % 3 else marker}y, rotate it"
        rows.append(
            {
                "event_id": f"Q{i:02d}",
                "session_id": f"q{i % 4}",
                "timestamp": BASE + 2 * DAY + i * 60_000,
                "role": "user",
                "text": text,
            }
        )
    rows.append({**rows[0], "event_id": "QV", "text": "clean", "metadata": {"a": [marker]}})
    rows.append({**rows[0], "event_id": "QK", "text": "clean", "metadata": {marker: 1}})
    rows.append({**rows[0], "event_id": "QN", "text": "lumen_quartz42 is a near miss"})
    assert memory.ingest_records(rows, project="alpha").ingested == 83
    with pytest.raises(QueryError, match="82 events match, more than the limit of 81"):
        memory.forget(query=marker, max_events=81)
    assert memory.store.count_events() == 95
    plan = memory.forget(query=f"  rotate {marker.lower()} ", dry_run=True)
    assert len(plan.event_ids) == 80  # "rotate" is in the texts, not in the metadata-only pair
    report = memory.forget(query=marker, max_events=82)
    assert sorted(report.event_ids) == sorted([f"Q{i:02d}" for i in range(80)] + ["QV", "QK"])
    left = [e.event_id for e in memory.events(limit=1000)]
    assert "QN" in left and not any(i.startswith("Q") and i != "QN" for i in left)
    assert memory.forget(query=marker, dry_run=True).event_ids == []
    assert memory.verify().ok
    with pytest.raises(QueryError, match="query is empty"):
        memory.forget(query="   ")


def test_forget_first_event_moves_the_segment(memory: Memory) -> None:
    old = memory.store.list_nodes("alpha", level="segment")[0]
    memory.forget(event_ids=["E0"])
    new = memory.store.list_nodes("alpha", level="segment")[0]
    assert new.node_id != old.node_id and new.start_ms == BASE + 60_000
    assert memory.store.node_versions("alpha", old.node_id) == []
    day = memory.store.find_node("toc:day:2024-01-15", "alpha")
    assert day.child_node_ids == (new.node_id,)
    assert memory.verify().ok


def test_selector_errors(memory: Memory) -> None:
    with pytest.raises(QueryError, match="needs a selector"):
        memory.forget(project="alpha")
    with pytest.raises(QueryError, match="empty time range"):
        memory.forget(since_ms=BASE + 10, until_ms=BASE)
    with pytest.raises(QueryError, match="empty"):
        memory.forget(event_ids=[])


def test_crash_before_rederivation_is_finished_by_process(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between purge and re-derivation")

    with monkeypatch.context() as patch:
        patch.setattr(forgetting, "finish", crash)
        with pytest.raises(RuntimeError, match="killed"):
            memory.forget(event_ids=["E3"])
    # purged and tombstoned already; the summaries still need re-deriving
    assert memory.store.outbox_counts()["pending"] == 1
    assert MARKER not in repr(table_rows(memory.store, ("events",)))
    report = memory.process()
    assert report.entries == 1 and not report.failures
    assert holding(memory, MARKER) == {}
    assert [n.event_count for n in memory.store.list_nodes("alpha", level="segment")] == [7, 4]
    if isinstance(memory.store, SqliteStore):
        assert file_hits(memory.store.path, MARKER) == 0
    assert memory.verify().ok


def test_secure_delete_zeroes_freed_pages(sqlite_memory: Memory, tmp_path: Path) -> None:
    """A long event spills into overflow pages; freed, they must not keep the text (nor carry
    it into a backup, which copies free pages too). Debian's SQLite defaults to secure_delete=1,
    so here this holds even without the pragma; forget sets it for builds that default to 0."""
    long_text = " ".join(f"line {i} of the build log {MARKER}x{i}" for i in range(2000))
    memory = sqlite_memory
    event = memory.remember(long_text, project="alpha", session_id="s3", role="tool")
    memory.process()
    store = sqlite(memory)
    store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert file_hits(store.path, f"{MARKER}x1999") == 1
    memory.forget(event_ids=[event.event_id])
    assert file_hits(store.path, f"{MARKER}x") == 0
    backup = tmp_path / "b.db"
    memory.backup(backup)
    assert backup.read_bytes().count(f"{MARKER}x".encode()) == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_forget_equals_never_ingested(tmp_path: Path, seed: int) -> None:
    """Re-derivation is exact: forgetting a random sample of events leaves the same TOC (segments,
    nodes at every level, grips) as a store that never had them — token-cap splits, gaps and
    emptied segments included."""
    events = make_events(
        seed=seed, sessions=5, per_session=(15, 35), start_ms=BASE, spread_ms=6 * DAY, big_every=9
    )
    rng = random.Random(seed)
    gone = {e.event_id for e in rng.sample(events, len(events) // 6)}
    # plus one whole segment's worth: a run of consecutive events of one session
    first_session = [e for e in events if e.session_id == events[0].session_id]
    gone.update(e.event_id for e in first_session[:6])

    def built(name: str, evs: list[Event]) -> Memory:
        clock = ManualClock(BASE + 30 * DAY)
        store = SqliteStore(tmp_path / name / "memtoc.db", clock=clock, durability="off")
        mem = Memory(store, clock=clock, tz=ZoneInfo("UTC"), semantic=SemanticIndex(store))
        store.append_events(evs)
        mem.process()
        mem.rollup(force=True)
        return mem

    forgot = built("forgot", events)
    report = forgot.forget(event_ids=sorted(gone))
    assert report.events == len(gone) and report.segments_removed > 0
    never = built("never", [e for e in events if e.event_id not in gone])
    snapshot = toc_snapshot(sqlite(forgot))
    assert len(snapshot) > 10 and snapshot == toc_snapshot(sqlite(never))
    assert forgot.verify().ok
    forgot.close()
    never.close()


def test_verify_catches_an_unpurged_tombstone(sqlite_memory: Memory) -> None:
    memory = sqlite_memory
    memory.forget(event_ids=["E3"])
    store = sqlite(memory)
    with store.transaction():
        store.connection.execute(f"UPDATE events SET text = '{MARKER}' WHERE event_id = 'E3'")
        store.connection.execute(
            "INSERT INTO segment_events(seq, project, node_id) SELECT seq, project, 'x' "
            "FROM events WHERE event_id = 'E3'"
        )
    problems = memory.verify().problems
    assert any(p.startswith("tombstones purged: 1 forgotten events") for p in problems), problems
    assert any(p.startswith("segment membership: 1 members") for p in problems), problems


def test_read_only_store_from_before_the_migration(tmp_path: Path) -> None:
    """A store not yet migrated to ``0006_forget``, opened read-only, reads as before."""
    path = tmp_path / "old.db"
    store = SqliteStore(path)
    store.append_events([Event("A1", "s", "p", "a", BASE, "user_message", "user", "hello there")])
    with store.transaction():
        store.connection.execute("DROP INDEX events_tombstones")
        store.connection.execute("ALTER TABLE events DROP COLUMN forgotten_ms")
        store.connection.execute("DROP TABLE forget_audit")
        store.connection.execute("DELETE FROM schema_migrations WHERE name = '0006_forget'")
    store.close()
    old = SqliteStore(path, read_only=True)
    assert [e.event_id for e in old.scan_events()] == ["A1"]
    assert old.count_events() == 1 and old.count_events("p") == 1
    assert old.get_event("A1").text == "hello there"
    old.close()
    upgraded = SqliteStore(path)  # read-write: the migration runs, tombstones become possible
    assert upgraded.count_events("p") == 1
    upgraded.close()


def test_postgres_scrub_waits_for_an_older_snapshot_then_finishes(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VACUUM FULL keeps a deleted row version that a running transaction can still see: a
    session reading a snapshot from before the forget leaves the scrub pending (reported, in
    status), the bytes still in the files; once it ends, the next ``process`` rewrites them."""
    import psycopg

    from memtoc.store.postgres import PostgresStore
    from memtoc.store.postgres import forget as postgres_forget

    monkeypatch.setattr(postgres_forget, "SNAPSHOT_WAIT_S", 0.3)
    clock = ManualClock(BASE + 10 * DAY)
    memory = _filed(PostgresStore(pg_url, clock=clock, pool_size=2), clock)
    try:
        with psycopg.connect(pg_url) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            assert reader.execute("SELECT COUNT(*) FROM events").fetchone() == (12,)
            report = memory.forget(event_ids=["E3"])
            assert report.wal_truncated is False and report.events == 1
            assert memory.status()["forget_scrub_pending"] is not None
            assert holding(memory, MARKER) == {}  # gone for every reader from now on
            assert relation_bytes(memory.store, MARKER)  # the old row versions are kept
            memory.process()
            assert memory.store.scrub_pending() is not None  # the reader is still there
            reader.rollback()
        for _ in range(100):  # a later process finishes it (others' snapshots on a busy server
            memory.process()  # hold the server-wide horizon for a moment: it tries again)
            if memory.store.scrub_pending() is None:
                break
            time.sleep(0.2)
        assert memory.store.scrub_pending() is None
        assert memory.status()["forget_scrub_pending"] is None
        assert relation_bytes(memory.store, MARKER) == {}
    finally:
        memory.close()
