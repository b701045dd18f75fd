"""Teleport modes for ``memtoc eval``: memtoc's own search, as users get it.

- ``teleport-bm25``: code-aware BM25 over events only (``memtoc search --kind event --mode bm25``).
- ``teleport-bm25-all``: BM25 over nodes, grips, bookmarks and events.
- ``teleport-hybrid``: BM25 and vectors fused by RRF, events only.
- ``teleport-hybrid-all``: the same over every kind (``memtoc search``'s default).

Items come at L2 (the full events each item includes), best first, until they cover ``k`` turns
(ranked first, then rendered lazily: only the items used are read and counted).
Hybrid modes embed the project's events and docs once (``prepare``, the pipeline's embedding step
with the run's embedder) and are unavailable without an embedder.
"""

from __future__ import annotations

from collections.abc import Iterable

from memtoc.errors import QueryError
from memtoc.eval.modes import ModeContext, ModeFactory, RetrievedItem, register_mode
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.hybrid import rank
from memtoc.retrieval.teleport import KINDS, SearchFilters
from memtoc.retrieval.tiers import SearchItem, TierRenderer


class TeleportMode:
    """``Memory``'s search (BM25 or hybrid) over events or every kind."""

    def __init__(self, ctx: ModeContext, name: str, method: str, kinds: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.name = name
        self.method = method
        self.kinds = kinds
        if method == "hybrid":
            ctx.require_embedder()
        self._memory: Memory | None = None
        self._semantic: SemanticIndex | None = None

    def prepare(self, memory: Memory, project: str) -> None:
        store = memory.store
        self._memory = memory
        self._semantic = None
        if self.method == "hybrid":
            self._semantic = SemanticIndex(store, embedder=self.ctx.require_embedder())
            step = self._semantic.embed_step()
            assert step is not None
            step.run()

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        if self._memory is None:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared")
        store = self._memory.store
        found = rank(
            store,
            query,
            SearchFilters(projects=(project,), kinds=self.kinds),
            semantic=self._semantic,
            limit=k,
            mode=self.method,
        )
        return covering(TierRenderer(store, self.ctx.counter).render_many(found.ranked, "L2"), k)


def covering(items: Iterable[SearchItem], k: int) -> list[RetrievedItem]:
    """Items in order until they include ``k`` turns; the rest is not rendered (``items`` is
    consumed lazily, so a whole segment at L2 ends the list early)."""
    out: list[RetrievedItem] = []
    covered = 0
    for item in items:
        if covered >= k:
            break
        ids = tuple(e.event_id for e in item.events)
        out.append(RetrievedItem(item.text, ids, item.tokens))
        covered += len(ids)
    return out


def _factory(name: str, method: str, kinds: tuple[str, ...]) -> ModeFactory:
    def build(ctx: ModeContext) -> TeleportMode:
        return TeleportMode(ctx, name, method, kinds)  # ModeUnavailable without an embedder

    return build


for _name, _method, _kinds in (
    ("teleport-bm25", "bm25", ("event",)),
    ("teleport-bm25-all", "bm25", KINDS),
    ("teleport-hybrid", "hybrid", ("event",)),
    ("teleport-hybrid-all", "hybrid", KINDS),
):
    register_mode(_name, _factory(_name, _method, _kinds))
