"""``DerivedStore`` on SQLite: the audit (``sqlite/audit``) plus the repairs ``rebuild`` needs.

See ``memtoc.store.derived`` for the contract and ``memtoc.derived.rebuild`` for their use:
sessions to re-segment, membership and BM25 presence of events, segments to queue, the processed
outbox batches, stale documents, and re-indexing both FTS tables from their sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from memtoc.store.audit import LATEST_VERSIONS, STALE_DOCS, stray_from
from memtoc.store.event_checks import storable_text
from memtoc.store.sqlite.audit import SqliteAudit, chunks
from memtoc.text.fts_text import original_text, search_text


class SqliteDerived(SqliteAudit):
    """``DerivedStore``: the audit (``sqlite/audit``) and the repairs ``rebuild`` needs."""

    # -- rebuild --------------------------------------------------------------------------------------
    def sessions(self, project: str | None = None) -> list[tuple[str, str]]:
        where, params = ("WHERE project = ?", (project,)) if project is not None else ("", ())
        source = "sessions" if self.store._spans else "events"
        rows = self.q(
            f"SELECT project, session_id FROM {source} {where} UNION "
            f"SELECT project, session_id FROM segments {where} ORDER BY 1, 2",
            params * 2,
        )
        return [(r[0], r[1]) for r in rows]

    def repair_session_spans(self) -> int:
        if not self.store._spans:
            return 0
        with self.store.transaction():
            cur = self.store._exec(
                "INSERT INTO sessions(session_id, project, first_ms, last_ms) "
                "SELECT a.session_id, a.project, a.lo, a.hi FROM (SELECT session_id, project, "
                "MIN(ts_ms) AS lo, MAX(ts_ms) AS hi FROM events GROUP BY session_id, project) a "
                "LEFT JOIN sessions s ON s.session_id = a.session_id AND s.project = a.project "
                "WHERE s.session_id IS NULL OR s.first_ms > a.lo OR s.last_ms < a.hi "
                "ON CONFLICT(session_id, project) DO UPDATE SET "
                "first_ms = MIN(sessions.first_ms, excluded.first_ms), "
                "last_ms = MAX(sessions.last_ms, excluded.last_ms)"
            )
            return max(cur.rowcount, 0)

    def repair_node_pointers(self) -> int:
        with self.store.transaction():
            cur = self.store._exec(
                "UPDATE toc_nodes AS n SET version = v.version, level = v.level, "
                "start_ms = v.start_ms, end_ms = v.end_ms, parent_id = v.parent_id "
                f"FROM ({LATEST_VERSIONS}) AS v WHERE v.project = n.project "
                "AND v.node_id = n.node_id AND (n.version != v.version OR n.level != v.level "
                "OR n.start_ms != v.start_ms OR n.end_ms != v.end_ms "
                "OR n.parent_id IS NOT v.parent_id)"
            )
            return max(cur.rowcount, 0)

    def filing_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        out: dict[int, tuple[str, str]] = {}
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for seq, project, node_id in self.q(
                f"SELECT seq, project, node_id FROM segment_events WHERE seq IN ({marks})", chunk
            ):
                out[int(seq)] = (project, node_id)
        return out

    def members_by_node(self, project: str, node_ids: Sequence[str]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for chunk in chunks(list(node_ids)):
            marks = ",".join("?" * len(chunk))
            for seq, node_id in self.q(
                f"SELECT seq, node_id FROM segment_events WHERE project = ? "
                f"AND node_id IN ({marks})",
                [project, *chunk],
            ):
                out.setdefault(node_id, set()).add(int(seq))
        return out

    def stray_members(self) -> list[int]:
        return [int(r[0]) for r in self.q(f"SELECT s.seq {stray_from(self.live)}")]

    def unfile(self, seqs: Sequence[int]) -> int:
        removed = 0
        with self.store.transaction():
            for chunk in chunks(list(seqs)):
                marks = ",".join("?" * len(chunk))
                cur = self.store._exec(f"DELETE FROM segment_events WHERE seq IN ({marks})", chunk)
                removed += max(cur.rowcount, 0)
        return removed

    def indexed_seqs(self, seqs: Sequence[int]) -> set[int]:
        out: set[int] = set()
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            out.update(
                int(r[0])
                for r in self.q(f"SELECT rowid FROM events_fts WHERE rowid IN ({marks})", chunk)
            )
        return out

    def queue_segments(self, project: str | None = None) -> int:
        scope, params = (" WHERE project = ?", (project,)) if project is not None else ("", ())
        with self.store.transaction():
            cur = self.store._exec(f"UPDATE segments SET built = 0, error = NULL{scope}", params)
            return max(cur.rowcount, 0)

    def queue_segment_ids(self, project: str, node_ids: Sequence[str]) -> int:
        done = 0
        with self.store.transaction():
            for chunk in chunks(list(node_ids)):
                marks = ",".join("?" * len(chunk))
                cur = self.store._exec(
                    "UPDATE segments SET built = 0, error = NULL WHERE project = ? "
                    f"AND node_id IN ({marks})",
                    [project, *chunk],
                )
                done += max(cur.rowcount, 0)
        return done

    def filed_ranges(self) -> list[tuple[int, int]]:
        rows = self.q(
            "SELECT json_extract(payload, '$.first_seq'), json_extract(payload, '$.last_seq') "
            "FROM outbox WHERE kind = 'events' AND status = 'done' ORDER BY entry_id"
        )
        return [(int(r[0]), int(r[1])) for r in rows]

    def delete_checkpoints(self, jobs: Sequence[str]) -> int:
        with self.store.transaction():
            cur = self.store.connection.executemany(
                "DELETE FROM checkpoints WHERE job = ?", [(j,) for j in jobs]
            )
            return max(cur.rowcount, 0)

    def drop_stale_docs(self) -> int:
        with self.store.transaction():
            rows = self.store._exec(f"SELECT d.doc_seq, d.text {STALE_DOCS}").fetchall()
            for doc_seq, text in rows:
                self.store._exec(
                    "INSERT INTO docs_fts(docs_fts, rowid, text) VALUES ('delete', ?, ?)",
                    (doc_seq, text),
                )
                self.store._exec("DELETE FROM docs WHERE doc_seq = ?", (doc_seq,))
        return len(rows)

    def rebuild_text_index(
        self, *, events: bool = True, docs: bool = True, batch: int = 5_000
    ) -> dict[str, int]:
        """Both FTS tables from their sources, in one transaction: searches see the old index or
        the new one. Docs get their stored text recomputed (``search_text`` of the original)."""
        n_events = n_docs = 0
        store = self.store
        with store.transaction():
            if events:
                n_events = self._reindex_events(batch)
            if docs:
                store._exec("INSERT INTO docs_fts(docs_fts) VALUES ('delete-all')")
                for doc_seq, text in store._exec("SELECT doc_seq, text FROM docs ORDER BY doc_seq"):
                    indexed = storable_text(search_text(original_text(text)))
                    if indexed != text:
                        store._exec(
                            "UPDATE docs SET text = ? WHERE doc_seq = ?", (indexed, doc_seq)
                        )
                    store._exec(
                        "INSERT INTO docs_fts(rowid, text) VALUES (?, ?)", (doc_seq, indexed)
                    )
                    n_docs += 1
        return {"events": n_events, "docs": n_docs}

    def _reindex_events(self, batch: int) -> int:
        store = self.store
        store._exec("INSERT INTO events_fts(events_fts) VALUES ('delete-all')")
        after = done = 0
        while rows := store._exec(
            "SELECT e.seq, e.text FROM segment_events s JOIN events e ON e.seq = s.seq "
            f"WHERE s.seq > ? AND {self.live} ORDER BY s.seq LIMIT ?",
            (after, batch),
        ).fetchall():
            store.connection.executemany(
                "INSERT INTO events_fts(rowid, text) VALUES (?, ?)",
                [(seq, search_text(text)) for seq, text in rows],
            )
            after = rows[-1][0]
            done += len(rows)
        return done
