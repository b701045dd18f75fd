"""Browsing the table of contents as an agent would, for ``memtoc eval coding``.

Two deterministic agents that read the TOC through the product's own views and pay for every
token they read, scored exactly like recall (``coding_score``: the gold quote inside one item of
what was read, within the budget):

- ``browse``: starts at the root: ``memory_toc()``'s years. Opening a node reads the product's
  node view (``Memory.node``, L0) focused on the question, as an agent passing ``focus`` would:
  title, the bullets about the question (each citing its first grip id), and a page of children,
  one ``[id] title`` line each, those holding the events recall ranks best first, with "… N more:
  offset=K" when the page is cut. Expanding a grip reads its events (``Memory.expand`` focused on
  the question: the grip's range and one neighbour either side, an event over
  ``FOCUS_EVENT_TOKENS`` shown by its passages holding the question's terms; only under a day or
  a segment, where a bullet is specific enough to dig under). The agent keeps a frontier of what
  it could do next — open a child it has seen listed, read the next page of a listing, expand
  the grip of a bullet it has read — and always does the most promising thing: an action scores
  by its own text's similarity to the question (``CHILD_WEIGHT``) blended with the standing the
  views above gave it (a child listed r-th under a parent of standing p has ``p / (1 + r)``, or
  0 past the children the view says hold a match; the years 1; a grip its node's). A year's
  or month's view names the days holding its best hits before its children: the agent reads
  them as the first listed (the children's ranks follow theirs), a way to a day past its month
  and week. The memory's clock stands at the question's time while the agent reads (a
  focused view ranks as recall is asked, ``at_ms``). A time expression in the question ("last
  Tuesday") is resolved at the question's time and children overlapping that window score
  ``TIME_BONUS`` more (the agent can read dates from the ids). It stops when nothing left fits the budget.
- ``teleport-browse``: first a search (``Memory.search`` as ``memory_search`` runs it: every
  kind, L0, ``SEARCH_HITS`` hits; the result list is read and paid for), then the same
  best-first browsing from there: the best hit is opened (a node) or expanded (a grip, an event,
  a bookmark's first event: ``Memory.expand`` takes an event id) first, the other hits join the
  frontier by their similarity.

Similarity is IDF-weighted key-term overlap (``key_terms``; IDF over the project's node texts),
averaged with the cosine of the run's embedder when there is one. What an expand shows of an event
is read whole or skipped when it does not fit what is left, never cut further.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError
from memtoc.eval.coding import CodingQuestion
from memtoc.eval.coding_methods import Answer
from memtoc.eval.coding_score import SEPARATOR, ContextItem, context_tokens
from memtoc.eval.modes import ModeContext
from memtoc.eval.summary_coverage import node_text
from memtoc.memory import Memory
from memtoc.model import Event, iso_ms
from memtoc.retrieval.navigate import NodeView
from memtoc.retrieval.time_search import resolve_time
from memtoc.text.keyphrases import key_terms

BROWSE_METHODS = ("browse", "teleport-browse")
CHILD_WEIGHT = 0.7
"""A listed child's score: this share from its own title, the rest from its parent's text."""
TIME_BONUS = 0.5
"""Added to a child overlapping the question's resolved time window."""
EXPAND_LEVELS = frozenset({"segment", "day"})
"""Levels whose bullets' grips the agent expands (a month's bullet is too broad to dig under)."""
SEARCH_HITS = 5
EXPAND_NEIGHBOURS = 1
"""Events either side of a grip's range read with it."""
RANKING_BUDGET = 8_000
"""The budget whose reading order is reported as the method's ranking (diagnostics)."""
MIN_LEFT = 3


@dataclass(order=True)
class _Action:
    priority: float
    seq: int
    kind: str = field(compare=False)
    """``open`` (a node), ``page`` (a node's next children) or ``expand`` (a grip)."""
    target: str = field(compare=False)
    offset: int = field(default=0, compare=False)


class _Similarity:
    """IDF-weighted key-term overlap with the question, averaged with the embedder's cosine."""

    def __init__(self, texts: Sequence[str], ctx: ModeContext) -> None:
        df: dict[str, int] = defaultdict(int)
        for text in texts:
            for t in key_terms(text):
                df[t] += 1
        n = max(len(texts), 1)
        self.idf = {t: math.log(1 + n / d) for t, d in df.items()}
        self.default_idf = math.log(1 + n)
        self.ctx = ctx
        self._vectors: dict[str, np.ndarray] = {}
        self._terms: dict[str, set[str]] = {}
        self._query_vec: np.ndarray | None = None
        self._query: tuple[dict[str, float], float] = ({}, 1.0)

    def set_question(self, question: str) -> None:
        terms = key_terms(question)
        weights = {t: self.idf.get(t, self.default_idf) for t in terms}
        self._query = (weights, math.fsum(weights.values()) or 1.0)
        self._query_vec = self.ctx.embed_query(question) if self.ctx.embedder is not None else None

    def _vector(self, text: str) -> np.ndarray:
        vec = self._vectors.get(text)
        if vec is None:
            vec = self.ctx.require_embedder().embed([text])[0]
            self._vectors[text] = vec
        return vec

    def __call__(self, text: str) -> float:
        weights, total = self._query
        terms = self._terms.get(text)
        if terms is None:
            terms = self._terms[text] = key_terms(text)
        lexical = math.fsum(w for t, w in weights.items() if t in terms) / total
        if self._query_vec is None:
            return lexical
        cosine = float(np.dot(self._vector(text), self._query_vec))
        return 0.5 * lexical + 0.5 * max(cosine, 0.0)


