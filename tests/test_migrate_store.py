"""``memtoc migrate-store``: a SQLite store copied into PostgreSQL whole (events in seq order,
outbox state, nodes and versions, grips, checkpoints, bookmarks, vectors), resumable after a
``kill -9`` without copying anything twice, and verified table by table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from memtoc.clock import ManualClock
from memtoc.errors import StoreError
from memtoc.model import Bookmark, Event
from memtoc.pipeline.embed_step import EmbedStep
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.retrieval.bookmark_step import bookmark_doc
from memtoc.store.base import PipelineStore
from memtoc.store.capabilities import TextScope
from memtoc.store.migrate import CHECKPOINT_PREFIX, migrate_store
from memtoc.store.postgres import PostgresStore
from memtoc.store.postgres import maintenance as postgres_maintenance
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder
from memtoc.text.tokens import default_counter
from pipeline_support import make_events, toc_snapshot

T0 = int(datetime(2024, 5, 6, 9, 0, tzinfo=UTC).timestamp() * 1000)
FAR_FUTURE = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)
SRC = Path(__file__).resolve().parents[1] / "src"


def processor(store: PipelineStore) -> Processor:
    counter = default_counter()
    return Processor(
        store,
        ExtractiveSummarizer(counter),
        counter,
        PipelineConfig(),
        ManualClock(FAR_FUTURE),
        ZoneInfo("UTC"),
    )


def build_source(path: Path, sessions: int = 8) -> tuple[list[Event], list[Event]]:
    """A processed SQLite store with bookmarks, vectors, a NUL in an event and, last, a batch of
    events not yet processed (its outbox entry pending). Returns (processed, pending) events."""
    events = make_events(seed=5, sessions=sessions, per_session=(20, 60), start_ms=T0)
    nul = Event("01HZZZZZZZZZZZZZZZZZZZZZZZ", "sess-nul", "alpha", "test", T0 + 5_000,
                "tool_result", "tool", "binary\x00output of the lexer")  # fmt: skip
    processed = [*events[:-30], nul]
    pending = events[-30:]
    store = SqliteStore(path, durability="off", clock=ManualClock(FAR_FUTURE))
    try:
        store.append_events(processed, checkpoints={"import:/tmp/a.jsonl": {"offset": 123}})
        proc = processor(store)
        proc.run(rollup=False)
        proc.rollup(force=True)
        mark = Bookmark(
            "bm-1", "alpha", "The lexer bug was the \x00 escape.", (nul.event_id,), 0.8,
            "resolution", T0, T0,
        )  # fmt: skip
        store.put_bookmark(mark)
        store.put_docs([bookmark_doc(mark)])  # as the bookmark step writes it
        EmbedStep(store, HashEmbedder(16)).run()  # vectors of every event and doc
        store.append_events(pending)  # stays pending in the outbox
    finally:
        store.close()
    return processed, pending


def table_rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_copy_is_whole_verified_and_the_pipeline_continues_on_postgres(
    tmp_path: Path, pg_url: str
) -> None:
    path = tmp_path / "memtoc.db"
    processed, pending = build_source(path)
    seen: list[tuple[str, int, int]] = []
    report = migrate_store(
        path, pg_url, batch_size=97, progress=lambda t, d, n: seen.append((t, d, n))
    )
    assert report.ok, report.to_dict()
    assert not report.resumed
    by_table = {c.table: c for c in report.checks}
    assert by_table["events"].target_rows == len(processed) + len(pending)
    assert by_table["vectors"].target_rows > 0 and by_table["bookmarks"].target_rows == 1
    assert by_table["event_search"].target_rows == len(processed)
    assert ("events", len(processed) + len(pending), len(processed) + len(pending)) in seen

    src = SqliteStore(path, read_only=True)
    pg = PostgresStore(pg_url, clock=ManualClock(FAR_FUTURE), pool_size=2)
    try:
        assert toc_snapshot(pg) == toc_snapshot(src)
        # events in the same seq order, exact text (NUL included), pending work still pending
        assert pg.events_by_seq(1, 10_000) == src.events_by_seq(1, 10_000)
        assert pg.get_event("01HZZZZZZZZZZZZZZZZZZZZZZZ").text == "binary\x00output of the lexer"
        assert pg.outbox_counts() == src.outbox_counts()
        assert pg.get_checkpoint("import:/tmp/a.jsonl") == {"offset": 123}
        # derived text holds U+FFFD for NUL on both backends (event_checks.storable_text)
        assert pg.list_bookmarks() == src.list_bookmarks()
        assert src.list_bookmarks()[0].content == "The lexer bug was the \ufffd escape."
        event = pg.get_event(processed[0].event_id)
        hit = pg.nearest("hash:16", HashEmbedder(16).embed([event.text])[0], 1)[0]
        assert hit[0].item_id == event.event_id and hit[1] == pytest.approx(1.0, abs=1e-5)
        # the copied vectors are current: only the events appended after embedding are new
        embedded = EmbedStep(pg, HashEmbedder(16)).run()
        assert (embedded.events, embedded.docs, embedded.rebuilt) == (len(pending), 0, False)
        node = next(n for n in pg.list_nodes("alpha") if n.keywords)
        alpha = TextScope(projects=("alpha",))
        assert pg.rank_text(node.keywords[0], kinds=("node", "event"), scope=alpha)
        # the copy is a working store: the worker files the pending batch; appends continue
        proc = processor(pg)
        proc.run(rollup=False)
        proc.rollup(force=True)
        assert pg.outbox_counts()["pending"] == 0
        ref = tmp_path / "ref.db"
        ref_store = SqliteStore(ref, durability="off", clock=ManualClock(FAR_FUTURE))
        ref_store.append_events(processed)
        ref_store.append_events(pending)
        ref_proc = processor(ref_store)
        ref_proc.run(rollup=False)
        ref_proc.rollup(force=True)
        assert toc_snapshot(pg) == toc_snapshot(ref_store)
        ref_store.close()
        extra = Event("01J0000000000000000000000A", "sess-new", "alpha", "test", FAR_FUTURE,
                      "user_message", "user", "after the move")  # fmt: skip
        pg.append_events([extra])
        assert pg.events_by_seq(src.max_seq() + 1, src.max_seq() + 1)[0][1] == extra
        EmbedStep(pg, HashEmbedder(16)).run()  # the pipeline's embedding step (no hook here)
        report = postgres_maintenance.verify(pg)
        assert report.ok, report.problems
    finally:
        src.close()
        pg.close()


def test_a_copy_killed_mid_way_resumes_and_copies_nothing_twice(
    tmp_path: Path, pg_url: str
) -> None:
    path = tmp_path / "memtoc.db"
    processed, pending = build_source(path, sessions=24)
    total = len(processed) + len(pending)
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "memtoc", "migrate-store", "--from", str(path), "--to", pg_url,
           "--batch-size", "7", "--json"]  # fmt: skip
    err = tmp_path / "child.err"
    with err.open("wb") as err_file:
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err_file)
    job = f"{CHECKPOINT_PREFIX}events"
    copied_before = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            try:
                rows = table_rows(pg_url, f"SELECT value FROM checkpoints WHERE job = '{job}'")
            except psycopg.Error:  # schema not created yet
                rows = []
            if rows and json.loads(str(rows[0][0]))["rows"] >= total // 3:
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, err.read_text()
    state = json.loads(
        str(table_rows(pg_url, f"SELECT value FROM checkpoints WHERE job = '{job}'")[0][0])
    )
    copied_before = int(table_rows(pg_url, "SELECT COUNT(*) FROM events")[0][0])
    assert copied_before == state["rows"] and 0 < copied_before < total and not state.get("done")

    report = migrate_store(path, pg_url, batch_size=500)
    assert report.ok, report.to_dict()
    assert report.resumed
    assert report.copied["events"] == total - copied_before  # nothing copied twice
    assert table_rows(pg_url, "SELECT COUNT(*), COUNT(DISTINCT event_id) FROM events")[0] == (
        total,
        total,
    )
    # a third run copies nothing and still verifies
    again = migrate_store(path, pg_url)
    assert again.ok and sum(again.copied.values()) == 0


def test_refuses_a_target_with_other_data(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "memtoc.db"
    build_source(path, sessions=2)
    pg = PostgresStore(pg_url, pool_size=1)
    pg.append_events(
        [Event("01J0000000000000000000000B", "s", "beta", "t", T0, "user_message", "user", "hi")]
    )
    pg.close()
    with pytest.raises(StoreError, match="already holds events"):
        migrate_store(path, pg_url)
    with pytest.raises(StoreError, match="no SQLite store"):
        migrate_store(tmp_path / "missing.db", pg_url)
