"""Drill-down and time-aware modes for ``memtoc eval``.

- ``drill``: ``memtoc.retrieval.drill`` with BM25 only — year → month → week → day → segment
  (beam 3, 5 segments), the best events inside the chosen segments, then the fallback cascade
  fills up to ``k`` events; a time expression in the question is resolved at the question's
  time and restricts the roots.
- ``drill-hybrid``: the same with the run's embedder (BM25 and cosine averaged at every step).
- ``teleport-time-filter`` / ``teleport-time-boost``: ``teleport-bm25`` (BM25 over events) with
  the question's time expression resolved at the question's time and applied as a filter or a
  boost (``memtoc.retrieval.time_search``) — to choose ``Memory.search``'s default.

Every item is one event at L2 (its full text), best first. ``toc-drill`` (segments ranked by
their summaries, then each segment's events in time order) is superseded by ``drill``.
"""

from __future__ import annotations

from memtoc.errors import QueryError
from memtoc.eval.modes import (
    ModeContext,
    ModeFactory,
    RetrievedItem,
    note_unregistered,
    register_mode,
)
from memtoc.eval.teleport_modes import covering
from memtoc.memory import Memory
from memtoc.retrieval.drill import drill
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.teleport import SearchFilters
from memtoc.retrieval.tiers import TierRenderer
from memtoc.retrieval.time_search import time_rank


class DrillMode:
    """``drill`` (BM25) or ``drill-hybrid`` (BM25 + the run's embedder)."""

    def __init__(self, ctx: ModeContext, name: str, vectors: bool) -> None:
        self.ctx = ctx
        self.name = name
        self.vectors = vectors
        if vectors:
            ctx.require_embedder()
        self._memory: Memory | None = None
        self._semantic: SemanticIndex | None = None
        self._fell_back = 0
        self._asked = 0

    def prepare(self, memory: Memory, project: str) -> None:
        self._memory = memory
        self._semantic = None
        if self.vectors:
            self._semantic = SemanticIndex(memory.store, embedder=self.ctx.require_embedder())
            step = self._semantic.embed_step()
            assert step is not None
            step.run()

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        memory = self._memory
        if memory is None:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared")
        result = drill(
            memory.store,
            self.ctx.counter,
            query,
            projects=(project,),
            semantic=self._semantic,
            at_ms=ref_ms,
            tz=memory.tz,
            limit=k,
            depth="L2",
        )
        self._asked += 1
        self._fell_back += result.reason is not None
        return covering(result.items, k)

    def tally(self) -> dict[str, int]:
        return {"fell_back": self._fell_back, "asked": self._asked}

    def absorb(self, tally: dict[str, int]) -> None:
        self._fell_back += tally["fell_back"]
        self._asked += tally["asked"]

    def notes(self) -> list[str]:
        return [
            f"{self.name}: the drill's own result was dropped for the fallback cascade on "
            f"{self._fell_back} of {self._asked} questions"
        ]


class TimeTeleportMode:
    """``teleport-bm25`` with the question's time expression applied (filter or boost)."""

    def __init__(self, ctx: ModeContext, name: str, time_mode: str) -> None:
        self.ctx = ctx
        self.name = name
        self.time_mode = time_mode
        self._memory: Memory | None = None
        self._resolved = 0
        self._asked = 0

    def prepare(self, memory: Memory, project: str) -> None:
        self._memory = memory

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        memory = self._memory
        if memory is None:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared")
        store = memory.store
        found, report = time_rank(
            store,
            query,
            SearchFilters(projects=(project,), kinds=("event",)),
            reference_ms=ref_ms,
            tz=memory.tz,
            time_mode=self.time_mode,
            limit=k,
            mode="bm25",
        )
        self._asked += 1
        self._resolved += report is not None and report.get("start_ms") is not None
        return covering(TierRenderer(store, self.ctx.counter).render_many(found.ranked, "L2"), k)

    def tally(self) -> dict[str, int]:
        return {"resolved": self._resolved, "asked": self._asked}

    def absorb(self, tally: dict[str, int]) -> None:
        self._resolved += tally["resolved"]
        self._asked += tally["asked"]

    def notes(self) -> list[str]:
        return [
            f"{self.name}: a time expression was resolved in {self._resolved} of "
            f"{self._asked} questions"
        ]


def _drill(name: str, vectors: bool) -> ModeFactory:
    def build(ctx: ModeContext) -> DrillMode:
        return DrillMode(ctx, name, vectors)  # ModeUnavailable without an embedder

    return build


def _timed(name: str, time_mode: str) -> ModeFactory:
    def build(ctx: ModeContext) -> TimeTeleportMode:
        return TimeTeleportMode(ctx, name, time_mode)

    return build


register_mode("drill", _drill("drill", False))
register_mode("drill-hybrid", _drill("drill-hybrid", True))
register_mode("teleport-time-filter", _timed("teleport-time-filter", "filter"))
register_mode("teleport-time-boost", _timed("teleport-time-boost", "boost"))
note_unregistered("toc-drill", "superseded by drill (memtoc.eval.drill_modes)")
