"""Recall: the best context for a question within a token budget (DESIGN §5, issue #5).

``recall(query, budget)`` ranks (``recall_rank``) and packs (``recall_pack``):

1. bookmarks that match the question, expanded to their source events;
2. then events, grips and segments by recall's score — hybrid retrieval (BM25 + vectors) over
   events, boosted by matching grips/segments, by the evidence of their session and, for the
   turns next to a strong hit, by that hit;
3. each unit at L2 when it fits, else stepped down to L1, then L0 — never cut mid-text;
4. every event once (near-identical turns too), the items returned in time order.

A time expression in the question ("last week", "in March", "on 8 May") is resolved against
``at_ms`` (``timeparse.parse_time``) in the store's time zone: the window brings in-window events
into the pool and boosts them, and the expression itself is not searched for as words.

The budget is never exceeded: ``tokens`` is the one ``TokenCounter``'s count of the assembled
context (items joined by newlines, with their day headers). A hard time limit stops ranking and
packing where they are and returns the best so far with ``truncated`` set. Without an embedder
recall runs BM25-only and ``degraded`` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import tzinfo

from memtoc.config import DEFAULTS
from memtoc.errors import QueryError
from memtoc.model import JsonValue, iso_ms
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall_pack import Cite, Packer, Unit, context_text
from memtoc.retrieval.recall_rank import Deadline, RankConfig, Ranker, Ranking
from memtoc.retrieval.teleport import SearchFilters
from memtoc.retrieval.tiers import SearchItem, TierRenderer
from memtoc.retrieval.time_search import ResolvedTime
from memtoc.retrieval.timeparse import parse_time
from memtoc.store.capabilities import SearchStore
from memtoc.text.fts_text import build_match
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter

DEFAULT_BUDGET = 1_000
DEFAULT_TIME_LIMIT_MS = DEFAULTS["recall_time_limit_ms"]
MAX_BUDGET = 1_000_000


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What ``Memory.recall`` returns (DESIGN §6): items in time order within ``budget``."""

    query: str
    budget: int
    tokens: int
    """The assembled context's token count (``context()``), never above ``budget``."""
    items: tuple[SearchItem, ...]
    at_ms: int
    method: str
    """``hybrid`` (BM25 + vectors) or ``bm25``."""
    degraded: str | None
    """Why recall could not run in full (no embedder, time limit), else ``None``."""
    truncated: bool
    """True when the time limit stopped recall early (the items are the best found by then)."""
    time_range: dict[str, JsonValue] | None = None
    elapsed_ms: float = 0.0
    stepped_down: int = 0
    """Items included below L2 because their full text did not fit."""
    summaries: dict[str, JsonValue] | None = None
    """Summaries among the items built by the extractive fallback or another backend than the
    configured one (``provenance.SummaryProvenance``), else ``None``."""
    cite: Cite = False
    """Each item's text in ``context()`` is led by its id or a handle of it (``recall_pack.Cite``:
    what an agent is sent over MCP)."""

    def context(self) -> str:
        """The context as one text: the items' texts joined by newlines (led by their ids when
        ``cite``); ``tokens`` is its count."""
        return context_text(self.items, cite=self.cite)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "query": self.query,
            "budget": self.budget,
            "tokens": self.tokens,
            "items": [item.to_dict() for item in self.items],
            "degraded": self.degraded,
            "truncated": self.truncated,
            "at": iso_ms(self.at_ms),
            "mode": self.method,
            "time_range": self.time_range,
            "stepped_down": self.stepped_down,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "summaries": self.summaries,
        }


def _units(ranking: Ranking) -> list[Unit]:
    """Events and matching bookmarks by score, then grips and segments.

    A bookmark is its content (a sentence or two, citing its events), ranked with the events at
    its match score times the best event's: packing its events whole ahead of everything (as
    recall once did) spent most of a budget on the few long turns a bookmark cites."""
    top = max(ranking.scores.values(), default=1.0)
    units: list[Unit] = []
    for project, bookmark_id, score in ranking.bookmarks:
        units.append(Unit("bookmark", project, bookmark_id, score * top, ()))
    ranked: list[Unit] = [
        Unit("event", e.project, e.event_id, ranking.scores[e.event_id], (e,))
        for e in ranking.ranked_events()
    ]
    # grips/segments last: their events came in one by one already (boosted by the doc's
    # match); what is left of the budget may hold a summary of a matching segment (L1/L0)
    docs = [
        Unit(kind, project, item_id, score, events, last=True)
        for (kind, project, item_id), score, events in ranking.docs
    ]
    return units + ranked + docs


