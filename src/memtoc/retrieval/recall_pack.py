"""Recall's packing: ranked units into a token budget, stepping tiers down instead of cutting.

Units are packed best first (events and bookmarks by score, then grips and segments). Each
unit is tried at L2 (its events' text, compact: one line per event, the event's own text — prefixed
``[role]`` only for tool and system events); if that does not fit the tokens left it is tried at
L1, then L0 (``tiers.TierRenderer``: a grip's bullets and excerpt, a segment's overview or
abstract, a bookmark's content, an event's head); a unit that fits at no tier is skipped and the
next one tried. An event is included once: a unit whose events are already in the context brings
only the new ones (the others become ``cites``), a turn whose text equals an included turn's
(case and spacing aside) is left out as a duplicate, and a turn with no text (an empty tool result,
a whitespace-only message) is never packed: it has nothing to show.

The context is the items in time order, joined by newlines, each day's first item under a date
line (``[2023-05-08]``). Every separator and date line is counted with the one ``TokenCounter``
while packing, and the assembled context is counted again at the end (dropping the weakest item
until it fits), so the result never exceeds the budget. With ``cite`` (what an agent is sent over
MCP) each item's text is led by its id, ``(id) text`` — the citation it can expand or quote — and
those labels are counted the same way.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo

from memtoc.errors import NotFoundError
from memtoc.model import MAX_TS_MS, MIN_TS_MS, Event, iso_ms
from memtoc.retrieval.recall_passages import (
    PASSAGE_TOKENS,
    Passage,
    passages_text,
    rank_passages,
    split_passages,
)
from memtoc.retrieval.recall_rank import Deadline
from memtoc.retrieval.tiers import EVENT_HEAD_TOKENS, SearchItem, TierRenderer, line_label
from memtoc.text.tokens import TokenCounter

SEPARATOR = "\n"
_DATE_LINE = re.compile(r"\[\d{4}-\d{2}-\d{2}\]")
MIN_ITEM_TOKENS = 3
"""Packing stops when fewer tokens than this are left (no item is that small)."""
MAX_CHARS_PER_TOKEN = 12
"""Text longer than this many characters per token left is not counted: it cannot fit (cl100k
averages about 4 characters per token on English and code)."""
_PLAIN_ROLES = frozenset({"user", "assistant"})
MAX_MISSES = 40
"""Packing stops after this many units in a row that brought nothing or did not fit: the budget
is full for what is left (units come best first, so the rest are weaker and each costs a count)."""
HEAD_FILL = 0.8
"""An event's head at tier T holds at least this share of ``EVENT_HEAD_TOKENS[T]`` in practice
(it is cut at the last word boundary that fits): with fewer tokens left it is not rendered."""


@dataclass(frozen=True, slots=True)
class Unit:
    """A candidate piece of context: an event, grip, segment node or bookmark, with its events."""

    kind: str
    project: str
    id: str
    score: float
    events: tuple[Event, ...]
    last: bool = False
    """Packed after every unit that is not (grips and segments: their events came one by one)."""
    passage: Passage | None = None
    """For an event unit: the one passage of its text this unit stands for (``None``: whole)."""


def event_line(event: Event) -> str:
    """One event in recall's compact form (always contains the event's full text)."""
    if event.role in _PLAIN_ROLES:
        return event.text
    return f"[{event.role}] {event.text}"


def part_score(score: float, ratio: float, rank: int, top: float) -> float:
    """The score of a long event's passage: the event's score times the passage's share of the
    event's relevance, and for the ``rank``-th passage after its best (0: the best) times the
    event's score relative to the best event's (``top``) to the power ``rank``: the best event
    goes as deep as its passages deserve, a weaker one gives way to other events' best parts."""
    depth = min(1.0, score / top) ** rank if top > 0 else 1.0
    return score * ratio * depth


Cite = bool | Callable[[str], str]
"""Whether each item is led by the id it cites, and how that id is written: ``True`` the id
itself, a function a short handle the surface resolves back (MCP's ``#12``: a ULID costs 21
tokens in its parentheses, a fifth of a 1,500-token recall of ~25 items)."""


