"""Verify's SQL on PostgreSQL: ``PgAudit.audit``, ``SqliteAudit``'s checks in PostgreSQL's SQL.

See ``memtoc.store.derived`` for the contract. The differences from SQLite: the events' BM25
index is ``event_search`` (a ``tsvector`` per filed event), a document's is the generated
``docs.tsv``, so the probe asks ``tsv @@ plainto_tsquery(word)`` on the probed row; the outbox
keeps each entry's seq range in columns; a document's vector records the MD5 of the text it came
from (``vectors.source_md5``) instead of SQLite's ``doc_vectors`` rows, so a document whose vector
was deleted is seen only as "no vector" — a problem once the pipeline is idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtoc.model import Grip, TocNode
from memtoc.store.base import SegmentRecord
from memtoc.store.capabilities import EmbedderIdentity
from memtoc.store.codecs import (
    GRIP_COLS,
    SEGMENT_COLS,
    grip_from_row,
    node_from_row,
    segment_from_row,
)
from memtoc.store.derived import EXAMPLES, PROBES, Audit, Finding, probe_words
from memtoc.store.derived_vectors import VectorCounts, vector_findings
from memtoc.store.event_checks import IN_RANGE_SQL
from memtoc.store.postgres.store import PostgresStore
from memtoc.text.fts_text import original_text

LATEST_VERSIONS = (
    "SELECT x.project, x.node_id, x.version, x.level, x.start_ms, x.end_ms, x.parent_id "
    "FROM toc_node_versions x WHERE x.version = (SELECT MAX(y.version) FROM toc_node_versions y "
    "WHERE y.project = x.project AND y.node_id = x.node_id)"
)
"""Each node's latest version (numbering only grows: a retired node's comes back after it)."""
STALE_DOCS = (
    "FROM docs d WHERE (d.kind = 'node' AND NOT EXISTS (SELECT 1 FROM toc_nodes n "
    "WHERE n.project = d.project AND n.node_id = d.doc_id)) OR (d.kind = 'grip' AND NOT EXISTS "
    "(SELECT 1 FROM grips g WHERE g.project = d.project AND g.grip_id = d.doc_id)) OR "
    "(d.kind = 'bookmark' AND NOT EXISTS (SELECT 1 FROM bookmarks b WHERE b.project = d.project "
    "AND b.bookmark_id = d.doc_id)) OR d.kind NOT IN ('node', 'grip', 'bookmark')"
)


def _scope(column: str, project: str | None) -> tuple[str, tuple[Any, ...]]:
    return (f" AND {column} = %s", (project,)) if project is not None else ("", ())


class PgAudit:
    """``DerivedStore`` over a ``PostgresStore``."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.q = store._query
        forget = self.q(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'events' AND column_name = 'forgotten_ms'"
        )
        self.live = "e.forgotten_ms IS NULL" if forget else "TRUE"
        """Live events (not tombstones), for a query that names ``events`` as ``e``."""
        self._stray_sql = (
            "FROM segment_events s LEFT JOIN events e ON e.seq = s.seq LEFT JOIN segments g "
            "ON g.project = s.project AND g.node_id = s.node_id WHERE e.seq IS NULL "
            f"OR NOT ({self.live}) OR e.project <> s.project OR g.node_id IS NULL "
            "OR g.session_id <> e.session_id"
        )
        """Membership rows pointing at no live event or at no segment row."""

    def _n(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self.q(sql, params)[0][0])

    # -- verify -------------------------------------------------------------------------------------
    def audit(self, embedder: EmbedderIdentity | None, *, examples: int = EXAMPLES) -> Audit:
        checks: list[str] = []
        found: list[Finding] = []
        pending: list[str] = []

        def check(name: str, *results: Finding | None) -> None:
            checks.append(name)
            found.extend(r for r in results if r is not None)

        check("segment coverage", self._coverage(examples, pending))
        check("segment membership", self._stray(examples))
        check("segment rows", self._segment_counts(examples))
        check("segment nodes", *self._segment_nodes(examples))
        check("node latest pointers", *self._pointers(examples))
        check("pipeline failures", *self._failures(examples))
        check("grips resolve", *self._grips(examples))
        check("bookmark events", self._bookmark_events(examples))
        check("search documents", *self._docs(examples))
        filed = self._n("SELECT COUNT(*) FROM segment_events")
        check("event_search rows", self._index_rows(filed))
        check("event_search probe", self._event_probe())
        check("docs.tsv probe", self._doc_probe())
        for name, results in self._vectors(embedder, examples, pending):
            check(name, *results)
        return Audit(tuple(checks), tuple(found), tuple(pending))

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
            f"AND {self.live} AND e.{IN_RANGE_SQL} AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'events' "
            "AND o.status <> 'done' AND e.seq BETWEEN o.first_seq AND o.last_seq) "
            "ORDER BY e.seq LIMIT %s",
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

    def _stray(self, examples: int) -> Finding | None:
        rows = self.q(f"SELECT s.seq, s.project, s.node_id {self._stray_sql} ORDER BY s.seq")
        if not rows:
            return None
        return Finding(
            "segment membership",
            f"{len(rows)} membership rows point at no live event or at a missing segment",
            len(rows),
            tuple(f"seq {r[0]} → {r[2]} in {r[1]}" for r in rows[:examples]),
            "memtoc rebuild --segments",
        )

    def _segment_counts(self, examples: int) -> Finding | None:
        rows = self.q(
            "SELECT g.project, g.node_id, g.event_count, COUNT(s.seq) FROM segments g "
            "LEFT JOIN segment_events s ON s.project = g.project AND s.node_id = g.node_id "
            "GROUP BY g.project, g.node_id, g.event_count HAVING COUNT(s.seq) <> g.event_count "
            "ORDER BY 1, 2"
        )
        if not rows:
            return None
        return Finding(
            "segment rows",
            f"{len(rows)} segments hold another number of events than they record",
            len(rows),
            tuple(f"{r[1]} in {r[0]}: {r[3]} filed, {r[2]} recorded" for r in rows[:examples]),
            "memtoc rebuild --segments",
        )

    def _segment_nodes(self, examples: int) -> list[Finding | None]:
        missing = self.segments_without_node()
        extra = self.nodes_without_segment()
        return [
            Finding(
                "segment nodes",
                f"{len(missing)} built segments have no TOC node",
                len(missing),
                tuple(f"{n} in {p}" for p, n in missing[:examples]),
                "memtoc rebuild --summaries",
            )
            if missing
            else None,
            Finding(
                "segment nodes",
                f"{len(extra)} segment nodes have no segment",
                len(extra),
                tuple(f"{n} in {p}" for p, n in extra[:examples]),
                "memtoc rebuild --segments",
            )
            if extra
            else None,
        ]

    def _pointers(self, examples: int) -> list[Finding | None]:
        rows = self.q(
            "SELECT n.project, n.node_id, n.version FROM toc_nodes n LEFT JOIN toc_node_versions v "
            "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version "
            "WHERE v.node_id IS NULL ORDER BY 1, 2"
        )
        # a row that is not its latest version's copy: children are found by the row's parent
        astray = self.q(
            f"SELECT n.project, n.node_id, n.version, v.version FROM toc_nodes n JOIN "
            f"({LATEST_VERSIONS}) v ON v.project = n.project AND v.node_id = n.node_id "
            "WHERE n.version != v.version OR n.level != v.level OR n.start_ms != v.start_ms "
            "OR n.end_ms != v.end_ms OR n.parent_id IS DISTINCT FROM v.parent_id ORDER BY 1, 2"
        )
        return [
            Finding(
                "node latest pointers",
                f"{len(rows)} nodes point at a version that does not exist",
                len(rows),
                tuple(f"{r[1]} v{r[2]} in {r[0]}" for r in rows[:examples]),
                "memtoc rebuild --summaries",
            )
            if rows
            else None,
            Finding(
                "node latest pointers",
                f"{len(astray)} nodes differ from their latest version (version, level, span "
                "or parent)",
                len(astray),
                tuple(f"{r[1]} v{r[2]} (latest v{r[3]}) in {r[0]}" for r in astray[:examples]),
                "memtoc rebuild --summaries",
            )
            if astray
            else None,
        ]

    def _failures(self, examples: int) -> list[Finding | None]:
        entries = self.q(
            "SELECT entry_id, error FROM outbox WHERE status = 'failed' ORDER BY entry_id"
        )
        segs = self.q(
            "SELECT project, node_id, error FROM segments WHERE error IS NOT NULL ORDER BY 1, 2"
        )
        return [
            Finding(
                "pipeline failures",
                f"{len(entries)} outbox entries failed",
                len(entries),
                tuple(f"entry {r[0]}: {str(r[1])[:120]}" for r in entries[:examples]),
                "memtoc process --retry-failed",
            )
            if entries
            else None,
            Finding(
                "pipeline failures",
                f"{len(segs)} segments are quarantined (their build failed)",
                len(segs),
                tuple(f"{r[1]} in {r[0]}: {str(r[2])[:120]}" for r in segs[:examples]),
                "memtoc process --retry-failed",
            )
            if segs
            else None,
        ]

    def _grips(self, examples: int) -> list[Finding | None]:
        unresolved = self.q(
            "SELECT g.grip_id, g.project FROM grips g WHERE NOT EXISTS (SELECT 1 FROM events e "
            f"WHERE e.event_id = g.event_id_start AND e.project = g.project AND {self.live}) "
            "OR NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = g.event_id_end "
            f"AND e.project = g.project AND {self.live}) ORDER BY 1"
        )
        orphans = self.q(
            "SELECT g.grip_id, g.project, g.toc_node_id FROM grips g LEFT JOIN toc_nodes n "
            "ON n.project = g.project AND n.node_id = g.toc_node_id WHERE n.node_id IS NULL "
            "ORDER BY 1"
        )
        return [
            Finding(
                "grips resolve",
                f"{len(unresolved)} grips point at missing events",
                len(unresolved),
                tuple(f"{r[0]} in {r[1]}" for r in unresolved[:examples]),
                "memtoc rebuild --grips",
            )
            if unresolved
            else None,
            Finding(
                "grips resolve",
                f"{len(orphans)} grips belong to no node",
                len(orphans),
                tuple(f"{r[0]} of {r[2]} in {r[1]}" for r in orphans[:examples]),
                "memtoc rebuild --grips",
            )
            if orphans
            else None,
        ]

    def _bookmark_events(self, examples: int) -> Finding | None:
        rows = self.q(
            "SELECT DISTINCT b.bookmark_id, b.project FROM bookmarks b, "
            "jsonb_array_elements_text(b.event_ids::jsonb) j(id) WHERE NOT EXISTS "
            f"(SELECT 1 FROM events e WHERE e.event_id = j.id AND {self.live}) ORDER BY 1"
        )
        if not rows:
            return None
        return Finding(
            "bookmark events",
            f"{len(rows)} bookmarks cite events that do not exist",
            len(rows),
            tuple(f"{r[0]} in {r[1]}" for r in rows[:examples]),
            "memtoc rebuild --bookmarks",
        )

    def _docs(self, examples: int) -> list[Finding | None]:
        missing = self.q(
            "SELECT 'node', n.project, n.node_id FROM toc_nodes n WHERE NOT EXISTS (SELECT 1 "
            "FROM docs d WHERE d.kind = 'node' AND d.project = n.project AND d.doc_id = n.node_id) "
            "UNION ALL SELECT 'grip', g.project, g.grip_id FROM grips g WHERE NOT EXISTS "
            "(SELECT 1 FROM docs d WHERE d.kind = 'grip' AND d.project = g.project "
            "AND d.doc_id = g.grip_id) UNION ALL SELECT 'bookmark', b.project, b.bookmark_id "
            "FROM bookmarks b WHERE NOT EXISTS (SELECT 1 FROM docs d WHERE d.kind = 'bookmark' "
            "AND d.project = b.project AND d.doc_id = b.bookmark_id)"
        )
        stale = self.q(f"SELECT d.kind, d.project, d.doc_id {STALE_DOCS}")
        return [
            Finding(
                "search documents",
                f"{len(missing)} nodes, grips or bookmarks have no search document",
                len(missing),
                tuple(f"{r[0]} {r[2]} in {r[1]}" for r in missing[:examples]),
                "memtoc rebuild --docs",
            )
            if missing
            else None,
            Finding(
                "search documents",
                f"{len(stale)} search documents are of items that do not exist",
                len(stale),
                tuple(f"{r[0]} {r[2]} in {r[1]}" for r in stale[:examples]),
                # a bookmark lost without its document: detected again from the events first
                "memtoc rebuild --bookmarks --docs"
                if any(r[0] == "bookmark" for r in stale)
                else "memtoc rebuild --docs",
            )
            if stale
            else None,
        ]

    def _index_rows(self, filed: int) -> Finding | None:
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

    def _probe(
        self, check: str, table: str, key: str, label: str, rows: list[Any]
    ) -> Finding | None:
        for rowid, item_id, text in rows:
            for word in probe_words(original_text(text)):
                hit, terms = self.q(
                    f"SELECT EXISTS (SELECT 1 FROM {table} WHERE {key} = %s AND tsv @@ q), "
                    "numnode(q) FROM plainto_tsquery('english'::regconfig, %s) q",
                    (rowid, word),
                )[0]
                if not terms:  # a stop word: try another
                    continue
                if hit:
                    return None
                return Finding(
                    check,
                    f"the BM25 index {table} does not find {label} {item_id} by its word "
                    f"{word!r}: search would miss it",
                    1,
                    (),
                    "memtoc rebuild --fts",
                )
        return None

    def _event_probe(self) -> Finding | None:
        rows: list[Any] = []
        for order in ("DESC", "ASC"):
            rows += self.q(
                "SELECT s.seq, e.event_id, e.text FROM segment_events s JOIN events e "
                f"ON e.seq = s.seq WHERE {self.live} ORDER BY s.seq {order} LIMIT {PROBES // 2}"
            )
        return self._probe("event_search probe", "event_search", "seq", "event", rows)

    def _doc_probe(self) -> Finding | None:
        rows: list[Any] = []
        for order in ("DESC", "ASC"):
            rows += self.q(
                f"SELECT doc_seq, kind || ' ' || doc_id, text FROM docs ORDER BY doc_seq {order} "
                f"LIMIT {PROBES // 2}"
            )
        return self._probe("docs.tsv probe", "docs", "doc_seq", "document", rows)

    # -- vectors ------------------------------------------------------------------------------------
    def _vectors(
        self, embedder: EmbedderIdentity | None, examples: int, pending: list[str]
    ) -> list[tuple[str, list[Finding | None]]]:
        recorded = {
            str(r[0]).removeprefix("embedder:"): str(r[1])
            for r in self.q("SELECT key, value FROM meta WHERE key LIKE %s", ("embedder:%",))
        }
        rows = self.q(
            "SELECT embedder, kind, dim, COUNT(*), COUNT(*) FILTER (WHERE vector_dims(vec) <> dim) "
            "FROM vectors GROUP BY embedder, kind, dim"
        )
        having = sorted({str(r[0]) for r in rows})
        names = sorted({*recorded, *having, *([embedder.name] if embedder else [])})
        quiet = not self.q(
            "SELECT 1 FROM outbox WHERE status = 'pending' UNION ALL "
            "SELECT 1 FROM segments WHERE built = 0 AND error IS NULL LIMIT 1"
        )
        out = []
        for name in names:
            counts = VectorCounts.of(name, rows, recorded.get(name))
            self._count_vectors(counts, examples)
            others = [n for n in having if n != name]
            found = vector_findings(counts, embedder, quiet=quiet, others=others, pending=pending)
            out.append((f"vectors {name}", found))
        return out

    def _count_vectors(self, c: VectorCounts, examples: int) -> None:
        cp = self.store.get_checkpoint(f"embed:{c.name}")
        c.checkpoint = int(cp) if isinstance(cp, int) else 0
        c.expected_events = self._n(
            f"SELECT COUNT(*) FROM events e WHERE e.seq <= %s AND {self.live}", (c.checkpoint,)
        )
        if c.event_vectors != c.expected_events:
            c.missing_events = [
                f"event {r[0]}"
                for r in self.q(
                    f"SELECT e.event_id FROM events e WHERE e.seq <= %s AND {self.live} AND NOT "
                    "EXISTS (SELECT 1 FROM vectors v WHERE v.kind = 'event' AND "
                    "v.project = e.project AND v.item_id = e.event_id AND v.embedder = %s) "
                    "ORDER BY e.seq LIMIT %s",
                    (c.checkpoint, c.name, examples),
                )
            ]
        orphans = self.q(
            "SELECT v.kind, v.project, v.item_id FROM vectors v WHERE v.embedder = %s "
            "AND v.kind <> 'event' AND NOT EXISTS (SELECT 1 FROM docs d WHERE "
            "d.kind = v.kind AND d.project = v.project AND d.doc_id = v.item_id) ORDER BY 1, 2, 3",
            (c.name,),
        )
        c.orphans = (len(orphans), [f"{r[0]} {r[2]} in {r[1]}" for r in orphans[:examples]])
        c.unembedded_docs = self._n(
            "SELECT COUNT(*) FROM docs d WHERE NOT EXISTS (SELECT 1 FROM vectors x "
            "WHERE x.kind = d.kind AND x.project = d.project AND x.item_id = d.doc_id "
            "AND x.embedder = %s)",
            (c.name,),
        )

    # -- structure scans (memtoc.derived.verify) ------------------------------------------------------
    def scan_nodes(self, after: tuple[str, str], limit: int) -> list[TocNode]:
        rows = self.q(
            "SELECT n.project, n.node_id, v.version, v.data FROM toc_nodes n "
            "JOIN toc_node_versions v ON v.project = n.project AND v.node_id = n.node_id "
            "AND v.version = n.version WHERE (n.project, n.node_id) > (%s, %s) "
            "ORDER BY n.project, n.node_id LIMIT %s",
            (*after, limit),
        )
        return [node_from_row(r[0], r[1], r[2], r[3]) for r in rows]

    def scan_grips(self, after: str, limit: int) -> list[Grip]:
        rows = self.q(
            f"SELECT {GRIP_COLS} FROM grips WHERE grip_id > %s ORDER BY grip_id LIMIT %s",
            (after, limit),
        )
        return [grip_from_row(r) for r in rows]

    def doc_texts(self, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        rows = self.q(
            "SELECT d.project, d.doc_id, d.text FROM docs d JOIN unnest(%s::text[], %s::text[]) "
            "AS k(p, i) ON d.project = k.p AND d.doc_id = k.i WHERE d.kind = %s",
            ([k[0] for k in keys], [k[1] for k in keys], kind),
        )
        return {(r[0], r[1]): r[2] for r in rows}

    def existing_grips(self, grip_ids: Sequence[str]) -> set[str]:
        if not grip_ids:
            return set()
        rows = self.q("SELECT grip_id FROM grips WHERE grip_id = ANY(%s)", (list(grip_ids),))
        return {r[0] for r in rows}

    def pending_segments(self) -> list[SegmentRecord]:
        rows = self.q(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE built = 0 OR error IS NOT NULL "
            "ORDER BY project, start_ms"
        )
        return [segment_from_row(r) for r in rows]

    def summary_backends(self) -> list[tuple[str, bool, int, str | None]]:
        rows = self.q(
            "SELECT d->>'summarizer', d->>'degraded' IS NOT NULL, COUNT(*), MIN(d->>'degraded') "
            "FROM toc_nodes n JOIN toc_node_versions v ON v.project = n.project "
            "AND v.node_id = n.node_id AND v.version = n.version, "
            "LATERAL (SELECT v.data::jsonb AS d) j GROUP BY 1, 2 ORDER BY 1, 2"
        )
        return [(str(r[0] or "extractive"), bool(r[1]), int(r[2]), r[3]) for r in rows]

    def segments_without_node(self, project: str | None = None) -> list[tuple[str, str]]:
        scope, params = _scope("g.project", project)
        rows = self.q(
            "SELECT g.project, g.node_id FROM segments g LEFT JOIN toc_nodes n "
            "ON n.project = g.project AND n.node_id = g.node_id "
            f"WHERE g.built = 1 AND n.node_id IS NULL{scope} ORDER BY 1, 2",
            params,
        )
        return [(r[0], r[1]) for r in rows]

    def nodes_without_segment(self, project: str | None = None) -> list[tuple[str, str]]:
        scope, params = _scope("n.project", project)
        rows = self.q(
            "SELECT n.project, n.node_id FROM toc_nodes n LEFT JOIN segments g "
            "ON g.project = n.project AND g.node_id = n.node_id "
            f"WHERE n.level = 'segment' AND g.node_id IS NULL{scope} ORDER BY 1, 2",
            params,
        )
        return [(r[0], r[1]) for r in rows]
