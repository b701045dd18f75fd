"""Time-aware evidence for recall: when a turn *says* something happened, and questions about time.

People tell what happened after it happened: "yesterday I went bowling", told on 17 March, is the
answer to "what did James do on March 16?", though the turn's own timestamp is outside that day.
``mentioned_ranges(event)`` resolves the relative and absolute time expressions in an event's text
(``timeparse.parse_time`` with the event's own time as the reference: "yesterday", "last week",
"two weeks ago", "in May") to the windows they name; recall boosts an event whose mention falls in
the question's window like one told inside it.

``asks_when(question)`` recognises a question whose answer is a time ("When did …", "How long …",
"What year …", "Since when …", "How many days …"): recall then slightly prefers turns that carry a
time expression — the date an answer needs is in them.

Parsing costs about 50-80 µs a turn, so a turn is parsed only when a cheap pre-filter finds a
time-like word in it, only its first ``MAX_CHARS`` characters, and results are memoised per event
(bounded).
"""

from __future__ import annotations

import re
from datetime import tzinfo

from memtoc.model import Event
from memtoc.retrieval.timeparse import Range, parse_time

MAX_EXPRESSIONS = 3
"""Time expressions resolved per event (the first ones)."""
MAX_CHARS = 500
"""Only the first characters of a turn are read for time expressions (a conversational turn is
shorter; a long tool output's dates are not what a question's window is about)."""
_MEMO_MAX = 200_000

_WHEN = re.compile(
    r"^\s*(?:when\b|since when\b|how long\b|how many (?:days|weeks|months|years)\b|"
    r"(?:what|which) (?:year|month|date|day|week|time)\b|at what (?:age|time)\b)",
    re.IGNORECASE,
)
_MONTHS = (
    "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|january|february|march|april|june|july|"
    "august|september|october|november|december|sept"
)
_TIMEISH = re.compile(
    r"\b(?:today|tonight|yesterday|tomorrow|ago|last|this|past|morning|afternoon|evening|"
    r"week|weeks|weekend|month|months|year|years|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|" + _MONTHS + r"|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a time (module docstring)."""
    return _WHEN.search(question) is not None


_MEMO: dict[tuple[str, int, int, str], tuple[Range, ...]] = {}


def mentioned_ranges(event: Event, tz: tzinfo) -> tuple[Range, ...]:
    """The windows named by the time expressions in ``event``'s text, resolved at its own time."""
    key = (event.event_id, event.ts_ms, hash(event.text), str(tz))
    found = _MEMO.get(key)
    if found is not None:
        return found
    ranges: list[Range] = []
    text = event.text[:MAX_CHARS]
    if _TIMEISH.search(text):
        rest = text
        for _ in range(MAX_EXPRESSIONS):
            expr = parse_time(rest, event.ts_ms, tz)
            if expr is None:
                break
            if expr.range is not None:
                ranges.append(expr.range)
            if expr.rest == rest:
                break
            rest = expr.rest
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    found = _MEMO[key] = tuple(ranges)
    return found


def mentions_window(event: Event, window: Range, tz: tzinfo) -> bool:
    """Whether a time expression in ``event`` names a window overlapping ``window``."""
    lo, hi = window
    return any(start < hi and end > lo for start, end in mentioned_ranges(event, tz))


def carries_time(event: Event, tz: tzinfo) -> bool:
    """Whether ``event``'s text holds a time expression that resolves to a window."""
    return bool(mentioned_ranges(event, tz))
