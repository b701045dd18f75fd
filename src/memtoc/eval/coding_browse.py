"""Browsing the table of contents as an agent would, for ``memtoc eval coding``.

Two deterministic agents that read the TOC through the product's own views and pay for every
token they read, scored exactly like recall (``coding_score``: the gold quote inside one item of
what was read, within the budget):

- ``browse``: starts at the root. Opening a node reads its title, L0 abstract, bullets (with their
  grip ids) and its children's titles (one line each, with the child's id, which carries its
  date); expanding a grip reads its events (``navigate.expand`` focused on the question: the
  grip's range and one neighbour either side, an event over ``FOCUS_EVENT_TOKENS`` shown by its
  passages holding the question's terms; only under a day or a segment, where a bullet is
  specific enough to dig under). The agent keeps a frontier of what it could do next —
  open a child it has seen listed, expand the grip of a bullet it has read — and always does the
  most promising thing: a child scores by its title's similarity to the question blended with its
  parent's (``CHILD_WEIGHT``), a grip by its bullet's. A time expression in the question
  ("last Tuesday") is resolved at the question's time and children overlapping that window score
  ``TIME_BONUS`` more (the agent can read dates from the ids). It stops when nothing left fits
  the budget.
- ``teleport-browse``: first a search (``Memory.search`` over nodes and grips, L0, ``SEARCH_HITS``
  hits; the result list is read and paid for), then the same best-first browsing from there: the
  best hit is opened or expanded first, the other hits join the frontier by their similarity.

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

from memtoc.errors import NotFoundError
from memtoc.eval.coding import CodingQuestion
from memtoc.eval.coding_methods import Answer
from memtoc.eval.coding_score import SEPARATOR, ContextItem, context_tokens
from memtoc.eval.modes import ModeContext
from memtoc.eval.summary_coverage import node_text
from memtoc.memory import Memory
from memtoc.model import Event, TocNode, iso_ms
from memtoc.retrieval.navigate import expand
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
    """``open`` (a node) or ``expand`` (a grip)."""
    target: str = field(compare=False)


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
        seq = 0

        def push(kind: str, target: str, score: float) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(frontier, _Action(-score, seq, kind, target))

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

        def list_children(parent_score: float, children: Sequence[TocNode]) -> None:
            for child in children:
                if child.node_id in seen_nodes:
                    continue
                score = CHILD_WEIGHT * self.sim(child.title) + (1 - CHILD_WEIGHT) * parent_score
                if span is not None and child.start_ms < span[1] and child.end_ms > span[0]:
                    score += TIME_BONUS
                push("open", child.node_id, score)

        def open_node(node: TocNode) -> None:
            seen_nodes.add(node.node_id)
            children = self._children(node)
            if not add(_render(node, children)):
                return
            own = self.sim(node_text(node))
            if node.level in EXPAND_LEVELS:  # higher up, descending says more per token
                for bullet in node.bullets:
                    for gid in bullet.grip_ids[:1]:
                        if gid not in seen_grips:
                            push("expand", gid, self.sim(bullet.text))
            list_children(own, children)

        def expand_grip(grip_id: str) -> None:
            seen_grips.add(grip_id)
            try:
                view = expand(self.store, counter, grip_id, before=EXPAND_NEIGHBOURS,
                              after=EXPAND_NEIGHBOURS, focus=q.question)  # fmt: skip
            except NotFoundError:
                return
            for i, event in enumerate(view.events):
                if event.event_id in read_events or not event.text.strip():
                    continue
                if add(_event_text(event, view.shown(i)), (event.event_id,)):
                    read_events.add(event.event_id)

        if self.teleport:
            found = self.memory.search(q.question, project=self.project, kinds=("node", "grip"),
                                       limit=SEARCH_HITS, depth="L0", at_ms=ref_ms)  # fmt: skip
            listing = "\n".join(f"- [{i.id}] {i.text}" for i in found.items)
            if found.items and add(listing):
                for rank, hit in enumerate(found.items):
                    score = 2.0 if rank == 0 else self.sim(hit.text)
                    push("open" if hit.kind == "node" else "expand", hit.id, score)
        if not self.teleport or not frontier:
            listing = "\n".join(f"- [{n.node_id}] {n.title}" for n in self.roots)
            if add(f"Table of contents ({self.project}):\n{listing}"):
                list_children(0.0, self.roots)
        while frontier and budget - used >= MIN_LEFT:
            action = heapq.heappop(frontier)
            if action.kind == "open":
                node = self.nodes.get(action.target)
                if node is not None and action.target not in seen_nodes:
                    open_node(node)
            elif action.target not in seen_grips:
                expand_grip(action.target)
        while items and context_tokens(items, counter) > budget:
            items.pop()
        return items

    def _children(self, node: TocNode) -> list[TocNode]:
        return [self.nodes[c] for c in node.child_node_ids if c in self.nodes]


def _render(node: TocNode, children: Sequence[TocNode]) -> str:
    """What opening a node shows: title, L0, bullets with grip ids, the children's titles."""
    lines = [f"{node.node_id} — {node.title}", node.abstract]
    lines += [f"* {b.text} ({', '.join(b.grip_ids)})" for b in node.bullets]
    lines += [f"- [{c.node_id}] {c.title}" for c in children]
    return "\n".join(line for line in lines if line)


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