def _time(
    query: str, at_ms: int, tz: tzinfo
) -> tuple[str, tuple[int, int] | None, dict[str, JsonValue] | None]:
    expr = parse_time(query, at_ms, tz)
    if expr is None or expr.range is None:
        return query, None, None
    rest = expr.rest if build_match(expr.rest) is not None else query
    lo, hi = expr.range
    resolved = ResolvedTime(expr.matched, rest, lo, hi, at_ms, applied="boost")
    return rest, (lo, hi), resolved.to_dict()  # the one time-range shape (search's too)


def rank_only(
    store: SearchStore,
    query: str,
    *,
    projects: tuple[str, ...] | None,
    at_ms: int,
    tz: tzinfo,
    semantic: SemanticIndex | None = None,
    config: RankConfig | None = None,
) -> Ranking:
    """Recall's ranking without packing (the eval's recall@k uses it)."""
    text, window, _ = _time(query, at_ms, tz)
    ranker = Ranker(store, semantic, config or RankConfig(), Deadline(None), tz)
    if build_match(text) is None:
        return Ranking()
    return ranker.rank(text, SearchFilters(projects=projects), window)


def recall(
    store: SearchStore,
    counter: TokenCounter,
    query: str,
    *,
    budget: int = DEFAULT_BUDGET,
    projects: tuple[str, ...] | None = None,
    at_ms: int,
    tz: tzinfo,
    semantic: SemanticIndex | None = None,
    time_limit_ms: float | None = DEFAULT_TIME_LIMIT_MS,
    config: RankConfig | None = None,
    timer: Callable[[], float] | None = None,
    headers: bool = True,
    cite: Cite = False,
) -> RecallResult:
    """Assemble the best context for ``query`` within ``budget`` tokens (module docstring)."""
    if budget < 0 or budget > MAX_BUDGET:
        raise QueryError(f"recall budget must be 0..{MAX_BUDGET} tokens (got {budget})")
    if time_limit_ms is not None and time_limit_ms < 0:
        raise QueryError(f"recall time limit must be ≥ 0 ms (got {time_limit_ms})")
    deadline = Deadline(time_limit_ms) if timer is None else Deadline(time_limit_ms, timer)
    text, window, time_range = _time(query, at_ms, tz)
    reasons: list[str] = []
    if semantic is None:
        reasons.append("no embedder: none configured")
    elif semantic.degraded is not None:
        reasons.append(semantic.degraded)
    elif semantic.partial is not None:
        reasons.append(semantic.partial)
    ranker = Ranker(store, semantic, config or RankConfig(), deadline, tz)
    if build_match(text) is None or budget == 0:
        ranking = Ranking(method="hybrid" if ranker.semantic is not None else "bm25")
    else:
        ranking = ranker.rank(text, SearchFilters(projects=projects), window)
    packer = Packer(
        TierRenderer(store, counter), counter, tz, budget, deadline, headers=headers,
        terms=key_terms(text), cite=cite,
    )  # fmt: skip
    packer.pack(_units(ranking))
    items, tokens = packer.finish()
    truncated = bool(ranking.skipped) or packer.truncated
    if truncated:
        left = ", ".join(ranking.skipped) or "packing"
        reasons.append(f"time limit {time_limit_ms:g} ms reached (skipped: {left})")
    return RecallResult(
        query=query,
        budget=budget,
        tokens=tokens,
        items=tuple(items),
        at_ms=at_ms,
        method=ranking.method,
        degraded="; ".join(reasons) or None,
        truncated=truncated,
        time_range=time_range,
        elapsed_ms=deadline.elapsed_ms(),
        stepped_down=packer.stepped_down,
        cite=cite,
    )
