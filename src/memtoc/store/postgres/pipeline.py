"""The pipeline part of the PostgreSQL store: grips, segments, rollup marks, search documents.

The same semantics as ``SqliteStore``'s pipeline section, plus what several workers on several
machines need (SQLite has one writer at a time; PostgreSQL does not):

- ``get_segment`` inside a transaction reads the row ``FOR UPDATE``: a builder that checked the
  segment's membership holds it until it commits, so a concurrent re-segmentation waits and then
  queues the segment again instead of being overwritten by ``mark_segment_built``.
- ``unbuilt_segments`` leases what it returns (``build_lease_ms``) to this store object, skipping
  rows another worker is reading; other workers get other segments, and an expired lease (a worker
  that died) makes the segment available again. A lease only spreads the work: correctness comes
  from the row lock above and from ``put_node``'s content comparison.
- rollup marks are upserted in key order, so two transactions never wait on each other in a cycle.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from memtoc.errors import NotFoundError, StoreError
from memtoc.model import Event, Grip
from memtoc.store.base import DirtyPeriod, DocRow, SegmentRecord
from memtoc.store.codecs import (
    GRIP_COLS,
    SEGMENT_COLS,
    event_from_row,
    grip_from_row,
    segment_from_row,
    segment_row,
)
from memtoc.store.postgres.base import LIVE, PgBase, pg_text
from memtoc.store.postgres.text_index import EVENT_UPSERT, doc_row, event_params

EVENT_COLS = (
    "seq, event_id, ts_ms, project, session_id, agent, event_type, role, text, metadata, "
    "source, source_pos, text_exact"
)
_SEGMENT_UPDATE = ", ".join(
    f"{c.strip()} = excluded.{c.strip()}" for c in SEGMENT_COLS.split(",")[2:]
)


class PgPipeline(PgBase):
    """Grips and the ``PipelineStore`` capability on PostgreSQL."""

    EVENT_COLS = EVENT_COLS

    lease_owner: str = ""

    def _owner(self) -> str:
        if not self.lease_owner:
            self.lease_owner = uuid.uuid4().hex
        return self.lease_owner

    # -- grips --------------------------------------------------------------------------------------
    def put_grips(self, grips: Sequence[Grip]) -> int:
        if not grips:
            return 0
        with self.transaction():
            rows = self._query(
                f"INSERT INTO grips({GRIP_COLS}) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
                "%s::text[], %s::int8[], %s::text[], %s::text[], %s::text[]) "
                "ON CONFLICT (grip_id) DO NOTHING RETURNING 1",
                (
                    [g.grip_id for g in grips],
                    [g.project for g in grips],
                    [pg_text(g.excerpt) for g in grips],
                    [g.event_id_start for g in grips],
                    [g.event_id_end for g in grips],
                    [g.ts_ms for g in grips],
                    [g.source for g in grips],
                    [g.toc_node_id for g in grips],
                    [g.session_id for g in grips],
                ),
            )
        return len(rows)

    def get_grip(self, grip_id: str) -> Grip:
        rows = self._query(f"SELECT {GRIP_COLS} FROM grips WHERE grip_id = %s", (grip_id,))
        if not rows:
            raise NotFoundError("grip", grip_id)
        return grip_from_row(rows[0])

    def grips_for_node(self, project: str, node_id: str) -> list[Grip]:
        rows = self._query(
            f"SELECT {GRIP_COLS} FROM grips WHERE project = %s AND toc_node_id = %s "
            "ORDER BY ts_ms, grip_id",
            (project, node_id),
        )
        return [grip_from_row(r) for r in rows]

    def replace_node_grips(self, project: str, node_id: str, grips: Sequence[Grip]) -> int:
        keep = [g.grip_id for g in grips]
        with self.transaction():
            stale = [
                r[0]
                for r in self._query(
                    "DELETE FROM grips WHERE project = %s AND toc_node_id = %s "
                    "AND NOT (grip_id = ANY(%s)) RETURNING grip_id",
                    (project, node_id, keep),
                )
            ]
            self._delete_docs("grip", project, stale)
            return self.put_grips(grips)

    def lock_node(self, project: str, node_id: str) -> None:
        """The node's transaction-scoped advisory lock (the one ``put_node`` takes)."""
        if not self.in_transaction:
            raise StoreError(f"{self.location}: lock_node({node_id!r}) outside a transaction")
        self._lock_key(f"node\x1f{project}\x1f{node_id}")

    def delete_node(self, project: str, node_id: str) -> None:
        with self.transaction():
            self._exec(
                "DELETE FROM toc_nodes WHERE project = %s AND node_id = %s", (project, node_id)
            )
            grip_ids = [
                r[0]
                for r in self._query(
                    "DELETE FROM grips WHERE project = %s AND toc_node_id = %s RETURNING grip_id",
                    (project, node_id),
                )
            ]
            self._delete_docs("grip", project, grip_ids)
            self._delete_docs("node", project, [node_id])

    # -- segmentation -------------------------------------------------------------------------------
    def assigned_seqs(self, seqs: Sequence[int]) -> set[int]:
        if not seqs:
            return set()
        rows = self._query("SELECT seq FROM segment_events WHERE seq = ANY(%s)", (list(seqs),))
        return {int(r[0]) for r in rows}

    def _segments(self, where: str, params: Sequence[Any], tail: str = "") -> list[SegmentRecord]:
        rows = self._query(f"SELECT {SEGMENT_COLS} FROM segments WHERE {where} {tail}", params)
        return [segment_from_row(r) for r in rows]

    def session_tail(self, project: str, session_id: str) -> SegmentRecord | None:
        found = self._segments(
            "project = %s AND session_id = %s",
            (project, session_id),
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
        )
        return found[0] if found else None

    def segment_before(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> SegmentRecord | None:
        found = self._segments(
            "project = %s AND session_id = %s AND (start_ms, first_event_id) <= (%s, %s)",
            (project, session_id, ts_ms, event_id),
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
        )
        return found[0] if found else None

    def segments_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[SegmentRecord]:
        return self._segments(
            "project = %s AND session_id = %s AND (start_ms, first_event_id) >= (%s, %s)",
            (project, session_id, ts_ms, event_id),
            "ORDER BY start_ms, first_event_id",
        )

    def session_events_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[tuple[int, Event]]:
        rows = self._query(
            f"SELECT {EVENT_COLS} FROM events WHERE session_id = %s AND project = %s "
            f"AND (ts_ms > %s OR (ts_ms = %s AND event_id >= %s)) AND {LIVE} "
            "ORDER BY ts_ms, event_id",
            (session_id, project, ts_ms, ts_ms, event_id),
        )
        return [(int(r[0]), event_from_row(r)) for r in rows]

    def members_of(self, project: str, node_ids: Sequence[str]) -> set[int]:
        if not node_ids:
            return set()
        rows = self._query(
            "SELECT seq FROM segment_events WHERE project = %s AND node_id = ANY(%s)",
            (project, list(node_ids)),
        )
        return {int(r[0]) for r in rows}

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
                    "DELETE FROM segments WHERE project = %s AND node_id = %s", (project, node_id)
                )
                self.delete_node(project, node_id)
            self._many(
                f"INSERT INTO segments({SEGMENT_COLS}) VALUES "
                "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (project, node_id) "
                f"DO UPDATE SET {_SEGMENT_UPDATE}, lease_owner = NULL, lease_until_ms = NULL",
                [segment_row(r) for r in upserts],
            )
            if membership:
                self._exec(
                    "INSERT INTO segment_events(seq, project, node_id) "
                    "SELECT s, %s, n FROM unnest(%s::int8[], %s::text[]) AS u(s, n) "
                    "ON CONFLICT (seq) DO UPDATE SET project = excluded.project, "
                    "node_id = excluded.node_id",
                    (project, [m[0] for m in membership], [m[1] for m in membership]),
                )
            if index_events:
                self._exec(
                    EVENT_UPSERT,
                    event_params([i[0] for i in index_events], [project] * len(index_events),
                                 [i[1] for i in index_events]),
                )  # fmt: skip

    # -- building -----------------------------------------------------------------------------------
    def unbuilt_segments(self, limit: int) -> list[SegmentRecord]:
        now = self.clock.now_ms()
        with self.transaction():
            rows = self._query(
                f"WITH c AS (SELECT project, node_id FROM segments WHERE built = 0 "
                "AND error IS NULL AND (lease_until_ms IS NULL OR lease_until_ms <= %s) "
                "ORDER BY project, session_id, start_ms, first_event_id LIMIT %s "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE segments s SET lease_owner = %s, lease_until_ms = %s FROM c "
                "WHERE s.project = c.project AND s.node_id = c.node_id "
                f"RETURNING {', '.join('s.' + c.strip() for c in SEGMENT_COLS.split(','))}",
                (now, limit, self._owner(), now + self.build_lease_ms),
            )
        found = [segment_from_row(r) for r in rows]
        found.sort(key=lambda s: (s.project, s.session_id, s.start_ms, s.first_event_id))
        return found

    def get_segment(self, project: str, node_id: str) -> SegmentRecord:
        lock = "FOR UPDATE" if self.in_transaction else ""
        found = self._segments("project = %s AND node_id = %s", (project, node_id), lock)
        if not found:
            raise NotFoundError("segment", f"{node_id} (project {project})")
        return found[0]

    def segment_member_events(self, project: str, node_id: str) -> list[Event]:
        cols = ", ".join(f"e.{c.strip()}" for c in EVENT_COLS.split(","))
        rows = self._query(
            f"SELECT {cols} FROM segment_events s JOIN events e ON e.seq = s.seq "
            "WHERE s.project = %s AND s.node_id = %s ORDER BY e.ts_ms, e.event_id",
            (project, node_id),
        )
        return [event_from_row(r) for r in rows]

    def previous_segment(self, segment: SegmentRecord) -> SegmentRecord | None:
        found = self._segments(
            "project = %s AND session_id = %s AND (start_ms, first_event_id) < (%s, %s)",
            (segment.project, segment.session_id, segment.start_ms, segment.first_event_id),
            "ORDER BY start_ms DESC, first_event_id DESC LIMIT 1",
        )
        return found[0] if found else None

    def mark_segment_built(self, project: str, node_id: str) -> None:
        self._exec(
            "UPDATE segments SET built = 1, error = NULL, lease_owner = NULL, "
            "lease_until_ms = NULL WHERE project = %s AND node_id = %s",
            (project, node_id),
        )

    def fail_segment(self, project: str, node_id: str, error: str) -> None:
        self._exec(
            "UPDATE segments SET built = 0, error = %s, lease_owner = NULL, lease_until_ms = NULL "
            "WHERE project = %s AND node_id = %s",
            (pg_text(error[:4000]), project, node_id),
        )

    def failed_segments(self, limit: int = 20) -> list[SegmentRecord]:
        return self._segments("error IS NOT NULL", (limit,), "ORDER BY project, start_ms LIMIT %s")

    def retry_failed_segments(self) -> int:
        return self._exec(
            "UPDATE segments SET error = NULL, lease_owner = NULL, lease_until_ms = NULL "
            "WHERE error IS NOT NULL"
        )

    def close_idle_segments(self, before_ms: int) -> int:
        # rows another worker holds (extending or building that segment) are left to the next
        # round: one UPDATE locking every idle row in scan order met a worker's transaction
        # locking two of them in another order ("deadlock detected" with four workers)
        return self._exec(
            "UPDATE segments s SET closed = 1 FROM ("
            "SELECT project, node_id FROM segments WHERE closed = 0 AND end_ms <= %s "
            "ORDER BY project, node_id FOR UPDATE SKIP LOCKED) idle "
            "WHERE s.project = idle.project AND s.node_id = idle.node_id",
            (before_ms,),
        )

    # -- rollups ------------------------------------------------------------------------------------
    def mark_dirty(self, marks: Sequence[DirtyPeriod]) -> None:
        ordered = sorted(marks, key=lambda m: (m.project, m.node_id))
        self._many(
            "INSERT INTO rollup_dirty(project, node_id, level, activity_ms, marked_ms) "
            "VALUES (%s,%s,%s,%s,%s) ON CONFLICT (project, node_id) DO UPDATE SET "
            "activity_ms = GREATEST(rollup_dirty.activity_ms, excluded.activity_ms), "
            "marked_ms = GREATEST(rollup_dirty.marked_ms, excluded.marked_ms), "
            "seq = nextval('rollup_mark_seq')",
            [(m.project, m.node_id, m.level, m.activity_ms, m.marked_ms) for m in ordered],
        )

    def clear_dirty(self, project: str, node_id: str, seq: int) -> None:
        # a mark re-set meanwhile holds a greater seq (the sequence only grows); a DELETE that
        # waited for that re-marking transaction's row lock re-checks the new row and keeps it
        self._exec(
            "DELETE FROM rollup_dirty WHERE project = %s AND node_id = %s AND seq <= %s",
            (project, node_id, seq),
        )

    # -- search documents ---------------------------------------------------------------------------
    def put_docs(self, docs: Sequence[DocRow]) -> None:
        ordered = sorted(docs, key=lambda d: (d.kind, d.project, d.doc_id))
        self._many(
            "INSERT INTO docs(kind, doc_id, project, ts_ms, text, tsv, dl) "
            "VALUES (%s,%s,%s,%s,%s,%s::tsvector,%s) "
            "ON CONFLICT (kind, project, doc_id) DO UPDATE SET text = excluded.text, "
            "ts_ms = excluded.ts_ms, tsv = excluded.tsv, dl = excluded.dl "
            "WHERE docs.text <> excluded.text OR docs.ts_ms <> excluded.ts_ms",
            [(d.kind, d.doc_id, d.project, d.ts_ms, pg_text(d.text), *doc_row(d.text))
             for d in ordered],
        )  # fmt: skip

    def _delete_docs(self, kind: str, project: str, doc_ids: Sequence[str]) -> None:
        if doc_ids:
            self._exec(
                "DELETE FROM docs WHERE kind = %s AND project = %s AND doc_id = ANY(%s)",
                (kind, project, list(doc_ids)),
            )
