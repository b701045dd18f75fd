"""Drill-down (DESIGN §5): year → month → week → day → segment, each step searching only inside
the periods of the parents it chose, then the best events inside the chosen segments.

How one step scores a candidate node (a child of a chosen parent):

- **own similarity**: how well its summary matches — BM25 over the node's search document (the
  FTS index over nodes: title, bullets, keywords, L0), normalised 0..1 among the candidates, and,
  with an embedder, the cosine between the query and the node's vector (the two averaged);
- **evidence**: the best similarity of an *event inside the candidate's window* (BM25 over events,
  plus cosine with an embedder, averaged), searched only inside the parent's window;
- ``similarity = max(own, evidence)`` and ``score = similarity * DEPTH_BOOST[level]`` (the boost
  grows with depth: a specific match deep in the tree outranks a vague one high up; it is what
  makes the scores of different levels comparable in the path and for the fallback threshold).

A candidate's *window* is its span intersected with its parent's window (and the query's time
range), so every step — and every returned event — stays inside every period chosen above it.
Levels that do not exist yet (rollups not run) are skipped: the first level that has nodes gives
the roots.

Why the answer in a month of a year that is **not the global top year** is still found: a naive
drill keeps the single best year by its summary, and a year whose summary is dense with weak
matches (many sessions mentioning the query's common words) beats the year whose one month holds
the exact answer — summaries are lossy and rarely name one detail. Two things prevent that here:
(1) a **beam**: each level keeps its ``beam`` best candidates, not one, so the second-best year is
still descended into; (2) **evidence**: a period's score includes the best event match inside it,
so the month holding the exact answer scores as high as the answer itself and wins across the
beam, whatever its year's summary says.

Fallback cascade: when the drill ends with nothing good (no segment, or the best segment's
similarity below ``min_similarity``), its items are dropped and the result comes from flat search
restricted to the query's time range (``range``), then flat search (``flat``). The same cascade
also *fills* a drill that found good but fewer than ``limit`` events. ``DrillResult.fallback``
names the stages that contributed items, ``reason`` why the drill itself was dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import tzinfo

from memtoc.errors import QueryError
from memtoc.model import Event, TocNode
from memtoc.retrieval.drill_result import (
    DEPTH_BOOST,
    LEVEL_ORDER,
    DrillResult,
    DrillStep,
    Scored,
)
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.teleport import Hit, SearchFilters, bm25_search
from memtoc.retrieval.tiers import TIERS, TierRenderer
from memtoc.retrieval.time_search import ResolvedTime, anchor_searcher, resolve_time
from memtoc.store.capabilities import SearchStore
from memtoc.text.tokens import TokenCounter

__all__ = [
    "DEFAULT_BEAM",
    "DEFAULT_SEGMENTS",
    "DEPTH_BOOST",
    "LEVEL_ORDER",
    "DrillResult",
    "DrillStep",
    "Scored",
    "drill",
]

DEFAULT_BEAM = 3
DEFAULT_SEGMENTS = 5
MIN_SIMILARITY = 0.2
"""Below this best-segment similarity the drill's own items are dropped (fallback)."""
EVIDENCE_POOL = 200
"""Events of the whole scope ranked once (BM25 and vectors each) as every step's evidence."""
KEEP_RATIO = 0.5
"""The drill keeps the events of its chosen segments scoring at least this fraction of the best
one; weaker ones (a name the question shares with half the conversation) wait for the fill."""
NODE_POOL = 2_000
"""Most nodes of one level ranked by their summaries per drill."""
_ALL_TIME = (0, 2**62)

Key = tuple[str, str]
"""(project, id)."""


@dataclass
class _Matches:
    """Event similarities found in one window: ``(project, event_id) → (similarity, event)``."""

    found: dict[Key, tuple[float, Event]] = field(default_factory=dict)

    def inside(self, node: TocNode, window: tuple[int, int]) -> list[tuple[float, Event]]:
        lo, hi = window
        return [
            (sim, ev)
            for (project, _), (sim, ev) in self.found.items()
            if project == node.project
            and lo <= ev.ts_ms < hi
            and (node.level != "segment" or ev.session_id == node.session_id)
        ]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else None


