"""Forgetting in the PostgreSQL store (``ForgetStore``, ``store/capabilities.py``).

The same contract as ``store/sqlite/forget.py`` (``memtoc.forgetting`` decides what to forget and
re-derives the TOC): a forgotten event stays as a tombstone row (``0010_forget``: text, exact text
and metadata purged, ``forgotten_ms`` set, listed in ``tombstones``) so re-importing it is still a
duplicate, and every read of events leaves tombstones out (``postgres/base.LIVE``); its
``event_search`` row, segment membership, vectors, the bookmarks citing it, and every stored
version of the nodes built from it are deleted.

Physical purge. PostgreSQL never overwrites a row in place: a deleted or updated row's old
version stays in the table's pages until ``VACUUM`` removes it, and plain ``VACUUM`` only marks
the space reusable. So ``scrub`` runs ``VACUUM (FULL, ANALYZE)`` on every table a forget deletes
from or updates (``SCRUBBED``): each is rewritten into new files holding only live rows (their
TOAST tables and indexes too), and the old files are removed. That takes each table's
``ACCESS EXCLUSIVE`` lock while it is rewritten, so other sessions' reads and writes of it wait
(seconds on a large store). ``VACUUM FULL`` copies a deleted row version that a running
transaction's snapshot can still see, so the scrub first waits for every other session of the
database holding a snapshot from before the forget (``pg_stat_activity.backend_xmin``: readers,
autovacuum's ``ANALYZE``) — as SQLite's scrub waits for WAL readers — and one that outlasts the
wait leaves the scrub pending (``wal_truncated: false``, ``status``: ``forget_scrub_pending``)
until a later ``process`` finishes it. What the server keeps outside the tables is the operator's: the
write-ahead log until its segments are recycled (``CHECKPOINT``; archived WAL and replicas keep
it), base backups and ``pg_dump`` files taken before the forget, and the filesystem's freed blocks
— docs/architecture.md, "Forget".
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from memtoc.errors import StoreError
from memtoc.store.capabilities import DOC_KINDS, EventRef, ScrubReport
from memtoc.store.postgres.base import LIVE, PgBase

SCRUBBED: tuple[str, ...] = (
    "events",
    "event_search",
    "segment_events",
    "segments",
    "toc_nodes",
    "toc_node_versions",
    "grips",
    "docs",
    "vectors",
    "bookmarks",
)
"""The tables a forget deletes from or updates: each holds, or indexes, the forgotten text."""
PENDING_KEY = "forget_scrub_pending"
"""``meta`` key: when a forget whose scrub waits for an older snapshot to end ran (ms)."""
SNAPSHOT_WAIT_S = 30.0
"""How long a scrub waits for sessions reading a snapshot from before the forget."""
_KEPT = re.compile(r"(\d+) dead row versions cannot be removed yet")
"""``VACUUM VERBOSE``'s count of row versions a snapshot still needs (the server's messages in
English: ``lc_messages`` C or en; in another language the count is not read and the scrub stays
pending, visibly, rather than claim a purge it cannot check)."""


def _like(word: str) -> str:
    """An ``ILIKE`` pattern matching ``word`` anywhere, its wildcards escaped."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class PgForget(PgBase):
    """The PostgreSQL store's half of ``memtoc.forgetting``."""

    ROW_LOCK = " FOR UPDATE"
    """``update_audit_counts`` locks the row it merges into (``store/forget_audit.py``)."""

    def select_events(
        self,
        *,
        event_ids: Sequence[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        contains: Sequence[str] | None = None,
    ) -> list[EventRef]:
        """``ForgetStore.select_events``; ``contains`` matches case-insensitively (``ILIKE``)."""
        clauses: list[str] = []
        args: list[Any] = []
        if event_ids is not None:
            ids = list(dict.fromkeys(event_ids))
            if not ids:
                return []
            clauses.append("event_id = ANY(%s)")
            args.append(ids)
        for clause, value in (
            ("project = %s", project),
            ("session_id = %s", session_id),
            ("ts_ms >= %s", since_ms),
            ("ts_ms < %s", until_ms),
        ):
            if value is not None:
                clauses.append(clause)
                args.append(value)
        for word in contains or ():
            clauses.append("(text ILIKE %s OR metadata ILIKE %s)")
            args += [_like(word), _like(json.dumps(word, ensure_ascii=False)[1:-1])]
        if contains:
            clauses.append(LIVE)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self._query(
            "SELECT seq, event_id, project, session_id, ts_ms, forgotten_ms FROM events"
            f"{where} ORDER BY ts_ms, seq",
            args,
        )
        return [EventRef(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5] is not None) for r in rows]

    def segments_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        rows = self._query(
            "SELECT seq, project, node_id FROM segment_events WHERE seq = ANY(%s)", (list(seqs),)
        )
        return {int(r[0]): (r[1], r[2]) for r in rows}

    def bookmarks_citing(self, event_ids: Sequence[str]) -> list[str]:
        if not event_ids:
            return []
        rows = self._query(
            "SELECT bookmark_id FROM bookmarks WHERE event_ids::jsonb ?| %s::text[] "
            "ORDER BY bookmark_id",
            (list(event_ids),),
        )
        return [r[0] for r in rows]

    @contextmanager
    def forget_guard(self) -> Iterator[None]:
        """Nothing to set: deleted rows are erased by ``scrub`` (module docstring)."""
        yield

    def unfile_events(self, seqs: Sequence[int]) -> int:
        with self.transaction():
            self._exec("DELETE FROM event_search WHERE seq = ANY(%s)", (list(seqs),))
            return self._exec("DELETE FROM segment_events WHERE seq = ANY(%s)", (list(seqs),))

    def tombstone_events(self, seqs: Sequence[int], now_ms: int) -> int:
        with self.transaction():
            done = self._exec(
                "UPDATE events SET text = '', text_exact = NULL, metadata = '{}', "
                f"forgotten_ms = %s WHERE seq = ANY(%s) AND {LIVE}",
                (now_ms, list(seqs)),
            )
            self._exec(
                "INSERT INTO tombstones(event_id, forgotten_ms, reason) "
                "SELECT event_id, forgotten_ms, 'forget' FROM events WHERE seq = ANY(%s) "
                "ON CONFLICT (event_id) DO UPDATE SET forgotten_ms = excluded.forgotten_ms, "
                "reason = excluded.reason",
                (list(seqs),),
            )
        return done

    def purge_event_vectors(self, events: Sequence[EventRef]) -> int:
        if not events:
            return 0
        return self._exec(
            "DELETE FROM vectors v USING unnest(%s::text[], %s::text[]) AS k(project, item_id) "
            "WHERE v.kind = 'event' AND v.project = k.project AND v.item_id = k.item_id",
            ([e.project for e in events], [e.event_id for e in events]),
        )

    def purge_tombstone_vectors(self) -> int:
        return self._exec(
            "DELETE FROM vectors v USING events e WHERE v.kind = 'event' "
            "AND v.item_id = e.event_id AND e.forgotten_ms IS NOT NULL"
        )

    def purge_stale_doc_vectors(self) -> tuple[int, set[str]]:
        """Vectors of docs gone, or computed from other text (``source_md5``)."""
        rows = self._query(
            "DELETE FROM vectors v WHERE v.kind = ANY(%s) AND NOT EXISTS (SELECT 1 FROM docs d "
            "WHERE d.kind = v.kind AND d.project = v.project AND d.doc_id = v.item_id "
            "AND md5(d.text) IS NOT DISTINCT FROM v.source_md5) RETURNING v.embedder",
            (list(DOC_KINDS),),
        )
        return len(rows), {r[0] for r in rows}

    def vector_embedders(self) -> set[str]:
        return {r[0] for r in self._query("SELECT DISTINCT embedder FROM vectors")}

    def purge_node_versions(self, project: str, node_ids: Sequence[str]) -> int:
        if not node_ids:
            return 0
        return self._exec(
            "DELETE FROM toc_node_versions v WHERE v.project = %s AND v.node_id = ANY(%s) "
            "AND v.version < COALESCE((SELECT n.version FROM toc_nodes n WHERE n.project = "
            "v.project AND n.node_id = v.node_id), 2147483647)",
            (project, list(dict.fromkeys(node_ids))),
        )

    # -- physical purge ---------------------------------------------------------------------------
    def scrub(self, now_ms: int) -> ScrubReport:
        """``VACUUM (FULL, ANALYZE)`` of every table in ``SCRUBBED`` (module docstring), once no
        other session of this database holds a snapshot from before the forget (``VACUUM FULL``
        keeps the row versions such a snapshot can still see); outside any transaction. A
        session that outlasts ``SNAPSHOT_WAIT_S`` leaves the scrub pending (``meta``,
        ``wal_truncated: false``), finished by ``finish_scrub`` (every ``process``)."""
        if self.in_transaction:
            raise StoreError(f"{self.location}: forget: VACUUM cannot run inside a transaction")
        started = time.perf_counter()
        self.set_meta(PENDING_KEY, str(now_ms))
        done = self.finish_scrub()
        return ScrubReport(
            tables=len(SCRUBBED), wal_truncated=done, seconds=time.perf_counter() - started
        )

    def scrub_pending(self) -> int | None:
        value = self.get_meta(PENDING_KEY)
        return int(value) if value else None

    def finish_scrub(self, *, wait: bool = True) -> bool:
        """Rewrite the tables once no older snapshot is held (waiting up to ``SNAPSHOT_WAIT_S``
        unless ``wait`` is False); whether no scrub is pending any more. A table whose rewrite
        had to keep dead row versions (a snapshot taken meanwhile can be older than the forget:
        a snapshot's horizon is the oldest transaction running on the whole server) is
        rewritten again until none is kept, or the scrub stays pending."""
        if self.scrub_pending() is None:
            return True
        horizon = self._query("SELECT pg_current_xact_id()::xid::text")[0][0]
        deadline = time.monotonic() + (SNAPSHOT_WAIT_S if wait else 0.0)
        while self._older_snapshots(horizon):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        for table in SCRUBBED:
            while self._vacuum_full(table):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)
        self._exec("DELETE FROM meta WHERE key = %s", (PENDING_KEY,))
        return True

    def _vacuum_full(self, table: str) -> int:
        """``VACUUM (FULL, ANALYZE, VERBOSE)`` of ``table``; how many dead row versions it had to
        keep (from its report; -1 when the report could not be read: not known to be clean)."""
        kept: list[int] = []

        def notice(diag: psycopg.errors.Diagnostic) -> None:
            found = _KEPT.search(f"{diag.message_primary or ''} {diag.message_detail or ''}")
            if found and f'.{table}"' in (diag.message_primary or ""):
                kept.append(int(found.group(1)))

        try:
            with self._pool.connection() as conn:
                conn.add_notice_handler(notice)
                try:
                    conn.execute(f"VACUUM (FULL, ANALYZE, VERBOSE) {table}")
                finally:
                    conn.remove_notice_handler(notice)
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: forget: VACUUM {table}: {exc}") from exc
        return sum(kept) if kept else -1

    def _older_snapshots(self, horizon: str) -> int:
        """Other sessions of this database whose snapshot may predate transaction ``horizon``."""
        rows = self._query(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL "
            "AND age(backend_xmin) >= age(%s::xid)",
            (horizon,),
        )
        return int(rows[0][0])
