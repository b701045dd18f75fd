"""Verify's SQL on SQLite: ``SqliteAudit``, the checks ``store/audit.py`` does not share.

See ``memtoc.store.derived`` for the contract and ``store/audit.py`` for the shared checks.
``events_fts`` and ``docs_fts`` are contentless FTS5 tables: their rows are counted (``COUNT(*)``
reads FTS5's per-row size table) and probed with a word of a stored text on that text's rowid,
which finds nothing when the index was wiped or lost the row. The outbox keeps an entry's seq
range in its JSON payload; ``doc_vectors`` records the text each document's vector came from, so
a vector lost from under a current document is found.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from memtoc.store.audit import SqlAudit
from memtoc.store.derived import Finding
from memtoc.store.event_checks import IN_RANGE_SQL
from memtoc.store.sqlite.store import SqliteStore

_CHUNK = 500


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


class SqliteAudit(SqlAudit):
    """``DerivedStore`` over a ``SqliteStore``."""

    IS_DISTINCT = "IS NOT"
    BAD_DIM = "SUM(length(vec) != 4 * dim)"
    GRIP_EVENT_PROJECT = ""
    INDEX_CHECKS = (
        ("events_fts rows", "_event_rows"),
        ("events_fts probe", "_event_probe"),
        ("docs_fts rows", "_doc_rows"),
        ("docs_fts probe", "_doc_probe"),
    )

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(
            store, store._query, "e.forgotten_ms IS NULL" if store._live != "1" else "1"
        )
        self.store: SqliteStore = store

    def _coverage(self, examples: int, pending: list[str]) -> Finding | None:
        """Every live event in exactly one segment (``segment_events.seq`` is unique), except
        the events whose outbox entry is not processed yet."""
        waiting = [
            (int(r[0]), int(r[1]))
            for r in self.q(
                "SELECT json_extract(payload, '$.first_seq'), json_extract(payload, '$.last_seq') "
                "FROM outbox WHERE kind = 'events' AND status != 'done'"
            )
        ]
        unfiled = queued = 0
        shown: list[str] = []
        with self.store._lock:
            cur = self.store.connection.execute(
                "SELECT e.seq, e.event_id, e.project, e.session_id FROM events e "
                "WHERE NOT EXISTS (SELECT 1 FROM segment_events s WHERE s.seq = e.seq) "
                f"AND {self.live} AND e.{IN_RANGE_SQL} ORDER BY e.seq"
            )
            for seq, event_id, project, session_id in cur:
                if any(lo <= seq <= hi for lo, hi in waiting):
                    queued += 1
                    continue
                unfiled += 1
                if len(shown) < examples:
                    shown.append(f"event {event_id} of {project}/{session_id}")
        if queued:
            pending.append(f"{queued} events wait in the outbox (memtoc process files them)")
        if not unfiled:
            return None
        return Finding(
            "segment coverage",
            f"{unfiled} processed events are in no segment",
            unfiled,
            tuple(shown),
            "memtoc rebuild --segments",
        )

    def _missing_bookmark_events(self) -> list[tuple[str, str]]:
        rows = self.q(
            "SELECT DISTINCT b.bookmark_id, b.project, j.value FROM bookmarks b, "
            "json_each(b.event_ids) j WHERE NOT EXISTS (SELECT 1 FROM events e "
            f"WHERE e.event_id = j.value AND {self.live}) ORDER BY b.bookmark_id"
        )
        return list(dict.fromkeys((r[0], r[1]) for r in rows))

    # -- the BM25 indexes ---------------------------------------------------------------------------
    def _fts_rows(self, table: str, expected: int) -> Finding | None:
        rows = self._n(f"SELECT COUNT(*) FROM {table}")
        if rows == expected:
            return None
        source = "filed events" if table == "events_fts" else "search documents"
        return Finding(
            f"{table} rows",
            f"the BM25 index {table} holds {rows} rows for {expected} {source}",
            abs(rows - expected),
            (),
            "memtoc rebuild --fts",
        )

    def _event_rows(self) -> Finding | None:
        return self._fts_rows("events_fts", self._n("SELECT COUNT(*) FROM segment_events"))

    def _doc_rows(self) -> Finding | None:
        return self._fts_rows("docs_fts", self._n("SELECT COUNT(*) FROM docs"))

    def _finds(self, table: str, key: str, rowid: Any, word: str) -> bool | None:
        return bool(self.q(f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND {key} = ?",
                           (f'"{word}"', rowid)))  # fmt: skip

    def _event_probe(self) -> Finding | None:
        return self._probe("events_fts probe", "events_fts", "rowid", "event", self._probe_events())

    def _doc_probe(self) -> Finding | None:
        return self._probe("docs_fts probe", "docs_fts", "rowid", "document", self._probe_docs())

    # -- vectors ------------------------------------------------------------------------------------
    def _lost_doc_vectors(self, name: str) -> list[Any] | None:
        return self.q(
            "SELECT v.kind, v.project, v.doc_id FROM doc_vectors v JOIN docs d "
            "ON d.kind = v.kind AND d.project = v.project AND d.doc_id = v.doc_id "
            "AND d.text = v.text WHERE v.embedder = ? AND NOT EXISTS (SELECT 1 FROM vectors x "
            "WHERE x.kind = v.kind AND x.project = v.project AND x.item_id = v.doc_id "
            "AND x.embedder = v.embedder)",
            (name,),
        )

    # -- structure scans ------------------------------------------------------------------------------
    def doc_texts(self, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        out: dict[tuple[str, str], str] = {}
        for project in sorted({p for p, _ in keys}):
            ids = [i for p, i in keys if p == project]
            for chunk in chunks(ids):
                marks = ",".join("?" * len(chunk))
                for doc_id, text in self.q(
                    f"SELECT doc_id, text FROM docs WHERE kind = ? AND project = ? "
                    f"AND doc_id IN ({marks})",
                    [kind, project, *chunk],
                ):
                    out[(project, doc_id)] = text
        return out

    def existing_grips(self, grip_ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(list(dict.fromkeys(grip_ids))):
            marks = ",".join("?" * len(chunk))
            out.update(
                r[0] for r in self.q(f"SELECT grip_id FROM grips WHERE grip_id IN ({marks})", chunk)
            )
        return out

    def summary_backends(self) -> list[tuple[str, bool, int, str | None]]:
        rows = self.q(
            "SELECT json_extract(v.data, '$.summarizer'), json_extract(v.data, '$.degraded') "
            "IS NOT NULL, COUNT(*), MIN(json_extract(v.data, '$.degraded')) FROM toc_nodes n "
            "JOIN toc_node_versions v ON v.project = n.project AND v.node_id = n.node_id "
            "AND v.version = n.version GROUP BY 1, 2 ORDER BY 1, 2"
        )
        return [(str(r[0] or "extractive"), bool(r[1]), int(r[2]), r[3]) for r in rows]