class _Drill:
    """One drill's state: the query, its scope and the similarity caches."""

    def __init__(
        self,
        store: SearchStore,
        text: str,
        projects: tuple[str, ...],
        semantic: SemanticIndex | None,
        scope: tuple[int, int],
        evidence: bool = True,
        pool_size: int = EVIDENCE_POOL,
    ) -> None:
        self.store = store
        self.text = text
        self.projects = projects
        self.semantic = semantic
        self.scope = scope
        self.use_evidence = evidence
        self._node_cos: dict[Key, float] | None = None
        self._best: dict[tuple[tuple[str, ...], str | None], float] = {}
        self._own: dict[str, dict[Key, float]] = {}
        self._pool: _Matches | None = None
        self.pool_size = pool_size

    def comparable(
        self, hits: list[Hit], kinds: tuple[str, ...], level: str | None
    ) -> list[tuple[Hit, float]]:
        """Hits of one window with scores comparable across windows.

        ``bm25_search`` normalises by the best row *of its own query*, so every window's best
        match would score 1 (0.5 when it misses a term) and a window of weak matches would look
        as good as the window holding the answer. FTS5's ``bm25()`` uses the whole table's
        statistics, so raw scores of one query text are comparable between windows: each score
        is rescaled by (best raw in this window / best raw in the whole scope).
        """
        if not hits:
            return []
        key = (kinds, level)
        best = self._best.get(key)
        if best is None:
            filters = SearchFilters(
                projects=self.projects,
                kinds=kinds,
                levels=(level,) if level else None,
                since_ms=self.scope[0],
                until_ms=self.scope[1],
            )
            found = bm25_search(self.store, self.text, filters, limit=30)
            best = self._best[key] = max((h.raw for h in found), default=0.0)
        local = max(h.raw for h in hits)
        ratio = min(1.0, local / best) if best > 0 else 1.0
        return [(h, h.score * ratio) for h in hits]

    def node_cos(self) -> dict[Key, float]:
        """Cosine of every node of the scope's projects (one exact search, cached)."""
        if self._node_cos is None:
            self._node_cos = {}
            if self.semantic is not None:
                found = self.semantic.search(
                    self.text, 1_000_000, projects=self.projects, kinds=("node",)
                )
                self._node_cos = {(k.project, k.item_id): max(0.0, c) for k, c in found}
        return self._node_cos

    def events(self, projects: tuple[str, ...], window: tuple[int, int], pool: int) -> _Matches:
        """The best ``pool`` events of ``projects`` in ``window`` by BM25 (and cosine, averaged),
        scores comparable across windows (``comparable``)."""
        filters = SearchFilters(
            projects=projects, kinds=("event",), since_ms=window[0], until_ms=window[1]
        )
        hits = bm25_search(self.store, self.text, filters, limit=pool)
        bm = {(h.project, h.item_id): sim for h, sim in self.comparable(hits, ("event",), None)}
        cos: dict[Key, float] = {}
        if self.semantic is not None:
            found = self.semantic.search(
                self.text,
                pool,
                projects=projects,
                kinds=("event",),
                since_ms=window[0],
                until_ms=window[1],
            )
            cos = {(k.project, k.item_id): max(0.0, c) for k, c in found}
        keys = list(dict.fromkeys([*bm, *cos]))
        by_id = {e.event_id: e for e in self.store.get_events([k[1] for k in keys])}
        out = _Matches()
        for key in keys:
            ev = by_id.get(key[1])
            if ev is None:
                continue
            sim = (bm.get(key, 0.0) + cos.get(key, 0.0)) / 2 if self.semantic else bm[key]
            out.found[key] = (sim, ev)
        return out

    def pool(self) -> _Matches:
        """The scope's best ``pool_size`` events: the evidence every step looks up first."""
        if self._pool is None:
            self._pool = self.events(self.projects, self.scope, self.pool_size)
        return self._pool

    def evidence(self, project: str, window: tuple[int, int]) -> _Matches:
        """Events matching inside ``window``: the scope's pool where it has some there, else a
        search of the window itself (a period whose matches are all weaker than the pool's)."""
        lo, hi = window
        pool = self.pool()
        found = {
            key: hit
            for key, hit in pool.found.items()
            if key[0] == project and lo <= hit[1].ts_ms < hi
        }
        if found or len(pool.found) < self.pool_size:
            return _Matches(found)  # a pool that is not full holds every match of the scope
        return self.events((project,), window, EVIDENCE_POOL)

    def own(self, level: str) -> dict[Key, float]:
        """Summary similarity of every ``level`` node of the scope (one search per level)."""
        cached = self._own.get(level)
        if cached is not None:
            return cached
        filters = SearchFilters(
            projects=self.projects,
            kinds=("node",),
            levels=(level,),
            since_ms=self.scope[0],
            until_ms=self.scope[1],
        )
        hits = bm25_search(self.store, self.text, filters, limit=NODE_POOL)
        bm = {(h.project, h.item_id): h.score for h in hits}
        if self.semantic is None:
            out = bm
        else:
            prefix = f"toc:{level}:"
            cos = {k: c for k, c in self.node_cos().items() if k[1].startswith(prefix)}
            out = {k: (bm.get(k, 0.0) + cos.get(k, 0.0)) / 2 for k in {*bm, *cos}}
        self._own[level] = out
        return out

    def level(self, level: str, parents: list[tuple[str, tuple[int, int]]]) -> list[Scored]:
        """Score every ``level`` node inside a parent's window, best first."""
        scored: dict[Key, Scored] = {}
        for project, window in parents:
            nodes = self.store.list_nodes(
                project, level=level, since_ms=window[0], until_ms=window[1]
            )
            if not nodes:
                continue
            own = self.own(level)
            matches = self.evidence(project, window) if self.use_evidence else _Matches()
            for node in nodes:
                inner = _overlap((node.start_ms, node.end_ms), window)
                if inner is None:
                    continue
                best = max((s for s, _ in matches.inside(node, inner)), default=0.0)
                cand = Scored(node, inner, own.get((project, node.node_id), 0.0), best)
                prev = scored.get((project, node.node_id))
                if prev is None or cand.similarity > prev.similarity:
                    scored[(project, node.node_id)] = cand
        return sorted(scored.values(), key=lambda s: (-s.score, s.node.start_ms, s.node.node_id))

    def inside_segments(self, chosen: tuple[Scored, ...]) -> list[tuple[float, Event]]:
        """The matching events of the chosen segments, scored event similarity times segment score."""
        out: list[tuple[float, Event]] = []
        for seg in chosen:
            for sim, ev in self.evidence(seg.node.project, seg.window).inside(seg.node, seg.window):
                out.append((sim * seg.score, ev))
        out.sort(key=lambda p: (-p[0], p[1].ts_ms, p[1].event_id))
        return out


