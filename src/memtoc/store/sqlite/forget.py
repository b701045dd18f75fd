"""Forgetting in the SQLite store: tombstones, physical purge, audit rows.

The service (``memtoc.forgetting``) decides *what* to forget and re-derives the TOC; these
methods do the store-level work, each joining the caller's ``store.transaction()``:

- ``select_events``: the events a selector names (tombstones included, flagged), without text;
  ``contains`` selects the live events whose text or metadata holds every given word (a literal,
  ASCII-case-insensitive scan: every match, no ranking, no cap — see ``memtoc.forgetting``).
- ``unfile_events``: take events out of their segments (``segment_events``) and out of the
  contentless ``events_fts``. A contentless FTS5 table can only delete a row when given the exact
  values it indexed; SQLite here is 3.40 (``contentless_delete=1`` needs 3.43), so the delete
  passes ``search_text(text)`` — what the worker indexes. Rows indexed from the plain text (the
  ``0005`` migration's re-index) are covered too: ``search_text`` is the text plus extra forms, and
  FTS5 deletes per (term, row), so the extra terms only add no-op delete markers.
- ``tombstone_events``: the row stays (id, seq, time, project, session, agent, type, role, source)
  with ``text = ''``, ``metadata = '{}'`` and ``forgotten_ms`` set: exactly-once import still holds
  (``INSERT OR IGNORE`` sees the id) and the outbox still tiles the log.
- ``purge_event_vectors``, ``purge_stale_doc_vectors``, ``purge_node_versions``: derived copies of
  the text (vectors, ``doc_vectors.text``, old TOC node versions).
``secure_delete`` wraps the whole operation in ``PRAGMA secure_delete = ON`` (the store sets it on
every writing connection too), so every freed cell and page is overwritten with zeros. What
SQLite never frees — copies left in rebalanced pages' free space — and the WAL are handled by
``store/sqlite/scrub.py``, which ends every forget: after it the forgotten bytes are in neither the
database file nor the WAL, nor in a backup taken afterwards (the online backup copies pages, free
ones included). ``memtoc compact`` (VACUUM) also shrinks the file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from memtoc.errors import StoreError
from memtoc.model import Event
from memtoc.store.capabilities import EventRef, ScrubReport
from memtoc.store.sqlite import scrub as sqlite_scrub
from memtoc.store.sqlite.base import SqliteBase
from memtoc.store.sqlite.scans import project_ids
from memtoc.store.sqlite.sessions import session_scope

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore
from memtoc.text.fts_text import search_text

_CHUNK = 500


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


def _like(word: str) -> str:
    """A ``LIKE`` pattern matching ``word`` anywhere, its wildcards escaped."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SqliteForget(SqliteBase):
    """``ForgetStore`` and ``ForgetLogged`` for ``SqliteStore``; the scrub is
    ``store/sqlite/scrub.py``'s."""

    def _store(self) -> SqliteStore:
        return cast("SqliteStore", self)

    def _forget_run(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: forget: {exc}") from exc

    # -- selection -------------------------------------------------------------------------------------

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
        """Events matching *every* given filter (``since`` inclusive, ``until`` exclusive), in time
        order. ``event_ids`` None means "any id"; an empty sequence selects nothing. ``contains``:
        live events whose text or metadata holds each of these words (``LIKE``: ASCII letters
        match in any case, other characters exactly; in metadata the word as JSON escapes it)."""
        clauses: list[str] = []
        args: list[Any] = []
        if session_id is not None:  # within the session's span (store/sqlite/sessions.py)
            scope = session_scope(
                self._query, session_id, project, since_ms, until_ms, table=self._spans
            )
            if scope is None:
                return []
            clauses, args = scope
            project = since_ms = until_ms = None
        elif project is None and (since_ms is not None or until_ms is not None):
            # a time window of every project: each project's range of the project index (there
            # is no time-only index: store/sqlite/scans.py)
            names = project_ids(self._query)
            if not names:
                return []
            clauses.append(f"project IN ({','.join('?' * len(names))})")
            args.extend(names)
        for clause, value in (
            ("project = ?", project),
            ("ts_ms >= ?", since_ms),
            ("ts_ms < ?", until_ms),
        ):
            if value is not None:
                clauses.append(clause)
                args.append(value)
        for word in contains or ():
            clauses.append("(text LIKE ? ESCAPE '\\' OR metadata LIKE ? ESCAPE '\\')")
            args += [_like(word), _like(json.dumps(word, ensure_ascii=False)[1:-1])]
        if contains and self._live != "1":
            clauses.append(self._live)
        cols = "SELECT seq, event_id, project, session_id, ts_ms, forgotten_ms FROM events"
        rows: list[Any] = []
        with self._lock:
            if event_ids is None:
                where = " WHERE " + " AND ".join(clauses) if clauses else ""
                rows = self._forget_run(cols + where, args)
            else:
                for chunk in _chunks(list(dict.fromkeys(event_ids))):
                    where = " AND ".join([f"event_id IN ({','.join('?' * len(chunk))})", *clauses])
                    rows.extend(self._forget_run(f"{cols} WHERE {where}", [*chunk, *args]))
        rows.sort(key=lambda r: (r[4], r[0]))
        return [EventRef(r[0], r[1], r[2], r[3], r[4], r[5] is not None) for r in rows]

    def segments_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        """``seq → (project, segment node id)`` for the given events that are filed in a segment."""
        out: dict[int, tuple[str, str]] = {}
        with self._lock:
            for chunk in _chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                for seq, project, node_id in self._forget_run(
                    f"SELECT seq, project, node_id FROM segment_events WHERE seq IN ({marks})",
                    chunk,
                ):
                    out[seq] = (project, node_id)
        return out

    def bookmarks_citing(self, event_ids: Sequence[str]) -> list[str]:
        """Ids of bookmarks whose source events include any of ``event_ids``."""
        found: set[str] = set()
        with self._lock:
            for chunk in _chunks(list(event_ids)):
                marks = ",".join("?" * len(chunk))
                rows = self._forget_run(
                    "SELECT DISTINCT b.bookmark_id FROM bookmarks b, json_each(b.event_ids) j "
                    f"WHERE j.value IN ({marks})",
                    chunk,
                )
                found.update(r[0] for r in rows)
        return sorted(found)

    # -- purge -----------------------------------------------------------------------------------------

    @contextmanager
    def forget_guard(self) -> Iterator[None]:
        """Run the body with ``PRAGMA secure_delete = ON`` (freed content overwritten with zeros)."""
        with self._lock:
            before = self._forget_run("PRAGMA secure_delete")[0][0]
            self._forget_run("PRAGMA secure_delete = ON")
            try:
                yield
            finally:
                self._forget_run(f"PRAGMA secure_delete = {int(before)}")

    def unfile_events(self, seqs: Sequence[int]) -> int:
        """Remove filed events from ``segment_events`` and ``events_fts``; return how many were filed.

        Must run before ``tombstone_events`` (the FTS delete needs the text that was indexed)."""
        removed = 0
        with self.transaction():
            for chunk in _chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                rows = self._forget_run(
                    "SELECT e.seq, e.text FROM segment_events s JOIN events e ON e.seq = s.seq "
                    f"WHERE s.seq IN ({marks})",
                    chunk,
                )
                try:
                    self.connection.executemany(
                        "INSERT INTO events_fts(events_fts, rowid, text) VALUES ('delete', ?, ?)",
                        [(seq, search_text(text)) for seq, text in rows],
                    )
                except sqlite3.Error as exc:
                    raise StoreError(f"{self.path}: forget: cannot unindex events: {exc}") from exc
                self._forget_run(f"DELETE FROM segment_events WHERE seq IN ({marks})", chunk)
                removed += len(rows)
        return removed

    def tombstone_events(self, seqs: Sequence[int], now_ms: int) -> int:
        """Purge the text and metadata of live events and mark them forgotten; return how many."""
        done = 0
        with self.transaction():
            for chunk in _chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                cur = self.connection.execute(
                    "UPDATE events SET text = '', metadata = '{}', forgotten_ms = ? "
                    f"WHERE seq IN ({marks}) AND forgotten_ms IS NULL",
                    [now_ms, *chunk],
                )
                done += max(cur.rowcount, 0)
                # the tombstone list (table from 0003) travels with `memtoc migrate-store`
                self.connection.execute(
                    "INSERT OR REPLACE INTO tombstones(event_id, forgotten_ms, reason) "
                    f"SELECT event_id, forgotten_ms, 'forget' FROM events WHERE seq IN ({marks})",
                    chunk,
                )
        return done

    def insert_tombstones(self, events: Sequence[tuple[str, int, str, str]], now_ms: int) -> int:
        """Record events the store never held as tombstones — ``(event_id, ts_ms, project,
        session_id)`` from the forget log — so re-importing them is a duplicate; return how many were
        new. They go through the ordinary append (so an outbox entry covers their seqs, as ``verify``
        requires), and that entry is done at once: there is nothing to file."""
        rows = [
            Event(
                event_id,
                session_id,
                project,
                "unknown",
                ts_ms,
                "system",
                "system",
                "",
                {},
                "forget-log",
            )
            for event_id, ts_ms, project, session_id in events
        ]
        if not rows:
            return 0
        with self.transaction():
            before = int(self._forget_run("SELECT COALESCE(MAX(seq), 0) FROM events")[0][0])
            appended = self._store().append_events(rows)
            seqs = [
                r[0] for r in self._forget_run("SELECT seq FROM events WHERE seq > ?", (before,))
            ]
            self.tombstone_events(seqs, now_ms)
            if appended.outbox_entry_id is not None:
                self._store().complete_outbox([appended.outbox_entry_id])
        return len(seqs)

    def logged_tombstones(self) -> list[tuple[str, int, str, str, int]]:
        """Every tombstone: ``(event_id, ts_ms, project, session_id, forgotten_ms)``."""
        if self._live == "1":
            return []
        rows = self._forget_run(
            "SELECT event_id, ts_ms, project, session_id, forgotten_ms FROM events "
            "WHERE forgotten_ms IS NOT NULL ORDER BY forgotten_ms, seq",
        )
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def purge_event_vectors(self, events: Sequence[EventRef]) -> int:
        """Delete every embedder's vectors of the events; return how many rows went."""
        with self.transaction():
            cur = self.connection.executemany(
                "DELETE FROM vectors WHERE kind = 'event' AND project = ? AND item_id = ?",
                [(e.project, e.event_id) for e in events],
            )
            return max(cur.rowcount, 0)

    def purge_tombstone_vectors(self) -> int:
        """Delete event vectors of any tombstone (an embedder that ran over the log after a forget,
        e.g. ``rebuild --vectors``, may have embedded their empty text)."""
        with self.transaction():
            cur = self.connection.execute(
                "DELETE FROM vectors WHERE kind = 'event' AND item_id IN "
                "(SELECT event_id FROM events WHERE forgotten_ms IS NOT NULL)"
            )
            return max(cur.rowcount, 0)

    def purge_stale_doc_vectors(self) -> tuple[int, set[str]]:
        """Delete vectors (and their ``doc_vectors`` text) of docs that are gone or whose text
        changed; return how many and the embedders touched. The embedding step re-embeds the changed
        docs on its next run; until then they are found by BM25 only."""
        rows = self._forget_run(
            "SELECT v.kind, v.project, v.doc_id, v.embedder FROM doc_vectors v LEFT JOIN docs d "
            "ON d.kind = v.kind AND d.project = v.project AND d.doc_id = v.doc_id "
            "WHERE d.doc_id IS NULL OR d.text != v.text",
        )
        if not rows:
            return 0, set()
        with self.transaction():
            self.connection.executemany(
                "DELETE FROM vectors WHERE kind = ? AND project = ? AND item_id = ? AND embedder = ?",
                rows,
            )
            self.connection.executemany(
                "DELETE FROM doc_vectors WHERE kind = ? AND project = ? AND doc_id = ? "
                "AND embedder = ?",
                rows,
            )
        return len(rows), {r[3] for r in rows}

    def vector_embedders(self) -> set[str]:
        """Names of the embedders that have vectors in the self."""
        return {r[0] for r in self._forget_run("SELECT DISTINCT embedder FROM vectors")}

    def purge_node_versions(self, project: str, node_ids: Sequence[str]) -> int:
        """Delete every version of the nodes except the latest (all of them for a retired node)."""
        deleted = 0
        with self.transaction():
            for node_id in dict.fromkeys(node_ids):
                cur = self.connection.execute(
                    "DELETE FROM toc_node_versions WHERE project = ?1 AND node_id = ?2 AND version < "
                    "COALESCE((SELECT version FROM toc_nodes WHERE project = ?1 AND node_id = ?2), "
                    "1 << 62)",
                    (project, node_id),
                )
                deleted += max(cur.rowcount, 0)
        return deleted

    # -- scrub (store/sqlite/scrub.py) --------------------------------------------------------------
    def scrub(self, now_ms: int) -> ScrubReport:
        return sqlite_scrub.scrub(self._store(), now_ms)

    def scrub_pending(self) -> int | None:
        return sqlite_scrub.pending(self._store())

    def finish_scrub(self, *, wait: bool = True) -> bool:
        return sqlite_scrub.finish_pending(self._store(), wait=wait)
