"""Search: BM25 (``teleport``), vectors (``embedding_index``) and their reciprocal-rank fusion,
rendered at a tier (``tiers``).

An item at rank ``r`` (1-based) in a method's list earns ``w / (k + r)``; an item's fused score is
the sum over the methods that returned it. Ranks, not scores, are fused, so BM25's unbounded
scores and cosine similarities need no calibration against each other. The fused score is
normalised to 0..1 by the best a single item can earn (rank 1 in every method:
``sum(w) / (k + 1)``).

The formula is versioned (``Fusion.name``: ``rrf-v1(k=60,w_bm25=1,w_vec=1)``) and reported with
every hybrid result, so a change of weights or formula is visible in output and evaluations.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memtoc.config import DEFAULTS, Settings
from memtoc.errors import ConfigError, QueryError
from memtoc.model import JsonValue
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.teleport import Hit, SearchFilters, SearchStore, bm25_search, filter_keys
from memtoc.retrieval.tiers import TIERS, SearchItem, TierRenderer
from memtoc.text.fts_text import build_match
from memtoc.text.tokens import TokenCounter

K = TypeVar("K", bound=Hashable)

FUSION_VERSION = "rrf-v1"


def _num(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True, slots=True)
class Fusion:
    """RRF parameters: ``k`` damps the head of each list, ``w_*`` weigh the methods."""

    k: float = DEFAULTS["fusion_k"]
    w_bm25: float = DEFAULTS["fusion_w_bm25"]
    w_vec: float = DEFAULTS["fusion_w_vec"]

    def __post_init__(self) -> None:
        if self.k < 0 or self.w_bm25 < 0 or self.w_vec < 0 or self.w_bm25 + self.w_vec == 0:
            raise ConfigError(
                f"fusion needs k ≥ 0 and non-negative weights, not both zero (got {self.name})",
                setting="fusion",
            )

    @property
    def name(self) -> str:
        """The formula and its parameters, e.g. ``rrf-v1(k=60,w_bm25=1,w_vec=1)``."""
        return f"{FUSION_VERSION}(k={_num(self.k)},w_bm25={_num(self.w_bm25)},w_vec={_num(self.w_vec)})"

    def fuse(self, bm25: Sequence[K], vectors: Sequence[K]) -> list[tuple[K, float]]:
        """Fused ``(key, score)`` pairs, best first; scores in 0..1.

        Ties (equal fused score) keep BM25's order, then the vector order, so the result is
        deterministic.
        """
        scores: dict[K, float] = {}
        order: dict[K, int] = {}
        for weight, ranking in ((self.w_bm25, bm25), (self.w_vec, vectors)):
            for rank, key in enumerate(dict.fromkeys(ranking), start=1):
                scores[key] = scores.get(key, 0.0) + weight / (self.k + rank)
                order.setdefault(key, len(order))
        best = (self.w_bm25 + self.w_vec) / (self.k + 1)
        ranked = sorted(scores, key=lambda key: (-scores[key], order[key]))
        return [(key, min(1.0, scores[key] / best)) for key in ranked]


def fusion_from_settings(settings: Settings) -> Fusion:
    """The fusion the settings configure (``fusion_k``, ``fusion_w_*``)."""
    return Fusion(k=settings.fusion_k, w_bm25=settings.fusion_w_bm25, w_vec=settings.fusion_w_vec)


# -- search: BM25, vectors, fusion, tiers ------------------------------------------------------
MODES: tuple[str, ...] = ("auto", "bm25", "vector", "hybrid")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What ``Memory.search`` returns (DESIGN §6): items at a tier plus how they were found."""

    query: str
    mode: str
    """``bm25``, ``vector`` or ``hybrid`` — the method that actually ranked."""
    fusion: str | None
    """The fusion formula (``rrf-v1(...)``) for hybrid results, else ``None``."""
    degraded: str | None
    """Why the configured method could not run in full (``no embedder: …``), else ``None``."""
    depth: str
    items: tuple[SearchItem, ...]
    time_range: dict[str, JsonValue] | None = None
    """The time expression resolved from the query and how it was applied
    (``time_search.ResolvedTime.to_dict``), else ``None``."""
    summaries: dict[str, JsonValue] | None = None
    """Result summaries built by the extractive fallback or another backend than the configured
    one (``provenance.SummaryProvenance``), else ``None``."""

    @property
    def tokens(self) -> int:
        return sum(item.tokens for item in self.items)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "query": self.query,
            "mode": self.mode,
            "fusion": self.fusion,
            "degraded": self.degraded,
            "depth": self.depth,
            "tokens": self.tokens,
            "items": [item.to_dict() for item in self.items],
            "time_range": self.time_range,
            "summaries": self.summaries,
        }


