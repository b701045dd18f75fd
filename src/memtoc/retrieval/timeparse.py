"""Time expressions in queries: "yesterday", "last week", "in March", "two weeks ago", "on 8 May",
"Friday evening", "about an hour ago", "since Monday", "before the migration" — resolved against a
reference instant in a time zone.

``parse_time(query, reference_ms, tz)`` finds the first time expression in ``query`` and returns a
``TimeExpr``: the half-open range ``[start_ms, end_ms)`` it denotes (local calendar periods computed
with ``pipeline.periods.Calendar``, so they agree with the TOC's days, ISO weeks and months, DST
included; hours of the day are local wall-clock hours), or — for "before/after <event>" — an
``anchor`` phrase and a ``relation`` the caller resolves by searching for the event
(``resolve_anchor``), plus the query with the expression removed (``rest``). No expression gives
``None``; arbitrary input never raises.

What each form means (``ref`` = the reference instant, "day" = a local calendar day):

=====================================  =========================================================
``today`` / ``yesterday`` / ``the      that day; ``earlier today`` = today up to ``ref``
day before yesterday`` / ``tomorrow``
``this week`` / ``last week``          the current / previous ISO week (Monday 00:00 → Monday);
                                       ``earlier this week|month|year`` ends at ``ref``
``the week before last``               the ISO week before the previous one
``this|last weekend``                  Saturday 00:00 → Monday 00:00 of the current / previous
                                       ISO week
``over|during|on|at the weekend``      the most recent weekend that has begun by ``ref``
``before|after the weekend``           the Friday before / the Monday after the most recent
                                       weekend that has begun (ended, for "after") by ``ref``
``this|last month|year``               the calendar month / year, or the one before
``Monday`` / ``on Monday`` / ``last    the most recent Monday strictly before today;
Monday``                               ``this Monday`` = the Monday of the current ISO week
``in March`` / ``during March``        the most recent March whose start is not after ``ref``
                                       (asked in January, "in December" is last year's)
``early|mid|late March``, ``the        days 1-10 / 11-20 / 21-end of that month
start|middle|end of March``
``last March``                         the most recent March strictly before the current month
``March 2023`` / ``in 2023`` / ``2023``  that month / year (a year alone: 1900-2099 only)
``on 8 May`` / ``May 8th`` / ``the     that day; without a year, the most recent one not after
8th of May`` / ``2023-05-08``          ``ref``'s date. A weekday written beside a date
                                       ("Tuesday Feb 17") is part of it; the date wins
``on the 27th`` / ``of the 27th``      the most recent 27th not after today (with a weekday,
                                       "Tuesday the 17th": the most recent 17th that is a
                                       Tuesday, within a year)
``N days ago``                         the local day ``N`` days before today
``N weeks ago``                        7 days centred on the day ``N`` weeks back (day-3 … day+3)
``N months ago``                       31 days centred on the same day ``N`` months back
``N years ago``                        365 days centred on the same day ``N`` years back
``N hours|minutes ago``                ``ref - N units`` ± half of it (at least ± 10 minutes),
                                       never after ``ref``: "an hour ago" = 1.5 h → 0.5 h before
``the last|past N days|hours|…``       ``[ref - N units, ref)`` (months = 30 d, years = 365 d)
``between X and Y``, ``from X to       from the start of the earlier to the end of the later
Y``, ``X and Y``                       (both dates or days)
``since X`` / ``after X``              ``[start(X), ref)`` / ``[end(X), ref)`` for a date ``X``
                                       (``X`` still ahead: ``X`` / as long again after it)
``before X`` / ``until X``             ``[0, start(X))`` / ``[0, end(X))`` (open start: epoch 0)
``before|until the <event>``           anchor ``<event>``, relation ``before``
``after|since the <event>``            anchor ``<event>``, relation ``after``
=====================================  =========================================================

**Parts of the day** narrow any expression naming one day, written after it ("Friday evening",
"yesterday around lunchtime", "Monday late afternoon", "Feb 18 in the morning") or before it ("the
evening of June 27", "the evening of the 27th", "around lunchtime today", "right after lunch
today", "late yesterday evening", "late this morning", "late last night"). ``this morning`` /
``tonight`` / ``last night`` are today's morning / today's night / yesterday's night. Alone, a
part of the day needs a position word ("at the end of the afternoon", "later in the morning",
"around lunchtime", "after lunch") and means the most recent one that has begun by ``ref``. Local
wall-clock hours (``PARTS``; a night runs into the next morning):

=====================  ==============  ====================  ==============
morning                05:00 - 12:00   early / mid / late    05-09 / 09-11 / 10-12
afternoon              12:00 - 18:00   early / mid / late    12-15 / 14-16 / 15-18
evening                18:00 - 24:00   early / mid / late    18-21 / 20-22 / 21-24
night                  18:00 - 06:00   early / middle / late 18-24 / 00-04 / 21-05
lunch(time)            12:00 - 13:30   before / after lunch  10:00-12:00 / 13:30-15:30
noon, midday           11:30 - 12:30   late <day>            16:00 - 24:00; early <day> 05-09
=====================  ==============  ====================  ==============

Speakers round to the part they mean (a message at 12:10 is still "late this morning", one at
17:55 "this evening"), so every part-of-day window is widened by ``PART_SLACK_MIN`` on each side,
but never beyond its day (except a night). "The start/beginning of" reads as early, "the end of",
"towards the end of" and "just before leaving" as late, "the middle of" as mid. "First thing this
morning" is the morning: "first" orders the morning's events, it does not move the clock.
``earlier`` before a day or a part ("earlier today", "earlier this afternoon") ends the window at
``ref``.

A clock time after a day, before it or alone ("yesterday at 3pm", "at 3 p.m. yesterday", "Friday
around 10:30", "at 15h30") is a window of ± ``CLOCK_TOLERANCE_MIN`` ("at") or twice that
("around", "about"), inside its day; it needs am/pm or minutes ("at 3" is not a time).

``N`` is digits or a word: ``a``/``an``/``one`` … ``twenty``, ``a couple (of)`` = 2,
``a few`` / ``several`` = 3, ``half an`` (hour) = ½. Month names take their three-letter
abbreviations (and ``Sept``); a bare month name ("March", "May") is not an expression — it needs a
preposition, a day or a year, because "may" and "march" are also ordinary words. An anchor needs a
determiner or a possessive ("after **the** migration", "after **Melanie's** birthday"), so "after
login" is not an anchor. When several expressions occur, the leftmost wins (the longest among those
starting there).

``parse_bound(value, …)`` is the one reader of a ``since``/``until``/``at`` argument on every surface
(CLI options, MCP tool arguments, HTTP parameters): an ISO 8601 date or instant (no zone = UTC; a
date alone is its whole UTC day), epoch milliseconds, an age (``30m``, ``12h``, ``7d``, ``2w``) or
any expression above (``yesterday``, ``last week``) — a period gives its start for ``since``/``at``
and its end for ``until``. Anything else, or an instant outside years 1-9999, is a ``QueryError``
naming the argument.

Parsing is on recall's path for every question and for up to a hundred candidate events each
(``recall_time``): a rule's regular expression runs only when one of its key words occurs in the
text (``timeparse_rules.key_words``), so a text without time words costs a few microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Literal

from memtoc.errors import QueryError
from memtoc.pipeline.periods import Calendar
from memtoc.retrieval.timeparse_rules import (
    LEFT_CLOCK,
    LEFT_MOD,
    LEFT_PART,
    LEFT_SPAN,
    MOD_WORDS,
    MONTH,
    PART_WORDS,
    PARTS,
    RIGHT_CLOCK,
    RIGHT_PART,
    RULES,
    WEEKDAYS,
    WORD_START,
    Ctx,
    Day,
    Range,
    clock_window,
    end_at_ref,
    key_words,
    mod_kind,
    part_key,
)

__all__ = [
    "PARTS",
    "Edge",
    "Range",
    "Relation",
    "SearchFn",
    "TimeExpr",
    "parse_bound",
    "parse_time",
    "resolve_anchor",
]

Relation = Literal["before", "after"]


@dataclass(frozen=True, slots=True)
class TimeExpr:
    """A time expression found in a query.

    ``range`` is a half-open ``[start_ms, end_ms)`` window (None for an anchor expression);
    ``anchor``/``relation`` name an event the range is relative to ("before the migration");
    ``matched`` is the expression as written, ``rest`` the query without it.
    """

    range: Range | None
    anchor: str | None
    relation: Relation | None
    matched: str
    rest: str

    def anchored_range(self, anchor_ms: int, reference_ms: int) -> Range | None:
        """The window once the anchor's instant is known: before → ``[0, anchor)``, after →
        ``[anchor, reference)`` (None for an expression without an anchor)."""
        if self.relation == "before":
            return (min(0, anchor_ms), anchor_ms)
        if self.relation == "after":
            return (anchor_ms, max(anchor_ms, reference_ms))
        return None


_WRAPPER = re.compile(r"(?P<w>since|after|from|before|until|till|up\s+to)\s+$", re.IGNORECASE)
_SPAN_LEFT = re.compile(WORD_START + r"(?P<w>between|from)\s+$", re.IGNORECASE)
_SPAN_JOIN = re.compile(
    r"\s*,?\s*(?P<w>and|to|through|thru|till|until|-|\u2013|\u2014)\s*", re.IGNORECASE
)
_NTH_LEFT = re.compile(
    WORD_START + r"(?:on|of|between|and|to|from|since|until|till|after|before|by|through)\s+$",
    re.IGNORECASE,
)
_NTH_FOLLOW = re.compile(
    r"\s*(?:$|[?.!,;:)])|\s+(?:and|or|at|in|on|around|about|when|while|we|i|you|before|after|"
    r"until|to|morning|afternoon|evening|night|lunch)\b",
    re.IGNORECASE,
)
_ANCHOR = re.compile(
    WORD_START
    + r"(?P<rel>before|after|since|until|till|prior\s+to|following)\s+"
    + r"(?P<phrase>(?:(?:the|my|our|your|his|her|their|its|a|an)\s+|[\w-]+'s\s+)"
    + r"[^\s?.!,;:]+(?:\s+[^\s?.!,;:]+){0,5})",
    re.IGNORECASE,
)
_ANCHOR_KEYS = frozenset(("before", "after", "since", "until", "till", "prior", "following"))
_ANCHOR_STOP = re.compile(
    r"\s+(?:and|but|or|when|while|because|so|did|do|does|was|were|is|are|had|has|have|"
    r"what|who|how|why|where|which|that)\b.*$",
    re.IGNORECASE,
)
_BARE_MONTH = re.compile(r"^\s*" + MONTH + r"\s*$", re.IGNORECASE)
_DETERMINERS = frozenset(("the", "my", "our", "your", "his", "her", "their", "its", "a", "an"))


def _ordinary_word(m: re.Match[str], query: str) -> bool:
    """A match that is really a word: "march"/"may" alone, "3 may fail", "the 3rd attempt"."""
    groups = m.re.groupindex
    if "wdp" in groups and (m.group("wdp") or "").lower() in WEEKDAYS:
        return False  # "Tuesday Feb 17": a date ("sat the 3rd exam" is not)
    if "third" in groups and m.group("third"):
        return False  # "mid-March"
    if _BARE_MONTH.match(m.group(0)):
        return True
    if "mon" not in groups:
        if "dd" in groups and "mm" not in groups:  # "the 27th": needs "on"/"of"/… and an end
            left = m.group("pre") or _NTH_LEFT.search(query, max(0, m.start() - 9), m.start())
            follow = _NTH_FOLLOW.match(query, m.end()) or RIGHT_PART.match(query, m.end())
            return not left or not follow
        return False
    if "pre" not in groups:
        return False
    mon = m.group("mon")
    return (
        mon in {"may", "march", "mar"}  # lower case, no preposition, no year
        and not m.group("pre")
        and not m.group("y")
    )


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    end: int
    range: Range | None
    anchor: str | None = None
    relation: Relation | None = None
    day: Day | None = None
    """Set when the expression names one day (a part of the day may narrow it)."""
    spanned: bool = False
    """A "between X and Y" span: no since/until wrapper applies."""


def _raw_candidates(query: str, keys: set[str], ctx: Ctx) -> Iterable[_Candidate]:
    for rule in RULES:
        if not all(not group.isdisjoint(keys) for group in rule.keys):
            continue
        for m in rule.pattern.finditer(query):
            start = m.start()
            if _ordinary_word(m, query):
                wrap = _WRAPPER.search(query, max(0, start - 12), start)
                if wrap is None or wrap.end() != start:  # "since March" is a date, "march on" not
                    continue
            try:
                value = rule.resolver(m, ctx)
                if isinstance(value, Day):
                    rng = ctx.part(value.day, value.part) if value.part else ctx.days(value.day)
                    yield _Candidate(start, m.end(), rng, day=value)
                else:
                    yield _Candidate(start, m.end(), value)
            except (ValueError, OverflowError, OSError, KeyError):
                continue


def _qualify(query: str, keys: set[str], c: _Candidate, ctx: Ctx) -> _Candidate:
    """``c`` (one day) narrowed by a part of the day and modifiers written around it."""
    if c.day is None:
        return c
    day, part, start, end = c.day.day, c.day.part, c.start, c.end
    mod: str | None = None
    words = part is None and not keys.isdisjoint(PART_WORDS)
    if words and (right := RIGHT_PART.match(query, end)):
        part = part_key(right.group("part"), right.group("mod"), right.group("ba"))
        end = right.end() if part else end
    if part is None and "0" in keys and (clock := RIGHT_CLOCK.match(query, end)):
        part = clock_window(clock)
        end = clock.end() if part else end
    if (
        part is None
        and words
        and (left := LEFT_PART.search(query, max(0, start - LEFT_SPAN), start))
    ):
        part = part_key(left.group("part"), left.group("mod"), left.group("ba"))
        start = left.start() if part else start
    if (
        part is None
        and "0" in keys
        and (clock := LEFT_CLOCK.search(query, max(0, start - 30), start))
    ):
        part = clock_window(clock)
        start = clock.start() if part else start
    earlier = False
    left_mod = None
    if not keys.isdisjoint(MOD_WORDS):
        left_mod = LEFT_MOD.search(query, max(0, start - LEFT_SPAN), start)
    if left_mod is not None:
        word = " ".join(left_mod.group("mod").lower().split())
        earlier = word == "earlier"
        mod = mod_kind(word)
        start = left_mod.start()
    key = part
    if mod is not None:
        if part is None:
            key = f"{mod} day" if f"{mod} day" in PARTS else None
        elif isinstance(part, str) and f"{mod} {part}" in PARTS:
            key = f"{mod} {part}"
    rng = ctx.part(day, key) if key else ctx.days(day)
    if earlier:
        rng = end_at_ref(rng, ctx.ref_ms)
    if (start, end, rng) == (c.start, c.end, c.range):
        return c
    return replace(c, start=start, end=end, range=rng, day=Day(day, key))


def _spans(query: str, cands: list[_Candidate]) -> Iterable[_Candidate]:
    """One window over both dates of "between X and Y", "from X to Y", "X and Y"."""
    by_start: dict[int, _Candidate] = {}
    for c in cands:  # the longest expression starting at each position
        best = by_start.get(c.start)
        if c.range is not None and (best is None or c.end > best.end):
            by_start[c.start] = c
    for x in cands:
        join = _SPAN_JOIN.match(query, x.end)
        if x.range is None or join is None:
            continue
        y = by_start.get(join.end())
        if y is None or y.range is None or y.start <= x.start:
            continue
        left = _SPAN_LEFT.search(query, max(0, x.start - 9), x.start)
        word = join.group("w").lower()
        if left is not None and (left.group("w").lower() == "between") != (word == "and"):
            left = None  # "between X to Y", "from X and Y": not a span from that word
        if left is None and word not in {"and", "to", "through", "thru", "-", "\u2013", "\u2014"}:
            continue
        rng = (min(x.range[0], y.range[0]), max(x.range[1], y.range[1]))
        start = left.start() if left is not None else x.start
        yield _Candidate(start, y.end, rng, spanned=left is not None)


def _wrapped(query: str, c: _Candidate, ref_ms: int) -> _Candidate:
    """``c`` with a "since/after/before/until" written right before it applied."""
    if c.range is None or c.spanned:
        return c
    wrap = _WRAPPER.search(query, max(0, c.start - 12), c.start)
    if wrap is None or wrap.end() != c.start:
        return c
    lo, hi = c.range
    word = " ".join(wrap.group("w").lower().split())
    if word in {"since", "from"}:  # up to now; a date still ahead: that date
        rng = (lo, ref_ms if ref_ms > lo else hi)
    elif word == "after":  # up to now; a date still ahead: as long again after it
        rng = (hi, ref_ms if ref_ms > hi else hi + (hi - lo))
    elif word == "before":
        rng = (min(0, lo - (hi - lo)), lo)
    else:  # until, till, up to
        rng = (min(0, lo), hi)
    return replace(c, start=wrap.start(), range=rng, day=None)


def _date_candidates(query: str, keys: set[str], ctx: Ctx) -> list[_Candidate]:
    cands = [_qualify(query, keys, c, ctx) for c in _raw_candidates(query, keys, ctx)]
    if len(cands) > 1:
        cands += list(_spans(query, cands))
    return [_wrapped(query, c, ctx.ref_ms) for c in cands]


def _anchor_candidates(query: str, keys: set[str]) -> Iterable[_Candidate]:
    if keys.isdisjoint(_ANCHOR_KEYS):
        return
    for m in _ANCHOR.finditer(query):
        phrase = _ANCHOR_STOP.sub("", m.group("phrase")).strip()
        words = phrase.split()
        if words and words[0].lower() in _DETERMINERS:
            words = words[1:]
        if not words:
            continue
        rel = " ".join(m.group("rel").lower().split())
        relation: Relation = "before" if rel in {"before", "until", "till", "prior to"} else "after"
        end = m.start("phrase") + len(phrase)
        yield _Candidate(m.start(), end, None, " ".join(words), relation)


def _remove(query: str, start: int, end: int) -> str:
    rest = query[:start] + " " + query[end:]
    rest = re.sub(r"\s+", " ", rest).strip()
    rest = re.sub(r"\s+([?.!,;:])", r"\1", rest)
    rest = re.sub(r"^[\s,;:]+|[\s,;:]+(?=[?.!]|$)", "", rest)
    return "" if re.fullmatch(r"[\s?.!,;:]*", rest) else rest


def parse_time(query: str, reference_ms: int, tz: tzinfo) -> TimeExpr | None:
    """The first time expression in ``query`` resolved at ``reference_ms`` in ``tz``, or None.

    Never raises on any string (unresolvable dates such as "31 February" are skipped).
    """
    if not isinstance(query, str) or not query.strip():
        return None
    keys = key_words(query)
    if not keys:
        return None
    try:
        cal = Calendar(tz)
        ctx = Ctx(cal, reference_ms, cal.local_date(reference_ms))
        dated = _date_candidates(query, keys, ctx)
    except (ValueError, OverflowError, OSError):
        return None
    anchors = [
        a
        for a in _anchor_candidates(query, keys)
        if not any(d.start < a.end and a.start < d.end for d in dated)
    ]
    candidates = dated + anchors
    if not candidates:
        return None
    best = min(candidates, key=lambda c: (c.start, -(c.end - c.start)))
    return TimeExpr(
        range=best.range,
        anchor=best.anchor,
        relation=best.relation,
        matched=query[best.start : best.end],
        rest=_remove(query, best.start, best.end),
    )


# -- anchors --------------------------------------------------------------------------------------
SearchFn = Callable[[str], Iterable[Any]]
"""A search callable: a query in, hits out, best first (events, search items, mappings…)."""


def _hit_time(hit: Any, relation: Relation | None) -> int | None:
    """The instant of a search hit: an int, or a ``ts_ms``/``start_ms``/``end_ms`` attribute or key
    (``end_ms`` preferred for "after", so the window starts when the event was over)."""
    if isinstance(hit, bool):
        return None
    if isinstance(hit, int):
        return hit
    names = ("end_ms", "ts_ms", "start_ms") if relation == "after" else ("start_ms", "ts_ms")
    for name in names:
        value = hit.get(name) if isinstance(hit, Mapping) else getattr(hit, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def resolve_anchor(
    memory_or_search_fn: Any,
    anchor: str,
    *,
    relation: Relation | None = None,
    not_after_ms: int | None = None,
) -> int | None:
    """The instant of the best-matching event for ``anchor`` ("the migration"), or None.

    ``memory_or_search_fn`` is a callable ``query -> hits`` or an object with a ``search(query)``
    method (the ``Memory`` facade); a result with an ``items`` attribute is unwrapped. Hits are
    taken best first; the first one with a time (``not_after_ms`` or earlier, when given) wins.
    """
    if not anchor.strip():
        return None
    search = getattr(memory_or_search_fn, "search", None)
    fn: SearchFn = search if callable(search) else memory_or_search_fn
    result = fn(anchor)
    hits = getattr(result, "items", result)
    for hit in hits:
        ts = _hit_time(hit, relation)
        if ts is not None and (not_after_ms is None or ts <= not_after_ms):
            return ts
    return None


# -- time arguments -------------------------------------------------------------------------------
Edge = Literal["start", "end"]
MAX_ABS_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest instant a time argument may name (and minus it)."""
# ASCII digits only ("²".isdigit() is true but int() refuses it), and few enough that the instant
# stays inside SQLite's 64-bit integers.
_AGE = re.compile(r"[0-9]{1,9}")
_EPOCH_MS = re.compile(r"[0-9]{1,15}")
_DIGITS = re.compile(r"[0-9]+")
_UNITS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000


