"""Open the store a setting names: a ``postgresql://`` URL (team mode) or a SQLite file path.

The one place above which no code names a concrete store class (``Memory.open`` calls it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.errors import StoreError

if TYPE_CHECKING:
    from memtoc.store.postgres import PostgresStore
    from memtoc.store.sqlite import SqliteStore


def open_store(
    db: str, *, durability: str = "full", read_only: bool = False, busy_timeout_ms: int = 30_000
) -> SqliteStore | PostgresStore:
    """The store at ``db`` (created on first use unless ``read_only``; the PostgreSQL driver is
    imported only for a PostgreSQL URL). ``busy_timeout_ms``: how long SQLite waits for another
    process's lock."""
    if db.startswith(("postgresql://", "postgres://")):
        from memtoc.store.postgres import PostgresStore

        return PostgresStore(db)
    if "://" in db and not db.startswith("file:"):
        raise StoreError(f"unsupported store URL {db!r} (a SQLite path or postgresql://…)")
    from memtoc.store.sqlite import SqliteStore

    return SqliteStore(
        Path(db), durability=durability, read_only=read_only, busy_timeout_ms=busy_timeout_ms
    )
