"""The pipeline part of the SQLite store: grips, segments, rollup marks, search documents.

The ``PipelineStore`` capability (``store/base.py``) on one SQLite file; ``store/postgres/pipeline.py``
is its PostgreSQL mirror (which adds what several concurrent workers need). Writes join the
caller's ``transaction()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memtoc.errors import NotFoundError, StoreError
from memtoc.model import (
    Event,
    Grip,
)
from memtoc.store.base import DirtyPeriod, DocRow, SegmentRecord
from memtoc.store.codecs import (
    GRIP_COLS,
    SEGMENT_COLS,
    event_from_row,
    grip_from_row,
    segment_from_row,
    segment_row,
)
from memtoc.store.event_checks import (
    storable_text,
)
from memtoc.store.sqlite.base import SqliteBase
from memtoc.store.sqlite.sessions import (
    session_scope,
)

EVENT_COLS = (
    "seq, event_id, ts_ms, project, session_id, agent, event_type, role, text, metadata, "
    "source, source_pos"
)


class SqlitePipeline(SqliteBase):
    """Grips and the ``PipelineStore`` capability on SQLite."""

    EVENT_COLS = EVENT_COLS

    # -- grips ------------------------------------------------------------------------------------
    def put_grips(self, grips: Sequence[Grip]) -> int:
        with self.transaction():
            cur = self._conn.executemany(
                f"INSERT OR IGNORE INTO grips({GRIP_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
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
        rows = self._query(f"SELECT {GRIP_COLS} FROM grips WHERE grip_id = ?", (grip_id,))
        if not rows:
            raise NotFoundError("grip", grip_id)
        return grip_from_row(rows[0])

    def grips_for_node(self, project: str, node_id: str) -> list[Grip]:
        rows = self._query(
            f"SELECT {GRIP_COLS} FROM grips WHERE project = ? AND toc_node_id = ? "
            "ORDER BY ts_ms, grip_id",
            (project, node_id),
        )
        return [grip_from_row(r) for r in rows]

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
            f"SELECT {SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
            (project, session_id),
        )
        return segment_from_row(rows[0]) if rows else None

    def segment_before(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> SegmentRecord | None:
        rows = self._query(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "AND (start_ms < ? OR (start_ms = ? AND first_event_id <= ?)) "
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
            (project, session_id, ts_ms, ts_ms, event_id),
        )
        return segment_from_row(rows[0]) if rows else None

    def segments_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[SegmentRecord]:
        rows = self._query(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
            "AND (start_ms > ? OR (start_ms = ? AND first_event_id >= ?)) "
            "ORDER BY start_ms, first_event_id",
            (project, session_id, ts_ms, ts_ms, event_id),
        )
        return [segment_from_row(r) for r in rows]

    def session_events_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[tuple[int, Event]]:
        scope = session_scope(self._query, session_id, project, ts_ms, None, table=self._spans)
        if scope is None:
            return []
        where, params = scope
        rows = self._query(
            f"SELECT {EVENT_COLS} FROM events WHERE {' AND '.join(where)} "
            f"AND (ts_ms > ? OR (ts_ms = ? AND event_id >= ?)) AND {self._live} "
            "ORDER BY ts_ms, event_id",
            (*params, ts_ms, ts_ms, event_id),
        )
        return [(r[0], event_from_row(r)) for r in rows]

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
                f"INSERT OR REPLACE INTO segments({SEGMENT_COLS}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [segment_row(r) for r in upserts],
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
            f"SELECT {SEGMENT_COLS} FROM segments WHERE built = 0 AND error IS NULL "
            "ORDER BY project, session_id, start_ms, first_event_id LIMIT ?",
            (limit,),
        )
        return [segment_from_row(r) for r in rows]

    def get_segment(self, project: str, node_id: str) -> SegmentRecord:
        rows = self._query(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE project = ? AND node_id = ?",
            (project, node_id),
        )
        if not rows:
            raise NotFoundError("segment", f"{node_id} (project {project})")
        return segment_from_row(rows[0])

    def segment_member_events(self, project: str, node_id: str) -> list[Event]:
        cols = ", ".join(f"e.{c.strip()}" for c in EVENT_COLS.split(","))
        rows = self._query(
            f"SELECT {cols} FROM segment_events s JOIN events e ON e.seq = s.seq "
            "WHERE s.project = ? AND s.node_id = ? ORDER BY e.ts_ms, e.event_id",
            (project, node_id),
        )
        return [event_from_row(r) for r in rows]

    def previous_segment(self, segment: SegmentRecord) -> SegmentRecord | None:
        rows = self._query(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE project = ? AND session_id = ? "
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
        return segment_from_row(rows[0]) if rows else None

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
            f"SELECT {SEGMENT_COLS} FROM segments WHERE error IS NOT NULL "
            "ORDER BY project, start_ms LIMIT ?",
            (limit,),
        )
        return [segment_from_row(r) for r in rows]

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

    def clear_dirty(self, project: str, node_id: str, seq: int) -> None:
        with self.transaction():
            self._exec(
                "DELETE FROM rollup_dirty WHERE project = ? AND node_id = ? AND seq <= ?",
                (project, node_id, seq),
            )

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
