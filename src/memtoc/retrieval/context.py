"""Session-start context: what an agent should know when it opens a session, within a budget.

``build_context`` assembles, for one project, at most ``budget`` tokens (counted with the one
``TokenCounter``) of:

- the **open thread**: the latest session's segment title (when it has been summarised), its last
  user question and, when a tool failed after that question, the failure — the heuristic for
  "where we left off";
- **recent activity**, most recent first: the latest day nodes' L0s, preceded by the latest
  segments that no day covers yet (days roll up an hour after their last change);
- the **top bookmarks** (by importance), when bookmarks exist.

Items are interleaved by priority (thread, newest day, top bookmark, next day, …) and added while
they fit; an L0 that does not fit is replaced by its title alone. The rendered text is counted
again at the end and trimmed item by item, so ``tokens <= budget`` always holds.

Cost: every read is an indexed walk that stops after a few rows — the newest events of the
project (``events(project, ts_ms)``), the newest segment and day nodes (``toc_nodes(project,
level, start_ms)``), the top bookmarks — so it does not grow with the store (see
``docs/architecture.md`` for the measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memtoc.errors import QueryError
from memtoc.model import Bookmark, Event, JsonValue, TocNode, iso_ms
from memtoc.store.base import Store
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

DEFAULT_BUDGET = 800
RECENT_DAYS = 7
"""Day nodes considered (newest first)."""
RECENT_SEGMENTS = 4
"""Segments newer than the newest day considered (newest first)."""
TOP_BOOKMARKS = 5
TAIL_EVENTS = 60
"""How many of the project's newest events the open-thread heuristic reads."""
_QUOTE_TOKENS = 80
"""A quoted question or error is cut to this many tokens."""


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One line of the context: its section, what it cites, and its text."""

    section: str
    """``thread``, ``recent`` or ``bookmark``."""
    ref: str
    """A node id, event id or bookmark id the agent can pass to memtoc's tools."""
    text: str
    start_ms: int

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "section": self.section,
            "id": self.ref,
            "text": self.text,
            "start_time": iso_ms(self.start_ms),
        }


@dataclass(frozen=True, slots=True)
class ContextView:
    """The session-start context of one project: items, their rendering, its token count."""

    project: str | None
    budget: int
    items: tuple[ContextItem, ...]
    text: str
    tokens: int
    omitted: int = 0
    """Candidate items left out for the budget."""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "project": self.project,
            "budget": self.budget,
            "tokens": self.tokens,
            "omitted": self.omitted,
            "items": [i.to_dict() for i in self.items],
            "text": self.text,
        }


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _is_error(event: Event) -> bool:
    meta = event.metadata
    return event.event_type == "tool_result" and (
        meta.get("is_error") is True or meta.get("status") in ("error", "failed")
    )


def is_work(event: Event) -> bool:
    """An event of the project's own work: not an agent's bookkeeping (``Event.bookkeeping``),
    not a sub-agent's session (its parent session holds what it reported)."""
    return not event.bookkeeping and "parent_session_id" not in event.metadata


def open_thread(
    store: Store, counter: TokenCounter, project: str, latest_segment: TocNode | None
) -> list[ContextItem]:
    """Where the latest session left off: its title, last user question and a later failure."""
    tail = [
        e
        for e in store.scan_events(project=project, limit=TAIL_EVENTS, descending=True)
        if is_work(e)
    ]
    if not tail:
        return []
    session = tail[0].session_id
    recent = [e for e in tail if e.session_id == session]  # newest first
    items: list[ContextItem] = []
    if latest_segment is not None and latest_segment.session_id == session:
        items.append(
            ContextItem(
                "thread",
                latest_segment.node_id,
                f"Latest session ({_day(tail[0].ts_ms)}): {latest_segment.title}",
                latest_segment.start_ms,
            )
        )
    else:
        items.append(
            ContextItem(
                "thread",
                tail[0].event_id,
                f"Latest session {session} ({_day(tail[0].ts_ms)}), not yet summarised",
                tail[0].ts_ms,
            )
        )
    question = next((e for e in recent if e.event_type == "user_message" and e.text.strip()), None)
    if question is not None:
        quote = truncate_to_tokens(counter, _one_line(question.text), _QUOTE_TOKENS)
        items.append(
            ContextItem("thread", question.event_id, f"Last request: “{quote}”", question.ts_ms)
        )
    after = [
        e
        for e in recent
        if question is None or (e.ts_ms, e.event_id) > (question.ts_ms, question.event_id)
    ]
    failure = next((e for e in after if _is_error(e)), None)
    if failure is not None:
        quote = truncate_to_tokens(counter, _one_line(failure.text), _QUOTE_TOKENS)
        items.append(
            ContextItem("thread", failure.event_id, f"Unresolved error: “{quote}”", failure.ts_ms)
        )
    return items