def parse_bound(value: str, *, reference_ms: int, tz: tzinfo, edge: Edge, name: str) -> int:
    """A ``since``/``until``/``at`` argument as epoch ms (module docstring): a period (a date, a
    phrase) gives its ``start`` or its ``end``; ``name`` (``--since``, ``until``) is named in the
    ``QueryError`` raised for anything else."""
    ms = _bound(value, reference_ms, tz, edge, name)
    if not -MAX_ABS_MS <= ms <= MAX_ABS_MS:
        raise QueryError(f"{name}={value!r}: out of range (years 1-9999)")
    return ms


def _bound(value: str, reference_ms: int, tz: tzinfo, edge: Edge, name: str) -> int:
    text = value.strip()
    if text and text[-1] in _UNITS and _AGE.fullmatch(text[:-1]):
        return reference_ms - int(text[:-1]) * _UNITS[text[-1]]
    if _EPOCH_MS.fullmatch(text):
        return int(text)
    if _DIGITS.fullmatch(text):
        raise QueryError(f"{name}={value!r}: epoch ms out of range (at most 15 digits)")
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        dt = None
    if dt is not None:
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        try:
            ms = int((dt - _EPOCH) / timedelta(milliseconds=1))
        except OverflowError:
            raise QueryError(f"{name}={value!r}: out of range (years 1-9999)") from None
        return ms + _DAY_MS if len(text) == 10 and edge == "end" else ms
    expr = parse_time(text, reference_ms, tz)
    if expr is None or expr.range is None:
        raise QueryError(
            f"{name}={value!r}: expected an ISO 8601 date or time (2024-01-18, "
            "2024-01-18T10:00Z), epoch ms, an age (12h, 7d) or a phrase (yesterday, last week)"
        )
    return expr.range[0] if edge == "start" else expr.range[1]
