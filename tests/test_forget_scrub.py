"""Forget leaves no byte behind (store/sqlite/scrub.py): not in free space inside live pages, not
in the WAL, not in a backup taken right after — and no reader keeps the text past the forget.

Before: in 3 of 44 forgets a fragment stayed in the unallocated gap of a live ``doc_vectors`` or
``docs_fts_data`` page (copies SQLite leaves behind when it rebalances a page; ``secure_delete``
only zeroes what it frees), and so in the next backup, until ``compact``; a reader holding a
snapshot kept the text in the WAL."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite import scrub as sqlite_scrub
from memtoc.text.embed import HashEmbedder
from pipeline_support import make_events

BASE = 1_705_312_800_000  # 2024-01-15T10:00:00Z
DAY = 86_400_000


def raw_hits(path: Path, needle: bytes) -> int:
    """Occurrences of ``needle`` in a database file and its WAL, as they are on disk."""
    return sum(p.read_bytes().count(needle) for p in (path, Path(f"{path}-wal")) if p.exists())


def churn(store: SqliteStore, seed: int) -> tuple[int, int]:
    """A workload of inserts, replacements, updates and deletes on one table (what the docs and
    summaries see): returns (marked rows alive, marker bytes in the file after a checkpoint)."""
    conn = store.connection
    conn.execute("CREATE TABLE churn (k TEXT PRIMARY KEY, body TEXT)")
    rng = random.Random(seed)
    live: dict[str, str] = {}
    with store.transaction():
        for n in range(4000):
            op = rng.random()
            if op < 0.6 or len(live) < 50:
                key = f"k{rng.randrange(10**6):07d}"
                body = (
                    f"MARKQ{n:05d} " if rng.random() < 0.05 else ""
                ) + "lorem ipsum " * rng.randrange(5, 60)
                conn.execute("INSERT OR REPLACE INTO churn VALUES (?, ?)", (key, body))
                live[key] = body
            elif op < 0.8:
                key = rng.choice(list(live))
                body = "lorem ipsum " * rng.randrange(5, 60)
                conn.execute("UPDATE churn SET body = ? WHERE k = ?", (body, key))
                live[key] = body
            else:
                key = rng.choice(list(live))
                conn.execute("DELETE FROM churn WHERE k = ?", (key,))
                del live[key]
    assert sqlite_scrub.truncate_wal(store)
    return sum(b.startswith("MARKQ") for b in live.values()), raw_hits(store.path, b"MARKQ")


def test_rebalanced_pages_keep_dead_copies_until_the_table_is_rewritten(tmp_path: Path) -> None:
    """The mechanism: with secure_delete on, dead rows still leave copies in pages' free space
    (on this SQLite, for at least one of these workloads); rewriting the table removes every one,
    and keeps every live row."""
    leaked = 0
    for seed in range(4):
        store = SqliteStore(tmp_path / f"churn{seed}.db")
        assert store.connection.execute("PRAGMA secure_delete").fetchone()[0] == 1
        alive, found = churn(store, seed)
        leaked += found - alive
        before = store.connection.execute("SELECT k, body FROM churn ORDER BY k").fetchall()
        tables, rows = sqlite_scrub.rewrite_tables(store)
        assert tables >= 1 and rows >= len(before)
        assert sqlite_scrub.truncate_wal(store)
        assert raw_hits(store.path, b"MARKQ") == alive, seed
        assert store.connection.execute("SELECT k, body FROM churn ORDER BY k").fetchall() == before
        store.close()
    assert leaked > 0, "no workload left a dead copy: the premise of the rewrite changed"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    clock = ManualClock(BASE + 60 * DAY)
    store = SqliteStore(tmp_path / "memtoc.db", clock=clock)
    mem = Memory(
        store,
        clock=clock,
        tz=ZoneInfo("UTC"),
        semantic=SemanticIndex(store, embedder=HashEmbedder(64)),
    )
    yield mem
    mem.close()


def planted(
    seed: int, marks: int, sessions: int = 24, per_session: tuple[int, int] = (8, 30), big: int = 0
) -> tuple[list[dict[str, object]], dict[str, str]]:
    """Synthetic sessions with a unique marker in ``marks`` short decisive user messages (so the
    summaries, grips and search documents quote it), some also in metadata."""
    events = make_events(
        seed=seed, sessions=sessions, per_session=per_session, start_ms=BASE, big_every=big
    )
    rng = random.Random(seed)
    rows = [
        {
            "event_id": e.event_id,
            "session_id": e.session_id,
            "timestamp": e.ts_ms,
            "role": e.role,
            "type": e.event_type,
            "text": e.text,
            "project": e.project,
        }
        for e in events
    ]
    words = [
        "build",
        "test",
        "cache",
        "index",
        "query",
        "retry",
        "deploy",
        "config",
        "schema",
        "token",
        "parser",
    ]
    for row in rows:  # real transcripts vary: a line, a paragraph, a page of tool output
        tail = rng.choice((0, 0, 40, 200, 1200, 4000))
        row["text"] = f"{row['text']} " + " ".join(rng.choice(words) for _ in range(tail // 6))
    markers: dict[str, str] = {}
    for n, i in enumerate(rng.sample(range(len(rows)), marks)):
        mark = f"zqx{seed:02d}m{n:02d}q"
        rows[i]["text"] = f"Decision: keep the {mark} deploy key because the old one broke."
        rows[i]["role"], rows[i]["type"] = "user", "user_message"
        if n % 3 == 0:
            rows[i]["metadata"] = {"tag": mark, mark: True}
        markers[str(rows[i]["event_id"])] = mark
    return rows, markers


def test_forgets_leave_no_byte_in_the_file_the_wal_or_a_backup(
    memory: Memory, tmp_path: Path
) -> None:
    rows, markers = planted(seed=0, marks=20)
    third = len(rows) // 3
    for part in (rows[:third], rows[third : 2 * third], rows[2 * third :]):
        memory.ingest_records(part)
        memory.process()
        memory.rollup(force=True)
    store = memory.store
    assert isinstance(store, SqliteStore)
    sqlite_scrub.truncate_wal(store)
    assert all(raw_hits(store.path, m.encode()) > 0 for m in markers.values())
    for n, (event_id, mark) in enumerate(markers.items()):
        report = memory.forget(event_ids=[event_id])
        assert report.events == 1 and report.wal_truncated is True
        assert report.tables_rewritten > 5
        backup = tmp_path / f"after-{n}.db"
        memory.backup(backup)  # right after the forget, the daemon still running
        assert raw_hits(store.path, mark.encode()) == 0, (n, mark)
        assert backup.read_bytes().count(mark.encode()) == 0, (n, mark)
        backup.unlink()
    rest = [m for m in markers.values()]
    assert not any(m in repr(memory.search(m, mode="bm25").items) for m in rest)
    report = memory.verify()
    assert report.ok, report.problems


def test_a_reader_on_an_old_snapshot_is_waited_for(memory: Memory, tmp_path: Path) -> None:
    """The forget waits for a reader that started before it; once the reader is done, the text
    is in neither the file nor the WAL."""
    memory.ingest_records(
        [
            {
                "event_id": f"R{i}",
                "session_id": "s",
                "timestamp": BASE + i * 1000,
                "role": "user",
                "text": f"step {i}" if i != 2 else "the vault passphrase is qpxreader99",
            }
            for i in range(6)
        ]
    )
    memory.process()
    store = memory.store
    assert isinstance(store, SqliteStore)
    reader = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    seen = reader.execute("SELECT text FROM events WHERE event_id = 'R2'").fetchone()[0]
    assert "qpxreader99" in seen

    def finish_reading() -> None:
        time.sleep(0.5)
        reader.execute("COMMIT")

    thread = threading.Thread(target=finish_reading)
    thread.start()
    report = memory.forget(event_ids=["R2"])  # the busy timeout (30 s) covers the reader
    thread.join()
    reader.close()
    assert report.wal_truncated is True
    assert raw_hits(store.path, b"qpxreader99") == 0
    assert sqlite_scrub.pending(store) is None


def test_a_reader_that_outlasts_the_wait_leaves_the_scrub_pending_and_visible(
    tmp_path: Path,
) -> None:
    clock = ManualClock(BASE + DAY)
    store = SqliteStore(tmp_path / "memtoc.db", clock=clock, busy_timeout_ms=200)
    memory = Memory(store, clock=clock, tz=ZoneInfo("UTC"))
    memory.ingest_records(
        [
            {
                "event_id": f"R{i}",
                "session_id": "s",
                "timestamp": BASE + i * 1000,
                "role": "user",
                "text": f"step {i}" if i != 2 else "the vault passphrase is qpxlinger77",
            }
            for i in range(6)
        ]
    )
    memory.process()
    reader = sqlite3.connect(store.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT text FROM events").fetchall()
    report = memory.forget(event_ids=["R2"])
    assert report.wal_truncated is False
    status = memory.status()
    assert status["forget_scrub_pending"] is not None
    # the reader still sees its snapshot: that is what "pending" means
    assert "qpxlinger77" in repr(reader.execute("SELECT text FROM events").fetchall())
    assert memory.process().entries == 0  # the reader is still there: still pending
    assert sqlite_scrub.pending(store) is not None
    reader.execute("COMMIT")
    reader.close()
    memory.process()  # what the daemon's worker and the hooks run: it finishes the scrub
    assert sqlite_scrub.pending(store) is None and memory.status()["forget_scrub_pending"] is None
    assert raw_hits(store.path, b"qpxlinger77") == 0
    memory.close()
