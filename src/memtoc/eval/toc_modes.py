"""memtoc's navigation mode for ``memtoc eval``: ``toc-drill``.

The simplest use of the table of contents: rank the project's *segment* nodes by how well their
summary matches the question, then return each chosen segment's events (in time order), best
segment first, until ``k`` turns are covered.

A segment's match is reciprocal-rank fusion (k = 60) of

- BM25 over its search document (``docs_fts``: title, bullets, keywords and L0 — what the
  pipeline indexes for nodes), with the same OR-of-quoted-terms query as the ``bm25`` baseline;
- cosine between the question and the segment's title + bullets + keywords (when the run has an
  embedder; BM25 alone otherwise).

One item per segment: its events' texts joined by newlines, so a budget cut keeps the leading
turns of the last segment that does not fit whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from memtoc.errors import QueryError, StoreError
from memtoc.eval.baselines import fts_query, rrf
from memtoc.eval.modes import ModeContext, RetrievedItem, register_mode
from memtoc.memory import Memory
from memtoc.model import TocNode

if TYPE_CHECKING:
    from memtoc.text.embed import FloatMatrix


def segment_text(node: TocNode) -> str:
    """What a segment is matched on by vectors: title, bullets, keywords."""
    return "\n".join([node.title, *(b.text for b in node.bullets), " ".join(node.keywords)])


@dataclass
class _Project:
    memory: Memory
    segments: list[TocNode]
    doc_index: dict[int, int]
    """docs.doc_seq → position in ``segments``."""
    items: dict[int, RetrievedItem]
    matrix: FloatMatrix | None


class TocDrillMode:
    """Best segments by summary match, then their events in order."""

    name = "toc-drill"

    def __init__(self, ctx: ModeContext) -> None:
        self.ctx = ctx
        self.projects: dict[str, _Project] = {}

    def prepare(self, memory: Memory, project: str) -> None:
        segments = memory.store.list_nodes(project, level="segment")
        position = {n.node_id: i for i, n in enumerate(segments)}
        rows = (
            memory.sqlite_store("eval")
            .connection.execute(
                "SELECT doc_seq, doc_id FROM docs WHERE kind = 'node' AND project = ?", (project,)
            )
            .fetchall()
        )
        doc_index = {int(seq): position[doc] for seq, doc in rows if doc in position}
        matrix = None
        if self.ctx.embedder is not None:
            texts = [segment_text(n) for n in segments]
            matrix = self.ctx.embed_texts((project, "segments"), texts)
        self.projects = {project: _Project(memory, segments, doc_index, {}, matrix)}

    def _bm25(self, p: _Project, project: str, query: str, limit: int) -> list[int]:
        match = fts_query(query)
        if match is None:
            return []
        try:
            rows = (
                p.memory.sqlite_store("eval")
                .connection.execute(
                    "SELECT docs_fts.rowid FROM docs_fts JOIN docs d ON d.doc_seq = docs_fts.rowid "
                    "WHERE docs_fts MATCH ? AND d.kind = 'node' AND d.project = ? "
                    "AND d.doc_id LIKE 'toc:segment:%' ORDER BY bm25(docs_fts), docs_fts.rowid "
                    "LIMIT ?",
                    (match, project, limit),
                )
                .fetchall()
            )
        except Exception as exc:  # sqlite3.Error: a query we built must never fail
            raise StoreError(f"segment BM25 query {match!r} failed: {exc}") from exc
        return [p.doc_index[r[0]] for r in rows if r[0] in p.doc_index]

    def _item(self, p: _Project, project: str, i: int) -> RetrievedItem:
        item = p.items.get(i)
        if item is None:
            events = p.memory.store.segment_member_events(project, p.segments[i].node_id)
            text = "\n".join(e.text for e in events)
            item = RetrievedItem(
                text, tuple(e.event_id for e in events), self.ctx.counter.count(text)
            )
            p.items[i] = item
        return item

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        p = self.projects.get(project)
        if p is None:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared")
        rankings = [self._bm25(p, project, query, len(p.segments))]
        if p.matrix is not None:
            sims = p.matrix @ self.ctx.embed_query(query)
            rankings.append([int(i) for i in np.argsort(-sims, kind="stable")])
        out: list[RetrievedItem] = []
        covered = 0
        for i in rrf(rankings):
            if covered >= k:
                break
            item = self._item(p, project, i)
            out.append(item)
            covered += len(item.event_ids)
        return out


register_mode("toc-drill", TocDrillMode)
