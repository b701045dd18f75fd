"""Navigate the table of contents (DESIGN §5): roots, a node with its children, grips, timelines.

These are read-only functions over a ``Store`` and the one ``TokenCounter``; every view reports
the tokens of what it renders (``tokens`` in ``to_dict()``) so an agent can budget its reads.

- ``toc_roots``: the year nodes of a project, oldest first.
- ``node_view``: a node (L0 by default: title, abstract, bullets with grip ids, keywords; L1 adds
  the overview) plus each child's id, level, title and L0. Children are read live (``children``),
  not from the parent's summary: a period exists as soon as it has content and its summary is
  rebuilt at most once per minimum age, so a child newer than the parent's summary is listed
  (marked ``new``) and the view says the summary is ``provisional``; so is the summary of a
  period that has not ended yet.
- ``expand``: a grip's events — its range plus up to ``before``/``after`` events of the *same
  session* within ``window_ms`` of the range — i.e. the evidence behind a bullet. With a
  ``focus`` (the question being answered), an event longer than ``event_tokens`` is shown by its
  passages that hold the focus's terms ("…" marks what is left out; ``recall_passages``), so an
  agent on a budget can read the evidence behind a bullet without paying for a whole pasted plan
  or log; ``events`` stay whole, ``texts`` is what is shown and counted.
- ``timeline``: the nodes of one level overlapping a time range; ``timeline_view`` wraps them in
  the one ``TimelineView`` every surface returns (CLI ``timeline --json``, ``/v1/timeline``,
  ``memory_timeline``): the project, level, range and each node's listing entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.errors import QueryError
from memtoc.model import LEVELS, Event, Grip, JsonValue, TocNode, iso_ms
from memtoc.retrieval.recall_passages import (
    PASSAGE_TOKENS,
    Passage,
    passages_text,
    rank_passages,
    split_passages,
)
from memtoc.store.base import Store
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter

DEFAULT_EXPAND_WINDOW_MS = 60 * 60_000
"""Neighbours of a grip farther than this (from the range's ends) are not included."""
_TIERS = ("L0", "L1")
FOCUS_EVENT_TOKENS = 2 * PASSAGE_TOKENS
"""With a focus, an event longer than this is shown by its best passages, about this many tokens."""


@dataclass(frozen=True, slots=True)
class ChildView:
    """A child as listed under its parent: id, level, title, L0 and span."""

    node_id: str
    level: str
    title: str
    abstract: str
    start_ms: int
    end_ms: int
    new: bool = False
    """Not yet covered by the parent's summary (the parent is rebuilt at most once per age)."""

    def render(self) -> str:
        note = " (new: not yet in the summary above)" if self.new else ""
        return f"- [{self.node_id}] {self.title}: {self.abstract}{note}"

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "node_id": self.node_id,
            "level": self.level,
            "title": self.title,
            "abstract": self.abstract,
            "start_time": iso_ms(self.start_ms),
            "end_time": iso_ms(self.end_ms),
            "new": self.new,
        }


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node and its children's summaries, as shown to an agent."""

    node: TocNode
    children: tuple[ChildView, ...]
    tier: str
    tokens: int
    provisional: bool = False
    """The summary may change: the period is still running, or a child is newer than it."""

    def render(self) -> str:
        return render_node(self.node, self.children, self.tier, self.provisional)

    def to_dict(self) -> dict[str, JsonValue]:
        node = self.node.to_dict()
        if self.tier == "L0":
            node.pop("overview")
        return {
            "node": node,
            "children": [c.to_dict() for c in self.children],
            "tier": self.tier,
            "tokens": self.tokens,
            "provisional": self.provisional,
        }


