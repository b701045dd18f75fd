"""Where we left off: what the project's latest sessions set out to do and how they ended.

A session's **intent** is its opening request — the first thing the user asked in it — and its
**outcome** the agent's last reply: coding agents close a piece of work with a statement of what
was done ("Committed 91757d4: the grid now has 4 columns; all 1,219 tests pass"), which is what
the next session needs and what a tool log never says. The **last request** is added when the
user asked something else after the opening one, and an **unresolved error** only when the
session ended on a failure (no reply after it). Only the project's own work counts: an agent's
bookkeeping (``Event.bookkeeping``) and sub-agents' sessions (their parent session holds what
they reported) are passed over.

The latest session gets all four; the sessions before it — work running in parallel, or the
thread the user left a little earlier — their intent and outcome. Every read is an indexed walk
that stops after a few rows: the project's newest events, its newest segments (to find its
recent sessions), the events just before the earliest session found (when one long session
fills those), and the first and last events of each of a few sessions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memtoc.model import Event, JsonValue, TocNode, iso_ms
from memtoc.store.base import Store
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

TAIL_EVENTS = 60
"""How many of the project's newest events are read to find its latest session."""
SESSION_SEGMENTS = 12
"""How many of the newest segments are read to find the sessions before it."""
EARLIER_SESSIONS = 2
"""Sessions before the latest one whose intent and outcome are offered."""
EDGE_EVENTS = 40
"""Events read at each end of a session (its opening request, its last reply)."""
QUOTE_TOKENS = 80
"""A quoted request, reply or error is cut to this many tokens."""


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One line of the context: its section, what it cites, and its text."""

    section: str
    """``thread``, ``earlier``, ``recent`` or ``bookmark``."""
    ref: str
    """A node id, event id or bookmark id the agent can pass to memtoc's tools."""
    text: str
    start_ms: int
    head: str = ""
    """What the line shrinks to when it does not fit whole (a day's date and title), if it can."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "section": self.section,
            "id": self.ref,
            "text": self.text,
            "start_time": iso_ms(self.start_ms),
        }


def day(ms: int) -> str:
    """``2024-01-18 10:00 UTC`` (any instant, also one only an older memtoc stored)."""
    date, _, clock = iso_ms(ms).partition("T")
    return f"{date} {clock[:5]} UTC"


def one_line(text: str) -> str:
    return " ".join(text.split())


def is_work(event: Event) -> bool:
    """An event of the project's own work: not an agent's bookkeeping (``Event.bookkeeping``),
    not a sub-agent's session (its parent session holds what it reported)."""
    return not event.bookkeeping and not is_subagent(event)


def is_subagent(event: Event) -> bool:
    """An event of a sub-agent's session: filed under its parent (``parent_session_id``), or
    one Gemini CLI marks ``kind: subagent`` wherever its file was found (an archived copy)."""
    meta = event.metadata
    return "parent_session_id" in meta or meta.get("session_kind") == "subagent"


def _is_error(event: Event) -> bool:
    meta = event.metadata
    return event.event_type == "tool_result" and (
        meta.get("is_error") is True or meta.get("status") in ("error", "failed")
    )


def _said(event: Event) -> bool:
    """A message with words in it (not a placeholder such as ``[image]``, not thinking)."""
    if event.metadata.get("kind") in ("thinking", "image", "document"):
        return False
    text = event.text.strip()
    return bool(text) and not (text.startswith("[") and text.endswith("]") and " " not in text)


@dataclass(frozen=True, slots=True)
class _Session:
    """The ends of one session, as read from the store."""

    session_id: str
    intent: Event | None
    last_request: Event | None
    outcome: Event | None
    failure: Event | None
    first_ms: int
    last_ms: int


def _session(store: Store, project: str, session_id: str) -> _Session | None:
    """The opening request, last request, last reply and (unresolved) failure of a session, or
    None for a session that is not the project's own work."""
    head = list(store.scan_events(project=project, session_id=session_id, limit=EDGE_EVENTS))
    if not head or any(is_subagent(e) for e in head[:1]):
        return None
    tail = list(
        store.scan_events(
            project=project, session_id=session_id, limit=EDGE_EVENTS, descending=True
        )
    )
    work_tail = [e for e in tail if is_work(e)]  # newest first
    intent = next((e for e in head if is_work(e) and e.event_type == "user_message" and _said(e)),
                  None)  # fmt: skip
    last_request = next((e for e in work_tail if e.event_type == "user_message" and _said(e)), None)
    outcome = next((e for e in work_tail if e.event_type == "assistant_message" and _said(e)), None)
    failure = None
    for e in work_tail:
        if e.event_type in ("assistant_message", "user_message"):
            break  # a reply or a new request came after any failure: not left unresolved
        if _is_error(e):
            failure = e
            break
    if intent is None and outcome is None:
        return None
    return _Session(
        session_id, intent, last_request, outcome, failure, head[0].ts_ms, tail[0].ts_ms
    )


