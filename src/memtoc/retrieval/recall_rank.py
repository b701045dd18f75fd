"""Recall's ranking: which events, grips/segments and bookmarks best answer a question.

Stages, cheapest first (each later one is skipped once the time limit is reached, and the result
says so):

1. **BM25 over events** (``teleport.bm25_search``, ``pool`` candidates) — always runs.
2. **Vectors over events** (the embedder's cosine, ``pool`` candidates), fused with BM25 by
   weighted reciprocal rank: an event at rank ``r`` of a method earns ``w / (rrf_k + r)``.
3. **Grips and segments** (BM25 + vectors over the ``docs`` index, segment nodes and grips only):
   the events a matching grip covers or a matching segment holds get ``w_doc *`` its score.
4. **Session evidence**: an event's session scores the sum of its best ``session_top`` event
   scores; every candidate gets ``w_session *`` its session's (normalised) score. A question's
   evidence tends to sit together, so a turn in a session with several hits beats an isolated one.
5. **Neighbours**: the turns adjacent (in its session) to each of the ``neighbours`` strongest
   hits join with ``w_neighbour *`` that hit's score — answers often follow the question's turn.
6. **Bookmarks**: those matching the query (every term by BM25, or cosine ≥ ``bookmark_cosine``)
   are *pinned*: recall packs them first, expanded to their source events.

A time expression ("last week", "in March") gives a window: an extra BM25/vector pass restricted
to it brings in-window events into the pool, and in-window events get ``+ w_time``.
All scores are normalised so the best fused event is 1.0 before the boosts are added.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memtoc.errors import NotFoundError
from memtoc.model import Event
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.retrieval.tiers import grip_events
from memtoc.store.sqlite import SqliteStore

Key = tuple[str, str, str]
"""(kind, project, item id), as search hits name items."""


@dataclass(frozen=True, slots=True)
class RankConfig:
    """Weights and depths of recall's ranking (see the module docstring).

    Defaults tuned on LoCoMo (docs/benchmarks.md, "Recall"): a small ``rrf_k`` (10, not search's
    60) lets the head of each list count; vectors weigh 0.7 of BM25 with the static model;
    neighbours of a hit join at 0.8 of its score.
    """

    pool: int = 60
    rrf_k: float = 10.0
    w_bm25: float = 1.0
    w_vec: float = 0.7
    w_doc: float = 0.1
    docs: int = 5
    w_session: float = 0.3
    session_top: int = 3
    neighbours: int = 8
    w_neighbour: float = 0.8
    w_time: float = 1.0
    bookmarks: int = 3
    bookmark_cosine: float = 0.6


class Deadline:
    """A time limit measured on a monotonic timer (injectable for tests)."""

    def __init__(
        self, limit_ms: float | None, timer: Callable[[], float] = time.perf_counter
    ) -> None:
        self.timer = timer
        self.start = timer()
        self.limit_ms = limit_ms

    def elapsed_ms(self) -> float:
        return (self.timer() - self.start) * 1000.0

    def expired(self) -> bool:
        return self.limit_ms is not None and self.elapsed_ms() >= self.limit_ms


@dataclass
class Ranking:
    """What the ranking found: scored events, doc units, pinned bookmarks and how it went."""

    scores: dict[str, float] = field(default_factory=dict)
    """Event id → final score (higher is better)."""
    events: dict[str, Event] = field(default_factory=dict)
    """Every scored event, loaded."""
    docs: list[tuple[Key, float, tuple[Event, ...]]] = field(default_factory=list)
    """Matching grips/segments, best first, with their events."""
    bookmarks: list[tuple[str, str, float]] = field(default_factory=list)
    """Pinned bookmarks: (project, bookmark id, score), best first."""
    method: str = "bm25"
    stages: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Stages left out because the time limit was reached."""

    def ranked_events(self) -> list[Event]:
        """Scored events, best first (ties: earlier first)."""
        order = sorted(self.scores, key=lambda i: (-self.scores[i], self.events[i].ts_ms, i))
        return [self.events[i] for i in order]


