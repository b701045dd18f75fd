"""Verify's SQL on PostgreSQL: ``PgAudit``, the checks ``store/audit.py`` does not share.

See ``memtoc.store.derived`` for the contract and ``store/audit.py`` for the shared checks
(``?`` placeholders: this runner turns them into ``%s``). The differences from SQLite: the events' BM25
index is ``event_search`` (a ``tsvector`` per filed event), a document's is ``docs.tsv``, so the
probe asks ``tsv @@`` the word's lexemes (``postgres/lexemes``) on the probed row; the outbox
keeps each entry's seq range in columns; a document's vector records the MD5 of the text it came
from (``vectors.source_md5``) instead of SQLite's ``doc_vectors`` rows, so a document whose vector
was deleted is seen only as "no vector" — a problem once the pipeline is idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtoc.store.audit import SqlAudit
from memtoc.store.derived import Finding
from memtoc.store.event_checks import IN_RANGE_SQL
from memtoc.store.postgres.lexemes import query_lexemes
from memtoc.store.postgres.search import tsquery_text
from memtoc.store.postgres.store import PostgresStore


class PgAudit(SqlAudit):
    """``DerivedStore`` over a ``PostgresStore``."""

    INDEX_CHECKS = (
        ("event_search rows", "_index_rows"),
        ("event_search probe", "_event_probe"),
        ("docs.tsv probe", "_doc_probe"),
    )

    def __init__(self, store: PostgresStore) -> None:
        forget = store._query(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'events' AND column_name = 'forgotten_ms'"
        )
        super().__init__(store, store._q, "e.forgotten_ms IS NULL" if forget else "TRUE")
        self.store: PostgresStore = store

    def _coverage(self, examples: int, pending: list[str]) -> Finding | None:
        queued = self._n(
            "SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM outbox "
            "WHERE kind = 'events' AND status <> 'done'"
        )
        if queued:
            pending.append(f"about {queued} events wait in the outbox (memtoc process files them)")
        rows = self.q(
            "SELECT e.event_id, e.project, e.session_id, COUNT(*) OVER () FROM events e "
            "WHERE NOT EXISTS (SELECT 1 FROM segment_events s WHERE s.seq = e.seq) "
            f"AND {self.live} AND e.{IN_RANGE_SQL} AND NOT EXISTS (SELECT 1 FROM outbox o "
            "WHERE o.kind = 'events' AND o.status <> 'done' AND e.seq BETWEEN o.first_seq "
            "AND o.last_seq) ORDER BY e.seq LIMIT ?",
            (examples,),
        )
        if not rows:
            return None
        n = int(rows[0][3])
        return Finding(
            "segment coverage",
            f"{n} processed events are in no segment",
            n,
            tuple(f"event {r[0]} of {r[1]}/{r[2]}" for r in rows),
            "memtoc rebuild --segments",
        )

    def _missing_bookmark_events(self) -> list[tuple[str, str]]:
        rows = self.q(
            "SELECT DISTINCT b.bookmark_id, b.project FROM bookmarks b, "
            "jsonb_array_elements_text(b.event_ids::jsonb) j(id) WHERE NOT EXISTS "
            f"(SELECT 1 FROM events e WHERE e.event_id = j.id AND {self.live}) ORDER BY 1"
        )
        return [(r[0], r[1]) for r in rows]

    # -- the BM25 indexes ---------------------------------------------------------------------------
    def _index_rows(self) -> Finding | None:
        filed = self._n("SELECT COUNT(*) FROM segment_events")
        rows = self._n("SELECT COUNT(*) FROM event_search")
        indexed = self._n(
            "SELECT COUNT(*) FROM event_search x JOIN segment_events s ON s.seq = x.seq"
        )
        if rows == filed == indexed:
            return None
        return Finding(
            "event_search rows",
            f"the BM25 index event_search holds {rows} rows ({indexed} of filed events) for "
            f"{filed} filed events",
            abs(filed - indexed) + (rows - indexed),
            (),
            "memtoc rebuild --fts",
        )

    def _finds(self, table: str, key: str, rowid: Any, word: str) -> bool | None:
        lexemes = [lex for lex, _ in query_lexemes([word])]
        if not lexemes:
            return None  # not a searchable word
        rows = self.q(
            f"SELECT 1 FROM {table} WHERE {key} = ? AND tsv @@ CAST(? AS tsquery)",
            (rowid, tsquery_text(lexemes, "&")),
        )
        return bool(rows)

    def _event_probe(self) -> Finding | None:
        rows = self._probe_events()
        return self._probe("event_search probe", "event_search", "seq", "event", rows)

    def _doc_probe(self) -> Finding | None:
        return self._probe("docs.tsv probe", "docs", "doc_seq", "document", self._probe_docs())

    # -- structure scans ------------------------------------------------------------------------------
    def doc_texts(self, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        rows = self.q(
            "SELECT d.project, d.doc_id, d.text FROM docs d JOIN unnest(?::text[], ?::text[]) "
            "AS k(p, i) ON d.project = k.p AND d.doc_id = k.i WHERE d.kind = ?",
            ([k[0] for k in keys], [k[1] for k in keys], kind),
        )
        return {(r[0], r[1]): r[2] for r in rows}

    def existing_grips(self, grip_ids: Sequence[str]) -> set[str]:
        if not grip_ids:
            return set()
        rows = self.q("SELECT grip_id FROM grips WHERE grip_id = ANY(?)", (list(grip_ids),))
        return {r[0] for r in rows}

    def summary_backends(self) -> list[tuple[str, bool, int, str | None]]:
        rows = self.q(
            "SELECT d->>'summarizer', d->>'degraded' IS NOT NULL, COUNT(*), MIN(d->>'degraded') "
            "FROM toc_nodes n JOIN toc_node_versions v ON v.project = n.project "
            "AND v.node_id = n.node_id AND v.version = n.version, "
            "LATERAL (SELECT v.data::jsonb AS d) j GROUP BY 1, 2 ORDER BY 1, 2"
        )
        return [(str(r[0] or "extractive"), bool(r[1]), int(r[2]), r[3]) for r in rows]
