"""Navigate the table of contents (DESIGN §5): roots, a node with its children, grips, timelines.

These are read-only functions over a ``Store`` and the one ``TokenCounter``; every view reports
the tokens of what it renders (``tokens`` in ``to_dict()``) so an agent can budget its reads.

- ``toc_roots``: the year nodes of a project, oldest first.
- ``node_view`` (``node_view.py``): a node's summary and a page of its children, compact at L0,
  optionally focused on a question. Children are read live (``children_of``), not from the
  parent's summary: a period exists as soon as it has content and its summary is
  rebuilt at most once per minimum age, so a child newer than the parent's summary is listed
  (marked ``new``) and the view says the summary is ``provisional``; so is the summary of a
  period that has not ended yet.
- ``expand``: a grip's events — its range plus up to ``before``/``after`` events of the *same
  session* within ``window_ms`` of the range — i.e. the evidence behind a bullet; or one event
  (an event id, e.g. a search hit) with its neighbours, anchored in the segment it is filed
  under (``toc_node_id``), so an agent lands next to the evidence a search found. With a
  ``focus`` (the question being answered), an event longer than ``event_tokens`` is shown by its
  passages that hold the focus's terms ("…" marks what is left out; ``recall_passages``), so an
  agent on a budget can read the evidence behind a bullet without paying for a whole pasted plan
  or log; ``events`` stay whole, ``texts`` is what is shown and counted. An agent's own notices
  that say nothing of the work (``QUIET_BOOKKEEPING``: hook progress, the local-command caveat,
  sub-agent warm-ups, injected context and instructions) are left out of the view, range and
  neighbours alike, and counted (``left_out``): a Claude Code edit's "Running PostToolUse:Edit…"
  line is not a neighbour worth 30 tokens.
- ``timeline``: the nodes of one level overlapping a time range; ``timeline_view`` wraps them in
  the one ``TimelineView`` every surface returns (CLI ``timeline --json``, ``/v1/timeline``,
  ``memory_timeline``): the project, level, range and each node's listing entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.errors import QueryError
from memtoc.model import LEVELS, Event, Grip, JsonValue, TocNode, iso_ms
from memtoc.retrieval.node_view import (
    ChildView,
    NodeView,
    children_of,
    node_view,
    render_node,
)
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

__all__ = [
    "ChildView",
    "ExpandView",
    "NodeView",
    "TimelineView",
    "children_of",
    "expand",
    "node_view",
    "render_node",
    "timeline",
    "timeline_view",
    "toc_roots",
]

DEFAULT_EXPAND_WINDOW_MS = 60 * 60_000
"""Neighbours of a grip farther than this (from the range's ends) are not included."""
QUIET_BOOKKEEPING = frozenset({"hook", "caveat", "warmup", "context", "instructions"})
"""Bookkeeping classes (``memtoc.ingest.sources.bookkeeping``) an expand leaves out: notices that
carry nothing a reader of the evidence needs. Slash commands, command output, interrupts,
compaction summaries and the agent's error notices stay: they tell what happened."""
NEIGHBOUR_READ_AHEAD = 40
"""Extra neighbours read per side so that left-out notices do not leave a side short."""
FOCUS_EVENT_TOKENS = 2 * PASSAGE_TOKENS
"""With a focus, an event longer than this is shown by its best passages, about this many tokens."""


@dataclass(frozen=True, slots=True)
class ExpandView:
    """A grip (or one event) with its events: the range and its neighbours in the same session."""

    grip: Grip | None
    """The grip expanded, or None when an event was (``event_id``)."""
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
    event_id: str | None = None
    """The event expanded (a search hit), when it was not a grip."""
    toc_node_id: str | None = None
    """The segment the range is filed under (a grip's node; an event's segment, if filed)."""
    left_out: int = 0
    """Events of the range and its neighbourhood not shown: the agent's quiet notices."""

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
            "grip": self.grip.to_dict() if self.grip is not None else None,
            "event_id": self.event_id,
            "toc_node_id": self.toc_node_id,
            "events": events,
            "tokens": self.tokens,
            "left_out": self.left_out,
        }
        if self.focus is not None:
            data["focus"] = self.focus
        return data


def toc_roots(store: Store, project: str) -> list[TocNode]:
    """The project's year nodes, oldest first; a year of bookkeeping alone only when all are."""
    years = store.list_nodes(project, level="year")
    return [y for y in years if not y.bookkeeping_only] or years


