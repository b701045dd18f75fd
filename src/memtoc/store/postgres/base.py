"""Plumbing of the PostgreSQL store: the connection pool, transactions, query helpers, meta.

Connections come from a ``psycopg_pool.ConnectionPool`` (autocommit; pgvector types registered on
each). ``transaction()`` takes one pooled connection for the calling thread and runs ``BEGIN`` …
``COMMIT`` on it; nested uses on the same thread join the outer transaction (no savepoints), the
SQLite store's semantics. Every read made inside a transaction runs on its connection (so it sees the
transaction's own writes); reads outside one borrow a connection for one statement.

Isolation level is PostgreSQL's default, READ COMMITTED. Where the pipeline needs more (several
workers on one store), the store takes explicit locks: advisory locks for seq allocation, node
versions and outbox claims, ``FOR UPDATE`` on a segment read inside a transaction.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from memtoc.clock import Clock, SystemClock
from memtoc.errors import StoreError
from memtoc.store.event_checks import storable_text
from memtoc.store.postgres.migrations import migrate

APPEND_LOCK = 0x6D656D746F630002
"""Advisory lock held while one append allocates its seqs (so they form a range of its own)."""
CLAIM_LOCK = 0x6D656D746F630003
"""Advisory lock serialising outbox claims (short), so session-aware claiming is consistent."""

Row = tuple[Any, ...]
PgConn = psycopg.Connection[tuple[Any, ...]]


def redact_url(url: str) -> str:
    """The URL without its password (for ``location`` and error messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://?"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


pg_text = storable_text
"""Derived text made storable (NUL becomes U+FFFD), as on every backend (``event_checks``)."""


SESSION_LOCKERS: weakref.WeakSet[PgConn] = weakref.WeakSet()
"""Connections that may hold a session-level advisory lock (``APPEND_LOCK``): added *before* the
lock is asked for, removed once it is released; ``transaction()`` releases every advisory lock of
a connection still in the set when it ends. (The pool has no reset callback: with one, psycopg_pool
hands every returned connection to a worker thread, and each read outside a transaction paid the
reset's round trip and a thread hand-off.)"""


LIVE = "forgotten_ms IS NULL"
"""The condition on ``events`` that leaves forgotten events (tombstones) out of every read."""


class _TxState(threading.local):
    conn: PgConn | None = None
    depth: int = 0


class PgBase:
    """Pool, transactions and query helpers shared by the PostgreSQL store's parts."""

    _live = LIVE
    """The condition on ``events`` that leaves tombstones out (``store/reads.py`` reads it)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        pool_size: int = 4,
        connect_timeout_s: float = 10.0,
        outbox_lease_ms: int = 120_000,
        build_lease_ms: int = 600_000,
        ann_min_rows: int | None = None,
    ) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise StoreError(f"not a PostgreSQL URL: {redact_url(url)}")
        self.url = url
        self.location = redact_url(url)
        self.clock = clock or SystemClock()
        self._registered: set[str] = set()
        """Project ids known to be in the registry (appends register the others)."""
        self.read_only = False
        self.durability = "server"
        self.outbox_lease_ms = outbox_lease_ms
        self.build_lease_ms = build_lease_ms
        self._tx = _TxState()
        self._bm25_stats: dict[str, tuple[float, int, float]] = {}
        """Per text index: (when read, rows, average length) — search statistics, briefly cached."""
        self._bm25_common: dict[str, tuple[float, dict[str, float]]] = {}
        """Per text index: (when read, its most common lexemes' row fractions) — ``text_stats``."""
        self._ann_cache: dict[str, tuple[float, bool, int]] = {}
        """Per vector index name: (when read, usable, lists) — see ``postgres/ann``."""
        self._pgvector: tuple[int, ...] | None = None
        self.ann_min_rows = ann_min_rows
        """Vectors of one embedder from which the embed step builds its approximate index (None:
        ``postgres/ann.ANN_MIN_ROWS``)."""
        self.use_ann = True
        """Search vectors through an embedder's approximate index when it has one (False: always
        exact, for comparisons)."""
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout_s)) as c:
                migrate(c, self.clock.now_ms())
        except psycopg.Error as exc:
            raise StoreError(f"cannot open store {self.location}: {exc}") from exc
        self._pool: ConnectionPool[PgConn] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=register_vector,
            open=False,
            name="memtoc",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to {self.location}: {exc}") from exc

    # -- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PgBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return self._tx.depth > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        state = self._tx
        if state.depth:
            state.depth += 1
            try:
                yield
            finally:
                state.depth -= 1
            return
        try:
            with self._pool.connection() as conn:
                state.conn, state.depth = conn, 1
                try:
                    with conn.transaction():
                        yield
                finally:
                    state.conn, state.depth = None, 0
                    if conn in SESSION_LOCKERS:  # a failed append could not release its lock
                        SESSION_LOCKERS.discard(conn)
                        conn.execute("SELECT pg_advisory_unlock_all()")
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: transaction failed: {exc}") from exc

    @contextmanager
    def _conn(self) -> Iterator[PgConn]:
        """The thread's transaction connection, or a pooled one for a single statement."""
        conn = self._tx.conn
        if conn is not None:
            yield conn
            return
        with self._pool.connection() as pooled:
            yield pooled

    def _query(self, text: str, params: Sequence[Any] | None = None) -> list[Row]:
        try:
            with self._conn() as conn:
                return conn.execute(text, params).fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _query_planned(
        self, text: str, params: Sequence[Any], settings: Sequence[tuple[str, str]]
    ) -> list[Row]:
        """A read run with planner ``settings`` (name, value: constants, never user input) local
        to it: ``BEGIN``, ``SET LOCAL`` …, the query and ``COMMIT`` pipelined, one round trip.
        Inside a caller's transaction the settings would outlive the query, so it runs plain."""
        if self._tx.conn is not None:
            return self._query(text, params)
        try:
            with self._pool.connection() as conn:
                with conn.pipeline(), conn.transaction():
                    for name, value in settings:
                        conn.execute(f"SET LOCAL {name} = {value}")
                    cur = conn.execute(text, params)
                return cur.fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """A statement written for both engines (``?`` placeholders, ``store/reads.py``,
        ``store/audit.py``): ``?`` becomes ``%s``, a literal ``%`` is escaped."""
        return self._query(sql.replace("%", "%%").replace("?", "%s"), list(params))

    def _exec(self, text: str, params: Sequence[Any] | None = None) -> int:
        """Run a write; return the affected row count."""
        try:
            with self._conn() as conn:
                return conn.execute(text, params).rowcount
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _many(self, text: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run a write for every row (pipelined); return the total affected row count."""
        if not rows:
            return 0
        try:
            with self._conn() as conn, conn.cursor() as cur:
                cur.executemany(text, rows)
                return cur.rowcount
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _lock_key(self, key: str) -> None:
        """Take a transaction-scoped advisory lock named by ``key`` (inside ``transaction()``)."""
        self._exec("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    # -- meta ---------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._exec(
                "INSERT INTO meta(key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
