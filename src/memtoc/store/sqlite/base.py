"""Plumbing of the SQLite store: the connection, transactions, query helpers, meta.

One connection per ``SqliteStore``, guarded by a re-entrant lock, so a store object may be shared by
threads; separate processes open their own store on the same file (WAL lets readers run beside the
one writer, and ``busy_timeout`` makes writers queue instead of failing).

Durability: ``full`` (default) runs ``synchronous=FULL``, so an acknowledged commit survives power
loss; ``normal`` survives process crashes only; ``off`` is for throwaway stores. Batching many events
per transaction keeps ``full`` fast.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memtoc.clock import Clock, SystemClock
from memtoc.errors import StoreError
from memtoc.store.sqlite import projects as sqlite_projects
from memtoc.store.sqlite.checkpoint import BackgroundCheckpointer
from memtoc.store.sqlite.migrations import migrate

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}
PAGE_SIZE = 16_384
"""Page size of a new store file (SQLite's default is 4,096)."""
_LIVE = "forgotten_ms IS NULL"
"""Readers skip tombstones (events forgotten by ``memtoc forget``: their row stays, purged)."""


def _live_filter(conn: sqlite3.Connection) -> str:
    """The WHERE clause that skips tombstones; ``1`` for a store opened read-only before its
    ``0006_forget`` migration ran (it cannot hold tombstones yet)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
    return _LIVE if "forgotten_ms" in columns else "1"


def _has_sessions(conn: sqlite3.Connection) -> bool:
    """Whether the store keeps session spans (``0007_session_spans``); a store opened read-only
    before that migration ran still has its session index and computes spans from the events."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'")
    return found.fetchone() is not None


def prepare_private_file(path: Path) -> None:
    """Create the data directory (0700) and the database file (0600) before SQLite touches them."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


class SqliteBase:
    """One SQLite file: its connection, transactions, query helpers and ``meta``."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "full",
        clock: Clock | None = None,
        read_only: bool = False,
        busy_timeout_ms: int = 30_000,
    ) -> None:
        if durability not in _SYNCHRONOUS:
            raise StoreError(f"unknown durability {durability!r} (full, normal or off)")
        self.path = Path(path)
        self.location = str(self.path)
        self.clock = clock or SystemClock()
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        try:
            if read_only:
                if not self.path.exists():
                    raise StoreError(f"no store at {self.path}")
                # Quoted: a path with "?" or "#" is still a path. On read-only media SQLite cannot
                # create the WAL index (-shm): open immutable there (nobody can write it anyway).
                uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
                if not os.access(self.path.parent, os.W_OK):
                    uri += "&immutable=1"
                self._conn = sqlite3.connect(
                    uri, uri=True, isolation_level=None, check_same_thread=False
                )
            else:
                prepare_private_file(self.path)
                self._conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not read_only:
                # A new file only (an existing one keeps its page size until VACUUM): fewer,
                # larger pages make the insert cheaper (docs/benchmarks.md, "Figures behind …").
                self._conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                # freed cells and pages are zeroed, whatever the build's default (forget relies
                # on it: store/sqlite/scrub.py); Debian's SQLite already defaults to it
                self._conn.execute("PRAGMA secure_delete = ON")
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: cannot enable WAL (journal_mode={mode})")
            self._conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
            self._conn.execute("PRAGMA cache_size = -65536")
            # Fewer, larger WAL checkpoints: index pages are rewritten once per checkpoint rather
            # than once per 4 MB of log (faster bulk ingest: docs/benchmarks.md, "Figures behind …").
            self._conn.execute("PRAGMA wal_autocheckpoint = 8192")
            self._conn.execute("PRAGMA temp_store = MEMORY")
            if not read_only:
                migrate(self._conn, self.clock.now_ms())
            self._live = _live_filter(self._conn)
            self._spans = _has_sessions(self._conn)
            self.has_project_registry = sqlite_projects.has_registry(self._conn)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc
        self.durability = durability
        self._registered: set[str] = set()
        """Project ids known to be in the registry (appends register the others)."""
        self.checkpointer = (
            None if read_only else BackgroundCheckpointer(self.path, _SYNCHRONOUS[durability])
        )
        """Copies bulk appends' WAL pages into the database file in the background
        (``sqlite/checkpoint``); ``None`` for a read-only store."""

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for maintenance code in this package."""
        return self._conn

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot start a write: {exc}") from exc
            self._depth = 1
            try:
                yield
            except BaseException as exc:
                self._depth = 0
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):  # disk full, read-only, I/O: a clear StoreError
                    raise StoreError(f"{self.path}: write failed: {exc}") from exc
                raise
            self._depth = 0
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise StoreError(f"{self.path}: commit failed: {exc}") from exc

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from exc

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A statement written for both engines (``?`` placeholders: ``store/reads.py``)."""
        return self._query(sql, params)

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from exc

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._exec("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
