"""Erase what a forget removed from every byte of the SQLite file and its WAL.

``PRAGMA secure_delete`` (on for every connection of the store) zeroes what SQLite *frees*: a
deleted cell, a freed page. It does not cover copies SQLite never frees: when a b-tree page is
rebalanced, cells that move to a sibling page stay behind, byte for byte, in the rebuilt page's
unallocated gap (between the cell pointers and the cell content), and nothing ever zeroes them.
Such a copy made while an event was alive survives its forget — found in 3 of 44 forgets, in the
gaps of live ``doc_vectors`` and ``docs_fts_data`` pages — and every online backup copies it.

So a forget ends with :func:`scrub`:

1. **Merge the FTS indexes** (``optimize``): an FTS5 delete only writes delete markers; the terms
   leave the index when its segments merge.
2. **Rewrite every table that can hold text** (``rewrite_tables``): copy its rows aside, delete
   them all (each freed page zeroed by ``secure_delete``) and insert them again in key order,
   into zeroed pages — the FTS shadow tables included, copied as they are. What is not
   rewritten is :data:`KEEP`, each for a stated reason; ``events`` is the one table that holds
   text there: its rows are only ever appended (new pages, never a rebalance), and a tombstone is
   written over its row in place (a smaller cell in the same page: an insert rebalances only an
   overfull page), so no copy of an event's bytes is ever left in free space — the test scans the
   raw file after forgets to hold this.
3. **Truncate the WAL** (``wal_checkpoint(TRUNCATE)``): it waits, up to the connection's busy
   timeout, for every reader still on a snapshot from before the forget (until it ends, that
   reader can read the text, and the old pages stay in the file). A reader that outlasts the wait
   leaves the scrub *pending* (``meta``: :data:`PENDING_KEY`): ``status`` shows it, the forget
   says so (the CLI exits 1), and every later ``process`` run (the daemon's worker, the hooks)
   retries the truncation until it succeeds.

The cost is the size of the derived data (summaries, their versions, search documents, the FTS
indexes); ``docs/benchmarks.md`` has figures.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import TYPE_CHECKING

from memtoc.errors import StoreError
from memtoc.store.capabilities import ScrubReport

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore

PENDING_KEY = "forget_scrub_pending"
"""``meta`` key: the epoch-ms of a forget whose WAL could not be truncated yet."""

KEEP: dict[str, str] = {
    "events": "append-only; tombstones are written in place (see the module docstring)",
    "vectors": "numbers, ids and embedder names only",
    "segment_events": "sequence numbers and node ids only",
    "sessions": "session ids and times only",
    "schema_migrations": "migration names only",
    "events_fts_docsize": "token counts only",
    "docs_fts_docsize": "token counts only",
}
"""Tables :func:`rewrite_tables` leaves alone, and why no forgotten byte can be in their free
space. Any other table (one added later included) is rewritten."""

_WITHOUT_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\s*$", re.IGNORECASE)
_FTS = ("events_fts", "docs_fts")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _run(store: SqliteStore, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    try:
        return store.connection.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"{store.path}: forget scrub: {exc}") from exc


def rewrite_tables(store: SqliteStore) -> tuple[int, int]:
    """Rewrite every table not in :data:`KEEP` (one transaction); return (tables, rows)."""
    tables = rows = 0
    with store.transaction():
        listed = _run(
            store,
            "SELECT name, sql FROM sqlite_schema WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        for name, sql in listed:
            assert isinstance(name, str) and isinstance(sql, str)
            if name in KEEP or sql.upper().startswith("CREATE VIRTUAL TABLE"):
                continue
            rows += _rewrite(store, name, sql)
            tables += 1
    return tables, rows


def _rewrite(store: SqliteStore, name: str, sql: str) -> int:
    """Delete every row of one table and insert it again in key order (same rowids)."""
    info = _run(store, f"PRAGMA table_info({_q(name)})")
    cols = ", ".join(_q(str(r[1])) for r in info)
    keys = [str(r[1]) for r in sorted(info, key=lambda r: int(str(r[5]))) if int(str(r[5])) > 0]
    rowid = not _WITHOUT_ROWID.search(sql.strip())
    aside = "temp._memtoc_scrub"
    _run(store, f"DROP TABLE IF EXISTS {aside}")
    if rowid:
        _run(store, f"CREATE TABLE {aside} AS SELECT rowid AS _scrub_rowid, {cols} FROM {_q(name)}")
        order = "_scrub_rowid"
        target, source = f"(rowid, {cols})", f"_scrub_rowid, {cols}"
    else:
        _run(store, f"CREATE TABLE {aside} AS SELECT {cols} FROM {_q(name)}")
        order = ", ".join(_q(k) for k in keys) or "rowid"
        target, source = f"({cols})", cols
    count = int(str(_run(store, f"SELECT COUNT(*) FROM {aside}")[0][0]))
    _run(store, f"DELETE FROM main.{_q(name)}")
    _run(
        store, f"INSERT INTO main.{_q(name)}{target} SELECT {source} FROM {aside} ORDER BY {order}"
    )
    _run(store, f"DROP TABLE {aside}")
    return count


def truncate_wal(store: SqliteStore, *, wait: bool = True) -> bool:
    """Checkpoint everything and truncate the WAL, waiting (busy timeout) for readers on older
    snapshots — or not at all with ``wait=False``; True when done, False when a reader is still
    there."""
    if store.checkpointer is not None:
        store.checkpointer.wait()
    with store._lock:
        timeout = _run(store, "PRAGMA busy_timeout")[0][0]
        if not wait:
            _run(store, "PRAGMA busy_timeout = 0")
        try:
            busy = _run(store, "PRAGMA wal_checkpoint(TRUNCATE)")[0][0]
        finally:
            _run(store, f"PRAGMA busy_timeout = {int(str(timeout))}")
    return int(str(busy)) == 0


def scrub(store: SqliteStore, now_ms: int) -> ScrubReport:
    """Merge the FTS indexes, rewrite the tables, truncate the WAL (module docstring)."""
    started = time.perf_counter()
    report = ScrubReport()
    with store.transaction():
        for table in _FTS:
            _run(store, f"INSERT INTO {table}({table}) VALUES ('optimize')")
    report.tables, report.rows = rewrite_tables(store)
    store.set_meta(PENDING_KEY, str(now_ms))
    report.wal_truncated = finish_pending(store)
    report.seconds = time.perf_counter() - started
    return report


def pending(store: SqliteStore) -> int | None:
    """The time of a forget whose WAL still holds old pages (None: none)."""
    value = store.get_meta(PENDING_KEY)
    return int(value) if value else None


def finish_pending(store: SqliteStore, *, wait: bool = True) -> bool:
    """Truncate the WAL for a pending scrub; True when none is pending any more. ``wait=False``
    (``process``): try once, without waiting for readers."""
    if pending(store) is None:
        return True
    if not truncate_wal(store, wait=wait):
        return False
    with store.transaction():
        _run(store, "DELETE FROM meta WHERE key = ?", (PENDING_KEY,))
    truncate_wal(store)  # that delete's own frame (no forgotten byte in it)
    return True