@dataclass(frozen=True, slots=True)
class ExpandView:
    """A grip with its events: the range and its neighbours in the same session."""

    grip: Grip
    events: tuple[Event, ...]
    range_start: int
    """Index in ``events`` of the grip's first event."""
    range_end: int
    """Index in ``events`` of the grip's last event (inclusive)."""
    tokens: int
    """Tokens of what is shown (``texts``)."""
    texts: tuple[str, ...] = ()
    """What is shown of each event: its text, or (``focus``) its passages joined by "…"."""
    focus: str | None = None

    def shown(self, index: int) -> str:
        """What is shown of ``events[index]``."""
        return self.texts[index] if self.texts else self.events[index].text

    def cut(self, index: int) -> bool:
        """Whether ``events[index]`` is shown by some of its passages only."""
        return self.shown(index) != self.events[index].text

    def to_dict(self) -> dict[str, JsonValue]:
        events: list[JsonValue] = []
        for i, e in enumerate(self.events):
            row = {**e.to_dict(), "in_grip": self.range_start <= i <= self.range_end}
            if self.cut(i):
                row.update(text=self.shown(i), passages_only=True)
            events.append(row)
        data: dict[str, JsonValue] = {
            "grip": self.grip.to_dict(),
            "events": events,
            "tokens": self.tokens,
        }
        if self.focus is not None:
            data["focus"] = self.focus
        return data


def render_node(
    node: TocNode, children: tuple[ChildView, ...], tier: str, provisional: bool = False
) -> str:
    """The text an agent reads for a node view (what ``tokens`` counts)."""
    head = f"{node.node_id} — {node.title}"
    if provisional:
        head += " (provisional summary)"
    lines = [head, node.abstract]
    lines += [f"* {b.text} ({', '.join(b.grip_ids)})" for b in node.bullets]
    if node.keywords:
        lines.append("keywords: " + ", ".join(node.keywords))
    if tier == "L1" and node.overview:
        lines.append(node.overview)
    lines += [c.render() for c in children]
    return "\n".join(line for line in lines if line)


def toc_roots(store: Store, project: str) -> list[TocNode]:
    """The project's year nodes, oldest first."""
    return store.list_nodes(project, level="year")


def children(store: Store, node: TocNode) -> list[TocNode]:
    """A node's children as they stand, in time order: a month's weeks are those holding one of its
    days (a week straddling two months is a child of each it has days in); otherwise the nodes
    naming it as parent."""
    if node.level == "month":
        days = store.list_nodes(
            node.project, level="day", since_ms=node.start_ms, until_ms=node.end_ms
        )
        from memtoc.pipeline.toc import weeks_of_days  # the pipeline: only for a month's view

        return weeks_of_days(store, node.project, node.start_ms, node.end_ms, days)
    if node.level == "segment":
        return []
    return store.list_nodes(node.project, parent_id=node.node_id)


def node_view(
    store: Store,
    counter: TokenCounter,
    node_id: str,
    project: str | None = None,
    *,
    tier: str = "L0",
    now_ms: int | None = None,
) -> NodeView:
    """A node with its children (ids, levels, titles, L0s), and the tokens of its rendering.

    ``now_ms`` (the memory's clock) decides whether a period is still running."""
    if tier not in _TIERS:
        raise QueryError(f"node views come at L0 or L1, not {tier!r}")
    node = store.find_node(node_id, project)
    covered = set(node.child_node_ids)
    kids = tuple(
        ChildView(
            c.node_id,
            c.level,
            c.title,
            c.abstract,
            c.start_ms,
            c.end_ms,
            new=c.node_id not in covered,
        )
        for c in children(store, node)
    )
    running = node.level != "segment" and now_ms is not None and now_ms < node.end_ms
    provisional = running or any(k.new for k in kids)
    text = render_node(node, kids, tier, provisional)
    return NodeView(node, kids, tier, counter.count(text), provisional)


def expand(
    store: Store,
    counter: TokenCounter,
    grip_id: str,
    *,
    before: int = 3,
    after: int = 3,
    window_ms: int | None = DEFAULT_EXPAND_WINDOW_MS,
    focus: str | None = None,
    event_tokens: int = FOCUS_EVENT_TOKENS,
) -> ExpandView:
    """The grip's events plus up to ``before``/``after`` neighbours in its session and window;
    with ``focus``, each event over ``event_tokens`` shown by its passages about the focus."""
    if before < 0 or after < 0:
        raise QueryError(f"before and after must be ≥ 0 (got {before}, {after})")
    if event_tokens < 1:
        raise QueryError(f"event_tokens must be ≥ 1 (got {event_tokens})")
    grip = store.get_grip(grip_id)
    start = store.get_event(grip.event_id_start)
    end = store.get_event(grip.event_id_end)
    # The range is cut from the session's events in store order (time, then append order), the
    # same order session_neighbors uses, so events sharing a millisecond stay where they belong.
    window = list(
        store.scan_events(
            project=grip.project,
            session_id=grip.session_id,
            since_ms=start.ts_ms,
            until_ms=end.ts_ms + 1,
        )
    )
    ids = [ev.event_id for ev in window]
    first = ids.index(start.event_id) if start.event_id in ids else 0
    last = ids.index(end.event_id) if end.event_id in ids else len(ids) - 1
    core = window[first : last + 1]
    prev, _ = store.session_neighbors(start, before=before, after=0, window_ms=window_ms)
    _, nxt = store.session_neighbors(end, before=0, after=after, window_ms=window_ms)
    events = (*prev, *core, *nxt)
    if focus is None:
        tokens = sum(counter.count(e.text) for e in events)
        return ExpandView(grip, events, len(prev), len(prev) + len(core) - 1, tokens)
    terms = key_terms(focus)
    texts = tuple(focused_text(e.text, terms, counter, event_tokens) for e in events)
    tokens = sum(counter.count(t) for t in texts)
    return ExpandView(grip, events, len(prev), len(prev) + len(core) - 1, tokens, texts, focus)


