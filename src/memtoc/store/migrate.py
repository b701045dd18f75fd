"""Copy a SQLite store into PostgreSQL (``memtoc migrate-store --from PATH --to postgresql://…``).

Everything is copied as it is, not re-derived: events keep their ``seq`` (so the outbox's seq
ranges, segment membership and "append order" mean the same), the outbox keeps each entry's state
(pending work stays pending), node versions, latest pointers, segments, grips, search documents,
bookmarks, vectors (pgvector, bit-exact float32), checkpoints (importer watermarks, rollup state),
rollup marks, tombstones and ``meta`` (time zone, embedder identities). PostgreSQL-only columns are
filled on the way: ``outbox.first_seq/last_seq/sessions`` from the events of each entry,
``text_exact`` for event text holding NUL, ``event_search`` (events filed into segments) and
``docs.tsv`` computed from the copied text (``postgres/text_index``, as the pipeline writes them).

**Resumable.** Tables are copied in a fixed order, each in keyset batches (by primary key); a
batch and the ``migrate-store:{table}`` checkpoint recording its last key commit in one target
transaction, so a run killed at any point continues after the last committed batch and copies no
row twice (the target's primary keys would refuse a second copy loudly). ``migrate-store:source``
records which source the copy is of; a target holding other data, or a copy of another source, is
refused. The source must not be written while it is copied (stop the agents and the worker).

**Verified.** After the copy, every table is compared: row counts and an order-independent content
hash (the sum of each row's SHA-256, over the values as stored in PostgreSQL — the source side is
converted exactly as it was for the copy), then ``postgres/maintenance.verify`` checks the target.

Not copied: ``forget_audit`` (the PostgreSQL schema has no audit table yet) and ``doc_vectors``
as such — each doc vector's source text becomes its ``vectors.source_md5`` instead.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector

from memtoc.clock import Clock, SystemClock
from memtoc.errors import StoreError
from memtoc.model import JsonValue
from memtoc.store.postgres.base import pg_text, redact_url
from memtoc.store.postgres.lexemes import index_rows
from memtoc.store.postgres.text_index import EVENT_UPSERT, event_params
from memtoc.text.fts_text import search_text

Row = tuple[Any, ...]
CHECKPOINT_PREFIX = "migrate-store:"
_MOD = 1 << 256


@dataclass(frozen=True, slots=True)
class TableSpec:
    """How one table is copied: its key (keyset order), the source columns read and the target
    columns written (``convert`` maps one to the other)."""

    name: str
    key: tuple[str, ...]
    source_cols: tuple[str, ...]
    target_cols: tuple[str, ...] = ()
    convert: Callable[[sqlite3.Connection, Row], Row] | None = None
    target_filter: str = "TRUE"
    """Target rows that belong to the copy (``checkpoints`` holds the migration's own rows too)."""
    overriding: bool = False
    """The target key is ``GENERATED ALWAYS``: insert with ``OVERRIDING SYSTEM VALUE``."""

    @property
    def columns(self) -> tuple[str, ...]:
        return self.target_cols or self.source_cols


def _event(_: sqlite3.Connection, r: Row) -> Row:
    text = r[8]
    exact = json.dumps(text) if "\x00" in text else None
    return (*r[:8], pg_text(text), exact, *r[9:])


def _outbox(src: sqlite3.Connection, r: Row) -> Row:
    first = last = None
    sessions: list[str] = []
    if r[1] == "events":
        payload = json.loads(r[2])
        first, last = int(payload["first_seq"]), int(payload["last_seq"])
        sessions = [
            f"{p}\x1f{s}"
            for p, s in src.execute(
                "SELECT DISTINCT project, session_id FROM events WHERE seq BETWEEN ? AND ? "
                "ORDER BY project, session_id",
                (first, last),
            )
        ]
    return (*r, first, last, sessions)


def _texts(*positions: int) -> Callable[[sqlite3.Connection, Row], Row]:
    """Derived text made storable (NUL → U+FFFD, as the PostgreSQL store writes it)."""

    def convert(_: sqlite3.Connection, r: Row) -> Row:
        return tuple(pg_text(v) if i in positions and isinstance(v, str) else v
                     for i, v in enumerate(r))  # fmt: skip

    return convert


def _vector(src: sqlite3.Connection, r: Row) -> Row:
    """The vector as float32 and, for a doc, the MD5 of the text it was computed from (SQLite's
    ``doc_vectors``), so the PostgreSQL embed step does not embed the doc again."""
    md5 = None
    if r[0] != "event":
        found = src.execute(
            "SELECT text FROM doc_vectors WHERE kind = ? AND project = ? AND doc_id = ? "
            "AND embedder = ?",
            (r[0], r[2], r[1], r[3]),
        ).fetchone()
        if found is not None:
            md5 = hashlib.md5(pg_text(found[0]).encode()).hexdigest()
    return (*r[:5], np.frombuffer(r[5], dtype="<f4").astype(np.float32), md5)


_EVENT_COLS = ("seq", "event_id", "ts_ms", "project", "session_id", "agent", "event_type", "role",
               "text", "metadata", "source", "source_pos", "forgotten_ms")  # fmt: skip
_OUTBOX_COLS = ("entry_id", "kind", "payload", "created_ms", "status", "attempts", "error",
                "claimed_by", "claimed_ms", "done_ms")  # fmt: skip
_NODE_COLS = ("project", "node_id", "version", "level", "start_ms", "end_ms", "parent_id")
SEGMENT_COLS = ("project", "node_id", "session_id", "start_ms", "end_ms", "first_seq",
                 "last_seq", "event_count", "token_count", "first_event_id", "last_event_id",
                 "closed", "built", "error")  # fmt: skip

TABLES: tuple[TableSpec, ...] = (
    TableSpec("events", ("seq",), _EVENT_COLS,
              (*_EVENT_COLS[:9], "text_exact", *_EVENT_COLS[9:]), _event),
    TableSpec("outbox", ("entry_id",), _OUTBOX_COLS,
              (*_OUTBOX_COLS, "first_seq", "last_seq", "sessions"), _outbox, overriding=True),
    TableSpec("checkpoints", ("job",), ("job", "value", "updated_ms"),
              target_filter=f"NOT starts_with(job, '{CHECKPOINT_PREFIX}')"),
    TableSpec("meta", ("key",), ("key", "value")),
    TableSpec("toc_node_versions", ("project", "node_id", "version"),
              (*_NODE_COLS, "data", "created_ms"), convert=_texts(7)),
    TableSpec("toc_nodes", ("project", "node_id"), _NODE_COLS),
    TableSpec("segments", ("project", "node_id"), SEGMENT_COLS),
    TableSpec("segment_events", ("seq",), ("seq", "project", "node_id")),
    TableSpec("grips", ("grip_id",), ("grip_id", "project", "toc_node_id", "excerpt",
              "event_id_start", "event_id_end", "ts_ms", "source", "session_id"),
              convert=_texts(3)),
    TableSpec("bookmarks", ("bookmark_id",), ("bookmark_id", "project", "content", "event_ids",
              "importance", "type", "created_ms", "last_relevant_ms"), convert=_texts(2)),
    TableSpec("docs", ("kind", "project", "doc_id"), ("kind", "doc_id", "project", "ts_ms", "text"),
              convert=_texts(4)),
    TableSpec("vectors", ("kind", "project", "item_id", "embedder"),
              ("kind", "item_id", "project", "embedder", "dim", "vec"),
              ("kind", "item_id", "project", "embedder", "dim", "vec", "source_md5"), _vector),
    TableSpec("tombstones", ("event_id",), ("event_id", "forgotten_ms", "reason")),
    TableSpec("forget_audit", ("audit_id",), ("audit_id", "forgotten_ms", "selector",
              "event_ids", "counts"), overriding=True),
    TableSpec("rollup_dirty", ("project", "node_id"),
              ("project", "node_id", "level", "activity_ms", "marked_ms")),
    TableSpec("projects", ("project",), ("project", "name", "created_ms")),
    TableSpec("project_roots", ("root",), ("root", "project", "added_ms")),
)  # fmt: skip


@dataclass(slots=True)
class TableCheck:
    """One table compared after the copy."""

    table: str
    source_rows: int
    target_rows: int
    source_hash: str
    target_hash: str

    @property
    def ok(self) -> bool:
        return self.source_rows == self.target_rows and self.source_hash == self.target_hash

    def to_dict(self) -> dict[str, JsonValue]:
        return {"table": self.table, "source_rows": self.source_rows,
                "target_rows": self.target_rows, "source_hash": self.source_hash,
                "target_hash": self.target_hash, "ok": self.ok}  # fmt: skip


@dataclass(slots=True)
class MigrateReport:
    """What one ``migrate_store`` run did and found."""

    source: str
    target: str
    copied: dict[str, int] = field(default_factory=dict)
    """Rows copied by this run, per table (a resumed run counts only what it copied)."""
    resumed: bool = False
    checks: list[TableCheck] = field(default_factory=list)
    verify_problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and not self.verify_problems

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "resumed": self.resumed,
            "copied": dict(self.copied),
            "checks": [c.to_dict() for c in self.checks],
            "verify_problems": list(self.verify_problems),
            "seconds": round(self.seconds, 3),
        }