def _vector_hits(
    store: SearchStore,
    semantic: SemanticIndex,
    query: str,
    filters: SearchFilters,
    k: int,
) -> list[Hit]:
    kinds = filters.effective_kinds()
    events_only = kinds == ("event",)
    post = any(
        v is not None
        for v in (filters.levels, filters.since_ms, filters.until_ms, filters.session_id)
    ) or (filters.role is not None)
    found = semantic.search(
        query,
        k * 4 if post else k,
        projects=filters.projects,
        kinds=kinds,
        since_ms=filters.since_ms if events_only else None,
        until_ms=filters.until_ms if events_only else None,
    )
    if post:
        keep = filter_keys(store, [tuple(key) for key, _ in found], filters)  # type: ignore[misc]
        found = [(key, cos) for key, cos in found if tuple(key) in keep]
    return [
        Hit(key.kind, key.project, key.item_id, 0, max(0.0, min(1.0, cos)), cos)
        for key, cos in found[:k]
    ]


@dataclass(frozen=True, slots=True)
class Ranking:
    """What ``rank`` found, before rendering: item keys ``(kind, project, item_id)`` with their
    0..1 scores, best first, and how they were ranked (see ``SearchResult``)."""

    query: str
    mode: str
    fusion: str | None
    degraded: str | None
    ranked: tuple[tuple[tuple[str, str, str], float], ...]


def _check(mode: str, depth: str, limit: int) -> None:
    if mode not in MODES:
        raise QueryError(f"unknown search mode {mode!r} (expected one of {', '.join(MODES)})")
    if depth not in TIERS:
        raise QueryError(f"unknown depth {depth!r} (expected L0, L1 or L2)")
    if limit < 0:
        raise QueryError(f"--limit must be ≥ 0 (got {limit})")


def rank(
    store: SearchStore,
    query: str,
    filters: SearchFilters | None = None,
    *,
    semantic: SemanticIndex | None = None,
    limit: int = 10,
    mode: str = "auto",
    fusion: Fusion | None = None,
) -> Ranking:
    """The best ``limit`` item keys for ``query``: BM25, vectors or both fused (``auto``: hybrid
    when an embedder loads, else BM25 with ``degraded`` saying why). Nothing is rendered, so a
    caller can render lazily (``TierRenderer.render_many``) and stop when it has enough."""
    _check(mode, "L0", limit)
    f = filters or SearchFilters()
    fusion = fusion or Fusion()
    degraded = None
    use_vectors = mode in ("auto", "vector", "hybrid")
    if use_vectors and (semantic is None or semantic.degraded is not None):
        degraded = semantic.degraded if semantic is not None else "no embedder: none configured"
        use_vectors = False
    elif use_vectors and semantic is not None:
        degraded = semantic.partial  # vectors used, but some filed events have none yet
    pool = max(3 * limit, 30)
    ranked: list[tuple[tuple[str, str, str], float]]
    if build_match(query) is None:  # nothing searchable: no method may invent results
        ranked, actual, formula = [], ("hybrid" if use_vectors else "bm25"), None
    elif mode == "bm25" or not use_vectors:
        actual, formula = "bm25", None
        ranked = [(h.key, h.score) for h in bm25_search(store, query, f, limit=limit)]
    else:
        assert semantic is not None
        vec = _vector_hits(store, semantic, query, f, pool)
        if mode == "vector":
            actual, formula = "vector", None
            ranked = [(h.key, h.score) for h in vec[:limit]]
        else:
            actual, formula = "hybrid", fusion.name
            lexical = bm25_search(store, query, f, limit=pool)
            fused = fusion.fuse([h.key for h in lexical], [h.key for h in vec])
            ranked = fused[:limit]
    return Ranking(query, actual, formula, degraded, tuple(ranked))


def search(
    store: SearchStore,
    counter: TokenCounter,
    query: str,
    filters: SearchFilters | None = None,
    *,
    semantic: SemanticIndex | None = None,
    limit: int = 10,
    depth: str = "L0",
    mode: str = "auto",
    fusion: Fusion | None = None,
) -> SearchResult:
    """Search ``query`` (``rank``), then render the best ``limit`` items at ``depth``."""
    _check(mode, depth, limit)
    found = rank(store, query, filters, semantic=semantic, limit=limit, mode=mode, fusion=fusion)
    items = tuple(TierRenderer(store, counter).render_many(found.ranked, depth))
    return SearchResult(query, found.mode, found.fusion, found.degraded, depth, items)
