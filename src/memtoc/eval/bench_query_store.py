"""The store ``memtoc bench query`` times: a SQLite file, or a database on a PostgreSQL server.

- **SQLite** (default): a temporary file, or with ``store_dir`` a kept one named by size and seed,
  reused by later runs once its ready marker (a file beside it) exists; a build cut short is
  started over. Before timing, its files are read once (``read_through``).
- **PostgreSQL** (``pg_url``, team mode): the database ``memtoc_bench_query_<N>_seed<S>`` on that
  server, created fresh and dropped after the run — or with ``keep``, kept and reused by later
  runs once its ready marker (a checkpoint row) exists, so before/after runs of the query code
  can alternate on one built store. After the build the tables are ``ANALYZE``d (what autovacuum
  would do a minute after a bulk load: ``store/postgres/text_stats`` reads those statistics);
  before timing, every table and index of the store is read once through ``pg_prewarm`` into the
  OS page cache — the steady state of a memory in use, as ``read_through`` does for SQLite.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from memtoc.errors import StoreError
from memtoc.eval.bench_ingest import _size
from memtoc.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from memtoc.store.postgres import PostgresStore

DB_PREFIX = "memtoc_bench_query_"
READY_CHECKPOINT = "bench.query.ready"


@dataclass
class BenchStore:
    """A store to build and time: ``reused`` when an earlier run's complete build is there."""

    store: SqliteStore | PostgresStore
    backend: str
    reused: bool
    mark_ready: Callable[[str], object]
    warm: Callable[[], float]
    """Bring the store into the page cache; returns the seconds it took."""
    size: Callable[[], int]
    """The store's size in bytes."""
    analyze: Callable[[], object]
    server_cpu: Callable[[], float | None] = lambda: None
    """The CPU seconds the store's server processes have used so far (``server_cpu_s``), or None
    (SQLite: the work is this process's own)."""


def read_through(db: Path, chunk: int = 8 << 20) -> float:
    """Read the store's files once, start to end, so the timed queries find them in the OS page
    cache — the steady state of a memory that is in use; returns the seconds it took. (A kept
    1M-event store is several GB, and the machine may have dropped it from its cache since the
    last run: the first pass would then measure the disk, not the query; docs/benchmarks.md.)"""
    t = time.perf_counter()
    buffer = bytearray(chunk)
    for path in (db, Path(f"{db}-wal")):
        try:
            with path.open("rb", buffering=0) as f:
                while f.readinto(buffer):
                    pass
        except FileNotFoundError:
            continue
    return time.perf_counter() - t


@contextlib.contextmanager
def bench_store(
    events: int,
    seed: int,
    *,
    workdir: Path | None = None,
    store_dir: Path | None = None,
    pg_url: str | None = None,
    keep: bool = False,
) -> Iterator[BenchStore]:
    """The store of an ``events``-event bench (see the module doc); closed (and, unless kept, a
    PostgreSQL database dropped) on exit."""
    if pg_url is not None:
        with _pg_store(pg_url, f"{DB_PREFIX}{events}_seed{seed}", keep) as bench:
            yield bench
        return
    with _sqlite_path(events, seed, workdir, store_dir) as (db, ready):
        store = SqliteStore(db, durability="normal")
        try:
            yield BenchStore(
                store,
                "sqlite",
                ready.exists(),
                ready.write_text,
                lambda: read_through(db),
                lambda: _size(db),
                lambda: None,  # SQLite's planner needs no statistics here (FTS5 and b-trees)
            )
        finally:
            store.close()


@contextlib.contextmanager
def _sqlite_path(
    events: int, seed: int, workdir: Path | None, store_dir: Path | None
) -> Iterator[tuple[Path, Path]]:
    """``(db, ready_marker)``: a temporary store, or with ``store_dir`` a kept one."""
    if store_dir is None:
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            yield Path(tmp) / "memtoc.db", Path(tmp) / "ready"
        return
    store_dir.mkdir(parents=True, exist_ok=True)
    db = store_dir / f"query-{events}-seed{seed}.db"
    ready = db.with_suffix(".ready")
    if not ready.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    yield db, ready


def _admin(pg_url: str, *statements: str) -> list[Any]:
    """Run ``statements`` on the server's ``postgres`` database (autocommit); the last one's
    rows."""
    import psycopg

    rows: list[Any] = []
    try:
        with psycopg.connect(_database_url(pg_url, "postgres"), autocommit=True) as conn:
            for sql in statements:
                cur = conn.execute(sql)
                rows = cur.fetchall() if cur.description else []
    except psycopg.Error as exc:
        raise StoreError(f"bench query: {exc}") from exc
    return rows


def _database_url(pg_url: str, name: str) -> str:
    return urlunsplit(urlsplit(pg_url)._replace(path="/" + name))


@contextlib.contextmanager
def _pg_store(pg_url: str, name: str, keep: bool) -> Iterator[BenchStore]:
    from memtoc.store.postgres import PostgresStore

    exists = bool(_admin(pg_url, f"SELECT 1 FROM pg_database WHERE datname = '{name}'"))
    url = _database_url(pg_url, name)
    reused = False
    if keep and exists:
        store = PostgresStore(url, pool_size=2)
        reused = READY_CHECKPOINT in store.list_checkpoints(READY_CHECKPOINT)
        store.close()
    if not reused:  # a fresh database (an unfinished kept build is started over)
        _admin(
            pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'
        )
    store = PostgresStore(url, pool_size=2)
    try:
        yield BenchStore(
            store,
            "postgresql",
            reused,
            lambda note: store.set_checkpoint(READY_CHECKPOINT, note),
            lambda: _prewarm(store),
            lambda: int(store._query("SELECT pg_database_size(current_database())")[0][0]),
            lambda: store._exec("ANALYZE"),
            ServerCpu(store),
        )
    finally:
        store.close()
        if not keep:
            _admin(pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ServerCpu:
    """The CPU seconds used by the store's server backends (its pool's connections), read from
    ``/proc/<pid>/schedstat`` — so only when the server runs on this machine and its processes
    are readable; else None. On a shared machine a query's wall clock counts the waits for a
    core of both the client and the server; their CPU time is what the query cost. The backends
    are looked up on the first call and again when one is gone."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.pids: list[int] | None = None

    def __call__(self) -> float | None:
        for _ in range(2):
            if self.pids is None:
                self.pids = [int(r[0]) for r in self.store._query(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_type = 'client backend'")]  # fmt: skip
            try:
                return sum(_schedstat_ns(pid) for pid in self.pids) / 1e9
            except FileNotFoundError:
                self.pids = None  # a backend went away: look again
            except (OSError, ValueError, IndexError):
                return None  # not this machine's processes, or not readable
        return None


def _schedstat_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[0])


def _prewarm(store: PostgresStore) -> float:
    """Read every table and index of the store once into the OS page cache (``pg_prewarm``'s
    ``read`` mode); returns the seconds it took."""
    t = time.perf_counter()
    store._exec("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    store._query(
        "WITH c AS (SELECT oid, relkind, reltoastrelid FROM pg_class WHERE relkind IN ('r', 'i') "
        "AND relnamespace = current_schema()::regnamespace) SELECT SUM(pg_prewarm(r, 'read')) "
        "FROM (SELECT oid AS r FROM c UNION SELECT reltoastrelid FROM c WHERE reltoastrelid <> 0) x"
    )
    return time.perf_counter() - t