Progress = Callable[[str, int, int], None]
"""``progress(table, rows_done, rows_total)``, called after every batch."""


def open_source(path: Path) -> sqlite3.Connection:
    """The SQLite store, read-only (it is migrated to the current schema first by the caller)."""
    if not path.is_file():
        raise StoreError(f"no SQLite store at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.execute("PRAGMA query_only = ON")
    return conn


def open_target(url: str) -> psycopg.Connection[Row]:
    try:
        conn: psycopg.Connection[Row] = psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {redact_url(url)}: {exc}") from exc
    register_vector(conn)
    return conn


def source_fingerprint(src: sqlite3.Connection, path: Path) -> dict[str, JsonValue]:
    """What identifies the copy's source: its path and its event log's extent."""
    count, max_seq, last_id = src.execute(
        "SELECT COUNT(*), COALESCE(MAX(seq), 0), "
        "(SELECT event_id FROM events ORDER BY seq DESC LIMIT 1) FROM events"
    ).fetchone()
    return {"path": str(path.resolve()), "events": count, "max_seq": max_seq, "last_id": last_id}


def copy_tables(
    src: sqlite3.Connection,
    dst: psycopg.Connection[Row],
    *,
    fingerprint: dict[str, JsonValue],
    batch_size: int = 5_000,
    progress: Progress | None = None,
    now_ms: int = 0,
) -> tuple[dict[str, int], bool]:
    """Copy every table (resuming after the last committed batch); return rows copied per table
    and whether an earlier run's copy was resumed."""
    resumed = _claim_target(dst, fingerprint, now_ms)
    copied: dict[str, int] = {}
    for spec in TABLES:
        copied[spec.name] = _copy_table(src, dst, spec, batch_size, progress, now_ms)
    _reset_identities(dst)
    return copied, resumed


def _claim_target(
    dst: psycopg.Connection[Row], fingerprint: dict[str, JsonValue], now: int
) -> bool:
    job = f"{CHECKPOINT_PREFIX}source"
    row = dst.execute("SELECT value FROM checkpoints WHERE job = %s", (job,)).fetchone()
    if row is not None:
        recorded = json.loads(row[0])
        if recorded != fingerprint:
            raise StoreError(
                f"the target holds a copy of another source ({recorded.get('path')}, "
                f"{recorded.get('events')} events); this source is {fingerprint.get('path')} "
                f"with {fingerprint.get('events')} events"
            )
        return True
    found = dst.execute("SELECT EXISTS (SELECT 1 FROM events)").fetchone()
    if found is not None and found[0]:
        raise StoreError("the target store already holds events: migrate into an empty database")
    _set_checkpoint(dst, job, fingerprint, now)
    return False


def _set_checkpoint(dst: psycopg.Connection[Row], job: str, value: JsonValue, now: int) -> None:
    dst.execute(
        "INSERT INTO checkpoints(job, value, updated_ms) VALUES (%s, %s, %s) "
        "ON CONFLICT (job) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
        (job, json.dumps(value), now),
    )


def _copy_table(
    src: sqlite3.Connection,
    dst: psycopg.Connection[Row],
    spec: TableSpec,
    batch_size: int,
    progress: Progress | None,
    now: int,
) -> int:
    job = f"{CHECKPOINT_PREFIX}{spec.name}"
    row = dst.execute("SELECT value FROM checkpoints WHERE job = %s", (job,)).fetchone()
    state: dict[str, Any] = json.loads(row[0]) if row else {"after": None, "rows": 0}
    total = int(src.execute(f"SELECT COUNT(*) FROM {spec.name}").fetchone()[0])
    if state.get("done"):
        if progress is not None:
            progress(spec.name, total, total)
        return 0
    copied = 0
    for batch in _batches(src, spec, state["after"], batch_size):
        rows = [spec.convert(src, r) for r in batch] if spec.convert else batch
        key_at = [spec.source_cols.index(k) for k in spec.key]
        state = {"after": [batch[-1][i] for i in key_at], "rows": state["rows"] + len(batch)}
        with dst.transaction():
            _write(dst, spec, rows)
            if spec.name == "segment_events":
                _index_events(dst, [int(r[0]) for r in rows])
            elif spec.name == "docs":
                _index_docs(dst, rows)
            _set_checkpoint(dst, job, state, now)
        copied += len(batch)
        if progress is not None:
            progress(spec.name, state["rows"], total)
    _set_checkpoint(dst, job, {**state, "done": True}, now)
    if progress is not None:
        progress(spec.name, total, total)
    return copied


def _batches(
    src: sqlite3.Connection, spec: TableSpec, after: list[Any] | None, size: int
) -> Iterator[list[Row]]:
    cols = ", ".join(spec.source_cols)
    key = ", ".join(spec.key)
    marks = ", ".join("?" for _ in spec.key)
    while True:
        where = f"WHERE ({key}) > ({marks})" if after is not None else ""
        batch = src.execute(
            f"SELECT {cols} FROM {spec.name} {where} ORDER BY {key} LIMIT ?",
            (*(after or ()), size),
        ).fetchall()
        if not batch:
            return
        yield batch
        after = [batch[-1][spec.source_cols.index(k)] for k in spec.key]


def _write(dst: psycopg.Connection[Row], spec: TableSpec, rows: Sequence[Row]) -> None:
    cols = ", ".join(spec.columns)
    if spec.name == "meta":  # the target's own meta (written when it was opened) gives way
        with dst.cursor() as cur:
            cur.executemany(
                "INSERT INTO meta(key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                rows,
            )
        return
    if spec.overriding:
        marks = ", ".join("%s" for _ in spec.columns)
        with dst.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {spec.name}({cols}) OVERRIDING SYSTEM VALUE VALUES ({marks})", rows
            )
        return
    with dst.cursor() as cur, cur.copy(f"COPY {spec.name} ({cols}) FROM STDIN") as copy:
        for r in rows:
            copy.write_row(r)