def drill(
    store: SearchStore,
    counter: TokenCounter,
    query: str,
    *,
    projects: Iterable[str] | None = None,
    semantic: SemanticIndex | None = None,
    at_ms: int,
    tz: tzinfo,
    since_ms: int | None = None,
    until_ms: int | None = None,
    beam: int = DEFAULT_BEAM,
    segments: int = DEFAULT_SEGMENTS,
    limit: int = 10,
    depth: str = "L0",
    min_similarity: float = MIN_SIMILARITY,
    resolve: bool = True,
    evidence: bool = True,
    keep_ratio: float = KEEP_RATIO,
) -> DrillResult:
    """Drill from the years down to segments and return the best events inside them.

    ``at_ms`` is the reference time for a time expression in the query (``resolve``: look for
    one); its window, intersected with ``since_ms``/``until_ms``, restricts the roots and every
    step. ``beam`` candidates are kept per level (``segments`` at the segment level); items are
    the ``limit`` best events inside the chosen segments, rendered at ``depth``, then filled
    from the fallback cascade (module docstring). ``evidence=False`` scores periods by their
    summaries alone (the naive drill, kept for comparison: it loses answers summaries omit).
    """
    if depth not in TIERS:
        raise QueryError(f"unknown depth {depth!r} (expected L0, L1 or L2)")
    if beam < 1 or segments < 1 or limit < 0:
        raise QueryError(
            f"drill needs beam ≥ 1, segments ≥ 1, limit ≥ 0 (got {beam}, {segments}, {limit})"
        )
    scope_projects = tuple(dict.fromkeys(projects or ())) or tuple(store.projects())
    degraded = None
    if semantic is None or semantic.degraded is not None:
        degraded = semantic.degraded if semantic is not None else "no embedder: none configured"
        semantic = None
    else:
        degraded = semantic.partial
    resolved: ResolvedTime | None = None
    if resolve:
        resolved = resolve_time(query, at_ms, tz, anchor_searcher(store, scope_projects, at_ms))
    text = (
        resolved.query if resolved is not None and resolved.resolved and resolved.query else query
    )
    explicit = (
        since_ms if since_ms is not None else _ALL_TIME[0],
        until_ms if until_ms is not None else _ALL_TIME[1],
    )
    scope = explicit
    if resolved is not None and resolved.resolved:
        assert resolved.start_ms is not None and resolved.end_ms is not None
        scope = _overlap(scope, (resolved.start_ms, resolved.end_ms)) or (0, 0)
    d = _Drill(store, text, scope_projects, semantic, scope, evidence, max(EVIDENCE_POOL, limit))
    path: list[DrillStep] = []
    parents = [(p, scope) for p in scope_projects] if scope[0] < scope[1] else []
    for level in LEVEL_ORDER:
        ranked = d.level(level, parents)
        if not ranked:
            continue  # a level not built (yet): its parents' windows carry on to the next
        width = segments if level == "segment" else beam
        chosen = tuple(s for s in ranked if s.similarity > 0)[:width]
        path.append(DrillStep(level, len(ranked), chosen))
        parents = [(s.node.project, s.window) for s in chosen]
        if not parents:
            break
    chosen_segments = path[-1].chosen if path and path[-1].level == "segment" else ()
    best = max((s.similarity for s in chosen_segments), default=0.0)
    reason = None
    ranked_events: list[tuple[float, Event]] = []
    if not chosen_segments:
        reason = "no segment matched" if path else "nothing to drill (no TOC nodes in scope)"
    elif best < min_similarity:
        reason = f"best segment similarity {best:.3f} < {min_similarity}"
    else:
        found = d.inside_segments(chosen_segments)
        top = max((sim for sim, _ in found), default=0.0)
        ranked_events = [(sim, ev) for sim, ev in found if sim >= keep_ratio * top]
    chosen_items: list[tuple[Event, float]] = []
    have: set[str] = set()
    for sim, ev in ranked_events:
        if len(chosen_items) < limit and ev.event_id not in have:
            have.add(ev.event_id)
            chosen_items.append((ev, sim))
    fallback: list[str] = []
    stages: list[tuple[str, tuple[int, int]]] = []
    if scope != _ALL_TIME and scope[0] < scope[1]:
        stages.append(("range", scope))
    if not stages or explicit != scope:
        stages.append(("flat", explicit))
    for stage, window in stages:
        if len(chosen_items) >= limit:
            break
        more = d.pool() if window == scope else d.events(scope_projects, window, max(limit, 10))
        extra = list(more.found.values())
        extra.sort(key=lambda p: (-p[0], p[1].ts_ms, p[1].event_id))
        added = [(ev, sim) for sim, ev in extra if ev.event_id not in have]
        if added:
            fallback.append(stage)
            for item in added[: limit - len(chosen_items)]:
                have.add(item[0].event_id)
                chosen_items.append(item)
    renderer = TierRenderer(store, counter)  # the events are in hand: rendered without a read
    items = tuple(renderer.render_event(ev, depth, sim) for ev, sim in chosen_items)
    return DrillResult(
        query=text,
        depth=depth,
        path=tuple(path),
        items=items,
        fallback=tuple(fallback),
        reason=reason,
        time_range=resolved.to_dict() if resolved is not None else None,
        degraded=degraded,
    )
