"""Tiers: every search (and recall) item rendered at L0, L1 or L2, with its citations.

=========  =======================================  =====================================  ==========================
kind       L0 (default)                             L1                                     L2
=========  =======================================  =====================================  ==========================
node       title + abstract                         title + overview + bullets (grip ids)  the node's events in full
grip       the excerpt                              the node bullet(s) it anchors + excerpt the grip's range in full
bookmark   the content                              type, importance + content             content + its events
event      head of the text (≤ 100 tokens)          head of the text (≤ 500 tokens)        the whole text
=========  =======================================  =====================================  ==========================

A node's events (L2) are a segment's member events, or for a period node the events its bullets'
grips cover. ``events`` lists the events whose text an item includes (in time order); ``cites``
the event ids the item refers to without including them (grip ranges, bookmark events). ``tokens``
counts the item's ``text`` with the one ``TokenCounter``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from memtoc.errors import NotFoundError, QueryError
from memtoc.model import Bookmark, Event, Grip, JsonValue, TocNode, iso_ms
from memtoc.store.base import PipelineStore
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

TIERS: tuple[str, ...] = ("L0", "L1", "L2")
EVENT_HEAD_TOKENS = {"L0": 100, "L1": 500}
_HEAD_CHARS = 16


@dataclass(frozen=True, slots=True)
class SearchItem:
    """One result at a tier: its text, token count, span, included events and citations."""

    kind: str
    id: str
    project: str
    tier: str
    text: str
    tokens: int
    start_ms: int
    end_ms: int
    events: tuple[Event, ...]
    cites: tuple[str, ...]
    score: float
    title: str = ""
    """A one-line label for human output (node title, grip/bookmark head, event role)."""
    built_by: tuple[str, str | None] | None = None
    """A node item showing its summary (L0, L1): the summariser that built it and why it was
    degraded (``provenance``; not part of ``to_dict``)."""
    role: str | None = None
    """Who spoke, for an event item recall packed (``user``, ``assistant``, ``tool``…): a cited
    context names it (not part of ``to_dict``)."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "kind": self.kind,
            "id": self.id,
            "project": self.project,
            "tier": self.tier,
            "title": self.title,
            "text": self.text,
            "tokens": self.tokens,
            "start_time": iso_ms(self.start_ms),
            "end_time": iso_ms(self.end_ms),
            "events": [e.citation() for e in self.events],
            "cites": list(self.cites),
            "score": round(self.score, 6),
        }


def _head(counter: TokenCounter, text: str, tokens: int) -> str:
    cut = truncate_to_tokens(counter, text[: tokens * _HEAD_CHARS], tokens)
    return cut if cut == text else cut + " …"


def _render_events(events: Iterable[Event]) -> str:
    return "\n".join(f"[{iso_ms(e.ts_ms)} {e.role}] {e.text}" for e in events)


def grip_events(store: PipelineStore, grip: Grip) -> list[Event]:
    """The events of a grip's range (its session, from its first to its last event). Its ends
    are read in one call (a round trip each on PostgreSQL, and recall expands a dozen grips)."""
    ends = {e.event_id: e for e in store.get_events((grip.event_id_start, grip.event_id_end))}
    # an end that is gone: get_event raises the NotFoundError naming it
    start = ends.get(grip.event_id_start) or store.get_event(grip.event_id_start)
    end = ends.get(grip.event_id_end) or store.get_event(grip.event_id_end)
    lo, hi = (start.ts_ms, start.event_id), (end.ts_ms, end.event_id)
    return [
        ev
        for ev in store.scan_events(
            project=grip.project,
            session_id=grip.session_id,
            since_ms=start.ts_ms,
            until_ms=end.ts_ms + 1,
        )
        if lo <= (ev.ts_ms, ev.event_id) <= hi
    ]


def _grip_cites(grips: Sequence[Grip]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for g in grips for i in (g.event_id_start, g.event_id_end)))


_BOOKMARK_MS = re.compile(r"bm:(\d{13}):")


def find_bookmark(store: PipelineStore, project: str, bookmark_id: str) -> Bookmark:
    """One bookmark by id: an indexed lookup of its creation instant when the id carries it
    (``bm:{created_ms:013}:…``, see ``memtoc.retrieval.bookmarks``), else a scan of the project's
    bookmarks (ids made elsewhere)."""
    stamp = _BOOKMARK_MS.match(bookmark_id)
    if stamp is not None:
        ms = int(stamp.group(1))
        for bookmark in store.find_bookmarks(project, since_ms=ms, until_ms=ms):
            if bookmark.bookmark_id == bookmark_id:
                return bookmark
    for bookmark in store.list_bookmarks(project):
        if bookmark.bookmark_id == bookmark_id:
            return bookmark
    raise NotFoundError("bookmark", bookmark_id)