def _index_events(dst: psycopg.Connection[Row], seqs: list[int]) -> None:
    """Full text of newly filed events, as the PostgreSQL pipeline writes it."""
    rows = dst.execute(
        "SELECT s.seq, s.project, e.text FROM segment_events s JOIN events e ON e.seq = s.seq "
        "WHERE s.seq = ANY(%s) ORDER BY s.seq",
        (seqs,),
    ).fetchall()
    if rows:
        dst.execute(
            EVENT_UPSERT,
            event_params([r[0] for r in rows], [r[1] for r in rows],
                         [search_text(r[2]) for r in rows]),
        )  # fmt: skip


def _index_docs(dst: psycopg.Connection[Row], rows: Sequence[Sequence[Any]]) -> None:
    """Full text of copied documents (``kind, doc_id, project, ts_ms, text`` rows), as the
    PostgreSQL pipeline writes it."""
    literals, lengths = index_rows([str(r[4]) for r in rows])
    dst.execute(
        "UPDATE docs d SET tsv = u.v::tsvector, dl = u.n FROM unnest(%s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::int4[]) AS u(k, i, p, v, n) "
        "WHERE d.kind = u.k AND d.doc_id = u.i AND d.project = u.p",
        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], literals, lengths),
    )


def _reset_identities(dst: psycopg.Connection[Row]) -> None:
    """Point the identity sequences past the copied keys, so new appends continue after them."""
    for table, col in (("events", "seq"), ("outbox", "entry_id"), ("forget_audit", "audit_id")):
        dst.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{col}'), "
            f"GREATEST((SELECT MAX({col}) FROM {table}), 1), "
            f"(SELECT MAX({col}) FROM {table}) IS NOT NULL)"
        )


