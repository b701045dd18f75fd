"""Verify's checks written once: the SQL both backends share, with ``?`` placeholders.

See ``memtoc.store.derived`` for the contract. ``SqlAudit`` runs every check that is the same
statement on both engines (segments, node pointers, failures, grips, search documents, vector
counts, the structure scans ``memtoc.derived.verify`` reads); ``SqliteAudit``
(``store/sqlite/audit.py``) and ``PgAudit`` (``store/postgres/audit.py``) give it a query runner
(PostgreSQL's turns ``?`` into ``%s``) and the checks only one engine can phrase: coverage against
the outbox, the BM25 indexes (FTS5 tables or ``tsvector`` columns), bookmarks' JSON event lists,
documents' vector provenance, batched lookups and the JSON of node versions. Checks read with one
statement each (an anti-join or a ``GROUP BY``), keep only a count and a few examples, and never
hold more than a chunk of rows in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memtoc.model import Grip, TocNode
from memtoc.store.base import SegmentRecord, Store
from memtoc.store.capabilities import EmbedderIdentity, embed_job
from memtoc.store.codecs import (
    GRIP_COLS,
    SEGMENT_COLS,
    grip_from_row,
    node_from_row,
    segment_from_row,
)
from memtoc.store.derived import EXAMPLES, PROBES, Audit, Finding, probe_words
from memtoc.store.derived_vectors import VectorCounts, vector_findings
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
"""Search documents of items that no longer exist (``SELECT …`` or ``DELETE`` goes before it)."""

Query = Callable[..., list[Any]]


def stray_from(live: str) -> str:
    """``FROM …`` of membership rows pointing at no live event (``live``: its condition on
    ``events e``) or at no segment row."""
    return (
        "FROM segment_events s LEFT JOIN events e ON e.seq = s.seq LEFT JOIN segments g "
        "ON g.project = s.project AND g.node_id = s.node_id WHERE e.seq IS NULL "
        f"OR NOT ({live}) OR e.project <> s.project OR g.node_id IS NULL "
        "OR g.session_id <> e.session_id"
    )


def scope(column: str, project: str | None) -> tuple[str, tuple[Any, ...]]:
    """A ``project`` filter on ``column`` (none when ``project`` is None)."""
    return (f" AND {column} = ?", (project,)) if project is not None else ("", ())


def found(
    check: str,
    rows: Sequence[Any],
    what: str,
    example: Callable[[Any], str],
    fix: str,
    examples: int,
) -> Finding | None:
    """A ``Finding`` of ``check`` when ``rows`` is not empty: "<how many> <what>", the first
    ``examples`` rows shown by ``example``, the command that repairs it."""
    if not rows:
        return None
    shown = tuple(example(r) for r in rows[:examples])
    return Finding(check, f"{len(rows)} {what}", len(rows), shown, fix)


class SqlAudit:
    """``DerivedStore``'s audit and structure scans over a query runner taking ``?``."""

    IS_DISTINCT = "IS DISTINCT FROM"
    """How the dialect compares two values where NULL equals NULL."""
    BAD_DIM = "COUNT(*) FILTER (WHERE vector_dims(vec) <> dim)"
    """Per group of ``vectors``: rows whose stored vector is not ``dim`` long."""
    GRIP_EVENT_PROJECT = " AND e.project = g.project"
    """Whether a grip's events must be of the grip's project to resolve."""
    INDEX_CHECKS: tuple[tuple[str, str], ...] = ()
    """``(check name, method)`` of the BM25 index checks, in order."""

    def __init__(self, store: Store, q: Query, live: str) -> None:
        self.store = store
        self.q = q
        """Runs one statement with ``?`` placeholders; its rows."""
        self.live = live
        """Live events (not tombstones), for a query that names ``events`` as ``e``."""

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
        for name, method in self.INDEX_CHECKS:
            check(name, getattr(self, method)())
        for name, results in self._vectors(embedder, examples, pending):
            check(name, *results)
        return Audit(tuple(checks), tuple(found), tuple(pending))

    def _coverage(self, examples: int, pending: list[str]) -> Finding | None:
        """Every live event in exactly one segment, but those whose outbox entry waits."""
        raise NotImplementedError

    def _stray(self, examples: int) -> Finding | None:
        rows = self.q(f"SELECT s.seq, s.project, s.node_id {stray_from(self.live)} ORDER BY s.seq")
        return found(
            "segment membership",
            rows,
            "membership rows point at no live event or at a missing segment",
            lambda r: f"seq {r[0]} → {r[2]} in {r[1]}",
            "memtoc rebuild --segments",
            examples,
        )

    def _segment_counts(self, examples: int) -> Finding | None:
        rows = self.q(
            "SELECT g.project, g.node_id, g.event_count, COUNT(s.seq) FROM segments g "
            "LEFT JOIN segment_events s ON s.project = g.project AND s.node_id = g.node_id "
            "GROUP BY g.project, g.node_id, g.event_count HAVING COUNT(s.seq) <> g.event_count "
            "ORDER BY 1, 2"
        )
        return found(
            "segment rows",
            rows,
            "segments hold another number of events than they record",
            lambda r: f"{r[1]} in {r[0]}: {r[3]} filed, {r[2]} recorded",
            "memtoc rebuild --segments",
            examples,
        )

    def _segment_nodes(self, examples: int) -> list[Finding | None]:
        def where(r: Any) -> str:
            return f"{r[1]} in {r[0]}"

        return [
            found(
                "segment nodes",
                self.segments_without_node(),
                "built segments have no TOC node",
                where,
                "memtoc rebuild --summaries",
                examples,
            ),
            found(
                "segment nodes",
                self.nodes_without_segment(),
                "segment nodes have no segment",
                where,
                "memtoc rebuild --segments",
                examples,
            ),
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
            "WHERE n.version <> v.version OR n.level <> v.level OR n.start_ms <> v.start_ms "
            f"OR n.end_ms <> v.end_ms OR n.parent_id {self.IS_DISTINCT} v.parent_id ORDER BY 1, 2"
        )
        return [
            found(
                "node latest pointers",
                rows,
                "nodes point at a version that does not exist",
                lambda r: f"{r[1]} v{r[2]} in {r[0]}",
                "memtoc rebuild --summaries",
                examples,
            ),
            found(
                "node latest pointers",
                astray,
                "nodes differ from their latest version (version, level, span or parent)",
                lambda r: f"{r[1]} v{r[2]} (latest v{r[3]}) in {r[0]}",
                "memtoc rebuild --summaries",
                examples,
            ),
        ]

    def _failures(self, examples: int) -> list[Finding | None]:
        entries = self.q(
            "SELECT entry_id, error FROM outbox WHERE status = 'failed' ORDER BY entry_id"
        )
        segs = self.q(
            "SELECT project, node_id, error FROM segments WHERE error IS NOT NULL ORDER BY 1, 2"
        )
        fix = "memtoc process --retry-failed"
        return [
            found("pipeline failures", entries, "outbox entries failed",
                  lambda r: f"entry {r[0]}: {str(r[1])[:120]}", fix, examples),
            found("pipeline failures", segs, "segments are quarantined (their build failed)",
                  lambda r: f"{r[1]} in {r[0]}: {str(r[2])[:120]}", fix, examples),
        ]  # fmt: skip

    def _grips(self, examples: int) -> list[Finding | None]:
        same = self.GRIP_EVENT_PROJECT
        unresolved = self.q(
            "SELECT g.grip_id, g.project FROM grips g WHERE NOT EXISTS (SELECT 1 FROM events e "
            f"WHERE e.event_id = g.event_id_start{same} AND {self.live}) "
            "OR NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = g.event_id_end"
            f"{same} AND {self.live}) ORDER BY 1"
        )
        orphans = self.q(
            "SELECT g.grip_id, g.project, g.toc_node_id FROM grips g LEFT JOIN toc_nodes n "
            "ON n.project = g.project AND n.node_id = g.toc_node_id WHERE n.node_id IS NULL "
            "ORDER BY 1"
        )
        fix = "memtoc rebuild --grips"
        return [
            found("grips resolve", unresolved, "grips point at missing events",
                  lambda r: f"{r[0]} in {r[1]}", fix, examples),
            found("grips resolve", orphans, "grips belong to no node",
                  lambda r: f"{r[0]} of {r[2]} in {r[1]}", fix, examples),
        ]  # fmt: skip

    def _missing_bookmark_events(self) -> list[tuple[str, str]]:
        """``(bookmark_id, project)`` of bookmarks citing an event that is not live, by id."""
        raise NotImplementedError

    def _bookmark_events(self, examples: int) -> Finding | None:
        return found(
            "bookmark events",
            self._missing_bookmark_events(),
            "bookmarks cite events that do not exist",
            lambda r: f"{r[0]} in {r[1]}",
            "memtoc rebuild --bookmarks",
            examples,
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
        # a bookmark lost without its document: detected again from the events first
        bookmark = any(r[0] == "bookmark" for r in stale)

        def item(r: Any) -> str:
            return f"{r[0]} {r[2]} in {r[1]}"

        return [
            found("search documents", missing, "nodes, grips or bookmarks have no search document",
                  item, "memtoc rebuild --docs", examples),
            found("search documents", stale, "search documents are of items that do not exist",
                  item, "memtoc rebuild --bookmarks --docs" if bookmark else "memtoc rebuild --docs",
                  examples),
        ]  # fmt: skip

    # -- the BM25 indexes: a word of a stored text must find it -------------------------------------
    def _finds(self, table: str, key: str, rowid: Any, word: str) -> bool | None:
        """Whether ``table``'s index finds row ``rowid`` by ``word`` (None: not a searchable
        word, try another)."""
        raise NotImplementedError

    def _probe(
        self, check: str, table: str, key: str, label: str, rows: list[Any]
    ) -> Finding | None:
        for rowid, item_id, text in rows:
            for word in probe_words(original_text(text)):
                hit = self._finds(table, key, rowid, word)
                if hit is None:
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

    def _probe_events(self) -> list[Any]:
        """The newest and oldest filed events: ``(seq, event_id, text)``."""
        rows: list[Any] = []
        for order in ("DESC", "ASC"):
            rows += self.q(
                "SELECT s.seq, e.event_id, e.text FROM segment_events s JOIN events e "
                f"ON e.seq = s.seq WHERE {self.live} ORDER BY s.seq {order} LIMIT {PROBES // 2}"
            )
        return rows

    def _probe_docs(self) -> list[Any]:
        """The newest and oldest search documents: ``(doc_seq, kind id, text)``."""
        rows: list[Any] = []
        for order in ("DESC", "ASC"):
            rows += self.q(
                f"SELECT doc_seq, kind || ' ' || doc_id, text FROM docs ORDER BY doc_seq {order} "
                f"LIMIT {PROBES // 2}"
            )
        return rows

    # -- vectors ------------------------------------------------------------------------------------
    def _vectors(
        self, embedder: EmbedderIdentity | None, examples: int, pending: list[str]
    ) -> list[tuple[str, list[Finding | None]]]:
        recorded = {
            str(r[0]).removeprefix("embedder:"): str(r[1])
            for r in self.q("SELECT key, value FROM meta WHERE key LIKE ?", ("embedder:%",))
        }
        rows = self.q(
            f"SELECT embedder, kind, dim, COUNT(*), {self.BAD_DIM} FROM vectors "
            "GROUP BY embedder, kind, dim"
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

    def _lost_doc_vectors(self, name: str) -> list[Any] | None:
        """``(kind, project, doc_id)`` of current docs whose recorded vector is gone (None where
        the store records no provenance apart from the vector itself)."""
        return None

    def _count_vectors(self, c: VectorCounts, examples: int) -> None:
        cp = self.store.get_checkpoint(embed_job(c.name))
        c.checkpoint = int(cp) if isinstance(cp, int) else 0
        c.expected_events = self._n(
            f"SELECT COUNT(*) FROM events e WHERE e.seq <= ? AND {self.live}", (c.checkpoint,)
        )
        if c.event_vectors != c.expected_events:
            c.missing_events = [
                f"event {r[0]}"
                for r in self.q(
                    f"SELECT e.event_id FROM events e WHERE e.seq <= ? AND {self.live} AND NOT "
                    "EXISTS (SELECT 1 FROM vectors v WHERE v.kind = 'event' AND "
                    "v.project = e.project AND v.item_id = e.event_id AND v.embedder = ?) "
                    "ORDER BY e.seq LIMIT ?",
                    (c.checkpoint, c.name, examples),
                )
            ]
        lost = self._lost_doc_vectors(c.name)
        if lost is not None:
            c.lost_docs = (len(lost), [f"{r[0]} {r[2]} in {r[1]}" for r in lost[:examples]])
        orphans = self.q(
            "SELECT v.kind, v.project, v.item_id FROM vectors v WHERE v.embedder = ? "
            "AND v.kind <> 'event' AND NOT EXISTS (SELECT 1 FROM docs d WHERE "
            "d.kind = v.kind AND d.project = v.project AND d.doc_id = v.item_id) ORDER BY 1, 2, 3",
            (c.name,),
        )
        c.orphans = (len(orphans), [f"{r[0]} {r[2]} in {r[1]}" for r in orphans[:examples]])
        c.unembedded_docs = self._n(
            "SELECT COUNT(*) FROM docs d WHERE NOT EXISTS (SELECT 1 FROM vectors x "
            "WHERE x.kind = d.kind AND x.project = d.project AND x.item_id = d.doc_id "
            "AND x.embedder = ?)",
            (c.name,),
        )

    # -- structure scans (memtoc.derived.verify) ------------------------------------------------------
    def scan_nodes(self, after: tuple[str, str], limit: int) -> list[TocNode]:
        rows = self.q(
            "SELECT n.project, n.node_id, v.version, v.data FROM toc_nodes n "
            "JOIN toc_node_versions v ON v.project = n.project AND v.node_id = n.node_id "
            "AND v.version = n.version WHERE (n.project, n.node_id) > (?, ?) "
            "ORDER BY n.project, n.node_id LIMIT ?",
            (*after, limit),
        )
        return [node_from_row(r[0], r[1], r[2], r[3]) for r in rows]

    def scan_grips(self, after: str, limit: int) -> list[Grip]:
        rows = self.q(
            f"SELECT {GRIP_COLS} FROM grips WHERE grip_id > ? ORDER BY grip_id LIMIT ?",
            (after, limit),
        )
        return [grip_from_row(r) for r in rows]

    def pending_segments(self) -> list[SegmentRecord]:
        rows = self.q(
            f"SELECT {SEGMENT_COLS} FROM segments WHERE built = 0 OR error IS NOT NULL "
            "ORDER BY project, start_ms"
        )
        return [segment_from_row(r) for r in rows]

    def segments_without_node(self, project: str | None = None) -> list[tuple[str, str]]:
        where, params = scope("g.project", project)
        rows = self.q(
            "SELECT g.project, g.node_id FROM segments g LEFT JOIN toc_nodes n "
            "ON n.project = g.project AND n.node_id = g.node_id "
            f"WHERE g.built = 1 AND n.node_id IS NULL{where} ORDER BY 1, 2",
            params,
        )
        return [(r[0], r[1]) for r in rows]

    def nodes_without_segment(self, project: str | None = None) -> list[tuple[str, str]]:
        where, params = scope("n.project", project)
        rows = self.q(
            "SELECT n.project, n.node_id FROM toc_nodes n LEFT JOIN segments g "
            "ON g.project = n.project AND g.node_id = n.node_id "
            f"WHERE n.level = 'segment' AND g.node_id IS NULL{where} ORDER BY 1, 2",
            params,
        )
        return [(r[0], r[1]) for r in rows]
