"""PostgreSQL specifics (team mode): the pipeline on PG gives SQLite's TOC, four worker processes
share one outbox, concurrent appenders, project isolation on every read path, migrations.

The store contract itself runs on both backends in tests/test_store_contract.py. These tests need
the server ``make test`` provides (``MEMTOC_TEST_PG_URL``); they skip without it, and fail in CI.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pytest

if os.environ.get("CI") != "true":  # in CI a missing driver is an error, not a skip
    pytest.importorskip("psycopg", reason="PostgreSQL tests need: pip install -e '.[postgres]'")

import psycopg

from memtoc.clock import ManualClock
from memtoc.config import load_settings
from memtoc.errors import MigrationError, NotFoundError, StoreError
from memtoc.memory import Memory
from memtoc.model import Bookmark, Event, Grip
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.store.base import DocRow, PipelineStore
from memtoc.store.capabilities import TextScope, VectorKey
from memtoc.store.postgres import PostgresStore
from memtoc.store.postgres import maintenance as postgres_maintenance
from memtoc.store.postgres.base import redact_url
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder
from memtoc.text.tokens import default_counter
from pipeline_support import make_events, toc_snapshot

T0 = int(datetime(2024, 1, 8, 9, 0, tzinfo=UTC).timestamp() * 1000)
FAR_FUTURE = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)
UTC_ZONE = ZoneInfo("UTC")


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, clock=ManualClock(FAR_FUTURE), pool_size=2)
    yield s
    s.close()


def processor(store: PipelineStore, worker_id: str = "w") -> Processor:
    counter = default_counter()
    return Processor(
        store,
        ExtractiveSummarizer(counter),
        counter,
        PipelineConfig(),
        ManualClock(FAR_FUTURE),
        UTC_ZONE,
        worker_id=worker_id,
    )


def corpus(sessions: int = 12) -> list[Event]:
    return make_events(seed=3, sessions=sessions, per_session=(15, 50), start_ms=T0, big_every=97)


def sqlite_reference(tmp_path: Path, events: Sequence[Event]) -> dict[tuple[str, str], object]:
    store = SqliteStore(tmp_path / "ref.db", durability="off", clock=ManualClock(FAR_FUTURE))
    store.append_events(list(events))
    proc = processor(store)
    proc.run()
    proc.rollup(force=True)
    snap = toc_snapshot(store)
    store.close()
    return snap


def assert_verified(store: PostgresStore) -> None:
    report = postgres_maintenance.verify(store)
    assert report.ok, report.problems
    assert len(report.checks) >= 9


def test_pipeline_on_postgres_builds_the_same_toc_as_sqlite(
    pg: PostgresStore, tmp_path: Path
) -> None:
    events = corpus()
    batches = [events[i : i + 150] for i in range(0, len(events), 150)]
    proc = processor(pg)
    for batch in batches:
        pg.append_events(batch)
        proc.run()
    proc.rollup(force=True)
    snap = toc_snapshot(pg)
    assert snap == sqlite_reference(tmp_path, events)
    assert {n.level for p in pg.projects() for n in pg.list_nodes(p)} == {
        "segment", "day", "week", "month", "year"
    }  # fmt: skip
    assert pg.outbox_counts() == {"pending": 0, "done": len(batches), "failed": 0}
    assert_verified(pg)
    # a second run writes nothing
    before = pg.stats()["node_versions"]
    assert proc.run().nodes_written == 0 and proc.rollup(force=True).written == 0
    assert pg.stats()["node_versions"] == before
    # full text over the documents the pipeline wrote, scores in 0..1
    project = pg.projects()[0]
    word = pg.list_nodes(project, level="segment")[0].keywords[0]
    hits = pg.rank_text(word, kinds=("node", "grip", "event"), scope=TextScope(projects=(project,)))
    assert hits and all(0 < r[4] <= 1 for r in hits)
    assert {r[0] for r in hits} >= {"node"}


def _drain(url: str, worker_id: str, start: Any) -> tuple[int, int, int]:
    """One worker process: its own store and processor, draining until the outbox is idle.

    Workers wait at ``start`` (a barrier) once set up, so a slow interpreter start-up does not
    let the first worker drain the whole queue alone."""
    store = PostgresStore(url, clock=ManualClock(FAR_FUTURE), pool_size=2)
    try:
        proc = processor(store, worker_id)
        start.wait(timeout=120)
        report = proc.run(rollup=False)
        return report.entries, len(report.failed_entries), len(report.failed_segments)
    finally:
        store.close()


def test_four_worker_processes_drain_one_outbox_exactly_once(
    pg: PostgresStore, pg_url: str, tmp_path: Path
) -> None:
    events = corpus(sessions=8)
    # Agents append their own sessions in small batches, interleaved in time; a few batches
    # span every session (an importer), so entries of one session are spread over the queue.
    sessions: dict[str, list[Event]] = {}
    for e in events:
        sessions.setdefault(e.session_id, []).append(e)
    chunks = [[s[i : i + 8] for i in range(0, len(s), 8)] for s in sessions.values()]
    tails = [c.pop() for c in chunks]  # every session's last chunk goes into one mixed batch
    batches = [c[r] for r in range(max(map(len, chunks))) for c in chunks if r < len(c)]
    batches.insert(len(batches) // 2, [e for t in tails for e in t])
    assert sum(map(len, batches)) == len(events)
    for batch in batches:
        pg.append_events(batch)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(4) as pool:
        start = manager.Barrier(4)
        results = pool.starmap(_drain, [(pg_url, f"worker-{i}", start) for i in range(4)])
    assert sum(r[0] for r in results) == len(batches)  # every entry completed once, in total
    assert all(r[1] == 0 and r[2] == 0 for r in results), results
    assert sum(1 for r in results if r[0]) >= 2  # the work was actually shared
    assert pg.outbox_counts() == {"pending": 0, "done": len(batches), "failed": 0}
    filed = pg._query("SELECT COUNT(*), COUNT(DISTINCT seq) FROM segment_events")[0]
    assert filed == (len(events), len(events))  # each event in exactly one segment
    assert pg.unbuilt_segments(1000) == []
    proc = processor(pg)
    proc.run()
    proc.rollup(force=True)
    assert toc_snapshot(pg) == sqlite_reference(tmp_path, events)
    assert_verified(pg)


def test_claims_skip_sessions_in_flight_and_leases_expire(pg: PostgresStore) -> None:
    def ev(i: int, session: str) -> Event:
        return Event(f"E{i:04d}", session, "p", "a", T0 + i, "user_message", "user", f"t{i}")

    pg.append_events([ev(1, "s1")])
    pg.append_events([ev(2, "s1")])
    pg.append_events([ev(3, "s2")])
    (a,) = pg.claim_outbox("A", 1)
    # B may not take the second s1 entry while A holds the first one: it gets s2's
    (b,) = pg.claim_outbox("B", 5)
    assert (a.entry_id, b.entry_id) == (1, 3)
    assert pg.claim_outbox("C", 5) == []
    pg.complete_outbox([a.entry_id])
    assert [e.entry_id for e in pg.claim_outbox("C", 5)] == [2]
    # B's lease runs out: the entry is claimable again, and completing it twice is refused
    assert isinstance(pg.clock, ManualClock)
    pg.clock.advance(pg.outbox_lease_ms + 1)
    again = pg.claim_outbox("D", 5)
    assert b.entry_id in [e.entry_id for e in again]
    pg.complete_outbox([b.entry_id])
    with pytest.raises(StoreError, match="already completed"):
        pg.complete_outbox([b.entry_id])


def test_concurrent_appenders_get_ranges_of_their_own(pg: PostgresStore) -> None:
    def write(t: int) -> None:
        for b in range(15):
            base = (t * 100 + b) * 20
            pg.append_events(
                [
                    Event(
                        f"T{base + i:07d}",
                        f"s{t}",
                        "p",
                        "a",
                        T0 + base + i,
                        "user_message",
                        "user",
                        f"thread {t} batch {b}",
                    )
                    for i in range(20)
                ]
            )

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pg.count_events() == 4 * 15 * 20
    entries = pg.claim_outbox("w", 1000)
    assert len(entries) == 60
    for entry in entries:  # each range holds exactly its own append's events
        rows = pg.events_by_seq(int(entry.payload["first_seq"]), int(entry.payload["last_seq"]))
        assert len(rows) == 20 and len({e.text for _, e in rows}) == 1
    assert_verified(pg)


def test_projects_are_isolated_on_every_read_path(pg: PostgresStore) -> None:
    def ev(i: int, project: str) -> Event:
        return Event(f"{project}-{i:03d}", "shared-session", project, "a", T0 + i * 1000,
                     "user_message", "user", f"secret {project} flexbox number {i}")  # fmt: skip

    pg.append_events([ev(i, p) for i in range(6) for p in ("alpha", "beta")])
    proc = processor(pg)
    proc.run()
    proc.rollup(force=True)
    pg.put_bookmark(
        Bookmark("bm-alpha", "alpha", "alpha flexbox note", ("alpha-001",), 0.9, "fact", 1, 1)
    )
    pg.put_docs([DocRow("bookmark", "bm-alpha", "alpha", 1, "alpha flexbox note")])
    unit = np.ones(8, dtype=np.float32)
    emb = HashEmbedder(8)
    keys = [VectorKey("node", "alpha", "n-alpha"), VectorKey("node", "beta", "n-beta")]
    pg.put_item_vectors(emb, keys, np.stack([unit, unit]))

    assert {e.project for e in pg.scan_events(project="beta")} == {"beta"}
    assert pg.count_events("beta") == 6
    beta_event = pg.get_event("beta-003")
    before, after = pg.session_neighbors(beta_event, before=10, after=10)
    assert {e.project for e in before + after} == {"beta"}
    nodes = pg.list_nodes("beta")
    assert nodes and {n.project for n in nodes} == {"beta"}
    segment = next(n for n in nodes if n.level == "segment")
    assert all(g.project == "beta" for g in pg.grips_for_node("beta", segment.node_id))
    assert pg.grips_for_node("alpha", segment.node_id) == []
    assert pg.segment_member_events("alpha", segment.node_id) == []
    with pytest.raises(NotFoundError):
        pg.get_node("alpha", segment.node_id) if segment.node_id not in {
            n.node_id for n in pg.list_nodes("alpha")
        } else pg.get_node("gamma", segment.node_id)
    assert pg.list_bookmarks("beta") == [] and pg.find_bookmarks("beta") == []
    assert [b.bookmark_id for b in pg.list_bookmarks("alpha")] == ["bm-alpha"]
    beta = TextScope(projects=("beta",))
    for kinds in (("node", "grip"), ("event",), ("bookmark",)):
        hits = pg.rank_text("flexbox", kinds=kinds, scope=beta)
        ids = {r[2] for r in hits}
        assert not any("alpha" in i for i in ids), (kinds, ids)
    assert pg.rank_text("flexbox", kinds=("event",), scope=beta)  # the path does return beta's
    near = pg.nearest(emb.name, unit, 20, projects=("beta",), kinds=("node", "grip"))
    assert [k.item_id for k, _ in near] == ["n-beta"]
    assert pg.latest_nodes("beta", "segment", 50) == pg.list_nodes("beta", level="segment")[::-1]
    days = pg.list_nodes("beta", level="day")
    for kw in ({}, {"level": "segment"}, {"parent_id": days[0].node_id},
               {"level": "day", "since_ms": days[0].start_ms, "until_ms": days[-1].end_ms}):  # fmt: skip
        assert pg.list_node_versions("beta", **kw) == [  # type: ignore[arg-type]
            (n.node_id, n.version)
            for n in pg.list_nodes("beta", **kw)  # type: ignore[arg-type]
        ]


def test_text_with_nul_round_trips_and_derived_text_is_storable(pg: PostgresStore) -> None:
    e = Event("NUL1", "s", "p", "a", T0, "tool_result", "tool", "bin\x00ary\x00", {"k": "v\x00"})
    pg.append_events([e])
    assert pg.get_event("NUL1") == e
    grip = Grip("grip:1", "p", "ex\x00cerpt", "NUL1", "NUL1", T0, "segment", "toc:segment:x", "s")
    assert pg.put_grips([grip]) == 1
    assert pg.get_grip("grip:1").excerpt == "ex\ufffdcerpt"


def test_location_hides_the_password() -> None:
    assert redact_url("postgresql://bob:s3cret@db:5432/mem") == "postgresql://bob:***@db:5432/mem"
    assert redact_url("postgresql://bob@db/mem") == "postgresql://bob@db/mem"


def test_migrations_recorded_once_and_newer_store_refused(pg: PostgresStore, pg_url: str) -> None:
    names = [r[0] for r in pg._query("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == [
        "0001_events_outbox",
        "0002_toc_grips_bookmarks",
        "0003_search_indexes",
        "0004_pipeline_segments_rollups",
        "0005_vector_sources",
        "0006_gin_pending_limit",
        "0007_rollup_mark_seq",
        "0008_projects",
        "0009_file_positions",
        "0010_forget",
        "0011_fts5_tokens",
        "0012_tsv_uncompressed",
        "0013_bookmarks_content",
    ]
    PostgresStore(pg_url).close()  # reopening runs nothing
    assert len(pg._query("SELECT name FROM schema_migrations")) == 13
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES ('9999_future', 0)")
    with pytest.raises(MigrationError, match="newer memtoc"):
        PostgresStore(pg_url)


def test_memory_opens_a_postgres_url_and_runs_the_pipeline(pg_url: str) -> None:
    settings = load_settings({"db": pg_url, "timezone": "UTC"})
    with Memory.open(settings) as memory:
        assert isinstance(memory.store, PostgresStore)
        report = memory.ingest_records(
            [
                {"session_id": "s", "role": "user", "text": f"note {i}", "timestamp": T0 + i}
                for i in range(5)
            ],
            project="p",
        )
        assert report.ingested == 5
        assert memory.process().entries == 1
        assert memory.toc("p")
        assert memory.verify().ok
        with pytest.raises(StoreError, match="pg_dump"):
            memory.backup("/tmp/x")
        found = memory.search("note", mode="bm25", kinds=("event",))  # search works on PG
        assert found.items and all("note" in item.text for item in found.items)
        drilled = memory.drill("note", project="p")  # navigation and recall work on PG
        assert drilled.items and all("note" in item.text for item in drilled.items)
        recalled = memory.recall("note", project="p", budget=200)
        assert recalled.items and recalled.tokens <= 200


def test_session_neighbours_are_one_round_trip(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall asks for the neighbouring turns of each of its strongest hits: one statement each
    (it was three: the event's seq, the turns before, the turns after), the same turns, and an
    event the store does not hold is still named."""
    kinds = ["user_message", "assistant_message", "tool_output"]
    pg.append_events([
        Event(f"n{i:02d}", "s1" if i % 4 else "s2", "p", "a", T0 + (i // 2) * 1000,
              kinds[i % 3], "user", f"turn {i}")
        for i in range(24)
    ])  # fmt: skip
    s1 = [e for e in pg.scan_events(session_id="s1")]
    statements: list[str] = []
    real = pg._query
    monkeypatch.setattr(pg, "_query", lambda *a: statements.append(a[0]) or real(*a))
    middle = s1[len(s1) // 2]
    before, after = pg.session_neighbors(middle, before=2, after=3)
    assert statements and len(statements) == 1
    at = s1.index(middle)
    assert before == s1[at - 2 : at] and after == s1[at + 1 : at + 4]
    turns = [e for e in s1 if e.event_type in kinds[:2]]
    before, after = pg.session_neighbors(middle, before=1, after=1, event_types=tuple(kinds[:2]))
    earlier = [e for e in turns if (e.ts_ms, s1.index(e)) < (middle.ts_ms, at)]
    later = [e for e in turns if (e.ts_ms, s1.index(e)) > (middle.ts_ms, at)]
    assert before == earlier[-1:] and after == later[:1]
    assert pg.session_neighbors(s1[0], before=3, after=0) == ([], [])
    ghost = Event("nobody", "s1", "p", "a", T0, "user_message", "user", "never stored")
    with pytest.raises(NotFoundError):
        pg.session_neighbors(ghost, before=1, after=1)


def test_closing_idle_segments_leaves_a_row_another_worker_holds(
    pg: PostgresStore, pg_url: str
) -> None:
    # a worker holding a segment's row (extending or building it) is neither waited for nor
    # deadlocked with: the segment is closed by the next round
    rows = [("p", f"toc:segment:{n}", "s", T0 + n, T0 + n, n, n, 1, 1) for n in range(3)]
    with psycopg.connect(pg_url) as conn:
        conn.cursor().executemany(
            "INSERT INTO segments(project, node_id, session_id, start_ms, end_ms, first_seq, "
            "last_seq, event_count, token_count) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            rows,
        )
        conn.commit()
        conn.execute("SELECT 1 FROM segments WHERE node_id = 'toc:segment:1' FOR UPDATE")
        closed: list[int] = []
        t = threading.Thread(target=lambda: closed.append(pg.close_idle_segments(FAR_FUTURE)))
        t.start()
        t.join(timeout=20)
        assert not t.is_alive() and closed == [2]  # did not wait for the held row
        conn.commit()  # the other worker is done with it
    assert pg.close_idle_segments(FAR_FUTURE) == 1
    assert pg.close_idle_segments(FAR_FUTURE) == 0
