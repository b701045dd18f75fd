"""The embedded store: ``SqliteStore`` on one SQLite file (stdlib ``sqlite3``, WAL).

Events, the outbox, checkpoints, TOC nodes, bookmarks and stats here; the connection and
transactions in ``base.py``, the pipeline's part in ``pipeline.py``, the capabilities in their
own modules (``search``, ``forget``, ``upkeep``, ``merge``) — the split of ``store/postgres/``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import tee
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from memtoc.errors import NotFoundError, StoreError
from memtoc.model import (
    AppendResult,
    Bookmark,
    Event,
    JsonValue,
    OutboxEntry,
    Project,
    TocNode,
)
from memtoc.store.base import EventRow
from memtoc.store.codecs import (
    OUTBOX_COLS,
    event_from_row,
    json_text,
    node_data,
    node_fields,
    node_from_row,
    outbox_entry_from_row,
)
from memtoc.store.event_checks import (
    VALID_TS_SQL,
    Stored,
    classify,
    out_of_range_count,
    split_valid,
    storable_text,
)
from memtoc.store.forget_audit import ForgetAudit
from memtoc.store.reads import SharedReads
from memtoc.store.sqlite import projects as sqlite_projects
from memtoc.store.sqlite.forget import SqliteForget
from memtoc.store.sqlite.merge import SqliteMerge
from memtoc.store.sqlite.pipeline import EVENT_COLS, SqlitePipeline
from memtoc.store.sqlite.scans import merged_scan, project_ids, scan_pages, time_order, time_span
from memtoc.store.sqlite.search import SqliteSearch
from memtoc.store.sqlite.sessions import (
    SPAN_UPSERT,
    session_order,
    session_scope,
    session_spans,
    spans_of,
)
from memtoc.store.sqlite.upkeep import SqliteUpkeep
from memtoc.store.sqlite.vectors import SqliteVectors

if TYPE_CHECKING:
    from memtoc.store.derived import DerivedStore

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
_COUNT_ALL = "SELECT COUNT(*) FROM events"
_COUNT_TOMBSTONES = "SELECT COUNT(*) FROM events WHERE forgotten_ms IS NOT NULL"


def _conditions(*pairs: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """WHERE clauses and their parameters, for the filters that are given (not None)."""
    given = [(clause, value) for clause, value in pairs if value is not None]
    return [c for c, _ in given], [v for _, v in given]


TOUCH_BUSY_MS = 250
"""How long a read-only store's bookmark touch waits for another writer before giving up."""


def _touch(execute: Callable[..., sqlite3.Cursor], bookmark_ids: Sequence[str], now_ms: int) -> int:
    """Set the bookmarks' ``last_relevant_ms`` to ``now_ms`` where it is older; how many."""
    sql = "UPDATE bookmarks SET last_relevant_ms = ? WHERE bookmark_id = ? AND last_relevant_ms < ?"
    return sum(execute(sql, (now_ms, bid, now_ms)).rowcount for bid in bookmark_ids)


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
        changed = _touch(conn.execute, bookmark_ids, now_ms)
        conn.execute("COMMIT")
        return changed
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(f"cannot record bookmark use in {path}: {exc}") from exc
    finally:
        conn.close()


