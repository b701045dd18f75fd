"""Recall modes for ``memtoc eval``: ``Memory.recall`` as users get it, asked per budget.

- ``recall``: hybrid recall (BM25 + the run's embedder), the product default;
- ``recall-bm25``: the same without vectors (what a store without an embedder gets);
- ``recall-rank``: recall's *ranking* only (no packing), as a flat ranked list of turns — recall@k
  of the ``recall`` modes is scored on the same list, so this mode shows the ranking's budget
  recall when items are simply taken in order (the harness's usual budget cut).

``recall`` / ``recall-bm25`` are ``BudgetedMode``s: the harness asks them once per budget ``B``
(``recall(query, budget=B)``, the time limit off so a loaded machine does not change the answer)
and scores budget recall on that context. Their recall@k is scored on recall's ranked events
(``retrieve``: the ranking without packing, one item per event), and their latency is the
largest budget's recall call.
"""

from __future__ import annotations

from memtoc.errors import QueryError
from memtoc.eval.modes import ModeContext, ModeFactory, RetrievedItem, register_mode
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall import rank_only, recall


class RecallRankMode:
    """Recall's ranked events (hybrid or BM25-only) over one project's store; the harness cuts
    the list in order for the budget metrics."""

    def __init__(self, ctx: ModeContext, name: str, hybrid: bool) -> None:
        self.ctx = ctx
        self.name = name
        self.hybrid = hybrid
        if hybrid:
            ctx.require_embedder()
        self._memory: Memory | None = None
        self._semantic: SemanticIndex | None = None

    def prepare(self, memory: Memory, project: str) -> None:
        self._memory = memory
        self._semantic = None
        if self.hybrid:
            self._semantic = SemanticIndex(memory.store, embedder=self.ctx.require_embedder())
            step = self._semantic.embed_step()
            assert step is not None
            step.run()

    def _mem(self, project: str) -> Memory:
        if self._memory is None:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared")
        return self._memory

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        memory = self._mem(project)
        ranking = rank_only(
            memory.store,
            query,
            projects=(project,),
            at_ms=ref_ms,
            tz=memory.tz,
            semantic=self._semantic,
        )
        counter = self.ctx.counter
        return [
            RetrievedItem(e.text, (e.event_id,), counter.count(e.text))
            for e in ranking.ranked_events()[:k]
        ]


class RecallMode(RecallRankMode):
    """``recall`` itself: asked once per budget for the budget metrics."""

    def retrieve_budget(
        self, query: str, project: str, ref_ms: int, budget: int
    ) -> list[RetrievedItem]:
        memory = self._mem(project)
        result = recall(
            memory.store,
            self.ctx.counter,
            query,
            budget=budget,
            projects=(project,),
            at_ms=ref_ms,
            tz=memory.tz,
            semantic=self._semantic,
            time_limit_ms=None,
        )
        return [
            RetrievedItem(i.text, tuple(e.event_id for e in i.events), i.tokens)
            for i in result.items
        ]


def _factory(name: str, hybrid: bool, budgeted: bool) -> ModeFactory:
    def build(ctx: ModeContext) -> RecallRankMode:
        cls = RecallMode if budgeted else RecallRankMode
        return cls(ctx, name, hybrid)  # ModeUnavailable without an embedder

    return build


for _name, _hybrid, _budgeted in (
    ("recall", True, True),
    ("recall-bm25", False, True),
    ("recall-rank", True, False),
):
    register_mode(_name, _factory(_name, _hybrid, _budgeted))