_MARKUP = re.compile(r"(?:(?<=\s)|^)#{1,6}(?=\s)|\*\*")
"""Markdown heading marks and bold markers: agents' replies are full of them ("## ✅ Done",
"**Trigger**"); on one line they say nothing and cost tokens of the budget."""


def plain(text: str) -> str:
    """``text`` on one line, without markdown heading and bold marks."""
    return one_line(_MARKUP.sub("", text))


def _quote(counter: TokenCounter, event: Event) -> str:
    """The event's text, at most ``QUOTE_TOKENS``, a cut one ending with "…" (a reply cut at
    "… public `policy` examples now only show" read as the whole outcome)."""
    text = plain(event.text)
    cut = truncate_to_tokens(counter, text, QUOTE_TOKENS)
    return cut if cut == text else cut.rstrip(" ,;:") + "…"


def recent_sessions(store: Store, project: str, segments: Iterable[TocNode]) -> list[_Session]:
    """The latest work session, then up to ``EARLIER_SESSIONS`` before it (by last activity):
    the sessions of the newest events and segments, and — when those are all one long session —
    the sessions whose events come just before the earliest one found."""
    tail = [
        e
        for e in store.scan_events(project=project, limit=TAIL_EVENTS, descending=True)
        if is_work(e)
    ]
    order = list(dict.fromkeys([*(e.session_id for e in tail),
                                *(s.session_id for s in segments if s.session_id)]))  # fmt: skip
    found: list[_Session] = []
    tried: set[str] = set()
    while len(found) <= EARLIER_SESSIONS:
        if not order:
            if not found:
                break
            before = min(s.first_ms for s in found)
            older = store.scan_events(
                project=project, until_ms=before, limit=TAIL_EVENTS, descending=True
            )
            order = [sid for sid in dict.fromkeys(e.session_id for e in older if is_work(e))
                     if sid not in tried]  # fmt: skip
            if not order:
                break
        session_id = order.pop(0)
        if session_id in tried:
            continue
        tried.add(session_id)
        session = _session(store, project, session_id)
        if session is not None:
            found.append(session)
    latest, earlier = found[:1], sorted(found[1:], key=lambda s: -s.last_ms)
    return latest + earlier


def thread_items(
    counter: TokenCounter, sessions: list[_Session], latest_segment: TocNode | None
) -> tuple[list[ContextItem], list[list[ContextItem]]]:
    """The latest session's items (``thread``) and, per earlier session, its items
    (``earlier``), each in the order they are offered."""
    if not sessions:
        return [], []
    first, *rest = sessions
    items: list[ContextItem] = []
    if latest_segment is not None and latest_segment.session_id == first.session_id:
        title = latest_segment.title
        quoted = [plain(e.text) for e in (first.intent, first.last_request) if e is not None]
        if any(key_terms(title) <= key_terms(q) for q in quoted):
            title = ""  # the title is the request quoted just below: said once
        items.append(ContextItem("thread", latest_segment.node_id,
                                 f"Latest session ({day(first.last_ms)})"
                                 + (f": {title}" if title else ""),
                                 latest_segment.start_ms))  # fmt: skip
    else:
        anchor = first.outcome or first.intent
        assert anchor is not None
        items.append(ContextItem("thread", anchor.event_id,
                                 f"Latest session ({day(first.last_ms)}), not yet summarised",
                                 anchor.ts_ms))  # fmt: skip
    if first.intent is not None:
        items.append(_item("thread", "Asked", counter, first.intent))
    if first.last_request is not None and first.last_request != first.intent:
        items.append(_item("thread", "Last request", counter, first.last_request))
    if first.outcome is not None:
        items.append(_item("thread", "Outcome", counter, first.outcome))
    if first.failure is not None:
        items.append(_item("thread", "Unresolved error", counter, first.failure))
    earlier: list[list[ContextItem]] = []
    for session in rest:
        group: list[ContextItem] = []
        when = day(session.last_ms)
        if session.intent is not None:
            group.append(_item("earlier", f"{when} — asked", counter, session.intent))
        if session.outcome is not None:
            group.append(_item("earlier", f"{when} — outcome", counter, session.outcome))
        earlier.append(group)
    return items, earlier


def _item(section: str, label: str, counter: TokenCounter, event: Event) -> ContextItem:
    return ContextItem(section, event.event_id, f"{label}: “{_quote(counter, event)}”", event.ts_ms)
