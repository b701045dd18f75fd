"""Maintenance of the SQLite store: online backup, restore, integrity verification, compaction."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memtoc.errors import StoreError
from memtoc.model import EVENT_TYPES, ROLES
from memtoc.store.capabilities import EmbedderIdentity
from memtoc.store.derived import VerifyReport
from memtoc.store.event_checks import OUT_OF_RANGE_SQL, out_of_range_problem
from memtoc.store.sqlite.audit import SqliteAudit
from memtoc.store.sqlite.base import prepare_private_file
from memtoc.store.sqlite.migrations import MIGRATIONS
from memtoc.store.sqlite.store import SqliteStore


def backup(store: SqliteStore, dest: Path) -> int:
    """Copy the live store to ``dest`` consistently (SQLite online backup); return its size."""
    if dest.exists():
        raise StoreError(f"backup target already exists: {dest}")
    blocked = next((p for p in dest.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise StoreError(f"cannot write the backup to {dest}: {blocked} is not a directory")
    try:
        prepare_private_file(dest)
        target = sqlite3.connect(dest)
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StoreError(f"cannot write the backup to {dest}: {reason}") from exc
    try:
        with store._lock:
            store.connection.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.Error as exc:
        target.close()
        dest.unlink(missing_ok=True)
        raise StoreError(f"backup to {dest} failed: {exc}") from exc
    target.close()
    return dest.stat().st_size


def restore(source: Path, dest: Path, *, force: bool = False) -> None:
    """Replace the store at ``dest`` with the backup ``source`` after checking the backup."""
    if not source.is_file():
        raise StoreError(f"no backup at {source}")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        ok = src.execute("PRAGMA integrity_check").fetchone()[0]
        if ok != "ok":
            raise StoreError(f"{source} is damaged: {ok}")
        names = {r[0] for r in src.execute("SELECT name FROM schema_migrations")}
    except sqlite3.Error as exc:
        raise StoreError(f"{source} is not a memtoc store: {exc}") from exc
    finally:
        src.close()
    if not names or not names <= {m.name for m in MIGRATIONS}:
        raise StoreError(f"{source} is not a memtoc store this version can read")
    if dest.exists() and not force:
        raise StoreError(f"{dest} exists; pass force to replace it")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dest}{suffix}").unlink(missing_ok=True)
    prepare_private_file(dest)
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    target = sqlite3.connect(dest)
    try:
        src.backup(target)
    finally:
        src.close()
        target.close()
    os.chmod(dest, 0o600)


def compact(store: SqliteStore) -> dict[str, int]:
    """Checkpoint the WAL, optimise the FTS indexes and VACUUM; return sizes before and after."""
    before = _size(store.path)
    conn = store.connection
    if store.checkpointer is not None:
        store.checkpointer.wait()
    with store._lock:
        try:
            for table in ("events_fts", "docs_fts"):
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise StoreError(f"compact failed: {exc}") from exc
    return {"bytes_before": before, "bytes_after": _size(store.path)}


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def verify(store: SqliteStore, embedder: EmbedderIdentity | None = None) -> VerifyReport:
    """Check SQLite integrity and memtoc's invariants, and audit the derived data against the
    events (``SqliteDerived.audit``; ``embedder``: the configured one); every problem is listed."""
    report = VerifyReport()
    q = store._query
    result = q("PRAGMA integrity_check")[0][0]
    report.check("sqlite integrity", None if result == "ok" else str(result))
    report.check(
        "migrations",
        None
        if {r[0] for r in q("SELECT name FROM schema_migrations")} == {m.name for m in MIGRATIONS}
        else "schema is not at the current version",
    )
    marks = ",".join("?" * len(ROLES))
    bad_roles = q(f"SELECT COUNT(*) FROM events WHERE role NOT IN ({marks})", ROLES)[0][0]
    report.check("event roles", f"{bad_roles} events with an unknown role" if bad_roles else None)
    marks = ",".join("?" * len(EVENT_TYPES))
    bad_types = q(f"SELECT COUNT(*) FROM events WHERE event_type NOT IN ({marks})", EVENT_TYPES)[0][
        0
    ]
    report.check("event types", f"{bad_types} events with an unknown type" if bad_types else None)
    live = store._live
    far = q(f"SELECT COUNT(*) FROM events WHERE {OUT_OF_RANGE_SQL} AND {live}")[0][0]
    shown = q(f"SELECT event_id, ts_ms FROM events WHERE {OUT_OF_RANGE_SQL} AND {live} LIMIT 3")
    report.check("event times", out_of_range_problem(far, shown))
    # Every stored event is announced by exactly one outbox entry (they commit together).
    ranges = q(
        "SELECT json_extract(payload, '$.first_seq'), json_extract(payload, '$.last_seq') "
        "FROM outbox WHERE kind = 'events' ORDER BY 1"
    )
    covered = 0
    overlap = None
    prev_end = 0
    for first, last in ranges:
        if first <= prev_end:
            overlap = f"outbox ranges overlap at seq {first}"
        covered += last - first + 1
        prev_end = max(prev_end, last)
    total = q("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM events")[0]
    problem = overlap
    if problem is None and covered != total[1]:
        problem = f"outbox announces {covered} event slots but the log holds {total[1]}"
    report.check("event/outbox atomicity", problem)
    if store._spans:  # session reads are bounded by these spans (store/sqlite/sessions.py)
        outside = q(
            "SELECT COUNT(*) FROM events e LEFT JOIN sessions s ON s.session_id = e.session_id "
            "AND s.project = e.project WHERE s.first_ms IS NULL OR e.ts_ms < s.first_ms "
            "OR e.ts_ms > s.last_ms"
        )[0][0]
        report.check(
            "session spans",
            f"{outside} events outside their session's span" if outside else None,
            "memtoc rebuild --segments",
        )
    if store._live != "1":
        _check_tombstones(report, store)
    for table in ("events_fts", "docs_fts"):
        if store.read_only:  # FTS5's integrity-check is an INSERT command: not on read-only media
            report.checks.append(f"{table} index (skipped: store opened read-only)")
            continue
        try:
            with store._lock:
                store.connection.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            report.check(f"{table} index", None)
        except sqlite3.Error as exc:
            report.check(f"{table} index", str(exc))
    report.add(SqliteAudit(store).audit(embedder))
    return report


def _check_tombstones(report: VerifyReport, store: SqliteStore) -> None:
    """Forgotten events keep no text or metadata, and no vector or bookmark cites them."""
    q = store._query
    unpurged = q(
        "SELECT COUNT(*) FROM events WHERE forgotten_ms IS NOT NULL "
        "AND (text != '' OR metadata != '{}')"
    )[0][0]
    vectors = q(
        "SELECT COUNT(*) FROM vectors v JOIN events e ON v.kind = 'event' "
        "AND e.event_id = v.item_id WHERE e.forgotten_ms IS NOT NULL"
    )[0][0]
    cited = q(
        "SELECT COUNT(DISTINCT b.bookmark_id) FROM bookmarks b, json_each(b.event_ids) j "
        "JOIN events e ON e.event_id = j.value WHERE e.forgotten_ms IS NOT NULL"
    )[0][0]
    problems = [
        f"{unpurged} forgotten events still hold text or metadata" if unpurged else "",
        f"{vectors} vectors of forgotten events" if vectors else "",
        f"{cited} bookmarks cite forgotten events" if cited else "",
    ]
    report.check("tombstones purged", "; ".join(p for p in problems if p) or None)