def focused_text(text: str, terms: set[str], counter: TokenCounter, limit: int) -> str:
    """``text`` when it has at most ``limit`` tokens; else its passages that hold ``terms``, best
    first while they fit ``limit`` (at least the best one; the first passage when none holds a
    term), in text order with "…" for the gaps."""
    if counter.count(text) <= limit:
        return text
    chosen: list[Passage] = []
    used = 0
    for passage, _ in rank_passages(terms, split_passages(text, counter)):
        size = counter.count(passage.text)
        if chosen and used + size > limit:
            continue
        chosen.append(passage)
        used += size
    shown, _ = passages_text(text, chosen)
    return shown


def timeline(
    store: Store, project: str, since_ms: int, until_ms: int, level: str = "day"
) -> list[TocNode]:
    """Nodes of ``level`` overlapping ``[since_ms, until_ms)``, in time order."""
    if level not in LEVELS:
        raise QueryError(f"unknown level {level!r} ({', '.join(LEVELS)})")
    if until_ms < since_ms:
        raise QueryError(f"until ({iso_ms(until_ms)}) is before since ({iso_ms(since_ms)})")
    if until_ms == since_ms:
        raise QueryError(f"empty time range: {iso_ms(since_ms)} .. {iso_ms(until_ms)}")
    return store.list_nodes(project, level=level, since_ms=since_ms, until_ms=until_ms)


def timeline_entry(node: TocNode) -> dict[str, JsonValue]:
    """A node as a timeline lists it: id, level, title, L0, keywords, span, size, session, parent
    (the full node, bullets and overview, is ``node_view``'s)."""
    return {
        "node_id": node.node_id,
        "project": node.project,
        "level": node.level,
        "title": node.title,
        "abstract": node.abstract,
        "keywords": list(node.keywords),
        "start_time": iso_ms(node.start_ms),
        "end_time": iso_ms(node.end_ms),
        "event_count": node.event_count,
        "session_id": node.session_id,
        "parent_id": node.parent_id,
    }


@dataclass(frozen=True, slots=True)
class TimelineView:
    """The nodes of one level over ``[since_ms, until_ms)`` in a project, in time order."""

    project: str
    level: str
    since_ms: int
    until_ms: int
    nodes: tuple[TocNode, ...]

    def render(self) -> str:
        """One line per node: ``- [id] title: abstract (N events)``."""
        lines = [
            f"- [{n.node_id}] {_oneline(n.title)}: {_oneline(n.abstract)} ({n.event_count} events)"
            for n in self.nodes
        ]
        return "\n".join(lines) if lines else f"no {self.level} nodes in that range"

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "project": self.project,
            "level": self.level,
            "since": iso_ms(self.since_ms),
            "until": iso_ms(self.until_ms),
            "nodes": [timeline_entry(n) for n in self.nodes],
        }


def _oneline(text: str) -> str:
    return " ".join(text.split())


def timeline_view(
    store: Store, project: str, since_ms: int | None, until_ms: int, level: str = "day"
) -> TimelineView:
    """``timeline`` as a ``TimelineView``; ``since_ms`` None: from the beginning."""
    start = 0 if since_ms is None else since_ms
    nodes = timeline(store, project, start, until_ms, level)
    return TimelineView(project, level, start, until_ms, tuple(nodes))
