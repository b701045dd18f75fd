"""The methods ``memtoc eval coding`` compares, each answering a question within a token budget.

- ``recall``: ``Memory.recall`` exactly as a user gets it (the product's ranking, packing, tiers,
  time limit and embedder), asked once per budget with the question's reference time.
- Baselines over the same stored events, each a ranking packed by ``coding_score.pack_whole``
  (whole events by rank; one too long for what is left is skipped, never cut):
  ``bm25`` (``baselines.Turns.bm25``: FTS5 BM25, any word of the question), ``dense`` (cosine
  with the run's embedder), ``rrf`` (reciprocal-rank fusion of the two, k = 60) and ``recency``
  (the newest events at or before the reference time first).
- Agents browsing the table of contents (``coding_browse``): ``browse`` from the root,
  ``teleport-browse`` from a search's best hit — paying for every token they read.

A baseline ranks once per question (``DEPTH`` events) and packs that ranking for every budget;
its latency is the ranking's plus the packing's time. Every method also exposes its ranking
(``ranking``), so the per-question output can say where a missed gold event stood.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from memtoc.eval.baselines import RRF_K, Turns, rrf
from memtoc.eval.coding import CodingQuestion
from memtoc.eval.coding_score import ContextItem, pack_whole
from memtoc.eval.modes import ModeContext
from memtoc.memory import Memory
from memtoc.retrieval.recall import rank_only
from memtoc.retrieval.vectors import cosine_scores

METHODS = ("recall", "bm25", "dense", "rrf", "recency", "browse", "teleport-browse")
DEPTH = 1_000
"""Events a baseline ranks per question (enough to fill 2,000 tokens after skips)."""


@dataclass(frozen=True, slots=True)
class Answer:
    items: list[ContextItem]
    latency_ms: float
    reported_tokens: int | None = None
    """The token count the method itself reported (recall), checked against the budget too."""
    truncated: bool = False
    degraded: str | None = None
    returned: tuple[str, ...] = ()
    """The events whose whole text the answer includes (recall: beside what it only cites)."""


class RecallMethod:
    """The product's recall over the built store."""

    name = "recall"

    def __init__(self, memory: Memory, project: str, time_limit_ms: float | None = None) -> None:
        self.memory = memory
        self.project = project
        self.time_limit_ms = time_limit_ms
        """None: the product's (setting ``recall_time_limit_ms``, default 1,000 ms)."""

    def answer(self, q: CodingQuestion, ref_ms: int, budget: int) -> Answer:
        start = time.perf_counter()
        result = self.memory.recall(
            q.question,
            budget=budget,
            project=self.project,
            at_ms=ref_ms,
            time_limit_ms=self.time_limit_ms,
        )
        latency = (time.perf_counter() - start) * 1000.0
        items = [
            ContextItem(
                i.text, tuple(dict.fromkeys([*(e.event_id for e in i.events), *i.cites])), i.tokens
            )
            for i in result.items
        ]
        included = tuple(e.event_id for i in result.items for e in i.events)
        return Answer(items, latency, result.tokens, result.truncated, result.degraded, included)

    def ranking(self, q: CodingQuestion, ref_ms: int) -> list[str]:
        """Recall's ranked events (its ranking without packing), best first."""
        memory = self.memory
        ranked = rank_only(
            memory.store,
            q.question,
            projects=(self.project,),
            at_ms=ref_ms,
            tz=memory.tz,
            semantic=memory.semantic,
        )
        return [e.event_id for e in ranked.ranked_events()]


@dataclass
class BaselineMethod:
    """A ranking of the stored events, packed whole for each budget."""

    name: str
    turns: Turns
    rank: Callable[[CodingQuestion, int], list[int]]
    ctx: ModeContext
    _cache: dict[tuple[str, int], tuple[list[int], float]] = field(default_factory=dict)

    def _ranked(self, q: CodingQuestion, ref_ms: int) -> tuple[list[int], float]:
        key = (q.qid, ref_ms)
        if key not in self._cache:
            start = time.perf_counter()
            order = self.rank(q, ref_ms)
            self._cache = {key: (order, (time.perf_counter() - start) * 1000.0)}
        return self._cache[key]

    def answer(self, q: CodingQuestion, ref_ms: int, budget: int) -> Answer:
        order, rank_ms = self._ranked(q, ref_ms)
        turns = self.turns
        start = time.perf_counter()
        items = pack_whole(
            order,
            lambda i: turns.events[i].text,
            lambda i: turns.tokens[i],
            lambda i: turns.events[i].event_id,
            budget,
            self.ctx.counter,
        )
        return Answer(items, rank_ms + (time.perf_counter() - start) * 1000.0)

    def ranking(self, q: CodingQuestion, ref_ms: int) -> list[str]:
        order, _ = self._ranked(q, ref_ms)
        return [self.turns.events[i].event_id for i in order]


def baselines(memory: Memory, project: str, ctx: ModeContext, names: tuple[str, ...]
              ) -> tuple[list[BaselineMethod], dict[str, str]]:  # fmt: skip
    """The named baselines over ``project``'s events, and those skipped with the reason."""
    turns = Turns.load(memory, project)
    skipped: dict[str, str] = {}
    matrix = None
    if ctx.embedder is not None and {"dense", "rrf"} & set(names):
        matrix = ctx.embed_texts((project, "events"), turns.texts)
    stamps = turns.ts_ms
    newest = [int(i) for i in np.argsort(-stamps, kind="stable")]

    def bm25(q: CodingQuestion, ref_ms: int) -> list[int]:
        return turns.bm25(q.question, DEPTH)

    def dense(q: CodingQuestion, ref_ms: int) -> list[int]:
        assert matrix is not None
        sims = cosine_scores(matrix, ctx.embed_query(q.question))
        return [int(i) for i in np.argsort(-sims, kind="stable")[:DEPTH]]

    def fused(q: CodingQuestion, ref_ms: int) -> list[int]:
        return rrf([bm25(q, ref_ms), dense(q, ref_ms)], RRF_K)[:DEPTH]

    def recency(q: CodingQuestion, ref_ms: int) -> list[int]:
        return [i for i in newest if stamps[i] <= ref_ms][:DEPTH]

    rankers: dict[str, Callable[[CodingQuestion, int], list[int]]] = {
        "bm25": bm25, "dense": dense, "rrf": fused, "recency": recency,
    }  # fmt: skip
    out: list[BaselineMethod] = []
    for name in names:
        if name not in rankers:
            continue
        if name in ("dense", "rrf") and matrix is None:
            skipped[name] = "no embedder (run with --embedder static|onnx)"
            continue
        out.append(BaselineMethod(name, turns, rankers[name], ctx))
    return out, skipped
