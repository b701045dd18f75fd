"""``DerivedStore`` on PostgreSQL: the audit (``postgres/audit``) plus ``rebuild``'s repairs.

The same operations as ``sqlite/derived``; ``rebuild_text_index`` refills ``event_search`` and
recomputes document texts and their ``tsv`` and ``dl`` (``postgres/text_index``) and drops this
process's cached BM25 statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

from memtoc.store.audit import LATEST_VERSIONS, STALE_DOCS, stray_from
from memtoc.store.postgres.audit import PgAudit
from memtoc.store.postgres.base import pg_text
from memtoc.store.postgres.text_index import reindex_docs, reindex_events
from memtoc.text.fts_text import original_text, search_text


class PgDerived(PgAudit):
    """``DerivedStore``: the audit (``postgres/audit``) and the repairs ``rebuild`` needs."""

    # -- rebuild --------------------------------------------------------------------------------------
    def sessions(self, project: str | None = None) -> list[tuple[str, str]]:
        where, params = ("WHERE project = %s", (project,)) if project is not None else ("", ())
        rows = self.store._query(
            f"SELECT DISTINCT project, session_id FROM events {where} UNION "
            f"SELECT project, session_id FROM segments {where} ORDER BY 1, 2",
            params * 2,
        )
        return [(r[0], r[1]) for r in rows]

    def repair_session_spans(self) -> int:
        return 0  # no span table: a session's events are found by index

    def repair_node_pointers(self) -> int:
        with self.store.transaction():
            rows = self.store._query(
                "UPDATE toc_nodes AS n SET version = v.version, level = v.level, "
                "start_ms = v.start_ms, end_ms = v.end_ms, parent_id = v.parent_id "
                f"FROM ({LATEST_VERSIONS}) AS v WHERE v.project = n.project "
                "AND v.node_id = n.node_id AND (n.version != v.version OR n.level != v.level "
                "OR n.start_ms != v.start_ms OR n.end_ms != v.end_ms "
                "OR n.parent_id IS DISTINCT FROM v.parent_id) RETURNING 1"
            )
            return len(rows)

    def filing_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        if not seqs:
            return {}
        rows = self.store._query(
            "SELECT seq, project, node_id FROM segment_events WHERE seq = ANY(%s)", (list(seqs),)
        )
        return {int(r[0]): (r[1], r[2]) for r in rows}

    def members_by_node(self, project: str, node_ids: Sequence[str]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        if not node_ids:
            return out
        for seq, node_id in self.store._query(
            "SELECT seq, node_id FROM segment_events WHERE project = %s AND node_id = ANY(%s)",
            (project, list(node_ids)),
        ):
            out.setdefault(node_id, set()).add(int(seq))
        return out

    def stray_members(self) -> list[int]:
        return [
            int(r[0])
            for r in self.store._query(f"SELECT s.seq {stray_from(self.live)} ORDER BY s.seq")
        ]

    def unfile(self, seqs: Sequence[int]) -> int:
        if not seqs:
            return 0
        return self.store._exec("DELETE FROM segment_events WHERE seq = ANY(%s)", (list(seqs),))

    def indexed_seqs(self, seqs: Sequence[int]) -> set[int]:
        if not seqs:
            return set()
        rows = self.store._query("SELECT seq FROM event_search WHERE seq = ANY(%s)", (list(seqs),))
        return {int(r[0]) for r in rows}

    def queue_segments(self, project: str | None = None) -> int:
        where, params = ("WHERE project = %s", (project,)) if project is not None else ("", ())
        return self.store._exec(
            "UPDATE segments SET built = 0, error = NULL, lease_owner = NULL, "
            f"lease_until_ms = NULL {where}",
            params,
        )

    def queue_segment_ids(self, project: str, node_ids: Sequence[str]) -> int:
        if not node_ids:
            return 0
        return self.store._exec(
            "UPDATE segments SET built = 0, error = NULL, lease_owner = NULL, "
            "lease_until_ms = NULL WHERE project = %s AND node_id = ANY(%s)",
            (project, list(node_ids)),
        )

    def filed_ranges(self) -> list[tuple[int, int]]:
        rows = self.store._query(
            "SELECT first_seq, last_seq FROM outbox WHERE kind = 'events' AND status = 'done' "
            "ORDER BY entry_id"
        )
        return [(int(r[0]), int(r[1])) for r in rows]

    def delete_checkpoints(self, jobs: Sequence[str]) -> int:
        if not jobs:
            return 0
        return self.store._exec("DELETE FROM checkpoints WHERE job = ANY(%s)", (list(jobs),))

    def drop_stale_docs(self) -> int:
        return self.store._exec(f"DELETE {STALE_DOCS}")

    def rebuild_text_index(
        self, *, events: bool = True, docs: bool = True, batch: int = 5_000
    ) -> dict[str, int]:
        """``event_search`` refilled from the filed events, in one transaction; documents whose
        stored text is not ``search_text`` of their original get it; every document's ``tsv``
        and ``dl`` recomputed (``postgres/text_index``)."""
        n_events = n_docs = 0
        store = self.store
        with store.transaction():
            if events:
                n_events = self._reindex_events(batch)
            after = 0
            while docs and (
                rows := self.store._query(
                    "SELECT doc_seq, text FROM docs WHERE doc_seq > %s ORDER BY doc_seq LIMIT %s",
                    (after, batch),
                )
            ):
                changed = [
                    (pg_text(search_text(original_text(text))), seq)
                    for seq, text in rows
                    if pg_text(search_text(original_text(text))) != text
                ]
                store._many("UPDATE docs SET text = %s WHERE doc_seq = %s", changed)
                after = int(rows[-1][0])
                n_docs += len(rows)
            if docs:
                with store._conn() as conn:
                    reindex_docs(conn, batch=batch)
        store._bm25_stats.clear()  # this process's cached BM25 statistics are of the old index
        store._bm25_common.clear()
        return {"events": n_events, "docs": n_docs}

    def _reindex_events(self, batch: int) -> int:
        store = self.store
        store._exec("DELETE FROM event_search")
        with store._conn() as conn:
            return reindex_events(conn, source="segment_events", where=self.live, batch=batch)