def cite_label(cite: Cite, item: SearchItem) -> str:
    """What leads an item in ``cite`` mode: ``(id)`` or ``(handle)``, with who spoke for a turn
    (``(#12 user)``: a decision the user made reads otherwise like one the agent proposed; a
    tool's or system's text already says ``[tool]``)."""
    ref = cite(item.id) if callable(cite) else item.id
    if item.kind == "event" and item.role in _PLAIN_ROLES:
        return f"({ref} {item.role})"
    return f"({ref})"


def cited(item: SearchItem, cite: Cite = True) -> str:
    """An item's text led by its id (``cite`` mode): what an agent reads and can cite."""
    return f"{cite_label(cite, item)} {item.text}"


def _dedupe_key(text: str) -> str:
    return " ".join(text.lower().split())


def _title(text: str) -> str:
    """An event's first non-blank line, cut at a word to 80 characters ("" for a text without
    one)."""
    return line_label(text)


class Packer:
    """Packs units into ``budget`` tokens (see the module docstring)."""

    def __init__(
        self,
        renderer: TierRenderer,
        counter: TokenCounter,
        tz: tzinfo,
        budget: int,
        deadline: Deadline,
        *,
        headers: bool = True,
        terms: Iterable[str] = (),
        cite: Cite = False,
    ) -> None:
        self.headers = headers
        self.cite = cite
        self.terms = set(terms)
        """The question's key terms: they choose a long event's passages (``recall_passages``)."""
        self._parts: dict[str, tuple[int, dict[int, Passage]]] = {}
        """Event id → (index in ``items``, its passages packed so far by index)."""
        self.renderer = renderer
        self.counter = counter
        self.tz = tz
        self.budget = budget
        self.deadline = deadline
        self.items: list[SearchItem] = []
        self.included: set[str] = set()
        self.texts: set[str] = set()
        self.days: dict[str, int] = {}
        """Day label → header tokens, for the days the context already has."""
        self.used = 0
        self._sep = counter.count(SEPARATOR)
        self._event_tokens: dict[str, int] = {}
        self._labels: dict[int, str] = {}
        self.stepped_down = 0
        self.truncated = False

    def day(self, ms: int) -> str:
        """The date line of the local day holding ``ms`` (memoised per minute)."""
        label = self._labels.get(ms // 60_000)
        if label is None:
            if MIN_TS_MS <= ms <= MAX_TS_MS:
                local = datetime.fromtimestamp(ms / 1000, UTC).astimezone(self.tz)
                label = local.strftime("[%Y-%m-%d]")
            else:  # an instant only an older memtoc stored: its UTC date, which any year shows
                label = f"[{iso_ms(ms).partition('T')[0]}]"
            self._labels[ms // 60_000] = label
        return label

    def _header_cost(self, label: str) -> int:
        if label in self.days or not self.headers:
            return 0
        return self.counter.count(label + SEPARATOR)

    def _tokens(self, event: Event) -> int:
        n = self._event_tokens.get(event.event_id)
        if n is None:
            n = self._event_tokens[event.event_id] = self.counter.count(event_line(event))
        return n

    def _fits(self, tokens: int, start_ms: int) -> bool:
        """Whether ``tokens`` more (plus a separator and a day line if new) fit the budget."""
        cost = tokens + (self._sep if self.items else 0)
        return self.used + cost + self._header_cost(self.day(start_ms)) <= self.budget

    def _l2(self, unit: Unit, new: Sequence[Event]) -> SearchItem:
        text = SEPARATOR.join(event_line(e) for e in new)
        included = {e.event_id for e in new}
        cites = tuple(e.event_id for e in unit.events if e.event_id not in included)
        return SearchItem(
            kind=unit.kind,
            id=unit.id,
            project=unit.project,
            tier="L2",
            text=text,
            tokens=self._tokens(new[0]) if len(new) == 1 else self.counter.count(text),
            start_ms=new[0].ts_ms,
            end_ms=new[-1].ts_ms,
            events=tuple(new),
            cites=cites,
            score=unit.score,
            title=_title(new[0].text) if unit.kind == "event" else unit.kind,
            role=new[0].role if unit.kind == "event" else None,
        )

    def _try(self, item: SearchItem) -> bool:
        label = self.day(item.start_ms)
        cost = item.tokens + (self._sep if self.items else 0)
        if self.cite:
            cost += self.counter.count(cite_label(self.cite, item))
        cost += self._header_cost(label)
        if self.used + cost > self.budget:
            return False
        if label not in self.days:
            self.days[label] = self._header_cost(label)
        self.used += cost
        self.items.append(item)
        for e in item.events:
            self.included.add(e.event_id)
            self.texts.add(_dedupe_key(e.text))
        return True

    def add(self, unit: Unit) -> bool:
        """Pack ``unit`` at the highest tier that fits; False when it brings nothing or fits not."""
        if unit.passage is not None:
            return self._add_passage(unit, unit.passage)
        new = [
            e
            for e in unit.events
            if e.event_id not in self.included
            and e.event_id not in self._parts
            and (key := _dedupe_key(e.text))
            and key not in self.texts
        ]
        if unit.events and not new:
            return False
        new = list({e.event_id: e for e in new}.values())
        new.sort(key=lambda e: (e.ts_ms, e.event_id))
        if new:
            # lower bounds first: most units that cannot fit are rejected without rendering
            chars = sum(len(e.text) for e in new)
            if chars > MAX_CHARS_PER_TOKEN * (self.budget - self.used):
                return self._step_down(unit)
            lower = sum(self._tokens(e) for e in new)
            if self._fits(lower, new[0].ts_ms) and self._try(self._l2(unit, new)):
                return True
        return self._step_down(unit)

    def _step_down(self, unit: Unit) -> bool:
        """Try ``unit`` at L1, then L0."""
        tiers: tuple[str, ...] = ("L1", "L0")
        if unit.kind == "event" and unit.events:
            # an event's L1/L0 is its head: only worth trying when shorter than the event, and
            # not rendered when even a head cut short at a word boundary could not fit (a head
            # is within a few tokens of its size; rendering one costs a binary search of counts)
            full = self._tokens(unit.events[0])
            left = self.budget - self.used
            tiers = tuple(
                t
                for t in tiers
                if EVENT_HEAD_TOKENS[t] < full and EVENT_HEAD_TOKENS[t] * HEAD_FILL <= left
            )
        for tier in tiers:
            try:
                item = self.renderer.render(unit.kind, unit.project, unit.id, tier, unit.score)
            except NotFoundError:
                return False
            if unit.kind == "event" and tier != "L2":
                # a head of an event is not the event: cite it instead of listing it
                role = unit.events[0].role if unit.events else None
                item = replace(item, events=(), cites=(unit.id,), role=role)
            if item.text and self._try(item):
                self.stepped_down += 1
                return True
        return False

    def pack(self, units: Sequence[Unit]) -> None:
        """Pack ``units`` best first (grips and segments after the rest). An event longer than a passage
        enters as its passages (``recall_passages``), each at the event's score times its share
        of the event's relevance, a deeper one discounted by the event's standing (``part_score``):
        a long event's relevant parts compete with other events one by one, and its irrelevant
        parts never spend the budget."""
        queue = [(1 if u.last else 0, -u.score, n, u) for n, u in enumerate(units)]
        heapq.heapify(queue)
        top = max((u.score for u in units if u.kind == "event"), default=0.0)
        order = len(queue)
        misses = 0
        while queue:
            if self.budget - self.used < MIN_ITEM_TOKENS or misses >= MAX_MISSES:
                break
            if self.items and self.deadline.expired():  # the best so far: at least one item
                self.truncated = True
                break
            pin, _, n, unit = heapq.heappop(queue)
            parts = self._passages(unit)
            if parts is not None:
                for k, (passage, ratio) in enumerate(parts):
                    score = part_score(unit.score, ratio, k, top)
                    part = replace(unit, score=score, passage=passage)
                    order += 1
                    heapq.heappush(queue, (pin, -part.score, n if k == 0 else order, part))
                continue
            misses = 0 if self.add(unit) else misses + 1

    def _passages(self, unit: Unit) -> list[tuple[Passage, float]] | None:
        """A long event unit's passages worth packing, best first (``None``: pack it whole)."""
        if unit.kind != "event" or unit.passage is not None or len(unit.events) != 1:
            return None
        event = unit.events[0]
        if event.event_id in self.included or self._tokens(event) <= PASSAGE_TOKENS:
            return None
        return rank_passages(self.terms, split_passages(event.text, self.counter))

    def _add_passage(self, unit: Unit, passage: Passage) -> bool:
        """Pack one passage of an event, merged into the item of its other packed passages."""
        event = unit.events[0]
        key = _dedupe_key(passage.text)
        if event.event_id in self.included or key in self.texts:
            return False
        index, packed = self._parts.get(event.event_id, (-1, {}))
        if passage.index in packed:
            return False
        parts = dict(packed)
        parts[passage.index] = passage
        item = self._passage_item(unit, parts, index, passage, title=True)
        if index < 0:
            if not self._try(item) and (
                item.tier == "L2" or not self._try(self._passage_item(unit, parts, index, passage))
            ):
                return False
            index = len(self.items) - 1
            self.stepped_down += 1
        else:
            grow = item.tokens - self.items[index].tokens
            if self.used + grow > self.budget:
                return False
            self.used += grow
            self.items[index] = item
            if item.tier == "L2":
                self.stepped_down -= 1
                self.included.add(event.event_id)
        self._parts[event.event_id] = (index, parts)
        self.texts.add(key)
        return True

    def _passage_item(
        self,
        unit: Unit,
        parts: dict[int, Passage],
        index: int,
        newest: Passage,
        *,
        title: bool = False,
    ) -> SearchItem:
        """The item of an event's packed ``parts`` (whole: L2, else L1 with "…" for the rest,
        led by the event's title with ``title`` when it holds a question term:
        ``recall_passages.passages_text``)."""
        event = unit.events[0]
        text, whole = passages_text(
            event.text, list(parts.values()), title=self.terms if title else None
        )
        text = event_line(replace(event, text=text))
        return SearchItem(
            kind="event",
            id=event.event_id,
            project=event.project,
            tier="L2" if whole else "L1",
            text=text,
            tokens=self.counter.count(text),
            start_ms=event.ts_ms,
            end_ms=event.ts_ms,
            events=(event,) if whole else (),
            cites=() if whole else (event.event_id,),
            score=max(unit.score, self.items[index].score if index >= 0 else 0.0),
            title=_title(newest.text),
            role=event.role,
        )

    def finish(self) -> tuple[list[SearchItem], int]:
        """The items in time order with day headers, and the context's token count (≤ budget)."""
        items = list(self.items)
        while True:
            out = self._assemble(items)
            tokens = self.counter.count(self.context(out))
            total = sum(i.tokens for i in out) + max(0, len(out) - 1)
            if max(tokens, total) <= self.budget or not out:
                return out, tokens if out else 0
            weakest = min(range(len(items)), key=lambda n: items[n].score)
            del items[weakest]

    def context(self, items: Sequence[SearchItem]) -> str:
        """The assembled items as one text (ids leading each item in ``cite`` mode)."""
        return context_text(items, cite=self.cite)

    def _assemble(self, items: Sequence[SearchItem]) -> list[SearchItem]:
        ordered = sorted(items, key=lambda i: (i.start_ms, i.end_ms, i.kind, i.id))
        out: list[SearchItem] = []
        seen: set[str] = set()
        for item in ordered:
            label = self.day(item.start_ms)
            if label not in seen and self.headers:
                seen.add(label)
                text = label + SEPARATOR + item.text
                item = replace(item, text=text, tokens=self.counter.count(text))
            out.append(item)
        return out


def context_text(items: Sequence[SearchItem], *, cite: Cite = False) -> str:
    """Items joined by newlines; with ``cite``, each led by its id (after its date line)."""
    if not cite:
        return SEPARATOR.join(item.text for item in items)
    parts = []
    for item in items:
        head, sep, rest = item.text.partition(SEPARATOR)
        if sep and _DATE_LINE.fullmatch(head):
            parts.append(f"{head}{SEPARATOR}{cite_label(cite, item)} {rest}")
        else:
            parts.append(cited(item, cite))
    return SEPARATOR.join(parts)
