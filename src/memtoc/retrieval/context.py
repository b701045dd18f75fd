"""Session-start context: what an agent should know when it opens a session, within a budget.

``build_context`` assembles, for one project, at most ``budget`` tokens (counted with the one
``TokenCounter``) of:

- **where we left off** (``context_thread``): the latest work session's title, what it was asked
  (its opening request), the last request when another came later, its outcome (the agent's last
  reply) and an error only when the session ended on it;
- **earlier sessions**: the opening request and outcome of the sessions just before (parallel or
  recent work);
- **recent activity**, most recent first: the latest day nodes' L0s, preceded by the latest
  segments that no day covers yet (days roll up an hour after their last change);
- the **top bookmarks** (by importance), when bookmarks exist — distinct moments: one that
  restates a better one (shared source events or content words, ``bookmark_terms.distinct``) is
  passed over for the next.

An agent's bookkeeping (``Event.bookkeeping``: warm-up prompts, command wrappers, notices) and
sub-agents' sessions never supply these, nor do the nodes that hold bookkeeping alone (a day of
sub-agent warm-ups, a segment of ``/exit``: ``is_bookkeeping``). Items are offered by priority (the latest session, then
an earlier session, the newest day, the top bookmark, the next earlier session, the next day, …)
and added while they fit; a day whose L0 does not fit is replaced by its title alone. The
rendered text is counted again at the end and trimmed item by item, so ``tokens <= budget``
always holds.

Cost: every read is an indexed walk that stops after a few rows — the newest events of the
project (``events(project, ts_ms)``), the newest segment and day nodes (``toc_nodes(project,
level, start_ms)``), the ends of a few sessions, the top bookmarks — so it does not grow with
the store (docs/benchmarks.md, "Design history" → "Agent surfaces", has the measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memtoc.errors import QueryError
from memtoc.model import BOOKKEEPING_TITLES, Bookmark, JsonValue, TocNode
from memtoc.retrieval.bookmark_terms import distinct
from memtoc.retrieval.context_thread import (
    SESSION_SEGMENTS,
    ContextItem,
    one_line,
    recent_sessions,
    thread_items,
)
from memtoc.store.base import Store
from memtoc.text.tokens import TokenCounter

DEFAULT_BUDGET = 800
RECENT_DAYS = 7
"""Day nodes considered (newest first)."""
RECENT_SEGMENTS = 4
"""Segments newer than the newest day considered (newest first)."""
TOP_BOOKMARKS = 5
BOOKMARK_POOL = 4 * TOP_BOOKMARKS
"""Bookmarks read (best first) to find ``TOP_BOOKMARKS`` distinct ones."""


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


def is_bookkeeping(node: TocNode) -> bool:
    """Whether ``node`` holds an agent's bookkeeping alone (how such nodes are titled, without
    keywords): it says nothing about the work, so the context never offers it."""
    return not node.keywords and node.title.startswith(BOOKKEEPING_TITLES)


def recent_items(days: Sequence[TocNode], segments: Sequence[TocNode]) -> list[ContextItem]:
    """Segments newer than the newest day, then the days, most recent first."""
    newest_day_end = days[0].end_ms if days else None
    fresh = [s for s in segments if newest_day_end is None or s.start_ms >= newest_day_end]
    out: list[ContextItem] = []
    for node in [*fresh, *days]:
        label = node.node_id.split(":", 2)[2][:16].replace("T", " ")
        abstract = one_line(node.abstract)
        if abstract.startswith(node.title):  # extractive L0s often open with the title
            abstract = abstract[len(node.title) :].lstrip(" .:;—-")
        head = f"{label} — {node.title}"
        text = head + (f": {abstract}" if abstract else "")
        out.append(ContextItem("recent", node.node_id, text, node.start_ms, head))
    return out


def bookmark_items(bookmarks: Sequence[Bookmark]) -> list[ContextItem]:
    return [
        ContextItem("bookmark", b.bookmark_id, f"[{b.type}] {one_line(b.content)}", b.created_ms)
        for b in bookmarks
    ]


_HEADINGS = {
    "thread": "Where we left off",
    "earlier": "Sessions before it",
    "recent": "Recent activity (newest first)",
    "bookmark": "Bookmarks",
}


FOOTER = "(Open a [toc:…] id with memory_toc; memory_recall or memory_search for more.)"


def cited(item: ContextItem) -> str:
    """An item's line: its text, and its id when a tool opens it (a ``toc:`` node id, which
    ``memory_toc`` takes). Event and bookmark ids stay in the data (``to_dict``) but not in the
    text: no tool opens them, and each costs 15-25 tokens of the budget."""
    return f"- {item.text} [{item.ref}]" if item.ref.startswith("toc:") else f"- {item.text}"


def render(project: str, items: Sequence[ContextItem]) -> str:
    """The context as an agent reads it (what ``tokens`` counts)."""
    if not items:
        return ""
    lines = [f"# memtoc memory — project {project}"]
    for section in _HEADINGS:
        chosen = [i for i in items if i.section == section]
        if chosen:
            lines.append(f"## {_HEADINGS[section]}")
            lines += [cited(i) for i in chosen]
    lines.append(FOOTER)
    return "\n".join(lines)


def _by_priority(
    thread: list[ContextItem],
    earlier: list[list[ContextItem]],
    recent: list[ContextItem],
    marks: list[ContextItem],
) -> list[ContextItem]:
    """The latest session first, then by turns an earlier session, a day and a bookmark."""
    order = list(thread)
    for i in range(max(len(earlier), len(recent), len(marks))):
        order += [*(earlier[i] if i < len(earlier) else []), *recent[i : i + 1], *marks[i : i + 1]]
    return order


def _title_only(item: ContextItem) -> ContextItem:
    """A day line without its abstract: its date and whole title (a title can hold ": " itself:
    "[CONTEXT PULSE: 2026-03-17_2155]" was cut to "[CONTEXT PULSE", "docs(graders): add …" to
    "Docs(graders)")."""
    head = item.head or item.text.split(": ", 1)[0]
    return ContextItem(item.section, item.ref, head, item.start_ms, head)


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
        # a day may shrink to its title; a quote cut to its label would say nothing
        options = (item, _title_only(item)) if item.section == "recent" else (item,)
        for option in options:
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
    name: str | None = None,
) -> ContextView:
    """The session-start context of ``project`` within ``budget`` tokens.

    ``bookmarks``: the bookmarks to offer, best first (None: the store's, by importance); the
    first ``TOP_BOOKMARKS`` distinct ones are. ``name``: the project's name as the agent knows
    it, for the heading (None: the id).
    """
    if budget < 0:
        raise QueryError(f"budget must be ≥ 0 (got {budget})")
    segments = [s for s in store.latest_nodes(project, "segment",
                                              max(RECENT_SEGMENTS, SESSION_SEGMENTS))
                if not is_bookkeeping(s)]  # fmt: skip
    days = [d for d in store.latest_nodes(project, "day", RECENT_DAYS) if not is_bookkeeping(d)]
    sessions = recent_sessions(store, project, segments)
    latest = next(
        (s for s in segments if sessions and s.session_id == sessions[0].session_id), None
    )
    thread, earlier = thread_items(counter, sessions, latest)
    pool = bookmarks if bookmarks is not None else store.list_bookmarks(project, BOOKMARK_POOL)
    marks = distinct(pool, TOP_BOOKMARKS)
    recent = recent_items(days, segments[:RECENT_SEGMENTS])
    candidates = _by_priority(thread, earlier, recent, bookmark_items(marks))
    chosen, text, tokens = fit(counter, name or project, candidates, budget)
    return ContextView(project, budget, tuple(chosen), text, tokens, len(candidates) - len(chosen))
