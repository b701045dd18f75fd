"""The team store: PostgreSQL (``psycopg`` 3 + ``psycopg_pool``), full text in ``tsvector``, vectors
in pgvector. ``PostgresStore(url)`` implements ``Store`` and ``PipelineStore`` with the SQLite store's
semantics (the contract suite runs on both), and lets several processes on several machines append
and drain the pipeline together:

- **Appends.** An append inserts its new events (duplicates by ``event_id`` are counted, not
  stored) and one outbox entry ``{first_seq, last_seq}`` in one transaction. Seqs are allocated
  under a short advisory lock held only for the ``INSERT`` (not the commit), so each append owns
  its range outright even with concurrent writers; commits still run in parallel.
- **Claims.** ``claim_outbox`` takes pending entries ``FOR UPDATE SKIP LOCKED`` and leases them
  (``outbox_lease_ms``); an entry not completed within the lease is claimable again. It never hands
  out an entry whose (project, session) keys overlap an entry leased to a worker that has not
  finished: the segmenter reads a session's state before writing it, so a session must be filed by
  one worker at a time. ``complete_outbox`` refuses to complete an entry twice, so a worker whose
  lease expired while another redid the entry rolls its duplicate effect back.
- **Node versions.** ``put_node`` takes an advisory lock on the node, so two workers writing the same
  node serialise and the second sees the first's version (equal content writes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memtoc.errors import NotFoundError, StoreError
from memtoc.model import AppendResult, Bookmark, Event, JsonValue, OutboxEntry, TocNode
from memtoc.store.codecs import (
    OUTBOX_COLS,
    event_from_row,
    json_sorted,
    node_data,
    node_fields,
    node_from_row,
    outbox_entry_from_row,
)
from memtoc.store.event_checks import Stored, classify, out_of_range_count, row_problem
from memtoc.store.forget_audit import ForgetAudit
from memtoc.store.postgres.base import (
    APPEND_LOCK,
    CLAIM_LOCK,
    LIVE,
    SESSION_LOCKERS,
    pg_text,
)
from memtoc.store.postgres.forget import PgForget
from memtoc.store.postgres.pipeline import EVENT_COLS, PgPipeline
from memtoc.store.postgres.projects import PgProjects
from memtoc.store.postgres.search import PgSearch
from memtoc.store.postgres.upkeep import PgUpkeep
from memtoc.store.postgres.vectors import PgVectors
from memtoc.store.reads import LATEST, SharedReads

if TYPE_CHECKING:
    from memtoc.store.derived import DerivedStore

_SET_LATEST = (
    "INSERT INTO toc_nodes(project, node_id, version, level, start_ms, end_ms, parent_id) "
    "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (project, node_id) DO UPDATE "
    "SET version = excluded.version, level = excluded.level, start_ms = excluded.start_ms, "
    "end_ms = excluded.end_ms, parent_id = excluded.parent_id"
)


def _session_key(project: str, session_id: str) -> str:
    return f"{project}\x1f{session_id}"


class PostgresStore(
    PgPipeline, PgSearch, PgVectors, PgProjects, PgForget, PgUpkeep, SharedReads, ForgetAudit
):
    """``Store`` + ``PipelineStore`` on a PostgreSQL database (``postgresql://`` URL)."""

    # -- events -------------------------------------------------------------------------------------
    def append_events(
        self,
        events: Sequence[Event],
        checkpoints: Mapping[str, JsonValue] | None = None,
    ) -> AppendResult:
        cols: list[list[Any]] = [[] for _ in range(12)]
        refused = False
        for e in events:
            if row_problem(e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type,
                           e.role) is not None:  # fmt: skip
                refused = True  # not sent; ``classify`` says why
                continue
            exact = None
            text = e.text
            if "\x00" in text:
                exact, text = json.dumps(text), pg_text(text)
            meta = json_sorted(dict(e.metadata)) if e.metadata else "{}"
            values = (
                e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type, e.role,
                text, exact, meta, e.source, e.source_pos,
            )  # fmt: skip
            for col, value in zip(cols, values, strict=True):
                col.append(value)
        job_values = [(job, json_sorted(value)) for job, value in (checkpoints or {}).items()]
        result = AppendResult()
        new: set[str] = set()
        with self.transaction():
            rows = self._insert_events(cols) if cols[0] else []
            result.inserted = len(rows)
            result.duplicates = len(events) - len(rows)
            if refused or result.duplicates:  # duplicates, conflicts or refused rows
                given = [
                    (e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type, e.role,
                     e.text)
                    for e in events
                ]  # fmt: skip
                classify(given, self._stored_for_classify, result)
            if rows:
                seqs = [int(r[0]) for r in rows]
                sessions = sorted({_session_key(r[1], r[2]) for r in rows})
                new = {str(r[1]) for r in rows} - self._registered
                if new:
                    self._ensure_projects(sorted(new))
                first, last = min(seqs), max(seqs)
                found = self._query(
                    "INSERT INTO outbox(kind, payload, first_seq, last_seq, sessions, created_ms) "
                    "VALUES ('events', %s, %s, %s, %s, %s) RETURNING entry_id",
                    (
                        json_sorted({"first_seq": first, "last_seq": last}),
                        first,
                        last,
                        sessions,
                        self.clock.now_ms(),
                    ),
                )
                result.outbox_entry_id = int(found[0][0])
            now = self.clock.now_ms()
            for job, value in job_values:
                self._exec(
                    "INSERT INTO checkpoints(job, value, updated_ms) VALUES (%s, %s, %s) "
                    "ON CONFLICT (job) DO UPDATE SET value = excluded.value, "
                    "updated_ms = excluded.updated_ms",
                    (job, value, now),
                )
        self._registered |= new  # committed
        return result

    def _insert_events(self, cols: list[list[Any]]) -> list[tuple[Any, ...]]:
        """Insert the new events; seqs are allocated under ``APPEND_LOCK`` (see the module doc).

        Events already stored are filtered out before the insert, so duplicates burn no seqs;
        ``ON CONFLICT`` covers a concurrent writer inserting the same event meanwhile.
        """
        if self._tx.conn is not None:  # always, inside append_events' transaction
            SESSION_LOCKERS.add(self._tx.conn)
        self._exec("SELECT pg_advisory_lock(%s)", (APPEND_LOCK,))
        rows = self._query(
            "INSERT INTO events(event_id, ts_ms, project, session_id, agent, event_type, role, "
            "text, text_exact, metadata, source, source_pos) "
            "SELECT u.event_id, u.ts_ms, u.project, u.session_id, u.agent, u.event_type, u.role, "
            "u.text, u.text_exact, u.metadata, u.source, u.source_pos FROM unnest("
            "%s::text[], %s::int8[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS "
            "u(event_id, ts_ms, project, session_id, agent, event_type, role, text, text_exact, "
            "metadata, source, source_pos, ord) "
            "WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = u.event_id) "
            "ORDER BY u.ord ON CONFLICT (event_id) DO NOTHING RETURNING seq, project, session_id",
            cols,
        )
        self._exec("SELECT pg_advisory_unlock(%s)", (APPEND_LOCK,))
        if self._tx.conn is not None:
            SESSION_LOCKERS.discard(self._tx.conn)
        return rows

    def _stored_for_classify(self, event_ids: list[str]) -> dict[str, Stored]:
        found: dict[str, Stored] = {}
        for row in self._query(
            f"SELECT event_id, ts_ms, session_id, event_type, role, text, text_exact, {LIVE} "
            "FROM events WHERE event_id = ANY(%s)",
            (event_ids,),
        ):
            text = json.loads(row[6]) if row[6] is not None else row[5]
            found[row[0]] = (int(row[1]), row[2], row[3], row[4], text, bool(row[7]))
        return found

    def get_events(self, event_ids: Iterable[str]) -> list[Event]:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return []
        rows = self._query(
            f"SELECT {EVENT_COLS} FROM events WHERE event_id = ANY(%s) AND {LIVE} "
            "ORDER BY ts_ms, seq",
            (ids,),
        )
        return [event_from_row(r) for r in rows]

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
        where: list[str] = [LIVE]
        params: list[Any] = []
        for clause, value in (
            ("project = %s", project),
            ("session_id = %s", session_id),
            ("ts_ms >= %s", since_ms),
            ("ts_ms < %s", until_ms),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        # Keyset pagination on (ts_ms, seq), as in the SQLite store: constant cost per page.
        order = "DESC" if descending else "ASC"
        cmp = "<" if descending else ">"
        remaining = limit
        cursor: tuple[int, int] | None = None
        while remaining is None or remaining > 0:
            size = 2_000 if remaining is None else min(2_000, remaining)
            clauses, args = list(where), list(params)
            if cursor is not None:
                clauses.append(f"(ts_ms, seq) {cmp} (%s, %s)")
                args.extend(cursor)
            text = f"SELECT {EVENT_COLS} FROM events WHERE " + " AND ".join(clauses)
            text += f" ORDER BY ts_ms {order}, seq {order} LIMIT {int(size)}"
            rows = self._query(text, args)
            for row in rows:
                yield event_from_row(row)
            if len(rows) < size:
                return
            cursor = (int(rows[-1][2]), int(rows[-1][0]))
            if remaining is not None:
                remaining -= len(rows)

    def events_by_seq(self, first_seq: int, last_seq: int) -> list[tuple[int, Event]]:
        rows = self._query(
            f"SELECT {EVENT_COLS} FROM events WHERE seq BETWEEN %s AND %s AND {LIVE} ORDER BY seq",
            (first_seq, last_seq),
        )
        return [(int(r[0]), event_from_row(r)) for r in rows]

    def session_neighbors(
        self,
        event: Event,
        *,
        before: int,
        after: int,
        window_ms: int | None = None,
        event_types: tuple[str, ...] | None = None,
    ) -> tuple[list[Event], list[Event]]:
        # one round trip (recall asks for the neighbours of each of its strongest hits): the
        # event itself (it exists), then its turns before and after in the session
        lo = event.ts_ms - window_ms if window_ms is not None else -(1 << 62)
        hi = event.ts_ms + window_ms if window_ms is not None else 1 << 62
        base = f"SELECT {EVENT_COLS} FROM events WHERE session_id = %s AND project = %s AND {LIVE} "
        only: tuple[object, ...] = ()
        if event_types:
            base += "AND event_type = ANY(%s) "
            only = (list(event_types),)
        rows = self._query(
            "WITH s AS MATERIALIZED (SELECT seq FROM events WHERE event_id = %s) "
            f"SELECT 0, x.* FROM (SELECT {EVENT_COLS} FROM events WHERE seq = (SELECT seq FROM s)) x "
            f"UNION ALL SELECT -1, x.* FROM ({base}AND (ts_ms, seq) < (%s, (SELECT seq FROM s)) "
            "AND ts_ms >= %s ORDER BY ts_ms DESC, seq DESC LIMIT %s) x "
            f"UNION ALL SELECT 1, x.* FROM ({base}AND (ts_ms, seq) > (%s, (SELECT seq FROM s)) "
            "AND ts_ms <= %s ORDER BY ts_ms, seq LIMIT %s) x",
            (event.event_id, event.session_id, event.project, *only, event.ts_ms, lo, before,
             event.session_id, event.project, *only, event.ts_ms, hi, after),
        )  # fmt: skip
        if not any(r[0] == 0 for r in rows):
            raise NotFoundError("event", event.event_id)
        ordered = sorted(rows, key=lambda r: (int(r[3]), int(r[1])))  # (ts_ms, seq)
        return [event_from_row(r[1:]) for r in ordered if r[0] == -1], [
            event_from_row(r[1:]) for r in ordered if r[0] == 1
        ]

    def count_events(self, project: str | None = None) -> int:
        if project is None:
            return int(self._query(f"SELECT COUNT(*) FROM events WHERE {LIVE}")[0][0])
        return int(
            self._query(f"SELECT COUNT(*) FROM events WHERE project = %s AND {LIVE}", (project,))[
                0
            ][0]
        )

    # -- outbox and checkpoints -----------------------------------------------------------------------
    def add_outbox(self, kind: str, payload: Mapping[str, JsonValue]) -> int:
        rows = self._query(
            "INSERT INTO outbox(kind, payload, created_ms) VALUES (%s, %s, %s) RETURNING entry_id",
            (kind, json_sorted(dict(payload)), self.clock.now_ms()),
        )
        return int(rows[0][0])

    def claim_outbox(self, worker_id: str, limit: int) -> list[OutboxEntry]:
        if limit <= 0:
            return []
        now = self.clock.now_ms()
        expired = now - self.outbox_lease_ms
        with self.transaction():
            self._exec("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            busy = {
                r[0]
                for r in self._query(
                    "SELECT DISTINCT unnest(sessions) FROM outbox WHERE status = 'pending' "
                    "AND claimed_ms IS NOT NULL AND claimed_ms > %s",
                    (expired,),
                )
            }
            candidates = self._query(
                f"SELECT {OUTBOX_COLS}, sessions FROM outbox WHERE status = 'pending' "
                "AND (claimed_ms IS NULL OR claimed_ms <= %s) ORDER BY entry_id "
                "LIMIT %s FOR UPDATE SKIP LOCKED",
                (expired, max(limit * 8, 64)),
            )
            taken: list[tuple[Any, ...]] = []
            for row in candidates:
                keys = set(row[7])
                if keys & busy:
                    continue  # a session another worker is filing: leave it to that worker
                taken.append(row)
                if len(taken) == limit:
                    break
            if taken:
                self._exec(
                    "UPDATE outbox SET claimed_by = %s, claimed_ms = %s, attempts = attempts + 1 "
                    "WHERE entry_id = ANY(%s)",
                    (worker_id, now, [r[0] for r in taken]),
                )
        return [outbox_entry_from_row(r, 1) for r in taken]

    def complete_outbox(self, entry_ids: Sequence[int]) -> None:
        ids = sorted(set(entry_ids))
        if not ids:
            return
        with self.transaction():
            done = self._exec(
                "UPDATE outbox SET status = 'done', done_ms = %s, error = NULL "
                "WHERE entry_id = ANY(%s) AND status <> 'done'",
                (self.clock.now_ms(), ids),
            )
            if done != len(ids):
                raise StoreError(
                    f"outbox entries {ids} were already completed (by another worker whose "
                    "lease outlived this one's?); this worker's effect is rolled back"
                )

    def fail_outbox(self, entry_id: int, error: str) -> None:
        self._exec(
            "UPDATE outbox SET status = 'failed', error = %s, claimed_ms = NULL "
            "WHERE entry_id = %s AND status = 'pending'",
            (pg_text(error[:4000]), entry_id),
        )

    def retry_failed_outbox(self) -> int:
        return self._exec(
            "UPDATE outbox SET status = 'pending', claimed_ms = NULL WHERE status = 'failed'"
        )

    def set_checkpoint(self, job: str, value: JsonValue) -> None:
        self._exec(
            "INSERT INTO checkpoints(job, value, updated_ms) VALUES (%s, %s, %s) "
            "ON CONFLICT (job) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
            (job, json_sorted(value), self.clock.now_ms()),
        )

    def list_checkpoints(self, prefix: str = "") -> dict[str, JsonValue]:
        rows = self._query(
            "SELECT job, value FROM checkpoints WHERE starts_with(job, %s) ORDER BY job", (prefix,)
        )
        return {r[0]: json.loads(r[1]) for r in rows}

    # -- TOC nodes ----------------------------------------------------------------------------------
    def put_node(self, node: TocNode) -> tuple[TocNode, bool]:
        with self.transaction():
            self._lock_key(f"node\x1f{node.project}\x1f{node.node_id}")
            rows = self._query(
                f"SELECT v.version, v.data {LATEST} WHERE n.project = %s AND n.node_id = %s",
                (node.project, node.node_id),
            )
            shape = (node.level, node.start_ms, node.end_ms, node.parent_id)
            if rows:
                latest = node_from_row(node.project, node.node_id, rows[0][0], rows[0][1])
                if latest.content_key() == node.content_key():
                    return latest, False
            top = self._query(
                "SELECT version, data FROM toc_node_versions WHERE project = %s AND node_id = %s "
                "ORDER BY version DESC LIMIT 1",
                (node.project, node.node_id),
            )
            if top and not rows:
                # No latest pointer (retired, or lost): a node equal to its last version gets its
                # pointer back instead of a copy; otherwise numbering continues after the versions.
                last = node_from_row(node.project, node.node_id, top[0][0], top[0][1])
                if last.content_key() == node.content_key():
                    self._exec(_SET_LATEST, (node.project, node.node_id, last.version, *shape))
                    return last, True
            version = int(top[0][0]) + 1 if top else 1
            now = self.clock.now_ms()
            self._exec(
                "INSERT INTO toc_node_versions(project, node_id, version, level, start_ms, end_ms, "
                "parent_id, data, created_ms) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (node.project, node.node_id, version, *shape, pg_text(node_data(node, now)), now),
            )
            self._exec(_SET_LATEST, (node.project, node.node_id, version, *shape))
        return TocNode(**{**node_fields(node), "version": version, "created_ms": now}), True

    # -- bookmarks ----------------------------------------------------------------------------------
    def put_bookmark(self, bookmark: Bookmark) -> None:
        self._exec(
            "INSERT INTO bookmarks(bookmark_id, project, content, event_ids, importance, type, "
            "created_ms, last_relevant_ms) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (bookmark_id) DO UPDATE SET project = excluded.project, "
            "content = excluded.content, event_ids = excluded.event_ids, "
            "importance = excluded.importance, type = excluded.type, "
            "created_ms = excluded.created_ms, last_relevant_ms = excluded.last_relevant_ms",
            (
                bookmark.bookmark_id,
                bookmark.project,
                pg_text(bookmark.content),
                json_sorted(list(bookmark.event_ids)),
                bookmark.importance,
                bookmark.type,
                bookmark.created_ms,
                bookmark.last_relevant_ms,
            ),
        )

    def touch_bookmarks(self, bookmark_ids: Sequence[str], now_ms: int) -> int:
        """Mark bookmarks as used at ``now_ms`` (``last_relevant_ms`` never moves back)."""
        return self._exec(
            "UPDATE bookmarks SET last_relevant_ms = %s "
            "WHERE bookmark_id = ANY(%s) AND last_relevant_ms < %s",
            (now_ms, list(dict.fromkeys(bookmark_ids)), now_ms),
        )

    def delete_bookmarks(self, bookmark_ids: Sequence[str]) -> int:
        """Delete bookmarks and their search documents; return how many existed."""
        with self.transaction():
            rows = self._query(
                "DELETE FROM bookmarks WHERE bookmark_id = ANY(%s) RETURNING project, bookmark_id",
                (list(dict.fromkeys(bookmark_ids)),),
            )
            for project, bid in rows:
                self._delete_docs("bookmark", project, [bid])
        return len(rows)

    # -- housekeeping -------------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        q = self._query
        levels: dict[str, JsonValue] = {
            r[0]: int(r[1]) for r in q("SELECT level, COUNT(*) FROM toc_nodes GROUP BY level")
        }
        span = q("SELECT MIN(ts_ms), MAX(ts_ms) FROM events")[0]
        return {
            "store": "postgres",
            "location": self.location,
            "durability": self.durability,
            "events": self.count_events(),
            "projects": int(q("SELECT COUNT(DISTINCT project) FROM events")[0][0]),
            "sessions": int(q("SELECT COUNT(DISTINCT session_id) FROM events")[0][0]),
            "first_event_ms": span[0],
            "last_event_ms": span[1],
            "events_out_of_range": out_of_range_count(q, span),
            "outbox": dict(self.outbox_counts()),
            "nodes": levels,
            "node_versions": int(q("SELECT COUNT(*) FROM toc_node_versions")[0][0]),
            "grips": int(q("SELECT COUNT(*) FROM grips")[0][0]),
            "bookmarks": int(q("SELECT COUNT(*) FROM bookmarks")[0][0]),
            "vectors": int(q("SELECT COUNT(*) FROM vectors")[0][0]),
            "vector_indexes": list(self.vector_indexes()),
            "bytes": int(q("SELECT pg_database_size(current_database())")[0][0]),
        }

    def derived(self) -> DerivedStore:
        """What ``verify`` and ``rebuild`` need of this store (``postgres/derived.py``)."""
        from memtoc.store.postgres.derived import PgDerived

        return PgDerived(self)

    def __enter__(self) -> PostgresStore:
        return self