def _rrf(lists: Sequence[tuple[float, Sequence[str]]], k: float) -> dict[str, float]:
    """Weighted reciprocal-rank fusion of ranked id lists; normalised so the best is 1.0."""
    scores: dict[str, float] = {}
    for weight, ids in lists:
        for rank, item in enumerate(dict.fromkeys(ids), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    best = max(scores.values(), default=0.0)
    return {i: s / best for i, s in scores.items()} if best > 0 else scores


class Ranker:
    """Runs the stages of the module docstring for one question."""

    def __init__(
        self,
        store: SqliteStore,
        semantic: SemanticIndex | None,
        config: RankConfig,
        deadline: Deadline,
    ) -> None:
        self.store = store
        self.semantic = semantic if semantic is not None and semantic.degraded is None else None
        self.cfg = config
        self.deadline = deadline

    def _stage(self, out: Ranking, name: str) -> bool:
        """True when stage ``name`` may run; else it is recorded as skipped."""
        if self.deadline.expired():
            out.skipped.append(name)
            return False
        out.stages.append(name)
        return True

    def _vector_ids(
        self, query: str, f: SearchFilters, kinds: tuple[str, ...], k: int
    ) -> list[tuple[Key, float]]:
        if self.semantic is None:
            return []
        found = self.semantic.search(
            query,
            k,
            projects=f.projects,
            kinds=kinds,
            since_ms=f.since_ms,
            until_ms=f.until_ms,
        )
        return [((key.kind, key.project, key.item_id), cos) for key, cos in found]

    def rank(self, query: str, filters: SearchFilters, window: tuple[int, int] | None) -> Ranking:
        cfg = self.cfg
        out = Ranking(method="hybrid" if self.semantic is not None else "bm25")
        ev = SearchFilters(projects=filters.projects, kinds=("event",))
        # 1. BM25 over events (always)
        out.stages.append("bm25")
        lexical = [h.item_id for h in bm25_search(self.store, query, ev, limit=cfg.pool)]
        in_window: list[str] = []
        if window is not None:
            wf = SearchFilters(
                projects=filters.projects, kinds=("event",), since_ms=window[0], until_ms=window[1]
            )
            in_window = [h.item_id for h in bm25_search(self.store, query, wf, limit=cfg.pool)]
        lists: list[tuple[float, Sequence[str]]] = [(cfg.w_bm25, lexical)]
        if in_window:
            lists.append((cfg.w_bm25, in_window))
        # 2. vectors over events
        if self.semantic is not None and self._stage(out, "vectors"):
            vec = [k[2] for k, _ in self._vector_ids(query, ev, ("event",), cfg.pool)]
            lists.append((cfg.w_vec, vec))
            if window is not None:
                wf = SearchFilters(
                    projects=filters.projects, since_ms=window[0], until_ms=window[1]
                )
                vin = [k[2] for k, _ in self._vector_ids(query, wf, ("event",), cfg.pool)]
                lists.append((cfg.w_vec, vin))
        fused = _rrf(lists, cfg.rrf_k)
        scores = dict(fused)
        out.events = {e.event_id: e for e in self.store.get_events(scores)}
        scores = {i: s for i, s in scores.items() if i in out.events}
        # 3. grips and segments
        if cfg.w_doc > 0 and cfg.docs > 0 and self._stage(out, "docs"):
            self._docs(query, filters, out)
            for _key, score, events in out.docs:
                for e in events:
                    out.events.setdefault(e.event_id, e)
                    scores[e.event_id] = scores.get(e.event_id, 0.0) + cfg.w_doc * score
        # 4. session evidence
        if cfg.w_session > 0 and self._stage(out, "sessions"):
            scores = self._sessions(scores, out.events)
        # 5. neighbours
        if cfg.neighbours > 0 and cfg.w_neighbour > 0 and self._stage(out, "neighbours"):
            self._neighbours(scores, out)
        if window is not None and cfg.w_time > 0:
            lo, hi = window
            for i in scores:
                if lo <= out.events[i].ts_ms < hi:
                    scores[i] += cfg.w_time
        out.scores = scores
        # 6. bookmarks
        if cfg.bookmarks > 0 and self._stage(out, "bookmarks"):
            self._bookmarks(query, filters, out)
        return out

    def _docs(self, query: str, filters: SearchFilters, out: Ranking) -> None:
        cfg = self.cfg
        f = SearchFilters(projects=filters.projects, kinds=("node", "grip"), levels=("segment",))
        lexical = [h.key for h in bm25_search(self.store, query, f, limit=cfg.docs)]
        vec = [k for k, _ in self._vector_ids(query, f, ("node", "grip"), cfg.docs * 4)]
        vec = [k for k in vec if k[0] == "grip" or self._is_segment(k)][: cfg.docs]
        fused: dict[Key, float] = {}
        for weight, keys in ((cfg.w_bm25, lexical), (cfg.w_vec, vec)):
            for rank, key in enumerate(keys, start=1):
                fused[key] = fused.get(key, 0.0) + weight / (cfg.rrf_k + rank)
        best = max(fused.values(), default=0.0)
        for key in sorted(fused, key=lambda k: -fused[k])[: cfg.docs]:
            events = self._doc_events(key)
            if events:
                out.docs.append((key, fused[key] / best, tuple(events)))

    def _is_segment(self, key: Key) -> bool:
        try:
            return self.store.get_node(key[1], key[2]).level == "segment"
        except NotFoundError:
            return False

    def _doc_events(self, key: Key) -> list[Event]:
        kind, project, item_id = key
        try:
            if kind == "grip":
                return grip_events(self.store, self.store.get_grip(item_id))
            return self.store.segment_member_events(project, item_id)
        except NotFoundError:  # gone since it was indexed (forget, rebuild)
            return []

    def _sessions(self, scores: dict[str, float], events: dict[str, Event]) -> dict[str, float]:
        cfg = self.cfg
        per: dict[str, list[float]] = {}
        for i, s in scores.items():
            per.setdefault(events[i].session_id, []).append(s)
        sess = {k: sum(sorted(v, reverse=True)[: cfg.session_top]) for k, v in per.items()}
        best = max(sess.values(), default=0.0) or 1.0
        return {i: s + cfg.w_session * sess[events[i].session_id] / best for i, s in scores.items()}

    def _neighbours(self, scores: dict[str, float], out: Ranking) -> None:
        cfg = self.cfg
        top = sorted(scores, key=lambda i: -scores[i])[: cfg.neighbours]
        for i in top:
            before, after = self.store.session_neighbors(out.events[i], before=1, after=1)
            for n in (*before, *after):
                out.events.setdefault(n.event_id, n)
                gain = cfg.w_neighbour * scores[i]
                if gain > scores.get(n.event_id, 0.0):
                    scores[n.event_id] = gain

    def _bookmarks(self, query: str, filters: SearchFilters, out: Ranking) -> None:
        cfg = self.cfg
        f = SearchFilters(projects=filters.projects, kinds=("bookmark",))
        chosen: dict[Key, float] = {}
        for h in bm25_search(self.store, query, f, limit=cfg.bookmarks):
            if h.score > 0.5:  # an AND match: every query term is in the bookmark
                chosen[h.key] = h.score
        for key, cos in self._vector_ids(query, f, ("bookmark",), cfg.bookmarks):
            if cos >= cfg.bookmark_cosine:
                chosen[key] = max(chosen.get(key, 0.0), cos)
        best = sorted(chosen, key=lambda k: -chosen[k])[: cfg.bookmarks]
        out.bookmarks = [(k[1], k[2], chosen[k]) for k in best]