# -- verification -------------------------------------------------------------------------------
def compare_tables(src: sqlite3.Connection, dst: psycopg.Connection[Row]) -> list[TableCheck]:
    """Row counts and content hashes of every copied table, source against target."""
    checks = []
    for spec in TABLES:
        n_src, h_src = _digest(
            spec.convert(src, r) if spec.convert else r
            for r in src.execute(f"SELECT {', '.join(spec.source_cols)} FROM {spec.name}")
        )
        with dst.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(spec.columns)} FROM {spec.name} WHERE {spec.target_filter}"
            )
            n_dst, h_dst = _digest(cur)
        checks.append(TableCheck(spec.name, n_src, n_dst, h_src, h_dst))
    checks.append(_event_search_check(dst))
    return checks


def _event_search_check(dst: psycopg.Connection[Row]) -> TableCheck:
    """``event_search`` has one row per filed event (``segment_events``)."""
    filed = dst.execute("SELECT COUNT(*) FROM segment_events").fetchone()
    indexed = dst.execute(
        "SELECT COUNT(*) FROM event_search x JOIN segment_events s ON s.seq = x.seq"
    ).fetchone()
    n_filed = int(filed[0]) if filed else 0
    n_indexed = int(indexed[0]) if indexed else 0
    return TableCheck("event_search", n_filed, n_indexed, "", "")


