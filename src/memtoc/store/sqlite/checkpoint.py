"""WAL checkpoints in the background, beside a bulk writer.

In WAL mode every commit appends pages to the ``-wal`` file, and a *checkpoint* copies them back
into the database file (and, with ``synchronous=FULL``, syncs it). SQLite runs one automatically at
the end of the commit that grows the log past ``wal_autocheckpoint`` pages: the writer waits for
it. At the store's 8,192 pages of 16 KiB that is a 128 MB copy and sync every few hundred thousand
events, a noticeable share of a bulk ingest's time (docs/benchmarks.md, "Figures behind design choices").

After a bulk append the store asks :class:`BackgroundCheckpointer` for a ``PASSIVE`` checkpoint
on a second connection, in a short-lived thread: it copies what is committed while the writer
prepares and inserts the next batch (``sqlite3`` releases the GIL while SQLite works; a passive
checkpoint never waits for readers or writers, and a writer never waits for it). One every
``MIN_EVENTS`` events keeps the log well under the automatic limit, so the writer's own
checkpoint finds little or nothing left to copy; it stays on as the safety net (a checkpoint that
failed or fell behind, events far larger than the average).

Nothing about durability changes: a commit is acknowledged after the WAL is synced, as before, and
a checkpoint interrupted by a crash is redone from the WAL on the next open.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MIN_EVENTS = 50_000
"""Events appended since the last checkpoint before another is started. Smaller writes (a hook's
few events) leave the log to SQLite's automatic checkpoint. A checkpoint every 1,000 events was
slower than none (its syncs compete with the commits'); every 20,000, and more so every 50,000,
faster (docs/benchmarks.md, "Figures behind design choices")."""


@dataclass(slots=True)
class CheckpointStats:
    runs: int = 0
    """Checkpoints completed."""
    log_frames: int = 0
    """Frames in the WAL at the last checkpoint."""
    copied_frames: int = 0
    """Of those, the frames in the database file after it (all of them unless the writer
    appended meanwhile)."""
    failures: int = 0
    last_error: str | None = None


class BackgroundCheckpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` for one store file in a background thread, one
    at a time; requests made while one runs are dropped (the next request covers them)."""

    def __init__(self, path: Path, synchronous: str, *, min_events: int = MIN_EVENTS) -> None:
        self.path = path
        self.synchronous = synchronous
        self.min_events = min_events
        self.stats = CheckpointStats()
        self._pending_events = 0
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._guard = threading.Lock()

    def appended(self, events: int) -> None:
        """``events`` were committed: start a checkpoint once ``min_events`` have been since the
        last, unless one is running."""
        self._pending_events += events
        if self._pending_events < self.min_events:
            return
        with self._guard:
            if self._closed or (self._thread is not None and self._thread.is_alive()):
                return
            self._pending_events = 0
            self._thread = threading.Thread(
                target=self._run, name="memtoc-wal-checkpoint", daemon=True
            )
            self._thread.start()

    def wait(self) -> None:
        """Wait for a running checkpoint to finish."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Wait for a running checkpoint, then close the second connection."""
        with self._guard:
            self._closed = True
        self.wait()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            # the copy into the database file is synced as the writer's own checkpoint would be
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._conn = conn
        return self._conn

    def _run(self) -> None:
        try:
            row = self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # the writer's automatic checkpoint still runs
            self.stats.failures += 1
            if self.stats.last_error is None:
                log.warning("background WAL checkpoint failed on %s: %s", self.path, exc)
            self.stats.last_error = str(exc)
            return
        self.stats.runs += 1
        if row is not None:
            self.stats.log_frames, self.stats.copied_frames = int(row[1]), int(row[2])
