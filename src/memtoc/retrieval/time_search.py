"""Time in search queries: "what did we decide last week about the cache?".

``resolve_time`` finds a time expression in a query (``timeparse.parse_time``, against a reference
instant — the caller's ``at_ms``, else the memory's clock — in the store's time zone) and turns it
into a half-open window ``[start_ms, end_ms)``. Anchored expressions ("before the migration")
are resolved by a BM25 search for the anchor over events no later than the reference time
(``timeparse.resolve_anchor``): the best-matching event's instant bounds the window.

``time_search`` then searches with the expression **removed** from the query (so "last week" does
not ask BM25 for the words "last" and "week") and applies the window in one of two ways:

- ``boost`` (the default): the search runs unrestricted over a larger pool, items inside the
  window keep their score and items outside are multiplied by ``OUTSIDE_FACTOR``, then the list
  is re-sorted — the window's matches come first, the rest still follow;
- ``filter``: the window is intersected with the caller's own ``since``/``until`` and passed as a
  search filter — only items inside it are returned.

Boost is the default because it measured better than filtering or ignoring the expression on
LoCoMo (docs/benchmarks.md, "Drill-down and time in queries"): a question's date is often the date of the event, which the conversation
mentions days or weeks later, so a hard filter drops the turn that tells it. A query whose
expression cannot be resolved (an anchor nothing matches) is searched as written, and the result
says so.

The resolution is reported with the result (``SearchResult.time_range``, JSON ``time_range``):
the expression, the window as ISO instants, the anchor and how it was applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from memtoc.errors import QueryError
from memtoc.model import JsonValue, iso_ms
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.hybrid import Fusion, Ranking, SearchResult, rank
from memtoc.retrieval.teleport import SearchFilters, SearchStore, bm25_search
from memtoc.retrieval.tiers import TIERS, TierRenderer, item_spans
from memtoc.retrieval.timeparse import parse_time, resolve_anchor
from memtoc.text.tokens import TokenCounter

TIME_MODES: tuple[str, ...] = ("boost", "filter", "off")
DEFAULT_TIME_MODE = "boost"
OUTSIDE_FACTOR = 0.5
"""``boost``: the score factor of items outside the window."""
BOOST_POOL = 5
"""``boost``: how many times ``limit`` items are ranked before re-sorting."""

AnchorSearch = Callable[[str], Iterable[Any]]


@dataclass(frozen=True, slots=True)
class ResolvedTime:
    """A time expression found in a query and the window it resolved to.

    ``start_ms``/``end_ms`` are None when the expression could not be resolved (an anchor with no
    matching event); ``query`` is the query without the expression.
    """

    expression: str
    query: str
    start_ms: int | None
    end_ms: int | None
    reference_ms: int
    anchor: str | None = None
    anchor_ms: int | None = None
    applied: str = "filter"
    """``filter``, ``boost`` or ``unresolved`` (set by ``time_search``)."""

    @property
    def resolved(self) -> bool:
        return self.start_ms is not None and self.end_ms is not None

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "expression": self.expression,
            "query": self.query,
            "start_time": iso_ms(self.start_ms) if self.start_ms is not None else None,
            "end_time": iso_ms(self.end_ms) if self.end_ms is not None else None,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "reference_time": iso_ms(self.reference_ms),
            "anchor": self.anchor,
            "anchor_time": iso_ms(self.anchor_ms) if self.anchor_ms is not None else None,
            "applied": self.applied,
        }


def anchor_searcher(
    store: SearchStore, projects: tuple[str, ...] | None, reference_ms: int
) -> AnchorSearch:
    """A search for anchor events: BM25 over events up to the reference time, best first."""

    def run(text: str) -> list[Any]:
        filters = SearchFilters(projects=projects, kinds=("event",), until_ms=reference_ms + 1)
        return bm25_search(store, text, filters, limit=5)

    return run


def resolve_time(
    query: str,
    reference_ms: int,
    tz: tzinfo,
    anchor_search: AnchorSearch | None = None,
) -> ResolvedTime | None:
    """The time expression in ``query`` and its window, or None when there is none.

    An anchored expression needs ``anchor_search`` (query → hits with a ``ts_ms``, best first);
    without one, or when nothing matches, the result is unresolved (no window).
    """
    expr = parse_time(query, reference_ms, tz)
    if expr is None:
        return None
    if expr.range is not None:
        start, end = expr.range
        return ResolvedTime(expr.matched, expr.rest, start, end, reference_ms)
    anchor_ms = None
    if expr.anchor is not None and anchor_search is not None:
        anchor_ms = resolve_anchor(
            anchor_search, expr.anchor, relation=expr.relation, not_after_ms=reference_ms
        )
    window = expr.anchored_range(anchor_ms, reference_ms) if anchor_ms is not None else None
    if window is None:
        # nothing to bound the search: keep the whole query (the anchor words may still match)
        return ResolvedTime(
            expr.matched, query, None, None, reference_ms, expr.anchor, None, "unresolved"
        )
    return ResolvedTime(
        expr.matched, expr.rest, window[0], window[1], reference_ms, expr.anchor, anchor_ms
    )


def restrict(filters: SearchFilters, start_ms: int, end_ms: int) -> SearchFilters | None:
    """``filters`` with its time range intersected with ``[start_ms, end_ms)`` (None: empty)."""
    since = start_ms if filters.since_ms is None else max(filters.since_ms, start_ms)
    until = end_ms if filters.until_ms is None else min(filters.until_ms, end_ms)
    if until <= since:
        return None
    return dataclasses.replace(filters, since_ms=since, until_ms=until)


def time_rank(
    store: SearchStore,
    query: str,
    filters: SearchFilters | None = None,
    *,
    reference_ms: int,
    tz: tzinfo,
    time_mode: str = DEFAULT_TIME_MODE,
    semantic: SemanticIndex | None = None,
    limit: int = 10,
    mode: str = "auto",
    fusion: Fusion | None = None,
) -> tuple[Ranking, dict[str, JsonValue] | None]:
    """``hybrid.rank`` with the query's time expression resolved and applied (``time_mode``:
    ``filter``, ``boost`` or ``off``), and the resolution's report (``None``: no expression).

    Nothing is rendered: ``boost`` reads only the spans of its wider pool (``item_spans``)."""
    if time_mode not in TIME_MODES:
        raise QueryError(f"unknown time mode {time_mode!r} (expected {', '.join(TIME_MODES)})")
    f = filters or SearchFilters()

    def run(text: str, flt: SearchFilters, n: int) -> Ranking:
        return rank(store, text, flt, semantic=semantic, limit=n, mode=mode, fusion=fusion)

    resolved = None
    if time_mode != "off":
        resolved = resolve_time(
            query, reference_ms, tz, anchor_searcher(store, f.projects, reference_ms)
        )
    if resolved is None or not resolved.resolved:
        report = resolved.to_dict() if resolved is not None else None
        return run(query, f, limit), report
    assert resolved.start_ms is not None and resolved.end_ms is not None
    text = resolved.query or query
    if time_mode == "filter":
        narrowed = restrict(f, resolved.start_ms, resolved.end_ms)
        if narrowed is None:  # the window misses the caller's own range: nothing can match
            empty = run("", f, 0)
            return dataclasses.replace(empty, query=text), resolved.to_dict()
        return run(text, narrowed, limit), resolved.to_dict()
    boosted = dataclasses.replace(resolved, applied="boost")
    wide = run(text, f, max(limit * BOOST_POOL, 30))
    spans = item_spans(store, [key for key, _ in wide.ranked])
    lo, hi = resolved.start_ms, resolved.end_ms

    def inside(key: tuple[str, str, str]) -> bool:
        span = spans.get(key)
        return span is not None and span[0] < hi and span[1] >= lo

    rescored = [(key, s if inside(key) else s * OUTSIDE_FACTOR) for key, s in wide.ranked]
    rescored.sort(key=lambda pair: -pair[1])  # stable: ties keep the search's order
    return dataclasses.replace(wide, ranked=tuple(rescored[:limit])), boosted.to_dict()


def time_search(
    store: SearchStore,
    counter: TokenCounter,
    query: str,
    filters: SearchFilters | None = None,
    *,
    reference_ms: int,
    tz: tzinfo,
    time_mode: str = DEFAULT_TIME_MODE,
    semantic: SemanticIndex | None = None,
    limit: int = 10,
    depth: str = "L0",
    mode: str = "auto",
    fusion: Fusion | None = None,
) -> SearchResult:
    """``hybrid.search`` with the query's time expression resolved and applied (``time_mode``:
    ``filter``, ``boost`` or ``off``); the result's ``time_range`` reports the resolution."""
    if depth not in TIERS:
        raise QueryError(f"unknown depth {depth!r} (expected L0, L1 or L2)")
    found, report = time_rank(
        store,
        query,
        filters,
        reference_ms=reference_ms,
        tz=tz,
        time_mode=time_mode,
        semantic=semantic,
        limit=limit,
        mode=mode,
        fusion=fusion,
    )
    items = tuple(TierRenderer(store, counter).render_many(found.ranked, depth))
    return SearchResult(
        found.query, found.mode, found.fusion, found.degraded, depth, items, time_range=report
    )
