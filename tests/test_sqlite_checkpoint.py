"""Background WAL checkpoints beside bulk appends (``store/sqlite/checkpoint.py``), on real
SQLite files."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from memtoc.model import Event
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.checkpoint import MIN_EVENTS, BackgroundCheckpointer
from memtoc.store.sqlite.maintenance import compact, verify


def _events(start: int, n: int) -> list[Event]:
    return [
        Event(
            event_id=f"E{i:08d}",
            session_id=f"s{i // 50}",
            project="p",
            agent="test",
            ts_ms=1_700_000_000_000 + i * 1000,
            event_type="user_message",
            role="user",
            text=f"event {i} " + "words to fill a page " * 20,
            metadata={"i": i},
        )
        for i in range(start, start + n)
    ]


def _wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the log, frames already in the database file), asked of a fresh connection
    (a passive checkpoint: it copies what is left, and says how much the log held)."""
    conn = sqlite3.connect(path)
    try:
        _busy, log_frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(log_frames), int(copied)
    finally:
        conn.close()


def test_bulk_appends_are_checkpointed_in_the_background(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db")
    checkpointer = store.checkpointer
    assert checkpointer is not None and checkpointer.min_events == MIN_EVENTS
    checkpointer.min_events = 300
    try:
        store.append_events(_events(0, 200))
        checkpointer.wait()
        assert checkpointer.stats.runs == 0  # fewer events than min_events: SQLite's own
        for start in range(200, 2_000, 200):
            store.append_events(_events(start, 200))
            checkpointer.wait()
        stats = checkpointer.stats
        assert stats.runs >= 5 and stats.failures == 0
        assert stats.copied_frames == stats.log_frames > 0  # it caught up with the writer
        # the log restarts after a complete checkpoint: it stays far below 2,000 events' pages
        log_frames, _ = _wal_frames(store.path)
        assert log_frames <= stats.log_frames + 20
        assert store.count_events() == 2_000
        assert verify(store).ok
    finally:
        store.close()
    assert checkpointer._thread is None or not checkpointer._thread.is_alive()
    reopened = SqliteStore(tmp_path / "m.db", read_only=True)
    try:
        assert reopened.count_events() == 2_000
    finally:
        reopened.close()


def test_checkpoints_run_while_the_writer_goes_on(tmp_path: Path) -> None:
    """No wait between appends: every event committed, whichever checkpoint overlapped which
    commit, and compact (VACUUM) waits for a running one."""
    store = SqliteStore(tmp_path / "m.db")
    assert store.checkpointer is not None
    store.checkpointer.min_events = 100
    try:
        for start in range(0, 5_000, 250):
            store.append_events(_events(start, 250))
        compact(store)
        assert store.checkpointer.stats.runs >= 1
        assert store.checkpointer.stats.failures == 0
        assert store.count_events() == 5_000
        assert verify(store).ok
    finally:
        store.close()


def test_a_failed_checkpoint_is_logged_and_leaves_the_writer_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint that cannot open the file fails in its thread: counted, logged once, never
    raised into the writer (whose own automatic checkpoint still runs)."""
    checkpointer = BackgroundCheckpointer(tmp_path / "missing" / "m.db", "FULL", min_events=1)
    with caplog.at_level(logging.WARNING, logger="memtoc.store.sqlite.checkpoint"):
        for _ in range(3):
            checkpointer.appended(5)
            checkpointer.wait()
    checkpointer.close()
    assert checkpointer.stats.failures == 3 and checkpointer.stats.runs == 0
    assert checkpointer.stats.last_error is not None
    warnings = [r for r in caplog.records if "background WAL checkpoint failed" in r.message]
    assert len(warnings) == 1
    checkpointer.appended(5)  # closed: nothing starts
    assert checkpointer.stats.failures == 3


def test_read_only_stores_have_no_checkpointer(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "m.db").close()
    ro = SqliteStore(tmp_path / "m.db", read_only=True)
    try:
        assert ro.checkpointer is None
    finally:
        ro.close()