def recent_items(days: Sequence[TocNode], segments: Sequence[TocNode]) -> list[ContextItem]:
    """Segments newer than the newest day, then the days, most recent first."""
    newest_day_end = days[0].end_ms if days else None
    fresh = [s for s in segments if newest_day_end is None or s.start_ms >= newest_day_end]
    out: list[ContextItem] = []
    for node in [*fresh, *days]:
        label = node.node_id.split(":", 2)[2][:16].replace("T", " ")
        abstract = _one_line(node.abstract)
        if abstract.startswith(node.title):  # extractive L0s often open with the title
            abstract = abstract[len(node.title) :].lstrip(" .:;—-")
        text = f"{label} — {node.title}" + (f": {abstract}" if abstract else "")
        out.append(ContextItem("recent", node.node_id, text, node.start_ms))
    return out


def bookmark_items(bookmarks: Sequence[Bookmark]) -> list[ContextItem]:
    return [
        ContextItem("bookmark", b.bookmark_id, f"[{b.type}] {_one_line(b.content)}", b.created_ms)
        for b in bookmarks
    ]


_HEADINGS = {
    "thread": "Where we left off",
    "recent": "Recent activity (newest first)",
    "bookmark": "Bookmarks",
}


def render(project: str, items: Sequence[ContextItem]) -> str:
    """The context as an agent reads it (what ``tokens`` counts)."""
    if not items:
        return ""
    lines = [f"# memtoc memory — project {project}"]
    for section in ("thread", "recent", "bookmark"):
        chosen = [i for i in items if i.section == section]
        if chosen:
            lines.append(f"## {_HEADINGS[section]}")
            lines += [f"- {i.text} [{i.ref}]" for i in chosen]
    lines.append("(memtoc tools: memory_toc, memory_expand, memory_timeline for details.)")
    return "\n".join(lines)


def _by_priority(
    thread: list[ContextItem], recent: list[ContextItem], marks: list[ContextItem]
) -> list[ContextItem]:
    """Thread first, then days and bookmarks alternating (newest day, top bookmark, …)."""
    order = list(thread)
    for i in range(max(len(recent), len(marks))):
        order += recent[i : i + 1] + marks[i : i + 1]
    return order


def _title_only(item: ContextItem) -> ContextItem:
    head = item.text.split(": ", 1)[0]
    return ContextItem(item.section, item.ref, head, item.start_ms)


def fit(
    counter: TokenCounter, project: str, candidates: Sequence[ContextItem], budget: int
) -> tuple[list[ContextItem], str, int]:
    """The candidates that fit ``budget`` (in priority order), the text, and its token count.

    Each candidate is tried whole, then as its title alone; the rendering is counted each time
    (a few dozen counts of a short text), so the result is exact, never an estimate.
    """
    chosen: list[ContextItem] = []
    text, tokens = "", 0
    for item in candidates:
        for option in (item, _title_only(item)):
            trial = render(project, [*chosen, option])
            count = counter.count(trial)
            if count <= budget:
                chosen.append(option)
                text, tokens = trial, count
                break
    return chosen, text, tokens


def build_context(
    store: Store,
    counter: TokenCounter,
    project: str,
    *,
    budget: int = DEFAULT_BUDGET,
    bookmarks: Sequence[Bookmark] | None = None,
) -> ContextView:
    """The session-start context of ``project`` within ``budget`` tokens.

    ``bookmarks``: the top bookmarks to offer (None: the store's, by importance).
    """
    if budget < 0:
        raise QueryError(f"budget must be ≥ 0 (got {budget})")
    segments = store.latest_nodes(project, "segment", RECENT_SEGMENTS)
    days = store.latest_nodes(project, "day", RECENT_DAYS)
    thread = open_thread(store, counter, project, segments[0] if segments else None)
    marks = (
        list(bookmarks) if bookmarks is not None else store.list_bookmarks(project, TOP_BOOKMARKS)
    )
    candidates = _by_priority(thread, recent_items(days, segments), bookmark_items(marks))
    chosen, text, tokens = fit(counter, project, candidates, budget)
    return ContextView(project, budget, tuple(chosen), text, tokens, len(candidates) - len(chosen))