class BrowseMethod:
    """``browse`` (from the root) or ``teleport-browse`` (from a search's best hit)."""

    def __init__(self, memory: Memory, project: str, ctx: ModeContext, *, teleport: bool) -> None:
        self.name = "teleport-browse" if teleport else "browse"
        self.memory = memory
        self.project = project
        self.ctx = ctx
        self.teleport = teleport
        self.store = memory.store
        nodes = self.store.list_nodes(project)
        self.nodes = {n.node_id: n for n in nodes}
        self.roots = [n for n in nodes if n.level == "year"] or [
            n for n in nodes if n.parent_id is None or n.parent_id not in self.nodes
        ]
        self.sim = _Similarity([node_text(n) for n in nodes], ctx)
        self._rankings: dict[tuple[str, int], list[str]] = {}

    # -- the agent ----------------------------------------------------------------------------

    def answer(self, q: CodingQuestion, ref_ms: int, budget: int) -> Answer:
        start = time.perf_counter()
        items = self._browse(q, ref_ms, budget)
        return Answer(items, (time.perf_counter() - start) * 1000.0)

    def ranking(self, q: CodingQuestion, ref_ms: int) -> list[str]:
        key = (q.qid, ref_ms)
        if key not in self._rankings:
            items = self._browse(q, ref_ms, RANKING_BUDGET)
            self._rankings = {key: list(dict.fromkeys(e for i in items for e in i.event_ids))}
        return self._rankings[key]

    def _browse(self, q: CodingQuestion, ref_ms: int, budget: int) -> list[ContextItem]:
        """The agent's reading for ``q`` asked at ``ref_ms``: the memory's clock stands there
        while it reads (a focused view resolves "this afternoon" at the question's time, as
        recall and search are asked ``at_ms``), and is put back after."""
        clock = self.memory.clock
        if not isinstance(clock, ManualClock):
            return self._read(q, ref_ms, budget)
        was = clock.now_ms()
        clock.set(ref_ms)
        try:
            return self._read(q, ref_ms, budget)
        finally:
            clock.set(was)

    def _read(self, q: CodingQuestion, ref_ms: int, budget: int) -> list[ContextItem]:
        counter = self.ctx.counter
        sep = counter.count(SEPARATOR)
        self.sim.set_question(q.question)
        window = resolve_time(q.question, ref_ms, self.memory.tz)
        span = (
            (window.start_ms, window.end_ms)
            if window is not None and window.start_ms is not None and window.end_ms is not None
            else None
        )
        items: list[ContextItem] = []
        used = 0
        frontier: list[_Action] = []
        seen_nodes: set[str] = set()
        seen_grips: set[str] = set()
        read_events: set[str] = set()
        prior: dict[str, float] = {}
        """How far up its parents' focused listings a node came (1: first all the way)."""
        seq = 0

        def push(kind: str, target: str, score: float, offset: int = 0) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(frontier, _Action(-score, seq, kind, target, offset))

        def fits(tokens: int) -> bool:
            return used + tokens + (sep if items else 0) <= budget

        def add(text: str, event_ids: tuple[str, ...] = ()) -> bool:
            nonlocal used
            tokens = counter.count(text)
            if not fits(tokens):
                return False
            used += tokens + (sep if items else 0)
            items.append(ContextItem(text, event_ids, tokens))
            return True

        def view(node_id: str, offset: int = 0) -> NodeView | None:
            try:
                return self.memory.node(
                    node_id, project=self.project, focus=q.question, offset=offset
                )
            except NotFoundError:
                return None

        def read_view(v: NodeView, p: float) -> None:
            """What the agent does with a view it has read: note the grips its bullets cite
            (under a day or a segment) and the children it lists, in the listed order."""
            node = v.node
            if node.level in EXPAND_LEVELS:  # higher up, descending says more per token
                for rank, bullet in enumerate(v.bullets):
                    order = p
                    if v.bullet_matches is not None:  # listed most about the question first
                        order = p / (1 + rank) if rank < v.bullet_matches else 0.0
                    for gid in bullet.grip_ids[:1]:  # the one grip an L0 view shows in full
                        if gid not in seen_grips:
                            push("expand", gid, blend(self.sim(bullet.text), order))
            for rank, day in enumerate(v.hot):  # the days holding its best hits, best first:
                if day.node_id in seen_nodes:  # a way down past the month and week
                    continue
                order = p / (1 + rank)
                prior[day.node_id] = max(prior.get(day.node_id, 0.0), order)
                score = blend(self.sim(day.title), order)
                if span is not None and day.start_ms < span[1] and day.end_ms > span[0]:
                    score += TIME_BONUS
                push("open", day.node_id, score)
            for rank, child in enumerate(v.children, start=v.offset):
                if child.node_id in seen_nodes:
                    continue
                # listed after the view's hot days, if any
                order = p / (1 + len(v.hot) + rank) if v.focus is not None else p
                if v.matched is not None and rank >= v.matched:
                    order = 0.0  # the view says no match for the question lies under it
                prior[child.node_id] = order
                score = blend(self.sim(child.title), order)
                if span is not None and child.start_ms < span[1] and child.end_ms > span[0]:
                    score += TIME_BONUS
                push("open", child.node_id, score)
                match = child.match  # the child's bullet the view shows under it, with its grip
                if match is not None and match.grip_ids and match.grip_ids[0] not in seen_grips:
                    # evidence one expand away, shown where the child stands: before opening it
                    push("expand", match.grip_ids[0], score + blend(self.sim(match.text), 0.0))
            if v.more:  # the next page: after what this one listed
                push("page", node.node_id, blend(0.0, p / (2 + v.offset + len(v.children))),
                     v.offset + len(v.children))  # fmt: skip

        def open_node(node_id: str, offset: int = 0) -> None:
            v = view(node_id, offset)
            if v is None:
                return
            if add(v.render()):
                read_view(v, prior.get(node_id, 0.0))

        def expand_grip(grip_id: str) -> None:
            seen_grips.add(grip_id)
            try:
                ev = self.memory.expand(grip_id, before=EXPAND_NEIGHBOURS,
                                        after=EXPAND_NEIGHBOURS, focus=q.question)  # fmt: skip
            except NotFoundError:
                return
            for i, event in enumerate(ev.events):
                if event.event_id in read_events or not event.text.strip():
                    continue
                if add(_event_text(event, ev.shown(i)), (event.event_id,)):
                    read_events.add(event.event_id)

        if self.teleport:  # memory_search(question): every kind, as the tool returns them
            found = self.memory.search(q.question, project=self.project, limit=SEARCH_HITS,
                                       depth="L0", at_ms=ref_ms)  # fmt: skip
            listing = "\n".join(f"- [{i.id}] {i.text}" for i in found.items)
            if found.items and add(listing):
                for rank, hit in enumerate(found.items):
                    score = 2.0 if rank == 0 else self.sim(hit.text)
                    prior[hit.id] = 1.0 / (1 + rank)
                    if hit.kind == "node":
                        push("open", hit.id, score)
                    elif hit.kind in ("grip", "event"):  # expand lands next to the evidence
                        push("expand", hit.id, score)
                    elif hit.cites:  # a bookmark: the first event it cites
                        push("expand", hit.cites[0], score)
        if not self.teleport or not frontier:
            # memory_toc() without a node: every year's view (focused on the question).
            views = [v for v in (view(r.node_id) for r in self.roots) if v is not None]
            for v in views:
                seen_nodes.add(v.node.node_id)
            text = "\n\n".join(v.render() for v in views)
            if views and add(f"Table of contents ({self.project}):\n{text}"):
                for v in views:
                    read_view(v, 1.0)
        while frontier and budget - used >= MIN_LEFT:
            action = heapq.heappop(frontier)
            if action.kind == "open":
                if action.target not in seen_nodes:
                    seen_nodes.add(action.target)
                    open_node(action.target)
            elif action.kind == "page":
                open_node(action.target, action.offset)
            elif action.target not in seen_grips:
                expand_grip(action.target)
        while items and context_tokens(items, counter) > budget:
            items.pop()
        return items


def blend(own: float, prior: float) -> float:
    """An action's score: its own text's similarity to the question and the standing the views
    above gave it (``CHILD_WEIGHT`` on its own)."""
    return CHILD_WEIGHT * own + (1 - CHILD_WEIGHT) * prior


def _event_text(event: Event, shown: str) -> str:
    return f"[{iso_ms(event.ts_ms)} {event.role}] {shown}"


def browse_methods(
    memory: Memory, project: str, ctx: ModeContext, names: Sequence[str]
) -> list[BrowseMethod]:
    """The browse methods among ``names``."""
    return [
        BrowseMethod(memory, project, ctx, teleport=name == "teleport-browse")
        for name in names
        if name in BROWSE_METHODS
    ]