def item_spans(
    store: PipelineStore, keys: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """``(start_ms, end_ms)`` of each item (kind, project, item id) as ``render`` would report
    it, without rendering: events in one query, the other kinds one lookup each."""
    spans: dict[tuple[str, str, str], tuple[int, int]] = {}
    events = {e.event_id: e for e in store.get_events([k[2] for k in keys if k[0] == "event"])}
    for key in keys:
        kind, project, item_id = key
        try:
            if kind == "event":
                if item_id in events:
                    ts = events[item_id].ts_ms
                    spans[key] = (ts, ts)
            elif kind == "node":
                node = store.get_node(project, item_id)
                spans[key] = (node.start_ms, node.end_ms)
            elif kind == "grip":
                grip = store.get_grip(item_id)
                ends = store.get_events([grip.event_id_start, grip.event_id_end])
                spans[key] = (ends[0].ts_ms, ends[-1].ts_ms) if ends else (grip.ts_ms, grip.ts_ms)
            elif kind == "bookmark":
                created = find_bookmark(store, project, item_id).created_ms
                spans[key] = (created, created)
        except NotFoundError:  # gone since it was ranked: no span, the caller decides
            continue
    return spans


class TierRenderer:
    """Renders hits as ``SearchItem``s at a tier, reading what it needs from the store."""

    def __init__(self, store: PipelineStore, counter: TokenCounter) -> None:
        self.store = store
        self.counter = counter

    def render(self, kind: str, project: str, item_id: str, tier: str, score: float) -> SearchItem:
        if tier not in TIERS:
            raise QueryError(f"unknown tier {tier!r} (expected L0, L1 or L2)")
        if kind == "event":
            return self.render_event(self.store.get_event(item_id), tier, score)
        if kind == "grip":
            return self._grip(item_id, tier, score)
        if kind == "node":
            return self._node(project, item_id, tier, score)
        if kind == "bookmark":
            return self._bookmark(project, item_id, tier, score)
        raise QueryError(f"unknown item kind {kind!r}")

    def _item(
        self,
        kind: str,
        item_id: str,
        project: str,
        tier: str,
        text: str,
        span: tuple[int, int],
        events: Sequence[Event],
        cites: Sequence[str],
        score: float,
        title: str,
    ) -> SearchItem:
        included = {e.event_id for e in events}
        return SearchItem(
            kind=kind,
            id=item_id,
            project=project,
            tier=tier,
            text=text,
            tokens=self.counter.count(text),
            start_ms=span[0],
            end_ms=span[1],
            events=tuple(events),
            cites=tuple(c for c in dict.fromkeys(cites) if c not in included),
            score=score,
            title=title,
        )

    def render_many(
        self, ranked: Iterable[tuple[tuple[str, str, str], float]], tier: str, *, batch: int = 50
    ) -> Iterator[SearchItem]:
        """``render`` for ``((kind, project, item_id), score)`` pairs, in order, lazily: events
        are read ``batch`` at a time in one query each, so a caller that stops early (enough
        turns, a full budget) reads and counts no more than it uses."""
        pending = list(ranked)
        for start in range(0, len(pending), batch):
            chunk = pending[start : start + batch]
            ids = [key[2] for key, _ in chunk if key[0] == "event"]
            events = {e.event_id: e for e in self.store.get_events(ids)} if ids else {}
            for (kind, project, item_id), score in chunk:
                ev = events.get(item_id) if kind == "event" else None
                if ev is not None:
                    yield self.render_event(ev, tier, score)
                else:  # other kinds, or an event forgotten since it was ranked (raises)
                    yield self.render(kind, project, item_id, tier, score)

    def render_event(self, ev: Event, tier: str, score: float) -> SearchItem:
        """An event already read from the store, at ``tier``."""
        if tier not in TIERS:
            raise QueryError(f"unknown tier {tier!r} (expected L0, L1 or L2)")
        text = ev.text if tier == "L2" else _head(self.counter, ev.text, EVENT_HEAD_TOKENS[tier])
        title = event_label(ev)
        return self._item(
            "event",
            ev.event_id,
            ev.project,
            tier,
            text,
            (ev.ts_ms, ev.ts_ms),
            [ev],
            (),
            score,
            title,
        )

    def _grip(self, grip_id: str, tier: str, score: float) -> SearchItem:
        grip = self.store.get_grip(grip_id)
        rng = grip_events(self.store, grip)
        span = (rng[0].ts_ms, rng[-1].ts_ms) if rng else (grip.ts_ms, grip.ts_ms)
        cites = [e.event_id for e in rng] or [grip.event_id_start, grip.event_id_end]
        title = line_label(grip.excerpt) or grip_id
        if tier == "L2":
            return self._item(
                "grip",
                grip_id,
                grip.project,
                tier,
                _render_events(rng),
                span,
                rng,
                (),
                score,
                title,
            )
        text = grip.excerpt
        if tier == "L1":
            try:
                node = self.store.get_node(grip.project, grip.toc_node_id)
                bullets = [f"* {b.text}" for b in node.bullets if grip_id in b.grip_ids]
            except NotFoundError:
                bullets = []
            text = "\n".join([*bullets, grip.excerpt])
        return self._item("grip", grip_id, grip.project, tier, text, span, (), cites, score, title)

    def _node(self, project: str, node_id: str, tier: str, score: float) -> SearchItem:
        node = self.store.get_node(project, node_id)
        grips = self._node_grips(node)
        span = (node.start_ms, node.end_ms)
        if tier == "L2":
            if node.level == "segment":
                events = self.store.segment_member_events(project, node_id)
            else:
                ids = {e.event_id for g in grips for e in grip_events(self.store, g)}
                events = self.store.get_events(ids)
            text = f"{node.title}\n{_render_events(events)}"
            return self._item(
                "node", node_id, project, tier, text, span, events, (), score, node.title
            )
        lines = [node.title]
        if tier == "L0":  # an extractive L0 often opens with the title: said once
            abstract = node.abstract
            if node.title and abstract.startswith(node.title):
                abstract = abstract[len(node.title) :].lstrip(" .:;—-")
            lines.append(abstract)
        else:
            lines.append(node.overview or node.abstract)
            lines += [f"* {b.text} ({', '.join(b.grip_ids)})" for b in node.bullets]
        text = "\n".join(line for line in lines if line)
        item = self._item(
            "node", node_id, project, tier, text, span, (), _grip_cites(grips), score, node.title
        )
        return dataclasses.replace(item, built_by=(node.summarizer, node.degraded))

    def _node_grips(self, node: TocNode) -> list[Grip]:
        """The node's own grips plus those its bullets inherit from children, in time order."""
        grips = {g.grip_id: g for g in self.store.grips_for_node(node.project, node.node_id)}
        for grip_id in dict.fromkeys(i for b in node.bullets for i in b.grip_ids):
            if grip_id not in grips:
                try:
                    grips[grip_id] = self.store.get_grip(grip_id)
                except NotFoundError:  # retired with its child since the rollup
                    continue
        return sorted(grips.values(), key=lambda g: (g.ts_ms, g.grip_id))

    def _bookmark(self, project: str, bookmark_id: str, tier: str, score: float) -> SearchItem:
        bm = find_bookmark(self.store, project, bookmark_id)
        span = (bm.created_ms, bm.created_ms)
        title = f"{bm.type} ({bm.importance:.2f})"
        if tier == "L0":
            text = bm.content
        elif tier == "L1":
            text = f"{bm.type}, importance {bm.importance:.2f}: {bm.content}"
        else:
            events = self.store.get_events(bm.event_ids)
            text = f"{bm.content}\n{_render_events(events)}"
            return self._item(
                "bookmark", bookmark_id, project, tier, text, span, events, (), score, title
            )
        return self._item(
            "bookmark", bookmark_id, project, tier, text, span, (), bm.event_ids, score, title
        )


_EVENT_WHAT = {"tool_call": "tool call", "tool_result": "tool output"}


def event_label(ev: Event) -> str:
    """An event's one-line label for a reader: who spoke, or which tool ran ("tool output ·
    Bash", "tool output · Bash · failed"), not its session's uuid ("assistant in 019ed917-…",
    which the web search listed as every event's headline)."""
    what = _EVENT_WHAT.get(ev.event_type, ev.role)
    tool = ev.metadata.get("tool_name")
    label = f"{what} · {tool}" if isinstance(tool, str) and tool else what
    return f"{label} · failed" if ev.metadata.get("is_error") is True else label


def line_label(text: str, limit: int = 80) -> str:
    """A text's first non-blank line as a label of at most ``limit`` characters, cut at a word
    with "…" ("… actually execu" was cut mid-word)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"
