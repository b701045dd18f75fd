"""The embedded store: one SQLite file (stdlib ``sqlite3``, WAL).

One connection per ``SqliteStore``, guarded by a re-entrant lock, so a store object may be shared by
threads; separate processes open their own store on the same file (WAL lets readers run beside the
one writer, and ``busy_timeout`` makes writers queue instead of failing).

Durability: ``full`` (default) runs ``synchronous=FULL``, so an acknowledged commit survives power
loss; ``normal`` survives process crashes only; ``off`` is for throwaway stores. Batching many events
per transaction keeps ``full`` fast.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import tee
from operator import attrgetter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memtoc.clock import Clock, SystemClock
from memtoc.errors import NotFoundError, StoreError
from memtoc.model import (
    AppendResult,
    Bookmark,
    Bullet,
    Event,
    Grip,
    JsonValue,
    OutboxEntry,
    Project,
    TocNode,
)
from memtoc.store.base import DirtyPeriod, DocRow, EventRow, SegmentRecord
from memtoc.store.event_checks import (
    VALID_TS_SQL,
    Stored,
    classify,
    out_of_range_count,
    split_valid,
    storable_text,
)
from memtoc.store.sqlite import projects as sqlite_projects
from memtoc.store.sqlite.checkpoint import BackgroundCheckpointer
from memtoc.store.sqlite.forget import SqliteForget
from memtoc.store.sqlite.merge import SqliteMerge
from memtoc.store.sqlite.migrations import migrate
from memtoc.store.sqlite.search import SqliteSearch
from memtoc.store.sqlite.sessions import (
    SPAN_UPSERT,
    session_order,
    session_scope,
    session_spans,
    spans_of,
)
from memtoc.store.sqlite.upkeep import SqliteUpkeep

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}
PAGE_SIZE = 16_384
"""Page size of a new store file (SQLite's default is 4,096)."""
_EVENT_COLS = (
    "seq, event_id, ts_ms, project, session_id, agent, event_type, role, text, metadata, "
    "source, source_pos"
)
_INSERT_EVENT = (
    "INSERT OR IGNORE INTO events(event_id, ts_ms, project, session_id, agent, event_type, role, "
    "text, source, source_pos, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
_INVALID_SINCE = f"SELECT seq FROM events WHERE seq > ? AND NOT ({VALID_TS_SQL})"
"""The rows just appended (``seq`` above the batch's start) whose instant is out of range."""
_EVENT_FIELDS = attrgetter(
    "event_id",
    "ts_ms",
    "project",
    "session_id",
    "agent",
    "event_type",
    "role",
    "text",
    "source",
    "source_pos",
)
"""An event's columns in ``_INSERT_EVENT`` order, but its metadata (serialised separately)."""
_LIVE = "forgotten_ms IS NULL"
"""Readers skip tombstones (events forgotten by ``memtoc forget``: their row stays, purged)."""
_COUNT_ALL = "SELECT COUNT(*) FROM events"
_COUNT_TOMBSTONES = "SELECT COUNT(*) FROM events WHERE forgotten_ms IS NOT NULL"
_GRIP_COLS = (
    "grip_id, project, excerpt, event_id_start, event_id_end, ts_ms, source, toc_node_id, "
    "session_id"
)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_dumps = _ENCODER.encode
"""JSON text of a value, keys in their given order (metadata is kept verbatim)."""


def _conditions(*pairs: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """WHERE clauses and their parameters, for the filters that are given (not None)."""
    given = [(clause, value) for clause, value in pairs if value is not None]
    return [c for c, _ in given], [v for _, v in given]


def _row_to_event(row: Sequence[Any]) -> Event:
    return Event(
        event_id=row[1],
        ts_ms=row[2],
        project=row[3],
        session_id=row[4],
        agent=row[5],
        event_type=row[6],
        role=row[7],
        text=row[8],
        metadata=json.loads(row[9]) if row[9] != "{}" else {},
        source=row[10],
        source_pos=row[11],
    )


def _node_from_row(project: str, node_id: str, version: int, data: str) -> TocNode:
    d = json.loads(data)
    return TocNode(
        node_id=node_id,
        project=project,
        level=d["level"],
        title=d["title"],
        start_ms=d["start_ms"],
        end_ms=d["end_ms"],
        bullets=tuple(Bullet(b["text"], tuple(b["grip_ids"])) for b in d["bullets"]),
        keywords=tuple(d["keywords"]),
        child_node_ids=tuple(d["child_node_ids"]),
        abstract=d["abstract"],
        overview=d["overview"],
        version=version,
        parent_id=d.get("parent_id"),
        session_id=d.get("session_id"),
        event_count=d.get("event_count", 0),
        token_count=d.get("token_count", 0),
        summarizer=d.get("summarizer", "extractive"),
        degraded=d.get("degraded"),
        created_ms=d.get("created_ms", 0),
        parent_ids=tuple(d.get("parent_ids", ())),
    )


def _node_data(node: TocNode, created_ms: int) -> str:
    return _dumps(
        {
            "level": node.level,
            "title": node.title,
            "start_ms": node.start_ms,
            "end_ms": node.end_ms,
            "bullets": [b.to_dict() for b in node.bullets],
            "keywords": list(node.keywords),
            "child_node_ids": list(node.child_node_ids),
            "abstract": node.abstract,
            "overview": node.overview,
            "parent_id": node.parent_id,
            "parent_ids": list(node.parent_ids),
            "session_id": node.session_id,
            "event_count": node.event_count,
            "token_count": node.token_count,
            "summarizer": node.summarizer,
            "degraded": node.degraded,
            "created_ms": created_ms,
        }
    )


TOUCH_BUSY_MS = 250
"""How long a read-only store's bookmark touch waits for another writer before giving up."""


def _touch_via_writer(path: Path, bookmark_ids: Sequence[str], now_ms: int) -> int:
    """``touch_bookmarks`` for a store opened read-only: one small write transaction on a
    connection of its own (never waiting long), closed at once."""
    uri = f"file:{quote(str(path.resolve()))}?mode=rw"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=TOUCH_BUSY_MS / 1000)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot record bookmark use in {path}: {exc}") from exc
    try:
        conn.execute("BEGIN IMMEDIATE")
        changed = 0
        for bid in bookmark_ids:
            cur = conn.execute(
                "UPDATE bookmarks SET last_relevant_ms = ? "
                "WHERE bookmark_id = ? AND last_relevant_ms < ?",
                (now_ms, bid, now_ms),
            )
            changed += cur.rowcount
        conn.execute("COMMIT")
        return changed
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(f"cannot record bookmark use in {path}: {exc}") from exc
    finally:
        conn.close()


def _grip_from_row(row: Sequence[Any]) -> Grip:
    return Grip(
        grip_id=row[0],
        project=row[1],
        excerpt=row[2],
        event_id_start=row[3],
        event_id_end=row[4],
        ts_ms=row[5],
        source=row[6],
        toc_node_id=row[7],
        session_id=row[8],
    )


def _bookmark_from_row(row: Sequence[Any]) -> Bookmark:
    return Bookmark(
        bookmark_id=row[0],
        project=row[1],
        content=row[2],
        event_ids=tuple(json.loads(row[3])),
        importance=row[4],
        type=row[5],
        created_ms=row[6],
        last_relevant_ms=row[7],
    )


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


class SqliteStore(SqliteSearch, SqliteForget, SqliteUpkeep, SqliteMerge):
    """``Store`` on one SQLite file."""

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
                # larger pages make the insert cheaper (measured: 5.6 -> 4.8 µs CPU per event).
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
            # than once per 4 MB of log (measured: ~10% faster bulk ingest).
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

    def __enter__(self) -> SqliteStore:
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

    # -- events -----------------------------------------------------------------------------------
    def append_events(
        self,
        events: Sequence[Event],
        checkpoints: Mapping[str, JsonValue] | None = None,
    ) -> AppendResult:
        # Rows built in C: one attrgetter call per event, then its metadata's JSON appended.
        fields = _EVENT_FIELDS
        dumps = _dumps
        rows = [
            (*fields(e), dumps(m if type(m) is dict else dict(m)) if (m := e.metadata) else "{}")
            for e in events
        ]
        keep, refused = split_valid(rows)  # the store's edge, for any caller
        if not refused:
            return self.append_rows(rows, checkpoints)
        result = self.append_rows([rows[i] for i in keep], checkpoints)
        result.conflicts = [(keep[j], differs) for j, differs in result.conflicts]
        result.refused = sorted(refused + [(keep[j], why) for j, why in result.refused])
        return result

    def append_rows(
        self,
        rows: Iterable[EventRow],
        checkpoints: Mapping[str, JsonValue] | None = None,
        *,
        count: int | None = None,
    ) -> AppendResult:
        """``append_events`` for prepared rows (``EventRow``: the metadata already JSON) that
        the caller validated (the importer, with the store's bounds); a row whose instant is out
        of range is still taken back (``VALID_TS_SQL``).

        ``rows`` may be an iterator (consumed inside the transaction, so rows can be produced
        while earlier ones are inserted); then ``count`` says how many it yields.
        """
        if count is None:
            rows = list(rows)
            count = len(rows)
            given: Iterable[EventRow] = rows
        else:  # an iterator: a copy of what it yields (kept in C) for the session spans
            rows, given = tee(rows)
        result = AppendResult()
        new: set[str] = set()
        with self.transaction():
            before = self._exec("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
            cur = self._conn.executemany(_INSERT_EVENT, rows)
            inserted = cur.rowcount if cur.rowcount >= 0 else 0
            if inserted:  # the store's edge: take back any row whose instant is out of range
                invalid = self._conn.execute(_INVALID_SINCE, (before,)).fetchall()
                if invalid:
                    self._conn.executemany("DELETE FROM events WHERE seq = ?", invalid)
                    inserted -= len(invalid)
            result.inserted = inserted
            result.duplicates = count - inserted
            if inserted < count:  # duplicates, conflicts or refused rows: tell them apart
                if not isinstance(given, list):
                    given = list(given)
                classify(given, self._stored_for_classify, result)
                if result.refused:  # a refused row's session span must not widen
                    skip = {i for i, _ in result.refused}
                    given = [r for i, r in enumerate(given) if i not in skip]
            if inserted:
                after = self._exec("SELECT MAX(seq) FROM events").fetchone()[0]
                result.outbox_entry_id = self._add_outbox(
                    "events", {"first_seq": before + 1, "last_seq": after}
                )
                # spans of every row's session: a duplicate's only widens a span (harmless)
                spans = session_spans(given if isinstance(given, list) else list(given))
                self._conn.executemany(SPAN_UPSERT, spans)
                new = {span[1] for span in spans} - self._registered
                if new and self.has_project_registry:
                    sqlite_projects.ensure_projects(self._conn, sorted(new), self.clock.now_ms())
            now = self.clock.now_ms()
            for job, value in (checkpoints or {}).items():
                self._exec(
                    "INSERT OR REPLACE INTO checkpoints(job, value, updated_ms) VALUES (?, ?, ?)",
                    (job, _dumps(value), now),
                )
        self._registered |= new  # committed
        if result.inserted and self.checkpointer is not None:
            self.checkpointer.appended(result.inserted)
        return result

    def _stored_for_classify(self, event_ids: list[str]) -> dict[str, Stored]:
        found: dict[str, Stored] = {}
        for i in range(0, len(event_ids), 500):
            chunk = event_ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                f"SELECT event_id, ts_ms, session_id, event_type, role, text, {self._live} "
                f"FROM events WHERE event_id IN ({marks})",
                chunk,
            ):
                found[row[0]] = (row[1], row[2], row[3], row[4], row[5], bool(row[6]))
        return found

    def get_event(self, event_id: str) -> Event:
        rows = self._query(
            f"SELECT {_EVENT_COLS} FROM events WHERE event_id = ? AND {self._live}", (event_id,)
        )
        if not rows:
            raise NotFoundError("event", event_id)
        return _row_to_event(rows[0])

    def get_events(self, event_ids: Iterable[str]) -> list[Event]:
        ids = list(dict.fromkeys(event_ids))
        out: list[Any] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.extend(
                self._query(
                    f"SELECT {_EVENT_COLS} FROM events WHERE event_id IN ({marks}) AND {self._live}",
                    chunk,
                )
            )
        out.sort(key=lambda r: (r[2], r[0]))
        return [_row_to_event(r) for r in out]

    def scan_events(
        self,
        *,
        project: str | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> Iterator[Event]:
        order = "DESC" if descending else "ASC"
        by = f"ts_ms {order}, seq {order}"
        if session_id is None:
            where, params = _conditions(
                ("project = ?", project), ("ts_ms >= ?", since_ms), ("ts_ms < ?", until_ms)
            )
        else:  # within the session's span, in (project, ts_ms, session_id) order
            scope = session_scope(
                self._query, session_id, project, since_ms, until_ms, table=self._spans
            )
            if scope is None:
                return
            where, params = scope
            by = session_order(descending)
        where.append(self._live)
        # Keyset pagination on (ts_ms, seq): a huge scan neither holds the lock between pages
        # nor loads everything, each page costs the same, and events of one millisecond keep
        # their append (file) order.
        cmp = "<" if descending else ">"
        base = f"SELECT {_EVENT_COLS} FROM events"
        page = 2_000
        remaining = limit
        cursor: tuple[int, int] | None = None
        while remaining is None or remaining > 0:
            size = page if remaining is None else min(page, remaining)
            clauses = list(where)
            args = list(params)
            if cursor is not None:
                clauses.append(f"(ts_ms {cmp} ? OR (ts_ms = ? AND seq {cmp} ?))")
                args.extend([cursor[0], cursor[0], cursor[1]])
            sql = base + (" WHERE " + " AND ".join(clauses) if clauses else "")
            sql += f" ORDER BY {by} LIMIT {size}"
            rows = self._query(sql, args)
            for row in rows:
                yield _row_to_event(row)
            if len(rows) < size:
                return
            cursor = (rows[-1][2], rows[-1][0])
            if remaining is not None:
                remaining -= len(rows)

    def events_by_seq(self, first_seq: int, last_seq: int) -> list[tuple[int, Event]]:
        rows = self._query(
            f"SELECT {_EVENT_COLS} FROM events WHERE seq BETWEEN ? AND ? AND {self._live} ORDER BY seq",
            (first_seq, last_seq),
        )
        return [(r[0], _row_to_event(r)) for r in rows]

    def session_neighbors(
        self,
        event: Event,
        *,
        before: int,
        after: int,
        window_ms: int | None = None,
        event_types: tuple[str, ...] | None = None,
    ) -> tuple[list[Event], list[Event]]:
        found = self._query("SELECT seq FROM events WHERE event_id = ?", (event.event_id,))
        if not found:
            raise NotFoundError("event", event.event_id)
        seq = found[0][0]
        spans = spans_of(self._query, event.session_id, event.project, table=self._spans)
        if not spans or not (before or after):
            return [], []
        _, first, last = spans[0]
        lo, hi = first, last
        if window_ms is not None:
            lo, hi = max(lo, event.ts_ms - window_ms), min(hi, event.ts_ms + window_ms)
        ts = event.ts_ms
        where = f"project = ? AND ts_ms >= ? AND ts_ms <= ? AND +session_id = ? AND {self._live}"
        if event_types:
            where += f" AND +event_type IN ({', '.join('?' * len(event_types))})"

        def side(earlier: bool, first: int, last: int, n: int) -> list[Event]:
            """The ``n`` events nearest ``event`` on one side, in time order."""
            if not n:
                return []
            cmp = "<" if earlier else ">"
            rows = self._query(
                f"SELECT {_EVENT_COLS} FROM events WHERE {where} AND (ts_ms {cmp} ? OR "
                f"(ts_ms = ? AND seq {cmp} ?)) ORDER BY {session_order(earlier)} LIMIT ?",
                (
                    event.project,
                    first,
                    last,
                    event.session_id,
                    *(event_types or ()),
                    ts,
                    ts,
                    seq,
                    n,
                ),
            )
            return [_row_to_event(r) for r in (reversed(rows) if earlier else rows)]

        return side(True, lo, ts, before), side(False, ts, hi, after)

    def count_events(self, project: str | None = None) -> int:
        # total minus tombstones: both counts are index-only (forget: partial index)
        args: tuple[str, ...] = ()
        if project is None:
            sql = _COUNT_ALL
            if self._live != "1":
                sql = f"SELECT ({_COUNT_ALL}) - ({_COUNT_TOMBSTONES})"
        else:
            sql, args = f"{_COUNT_ALL} WHERE project = ?", (project,)
            if self._live != "1":
                sql = f"SELECT ({sql}) - ({_COUNT_TOMBSTONES} AND project = ?)"
                args = (project, project)
        return int(self._query(sql, args)[0][0])

    def max_seq(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM events")[0][0])

    def projects(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT project FROM events ORDER BY project")]

    # -- the project registry (memtoc.projects holds the rule; store/sqlite_projects the SQL) ------
    def list_projects(self) -> list[Project]:
        return sqlite_projects.list_projects(self)

    def register_project(self, project: str, name: str, root: str | None = None) -> str:
        return sqlite_projects.register_project(self, project, name, root, self.clock.now_ms())

    def add_project_root(self, project: str, root: str) -> str:
        return sqlite_projects.add_root(self, project, root, self.clock.now_ms())

    def rename_project(self, project: str, name: str) -> None:
        sqlite_projects.rename_project(self, project, name)

    def forget_registered(self, project: str) -> None:
        """Drop ``project`` from the appends' cache of registered ids (it left the registry)."""
        self._registered.discard(project)

    # -- outbox and checkpoints ---------------------------------------------------------------------
    def _add_outbox(self, kind: str, payload: Mapping[str, JsonValue]) -> int:
        cur = self._exec(
            "INSERT INTO outbox(kind, payload, created_ms) VALUES (?, ?, ?)",
            (kind, _dumps(dict(payload)), self.clock.now_ms()),
        )
        return int(cur.lastrowid or 0)

    def add_outbox(self, kind: str, payload: Mapping[str, JsonValue]) -> int:
        with self.transaction():
            return self._add_outbox(kind, payload)

    def claim_outbox(self, worker_id: str, limit: int) -> list[OutboxEntry]:
        with self.transaction():
            rows = self._exec(
                "SELECT entry_id, kind, payload, created_ms, attempts, status, error FROM outbox "
                "WHERE status = 'pending' ORDER BY entry_id LIMIT ?",
                (limit,),
            ).fetchall()
            if rows:
                self._conn.executemany(
                    "UPDATE outbox SET claimed_by = ?, claimed_ms = ?, attempts = attempts + 1 "
                    "WHERE entry_id = ?",
                    [(worker_id, self.clock.now_ms(), r[0]) for r in rows],
                )
        return [OutboxEntry(r[0], r[1], json.loads(r[2]), r[3], r[4] + 1, r[5], r[6]) for r in rows]

    def complete_outbox(self, entry_ids: Sequence[int]) -> None:
        with self.transaction():
            self._conn.executemany(
                "UPDATE outbox SET status = 'done', done_ms = ?, error = NULL WHERE entry_id = ?",
                [(self.clock.now_ms(), i) for i in entry_ids],
            )

    def fail_outbox(self, entry_id: int, error: str) -> None:
        with self.transaction():
            self._exec(
                "UPDATE outbox SET status = 'failed', error = ? WHERE entry_id = ?",
                (storable_text(error[:4000]), entry_id),
            )

    def retry_failed_outbox(self) -> int:
        with self.transaction():
            cur = self._exec("UPDATE outbox SET status = 'pending' WHERE status = 'failed'")
            return int(cur.rowcount)

    def outbox_counts(self) -> dict[str, int]:
        counts = {"pending": 0, "done": 0, "failed": 0}
        for status, n in self._query("SELECT status, COUNT(*) FROM outbox GROUP BY status"):
            counts[status] = int(n)
        return counts

    def failed_outbox(self, limit: int = 20) -> list[OutboxEntry]:
        rows = self._query(
            "SELECT entry_id, kind, payload, created_ms, attempts, status, error FROM outbox "
            "WHERE status = 'failed' ORDER BY entry_id LIMIT ?",
            (limit,),
        )
        return [OutboxEntry(r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], r[6]) for r in rows]

    def get_checkpoint(self, job: str) -> JsonValue | None:
        rows = self._query("SELECT value FROM checkpoints WHERE job = ?", (job,))
        return json.loads(rows[0][0]) if rows else None

    def set_checkpoint(self, job: str, value: JsonValue) -> None:
        with self.transaction():
            self._exec(
                "INSERT OR REPLACE INTO checkpoints(job, value, updated_ms) VALUES (?, ?, ?)",
                (job, _dumps(value), self.clock.now_ms()),
            )

    def list_checkpoints(self, prefix: str = "") -> dict[str, JsonValue]:
        rows = self._query(
            "SELECT job, value FROM checkpoints WHERE job >= ? AND job < ? ORDER BY job",
            (prefix, prefix + "\U0010ffff"),
        )
        return {r[0]: json.loads(r[1]) for r in rows}

    # -- TOC nodes and grips -------------------------------------------------------------------------
    def put_node(self, node: TocNode) -> tuple[TocNode, bool]:
        with self.transaction():
            rows = self._exec(
                "SELECT v.version, v.data FROM toc_nodes n JOIN toc_node_versions v "
                "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version "
                "WHERE n.project = ? AND n.node_id = ?",
                (node.project, node.node_id),
            ).fetchall()
            if rows:
                latest = _node_from_row(node.project, node.node_id, rows[0][0], rows[0][1])
                if latest.content_key() == node.content_key():
                    return latest, False
                version = latest.version + 1
            else:
                # No latest pointer: a new node, or one retired (or whose pointer was lost) whose
                # versions stay. Numbering continues after them; a node equal to its last version
                # gets its pointer back instead of a copy.
                top = self._exec(
                    "SELECT version, data FROM toc_node_versions WHERE project = ? AND node_id = ? "
                    "ORDER BY version DESC LIMIT 1",
                    (node.project, node.node_id),
                ).fetchone()
                if top is not None:
                    last = _node_from_row(node.project, node.node_id, top[0], top[1])
                    if last.content_key() == node.content_key():
                        self._set_latest(node, last.version)
                        return last, True
                version = top[0] + 1 if top is not None else 1
            now = self.clock.now_ms()
            self._exec(
                "INSERT INTO toc_node_versions(project, node_id, version, level, start_ms, end_ms, "
                "parent_id, data, created_ms) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    node.project,
                    node.node_id,
                    version,
                    node.level,
                    node.start_ms,
                    node.end_ms,
                    node.parent_id,
                    _node_data(node, now),
                    now,
                ),
            )
            self._set_latest(node, version)
        stored = TocNode(**{**_asdict(node), "version": version, "created_ms": now})
        return stored, True

    def _set_latest(self, node: TocNode, version: int) -> None:
        self._exec(
            "INSERT OR REPLACE INTO toc_nodes(project, node_id, version, level, start_ms, "
            "end_ms, parent_id) VALUES (?,?,?,?,?,?,?)",
            (
                node.project,
                node.node_id,
                version,
                node.level,
                node.start_ms,
                node.end_ms,
                node.parent_id,
            ),
        )

    def get_node(self, project: str, node_id: str, version: int | None = None) -> TocNode:
        if version is None:
            rows = self._query(
                "SELECT v.version, v.data FROM toc_nodes n JOIN toc_node_versions v "
                "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version "
                "WHERE n.project = ? AND n.node_id = ?",
                (project, node_id),
            )
        else:
            rows = self._query(
                "SELECT version, data FROM toc_node_versions "
                "WHERE project = ? AND node_id = ? AND version = ?",
                (project, node_id, version),
            )
        if not rows:
            raise NotFoundError("node", f"{node_id} (project {project})")
        return _node_from_row(project, node_id, rows[0][0], rows[0][1])

    def find_node(self, node_id: str, project: str | None = None) -> TocNode:
        if project is not None:
            return self.get_node(project, node_id)
        rows = self._query("SELECT project FROM toc_nodes WHERE node_id = ?", (node_id,))
        if not rows:
            raise NotFoundError("node", node_id)
        if len(rows) > 1:
            from memtoc.errors import QueryError

            names = ", ".join(sorted(r[0] for r in rows))
            raise QueryError(f"{node_id} exists in several projects ({names}); name one")
        return self.get_node(rows[0][0], node_id)

    def list_nodes(
        self,
        project: str,
        *,
        level: str | None = None,
        parent_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TocNode]:
        where, params = _conditions(
            ("n.project = ?", project),
            ("n.level = ?", level),
            ("n.parent_id = ?", parent_id),
            ("n.end_ms > ?", since_ms),  # periods overlapping [since, until)
            ("n.start_ms < ?", until_ms),
        )
        rows = self._query(
            "SELECT n.node_id, v.version, v.data FROM toc_nodes n JOIN toc_node_versions v "
            "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version "
            f"WHERE {' AND '.join(where)} ORDER BY n.start_ms, n.node_id",
            params,
        )
        return [_node_from_row(project, r[0], r[1], r[2]) for r in rows]

    # -- latest nodes (session-start context, memtoc.retrieval.context) ----------------------------
    def latest_nodes(self, project: str, level: str, limit: int) -> list[TocNode]:
        """The ``limit`` nodes of ``level`` that start last, newest first.

        A backwards walk of the ``(project, level, start_ms)`` index: its cost does not grow with
        the store.
        """
        rows = self._query(
            "SELECT n.node_id, v.version, v.data FROM toc_nodes n JOIN toc_node_versions v "
            "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version "
            "WHERE n.project = ? AND n.level = ? ORDER BY n.start_ms DESC, n.node_id DESC "
            f"LIMIT {max(0, int(limit))}",
            (project, level),
        )
        return [_node_from_row(project, r[0], r[1], r[2]) for r in rows]

    def node_versions(self, project: str, node_id: str) -> list[int]:
        rows = self._query(
            "SELECT version FROM toc_node_versions WHERE project = ? AND node_id = ? "
            "ORDER BY version",
            (project, node_id),
        )
        return [r[0] for r in rows]

    def put_grips(self, grips: Sequence[Grip]) -> int:
        with self.transaction():
            cur = self._conn.executemany(
                f"INSERT OR IGNORE INTO grips({_GRIP_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (
                        g.grip_id,
                        g.project,
                        storable_text(g.excerpt),
                        g.event_id_start,
                        g.event_id_end,
                        g.ts_ms,
                        g.source,
                        g.toc_node_id,
                        g.session_id,
                    )
                    for g in grips
                ],
            )
            return max(cur.rowcount, 0)

    def get_grip(self, grip_id: str) -> Grip:
        rows = self._query(f"SELECT {_GRIP_COLS} FROM grips WHERE grip_id = ?", (grip_id,))
        if not rows:
            raise NotFoundError("grip", grip_id)
        return _grip_from_row(rows[0])

    def grips_for_node(self, project: str, node_id: str) -> list[Grip]:
        rows = self._query(
            f"SELECT {_GRIP_COLS} FROM grips WHERE project = ? AND toc_node_id = ? "
            "ORDER BY ts_ms, grip_id",
            (project, node_id),
        )
        return [_grip_from_row(r) for r in rows]

    # -- bookmarks ---------------------------------------------------------------------------------
    def put_bookmark(self, bookmark: Bookmark) -> None:
        with self.transaction():
            self._exec(
                "INSERT OR REPLACE INTO bookmarks(bookmark_id, project, content, event_ids, "
                "importance, type, created_ms, last_relevant_ms) VALUES (?,?,?,?,?,?,?,?)",
                (
                    bookmark.bookmark_id,
                    bookmark.project,
                    storable_text(bookmark.content),
                    _dumps(list(bookmark.event_ids)),
                    bookmark.importance,
                    bookmark.type,
                    bookmark.created_ms,
                    bookmark.last_relevant_ms,
                ),
            )

    def list_bookmarks(
        self, project: str | None = None, limit: int | None = None
    ) -> list[Bookmark]:
        sql = (
            "SELECT bookmark_id, project, content, event_ids, importance, type, created_ms, "
            "last_relevant_ms FROM bookmarks"
        )
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(project)
        sql += " ORDER BY importance DESC, created_ms DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_bookmark_from_row(r) for r in self._query(sql, params)]

    # -- bookmarks: use, merge and lookup (memtoc.retrieval.bookmark_step) ----------------------------
    def touch_bookmarks(self, bookmark_ids: Sequence[str], now_ms: int) -> int:
        """Mark bookmarks as used at ``now_ms`` (``last_relevant_ms`` never moves back).

        Reads first and takes the write lock only when a bookmark is older than ``now_ms``. On a
        store opened read-only (a CLI search) the update goes through a short-lived writable
        connection that waits at most ``TOUCH_BUSY_MS`` for a lock (raises ``StoreError`` when it
        cannot write: read-only media, a long write elsewhere)."""
        ids = list(dict.fromkeys(bookmark_ids))
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        stale = [
            r[0]
            for r in self._query(
                f"SELECT bookmark_id FROM bookmarks WHERE bookmark_id IN ({marks}) "
                "AND last_relevant_ms < ?",
                (*ids, now_ms),
            )
        ]
        if not stale:
            return 0
        if self.read_only:
            return _touch_via_writer(self.path, stale, now_ms)
        changed = 0
        with self.transaction():
            for bid in stale:
                cur = self._exec(
                    "UPDATE bookmarks SET last_relevant_ms = ? "
                    "WHERE bookmark_id = ? AND last_relevant_ms < ?",
                    (now_ms, bid, now_ms),
                )
                changed += cur.rowcount
        return changed

    def delete_bookmarks(self, bookmark_ids: Sequence[str]) -> int:
        """Delete bookmarks and their search documents; return how many existed."""
        deleted = 0
        with self.transaction():
            for bid in dict.fromkeys(bookmark_ids):
                rows = self._query("SELECT project FROM bookmarks WHERE bookmark_id = ?", (bid,))
                if not rows:
                    continue
                self._exec("DELETE FROM bookmarks WHERE bookmark_id = ?", (bid,))
                self._delete_docs("bookmark", rows[0][0], [bid])
                deleted += 1
        return deleted

    def find_bookmarks(
        self,
        project: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        type: str | None = None,  # noqa: A002 - the model's field name
        content: str | None = None,
    ) -> list[Bookmark]:
        """A project's bookmarks created in ``[since, until]`` (inclusive), of ``type`` and with
        exactly ``content`` when given, oldest first."""
        sql = (
            "SELECT bookmark_id, project, content, event_ids, importance, type, created_ms, "
            "last_relevant_ms FROM bookmarks WHERE project = ?"
        )
        params: list[Any] = [project]
        for clause, value in (
            ("created_ms >= ?", since_ms),
            ("created_ms <= ?", until_ms),
            ("type = ?", type),
            ("content = ?", content),
        ):
            if value is not None:
                sql += f" AND {clause}"
                params.append(value)
        sql += " ORDER BY created_ms, bookmark_id"
        return [_bookmark_from_row(r) for r in self._query(sql, params)]

    # -- housekeeping --------------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        q = self._query
        levels = {r[0]: r[1] for r in q("SELECT level, COUNT(*) FROM toc_nodes GROUP BY level")}
        span = q("SELECT MIN(ts_ms), MAX(ts_ms) FROM events")[0]
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return {
            "store": "sqlite",
            "location": self.location,
            "durability": self.durability,
            "events": self.count_events(),
            "projects": int(q("SELECT COUNT(DISTINCT project) FROM events")[0][0]),
            "sessions": int(q("SELECT COUNT(DISTINCT session_id) FROM events")[0][0]),
            "first_event_ms": span[0],
            "last_event_ms": span[1],
            "events_out_of_range": out_of_range_count(q, span, self._live),
            "outbox": self.outbox_counts(),
            "nodes": levels,
            "node_versions": int(q("SELECT COUNT(*) FROM toc_node_versions")[0][0]),
            "grips": int(q("SELECT COUNT(*) FROM grips")[0][0]),
            "bookmarks": int(q("SELECT COUNT(*) FROM bookmarks")[0][0]),
            "bytes": size,
        }

    # -- segments and rollups (pipeline) -------------------------------------------------------------
    # Owned by the TOC pipeline (memtoc.pipeline): segment bookkeeping, node retirement, grip
    # replacement, rollup marks and search-document upkeep. Writes join the caller's transaction.

    def assigned_seqs(self, seqs: Sequence[int]) -> set[int]:
        out: set[int] = set()
        if not seqs:
            return out
        lo, hi = min(seqs), max(seqs)
        if hi - lo < 4 * len(seqs) + 1000:
            wanted = set(seqs)
            rows = self._query("SELECT seq FROM segment_events WHERE seq BETWEEN ? AND ?", (lo, hi))
            return {r[0] for r in rows if r[0] in wanted}
        ids = list(seqs)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._query(f"SELECT seq FROM segment_events WHERE seq IN ({marks})", chunk)
            out.update(r[0] for r in rows)
        return out

    def session_tail(self, project: str, session_id: str) -> SegmentRecord | None:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
            (project, session_id),
        )
        return _segment_from_row(rows[0]) if rows else None

    def segment_before(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> SegmentRecord | None:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "AND (start_ms < ? OR (start_ms = ? AND first_event_id <= ?)) "
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
            (project, session_id, ts_ms, ts_ms, event_id),
        )
        return _segment_from_row(rows[0]) if rows else None

    def segments_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[SegmentRecord]:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "AND (start_ms > ? OR (start_ms = ? AND first_event_id >= ?)) "
            "ORDER BY start_ms, first_event_id",
            (project, session_id, ts_ms, ts_ms, event_id),
        )
        return [_segment_from_row(r) for r in rows]

    def session_events_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[tuple[int, Event]]:
        scope = session_scope(self._query, session_id, project, ts_ms, None, table=self._spans)
        if scope is None:
            return []
        where, params = scope
        rows = self._query(
            f"SELECT {_EVENT_COLS} FROM events WHERE {' AND '.join(where)} "
            f"AND (ts_ms > ? OR (ts_ms = ? AND event_id >= ?)) AND {self._live} "
            "ORDER BY ts_ms, event_id",
            (*params, ts_ms, ts_ms, event_id),
        )
        return [(r[0], _row_to_event(r)) for r in rows]

    def members_of(self, project: str, node_ids: Sequence[str]) -> set[int]:
        out: set[int] = set()
        ids = list(node_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                f"SELECT seq FROM segment_events WHERE project = ? AND node_id IN ({marks})",
                [project, *chunk],
            )
            out.update(r[0] for r in rows)
        return out

    def write_segments(
        self,
        upserts: Sequence[SegmentRecord],
        deleted: Sequence[str],
        project: str,
        membership: Sequence[tuple[int, str]],
        index_events: Sequence[tuple[int, str]],
    ) -> None:
        with self.transaction():
            for node_id in deleted:
                self._exec(
                    "DELETE FROM segments WHERE project = ? AND node_id = ?", (project, node_id)
                )
                self.delete_node(project, node_id)
            self._conn.executemany(
                f"INSERT OR REPLACE INTO segments({_SEGMENT_COLS}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [_segment_row(r) for r in upserts],
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO segment_events(seq, project, node_id) VALUES (?, ?, ?)",
                [(seq, project, node_id) for seq, node_id in membership],
            )
            self._conn.executemany(
                "INSERT INTO events_fts(rowid, text) VALUES (?, ?)", index_events
            )

    def unbuilt_segments(self, limit: int) -> list[SegmentRecord]:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE built = 0 AND error IS NULL "
            "ORDER BY project, session_id, start_ms, first_event_id LIMIT ?",
            (limit,),
        )
        return [_segment_from_row(r) for r in rows]

    def get_segment(self, project: str, node_id: str) -> SegmentRecord:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE project = ? AND node_id = ?",
            (project, node_id),
        )
        if not rows:
            raise NotFoundError("segment", f"{node_id} (project {project})")
        return _segment_from_row(rows[0])

    def segment_member_events(self, project: str, node_id: str) -> list[Event]:
        cols = ", ".join(f"e.{c.strip()}" for c in _EVENT_COLS.split(","))
        rows = self._query(
            f"SELECT {cols} FROM segment_events s JOIN events e ON e.seq = s.seq "
            "WHERE s.project = ? AND s.node_id = ? ORDER BY e.ts_ms, e.event_id",
            (project, node_id),
        )
        return [_row_to_event(r) for r in rows]

    def previous_segment(self, segment: SegmentRecord) -> SegmentRecord | None:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "AND (start_ms < ? OR (start_ms = ? AND first_event_id < ?)) "
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
            (
                segment.project,
                segment.session_id,
                segment.start_ms,
                segment.start_ms,
                segment.first_event_id,
            ),
        )
        return _segment_from_row(rows[0]) if rows else None

    def mark_segment_built(self, project: str, node_id: str) -> None:
        with self.transaction():
            self._exec(
                "UPDATE segments SET built = 1, error = NULL WHERE project = ? AND node_id = ?",
                (project, node_id),
            )

    def fail_segment(self, project: str, node_id: str, error: str) -> None:
        with self.transaction():
            self._exec(
                "UPDATE segments SET built = 0, error = ? WHERE project = ? AND node_id = ?",
                (storable_text(error[:4000]), project, node_id),
            )

    def failed_segments(self, limit: int = 20) -> list[SegmentRecord]:
        rows = self._query(
            f"SELECT {_SEGMENT_COLS} FROM segments WHERE error IS NOT NULL "
            "ORDER BY project, start_ms LIMIT ?",
            (limit,),
        )
        return [_segment_from_row(r) for r in rows]

    def retry_failed_segments(self) -> int:
        with self.transaction():
            cur = self._exec("UPDATE segments SET error = NULL WHERE error IS NOT NULL")
            return int(cur.rowcount)

    def close_idle_segments(self, before_ms: int) -> int:
        with self.transaction():
            cur = self._exec(
                "UPDATE segments SET closed = 1 WHERE closed = 0 AND end_ms <= ?", (before_ms,)
            )
            return int(cur.rowcount)

    def replace_node_grips(self, project: str, node_id: str, grips: Sequence[Grip]) -> int:
        keep = {g.grip_id for g in grips}
        with self.transaction():
            old = [
                r[0]
                for r in self._exec(
                    "SELECT grip_id FROM grips WHERE project = ? AND toc_node_id = ?",
                    (project, node_id),
                ).fetchall()
            ]
            stale = [g for g in old if g not in keep]
            if stale:
                self._conn.executemany("DELETE FROM grips WHERE grip_id = ?", [(g,) for g in stale])
                self._delete_docs("grip", project, stale)
            return self.put_grips(grips) if grips else 0

    def lock_node(self, project: str, node_id: str) -> None:
        """Nothing to take: ``transaction()`` is ``BEGIN IMMEDIATE``, the database's one write lock,
        which already serialises every writer (of every node) until it ends."""
        if not self._depth:
            raise StoreError(f"{self.path}: lock_node({node_id!r}) outside a transaction")

    def delete_node(self, project: str, node_id: str) -> None:
        with self.transaction():
            self._exec(
                "DELETE FROM toc_nodes WHERE project = ? AND node_id = ?", (project, node_id)
            )
            grip_ids = [
                r[0]
                for r in self._exec(
                    "SELECT grip_id FROM grips WHERE project = ? AND toc_node_id = ?",
                    (project, node_id),
                ).fetchall()
            ]
            self._exec(
                "DELETE FROM grips WHERE project = ? AND toc_node_id = ?", (project, node_id)
            )
            self._delete_docs("grip", project, grip_ids)
            self._delete_docs("node", project, [node_id])

    def mark_dirty(self, marks: Sequence[DirtyPeriod]) -> None:
        if not marks:
            return
        with self.transaction():
            (seq,) = self._conn.execute(
                "INSERT INTO meta(key, value) VALUES ('rollup_mark_seq', '1') "
                "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1 "
                "RETURNING CAST(value AS INTEGER)"
            ).fetchone()
            self._conn.executemany(
                "INSERT INTO rollup_dirty(project, node_id, level, activity_ms, marked_ms, seq) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(project, node_id) DO UPDATE SET "
                "activity_ms = MAX(activity_ms, excluded.activity_ms), "
                "marked_ms = MAX(marked_ms, excluded.marked_ms), seq = excluded.seq",
                [(m.project, m.node_id, m.level, m.activity_ms, m.marked_ms, seq) for m in marks],
            )

    def dirty_periods(self, level: str) -> list[DirtyPeriod]:
        rows = self._query(
            "SELECT project, node_id, level, activity_ms, marked_ms, seq FROM rollup_dirty "
            "WHERE level = ? ORDER BY project, node_id",
            (level,),
        )
        return [DirtyPeriod(*r) for r in rows]

    def clear_dirty(self, project: str, node_id: str, seq: int) -> None:
        with self.transaction():
            self._exec(
                "DELETE FROM rollup_dirty WHERE project = ? AND node_id = ? AND seq <= ?",
                (project, node_id, seq),
            )

    def orphan_parent_ids(self, level: str) -> list[tuple[str, str, int]]:
        rows = self._query(
            "SELECT c.project, c.parent_id, MAX(c.end_ms) FROM toc_nodes c "
            "LEFT JOIN toc_nodes p ON p.project = c.project AND p.node_id = c.parent_id "
            "WHERE c.level = ? AND c.parent_id IS NOT NULL AND p.node_id IS NULL "
            "GROUP BY c.project, c.parent_id ORDER BY c.project, c.parent_id",
            (level,),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def put_docs(self, docs: Sequence[DocRow]) -> None:
        if not docs:
            return
        with self.transaction():
            for doc in docs:
                if "\x00" in doc.text:
                    doc = dataclasses.replace(doc, text=storable_text(doc.text))
                row = self._exec(
                    "SELECT doc_seq, text, ts_ms FROM docs WHERE kind = ? AND project = ? "
                    "AND doc_id = ?",
                    (doc.kind, doc.project, doc.doc_id),
                ).fetchone()
                if row is not None:
                    if row[1] == doc.text and row[2] == doc.ts_ms:
                        continue
                    self._exec(
                        "INSERT INTO docs_fts(docs_fts, rowid, text) VALUES ('delete', ?, ?)",
                        (row[0], row[1]),
                    )
                    self._exec(
                        "UPDATE docs SET text = ?, ts_ms = ? WHERE doc_seq = ?",
                        (doc.text, doc.ts_ms, row[0]),
                    )
                    doc_seq = row[0]
                else:
                    cur = self._exec(
                        "INSERT INTO docs(kind, doc_id, project, ts_ms, text) VALUES (?,?,?,?,?)",
                        (doc.kind, doc.doc_id, doc.project, doc.ts_ms, doc.text),
                    )
                    doc_seq = cur.lastrowid
                self._exec("INSERT INTO docs_fts(rowid, text) VALUES (?, ?)", (doc_seq, doc.text))

    def _delete_docs(self, kind: str, project: str, doc_ids: Sequence[str]) -> None:
        for doc_id in doc_ids:
            row = self._exec(
                "SELECT doc_seq, text FROM docs WHERE kind = ? AND project = ? AND doc_id = ?",
                (kind, project, doc_id),
            ).fetchone()
            if row is None:
                continue
            self._exec(
                "INSERT INTO docs_fts(docs_fts, rowid, text) VALUES ('delete', ?, ?)",
                (row[0], row[1]),
            )
            self._exec("DELETE FROM docs WHERE doc_seq = ?", (row[0],))


_SEGMENT_COLS = (
    "project, node_id, session_id, start_ms, end_ms, first_seq, last_seq, event_count, "
    "token_count, first_event_id, last_event_id, closed, built, error"
)


def _segment_from_row(row: Sequence[Any]) -> SegmentRecord:
    return SegmentRecord(
        project=row[0],
        node_id=row[1],
        session_id=row[2],
        start_ms=row[3],
        end_ms=row[4],
        first_seq=row[5],
        last_seq=row[6],
        event_count=row[7],
        token_count=row[8],
        first_event_id=row[9],
        last_event_id=row[10],
        closed=bool(row[11]),
        built=bool(row[12]),
        error=row[13],
    )


def _segment_row(r: SegmentRecord) -> tuple[Any, ...]:
    return (
        r.project,
        r.node_id,
        r.session_id,
        r.start_ms,
        r.end_ms,
        r.first_seq,
        r.last_seq,
        r.event_count,
        r.token_count,
        r.first_event_id,
        r.last_event_id,
        int(r.closed),
        int(r.built),
        r.error,
    )


def _asdict(node: TocNode) -> dict[str, Any]:
    return {f: getattr(node, f) for f in node.__dataclass_fields__}
