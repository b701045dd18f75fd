"""Every table of a store, read whole: what a forget must leave no copy of the text in.

The table list comes from the database's own catalogue (``sqlite_master``, ``pg_class``), not
from a list kept here, so a table added later is read too. On PostgreSQL every column is read
as text (``tsvector`` columns show their lexemes, so the search indexes' copies count), and
``relation_bytes`` reads the relations' files on the server (superuser: ``CHECKPOINT``,
``pg_read_binary_file``)
for what SQL no longer shows: dead row versions ``VACUUM`` has not removed.
"""

from __future__ import annotations

from typing import Any

from memtoc.store.sqlite import SqliteStore


def table_names(store: Any) -> list[str]:
    if isinstance(store, SqliteStore):
        rows = store.connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
        return [str(r[0]) for r in rows]
    rows = store._query(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY 1"
    )
    return [str(r[0]) for r in rows]


def tables_holding(store: Any, needle: str) -> dict[str, int]:
    """``table → rows`` whose any column (read as text, blobs decoded) contains ``needle``."""
    found: dict[str, int] = {}
    for table in table_names(store):
        if isinstance(store, SqliteStore):
            rows = store.connection.execute(f'SELECT * FROM "{table}"').fetchall()
        else:
            rows = store._query(f'SELECT t::text FROM "{table}" t')
        count = sum(1 for row in rows if any(needle in _text(v) for v in row))
        if count:
            found[table] = count
    return found


def table_rows(store: Any, tables: tuple[str, ...]) -> list[list[tuple[Any, ...]]]:
    """Every row of ``tables``, in a stable order (a dry run must change none)."""
    out = []
    for table in tables:
        sql = f"SELECT * FROM {table} ORDER BY 1, 2"
        if isinstance(store, SqliteStore):
            out.append([tuple(r) for r in store.connection.execute(sql).fetchall()])
        else:
            out.append([tuple(r) for r in store._query(sql)])
    return out


def relation_bytes(store: Any, needle: str) -> dict[str, int]:
    """PostgreSQL: ``relation → occurrences`` of ``needle`` in the files of every table, TOAST
    table and index of the store's schema (dead row versions included). A ``CHECKPOINT`` first
    writes every changed page to its file (else the file shows an older state of the table)."""
    store._exec("CHECKPOINT")
    rows = store._query(
        "SELECT c.relname, pg_read_binary_file(pg_relation_filepath(c.oid)) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE (n.nspname = current_schema() OR c.oid IN (SELECT reltoastrelid FROM pg_class "
        "WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()))) "
        "AND c.relkind IN ('r', 't', 'i') AND pg_relation_filepath(c.oid) IS NOT NULL"
    )
    data = needle.encode()
    return {str(name): bytes(blob).count(data) for name, blob in rows if data in bytes(blob)}


def _text(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