def expand(
    store: Store,
    counter: TokenCounter,
    item_id: str,
    *,
    before: int = 3,
    after: int = 3,
    window_ms: int | None = DEFAULT_EXPAND_WINDOW_MS,
    focus: str | None = None,
    event_tokens: int = FOCUS_EVENT_TOKENS,
) -> ExpandView:
    """A grip's events (``item_id`` ``grip:…``) or one event (any other id: a search hit) plus
    up to ``before``/``after`` neighbours in its session and window; with ``focus``, each event
    over ``event_tokens`` shown by its passages about the focus."""
    if before < 0 or after < 0:
        raise QueryError(f"before and after must be ≥ 0 (got {before}, {after})")
    if event_tokens < 1:
        raise QueryError(f"event_tokens must be ≥ 1 (got {event_tokens})")
    grip: Grip | None = None
    if item_id.startswith("grip:"):
        grip = store.get_grip(item_id)
        core = grip_range(store, grip)
        anchor: str | None = grip.toc_node_id
    else:
        event = store.get_event(item_id)
        core = [event]
        anchor = segment_of(store, event)
    kept = [e for e in core if not _quiet(e)] or core  # a range of notices alone shows them
    left_out = len(core) - len(kept)
    prev: list[Event] = []
    nxt: list[Event] = []
    if before:
        prev, _ = store.session_neighbors(
            kept[0], before=before + NEIGHBOUR_READ_AHEAD, after=0, window_ms=window_ms
        )
    if after:
        _, nxt = store.session_neighbors(
            kept[-1], before=0, after=after + NEIGHBOUR_READ_AHEAD, window_ms=window_ms
        )
    prev_shown = [e for e in prev if not _quiet(e)][-before:] if before else []
    nxt_shown = [e for e in nxt if not _quiet(e)][:after]
    # the notices between the range and the farthest neighbour shown (all read, if none is)
    near_prev = prev[prev.index(prev_shown[0]) :] if prev_shown else prev
    near_nxt = nxt[: nxt.index(nxt_shown[-1]) + 1] if nxt_shown else nxt
    left_out += sum(1 for e in (*near_prev, *near_nxt) if _quiet(e))
    events = (*prev_shown, *kept, *nxt_shown)
    event_id = None if grip is not None else item_id
    first, last = len(prev_shown), len(prev_shown) + len(kept) - 1
    if focus is None:
        tokens = sum(counter.count(e.text) for e in events)
        return ExpandView(grip, events, first, last, tokens, event_id=event_id,
                          toc_node_id=anchor, left_out=left_out)  # fmt: skip
    terms = key_terms(focus)
    texts = tuple(focused_text(e.text, terms, counter, event_tokens) for e in events)
    tokens = sum(counter.count(t) for t in texts)
    return ExpandView(grip, events, first, last, tokens, texts, focus, event_id, anchor, left_out)


def _quiet(event: Event) -> bool:
    return event.bookkeeping in QUIET_BOOKKEEPING


def grip_range(store: Store, grip: Grip) -> list[Event]:
    """The events of a grip's range, cut from its session's events in store order (time, then
    append order: the order ``session_neighbors`` uses, so events sharing a millisecond stay
    where they belong)."""
    start = store.get_event(grip.event_id_start)
    end = store.get_event(grip.event_id_end)
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
    return window[first : last + 1] or [start]


def segment_of(store: Store, event: Event) -> str | None:
    """The id of the segment ``event`` is filed under: its session's segment spanning its time
    (None while it is not filed yet)."""
    for node in store.list_nodes(
        event.project, level="segment", since_ms=event.ts_ms, until_ms=event.ts_ms + 1
    ):
        if node.session_id == event.session_id and node.start_ms <= event.ts_ms <= node.end_ms:
            return node.node_id
    return None


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
    """Nodes of ``level`` overlapping ``[since_ms, until_ms)``, in time order, but those of an
    agent's bookkeeping alone (sub-agent warm-ups, command notices: ``bookkeeping_only``)."""
    if level not in LEVELS:
        raise QueryError(f"unknown level {level!r} ({', '.join(LEVELS)})")
    if until_ms < since_ms:
        raise QueryError(f"until ({iso_ms(until_ms)}) is before since ({iso_ms(since_ms)})")
    if until_ms == since_ms:
        raise QueryError(f"empty time range: {iso_ms(since_ms)} .. {iso_ms(until_ms)}")
    nodes = store.list_nodes(project, level=level, since_ms=since_ms, until_ms=until_ms)
    return [n for n in nodes if not n.bookkeeping_only]


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