def _digest(rows: Iterator[Row] | Any) -> tuple[int, str]:
    total = count = 0
    for row in rows:
        blob = json.dumps([_canon(v) for v in row], ensure_ascii=False, separators=(",", ":"))
        total = (total + int.from_bytes(hashlib.sha256(blob.encode()).digest(), "big")) % _MOD
        count += 1
    return count, f"{total:064x}"


def _canon(value: Any) -> Any:
    """A JSON-able form in which source and target values compare equal (vectors as bytes)."""
    if isinstance(value, Vector):
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        return value.astype("<f4").tobytes().hex()
    return value


# -- the whole run ----------------------------------------------------------------------------------
def migrate_store(
    source: Path,
    url: str,
    *,
    batch_size: int = 5_000,
    progress: Progress | None = None,
    clock: Clock | None = None,
) -> MigrateReport:
    """Copy the SQLite store at ``source`` into the PostgreSQL database at ``url`` (resuming an
    interrupted copy), then compare every table and verify the target."""
    from memtoc.store.postgres import PostgresStore
    from memtoc.store.postgres import maintenance as postgres_maintenance
    from memtoc.store.sqlite import SqliteStore

    clock = clock or SystemClock()
    started = time.perf_counter()
    if batch_size < 1:
        raise StoreError(f"batch size must be positive (got {batch_size})")
    if not source.is_file():
        raise StoreError(f"no SQLite store at {source}")
    SqliteStore(source, clock=clock).close()  # brings the source's schema up to date
    target = PostgresStore(url, clock=clock, pool_size=1)  # creates or migrates the schema
    report = MigrateReport(str(source), target.location)
    src = open_source(source)
    try:
        with open_target(url) as dst:
            report.copied, report.resumed = copy_tables(
                src,
                dst,
                fingerprint=source_fingerprint(src, source),
                batch_size=batch_size,
                progress=progress,
                now_ms=clock.now_ms(),
            )
            report.checks = compare_tables(src, dst)
        report.verify_problems = list(postgres_maintenance.verify(target).problems)
    finally:
        src.close()
        target.close()
    report.seconds = time.perf_counter() - started
    return report