class SqliteStore(
    SqlitePipeline,
    SqliteVectors,
    SqliteSearch,
    SqliteForget,
    SqliteUpkeep,
    SqliteMerge,
    SharedReads,
    ForgetAudit,
):
    """``Store`` on one SQLite file."""

    def derived(self) -> DerivedStore:
        """What ``verify`` and ``rebuild`` need of this store (``sqlite/derived.py``)."""
        from memtoc.store.sqlite.derived import SqliteDerived

        return SqliteDerived(self)

    def __enter__(self) -> SqliteStore:
        return self

    # -- events -----------------------------------------------------------------------------------
    def append_events(
        self,
        events: Sequence[Event],
        checkpoints: Mapping[str, JsonValue] | None = None,
    ) -> AppendResult:
        # Rows built in C: one attrgetter call per event, then its metadata's JSON appended.
        fields = _EVENT_FIELDS
        dumps = json_text
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
                    (job, json_text(value), now),
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

    def get_events(self, event_ids: Iterable[str]) -> list[Event]:
        ids = list(dict.fromkeys(event_ids))
        out: list[Any] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.extend(
                self._query(
                    f"SELECT {EVENT_COLS} FROM events WHERE event_id IN ({marks}) AND {self._live}",
                    chunk,
                )
            )
        out.sort(key=lambda r: (r[2], r[0]))
        return [event_from_row(r) for r in out]

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
        # Keyset pages of the project index (``scans``); every project's scan is a merge of the
        # projects' scans, in the same ``(ts_ms, seq)`` order.
        if project is None and session_id is None:
            rows = merged_scan(
                self._query,
                lambda p: partial(self._scan_scope, p, None),
                since_ms,
                until_ms,
                descending=descending,
                limit=limit,
            )
        else:
            rows = scan_pages(
                self._query,
                partial(self._scan_scope, project, session_id),
                since_ms,
                until_ms,
                order_by=session_order(descending) if session_id else time_order(descending),
                descending=descending,
                limit=limit,
            )
        for row in rows:
            yield event_from_row(row)

    def _scan_scope(
        self,
        project: str | None,
        session_id: str | None,
        since_ms: int | None,
        until_ms: int | None,
    ) -> tuple[list[str], list[Any]] | None:
        """WHERE clauses and parameters of a scan's page; None when nothing can match.

        A project's scan names ``unlikely(project = ?)``: with ``ANALYZE`` statistics of a few
        projects, ``project = ?`` looks unselective and SQLite may prefer reading the table and
        sorting it; the hint keeps the project's index range (a store opened read-only before
        ``0012_drop_events_time`` still has ``events_time``, which it would otherwise read).
        """
        if session_id is None:
            where, params = _conditions(
                ("unlikely(project = ?)", project),
                ("ts_ms >= ?", since_ms),
                ("ts_ms < ?", until_ms),
            )
        else:  # within the session's span, in (project, ts_ms, session_id) order
            scope = session_scope(
                self._query, session_id, project, since_ms, until_ms, table=self._spans
            )
            if scope is None:
                return None
            where, params = scope
        return [*where, self._live], params

    def projects(self) -> list[str]:
        return project_ids(self._query)

    def events_by_seq(self, first_seq: int, last_seq: int) -> list[tuple[int, Event]]:
        rows = self._query(
            f"SELECT {EVENT_COLS} FROM events WHERE seq BETWEEN ? AND ? AND {self._live} ORDER BY seq",
            (first_seq, last_seq),
        )
        return [(r[0], event_from_row(r)) for r in rows]

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
                f"SELECT {EVENT_COLS} FROM events WHERE {where} AND (ts_ms {cmp} ? OR "
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
            return [event_from_row(r) for r in (reversed(rows) if earlier else rows)]

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
            (kind, json_text(dict(payload)), self.clock.now_ms()),
        )
        return int(cur.lastrowid or 0)

    def add_outbox(self, kind: str, payload: Mapping[str, JsonValue]) -> int:
        with self.transaction():
            return self._add_outbox(kind, payload)

    def claim_outbox(self, worker_id: str, limit: int) -> list[OutboxEntry]:
        with self.transaction():
            rows = self._exec(
                f"SELECT {OUTBOX_COLS} FROM outbox WHERE status = 'pending' ORDER BY entry_id "
                "LIMIT ?",
                (limit,),
            ).fetchall()
            if rows:
                self._conn.executemany(
                    "UPDATE outbox SET claimed_by = ?, claimed_ms = ?, attempts = attempts + 1 "
                    "WHERE entry_id = ?",
                    [(worker_id, self.clock.now_ms(), r[0]) for r in rows],
                )
        return [outbox_entry_from_row(r, 1) for r in rows]

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

    def set_checkpoint(self, job: str, value: JsonValue) -> None:
        with self.transaction():
            self._exec(
                "INSERT OR REPLACE INTO checkpoints(job, value, updated_ms) VALUES (?, ?, ?)",
                (job, json_text(value), self.clock.now_ms()),
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
                latest = node_from_row(node.project, node.node_id, rows[0][0], rows[0][1])
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
                    last = node_from_row(node.project, node.node_id, top[0], top[1])
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
                    node_data(node, now),
                    now,
                ),
            )
            self._set_latest(node, version)
        stored = TocNode(**{**node_fields(node), "version": version, "created_ms": now})
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
                    json_text(list(bookmark.event_ids)),
                    bookmark.importance,
                    bookmark.type,
                    bookmark.created_ms,
                    bookmark.last_relevant_ms,
                ),
            )

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
        with self.transaction():
            return _touch(self._exec, stale, now_ms)

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

    # -- housekeeping --------------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        q = self._query
        levels = {r[0]: r[1] for r in q("SELECT level, COUNT(*) FROM toc_nodes GROUP BY level")}
        projects = project_ids(q)
        span = time_span(q, projects)  # each project's two index ends, not a scan of the table
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
            "projects": len(projects),
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
