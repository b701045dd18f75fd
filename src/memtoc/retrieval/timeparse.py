"""Time expressions in queries: "yesterday", "last week", "in March", "two weeks ago", "on 8 May",
"since Monday", "before the migration" — resolved against a reference instant in a time zone.

``parse_time(query, reference_ms, tz)`` finds the first time expression in ``query`` and returns a
``TimeExpr``: the half-open range ``[start_ms, end_ms)`` it denotes (local calendar periods computed
with ``pipeline.periods.Calendar``, so they agree with the TOC's days, ISO weeks and months, DST
included), or — for "before/after <event>" — an ``anchor`` phrase and a ``relation`` the caller
resolves by searching for the event (``resolve_anchor``), plus the query with the expression
removed (``rest``). No expression gives ``None``; arbitrary input never raises.

What each form means (``ref`` = the reference instant, "day" = a local calendar day):

=====================================  =========================================================
``today`` / ``this morning`` …         today (morning 00-12h, afternoon 12-18h, evening 18-24h)
``yesterday`` / ``the day before …``   that day; ``last night`` = yesterday 18:00 → today 06:00
``this week`` / ``last week``          the current / previous ISO week (Monday 00:00 → Monday)
``the week before last``               the ISO week before the previous one
``this|last weekend``                  Saturday 00:00 → Monday 00:00 of the current / previous
                                       ISO week
``this|last month|year``               the calendar month / year, or the one before
``Monday`` / ``on Monday`` / ``last    the most recent Monday strictly before today;
Monday``                               ``this Monday`` = the Monday of the current ISO week
``in March`` / ``during March``        the most recent March whose start is not after ``ref``
                                       (asked in January, "in December" is last year's)
``last March``                         the most recent March strictly before the current month
``March 2023`` / ``in 2023`` / ``2023``  that month / year (a year alone: 1900-2099 only)
``on 8 May`` / ``May 8th`` / ``the     that day; without a year, the most recent one not after
8th of May`` / ``2023-05-08``          ``ref``'s date
``N days ago``                         the local day ``N`` days before today
``N weeks ago``                        7 days centred on the day ``N`` weeks back (day-3 … day+3)
``N months ago``                       31 days centred on the same day ``N`` months back
``N years ago``                        365 days centred on the same day ``N`` years back
``the last|past N days|weeks|…``       ``[ref - N units, ref)`` (months = 30 d, years = 365 d)
``since X`` / ``after X``              ``[start(X), ref)`` / ``[end(X), ref)`` for a date ``X``
``before X`` / ``until X``             ``[0, start(X))`` / ``[0, end(X))`` (open start: epoch 0)
``before|until the <event>``           anchor ``<event>``, relation ``before``
``after|since the <event>``            anchor ``<event>``, relation ``after``
=====================================  =========================================================

``N`` is digits or a word: ``a``/``an``/``one`` … ``twenty``, ``a couple (of)`` = 2,
``a few`` / ``several`` = 3. Month names take their three-letter abbreviations (and ``Sept``); a
bare month name ("March", "May") is not an expression — it needs a preposition, a day or a year,
because "may" and "march" are also ordinary words. An anchor needs a determiner or a possessive
("after **the** migration", "after **Melanie's** birthday"), so "after login" is not an anchor.
When several expressions occur, the leftmost wins (the longest among those starting there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta, tzinfo
from typing import Any, Literal

from memtoc.pipeline.periods import Calendar

Relation = Literal["before", "after"]
Range = tuple[int, int]

_DAY_MS = 86_400_000
_MAX_N = 10_000
_UNIT_MS = {"day": _DAY_MS, "week": 7 * _DAY_MS, "month": 30 * _DAY_MS, "year": 365 * _DAY_MS}


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


# -- vocabulary ---------------------------------------------------------------------------------
_NUMBERS: dict[str, int] = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_NUM_WORDS = "|".join(
    re.escape(w).replace(r"\ ", r"\s+") for w in sorted(_NUMBERS, key=len, reverse=True)
)
_NUM = rf"(?P<n>\d{{1,6}}|{_NUM_WORDS})"

_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ),
    start=1,
):
    _MONTHS[_name] = _i
    _MONTHS[_name[:3]] = _i
_MONTHS["sept"] = 9
_MONTH = (
    r"(?P<mon>" + "|".join(sorted((re.escape(m) for m in _MONTHS), key=len, reverse=True)) + r")\.?"
)
_WEEKDAYS = {
    d: i
    for i, d in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
_WEEKDAY = r"(?P<wd>" + "|".join(_WEEKDAYS) + r")"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>\d{4})"
_B = r"(?<![\w'-])"  # left word boundary that also refuses "-" and "'" (ids, possessives)
_E = r"(?![\w-])"


def _number(text: str) -> int:
    word = " ".join(text.lower().split())
    return int(word) if word.isdigit() else _NUMBERS[word]


# -- resolution helpers ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Ctx:
    cal: Calendar
    ref_ms: int
    today: date

    def days(self, first: date, count: int = 1) -> Range:
        return (self.cal.day_start(first), self.cal.day_start(first + timedelta(days=count)))

    def month(self, year: int, month: int) -> Range:
        p = self.cal.month(year, month)
        return (p.start_ms, p.end_ms)

    def year(self, year: int) -> Range:
        p = self.cal.year(year)
        return (p.start_ms, p.end_ms)

    def week_of(self, d: date) -> Range:
        p = self.cal.week(d)
        return (p.start_ms, p.end_ms)

    def hours(self, d: date, start_h: int, end_h: int) -> Range:
        base = self.cal.day_start(d)
        return (base + start_h * 3_600_000, base + end_h * 3_600_000)


def _shift_months(d: date, months: int) -> date:
    index = d.year * 12 + (d.month - 1) - months
    year, month = divmod(index, 12)
    month += 1
    for day in (d.day, 30, 29, 28):
        try:
            return date(year, month, day)
        except ValueError:
            continue
    raise ValueError(f"no such month: {year}-{month}")  # pragma: no cover - 28 always exists


def _recent_day(ctx: _Ctx, month: int, day: int) -> date:
    """The most recent ``month``/``day`` not after today (skipping years where it does not exist)."""
    for year in range(ctx.today.year, ctx.today.year - 9, -1):
        try:
            d = date(year, month, day)
        except ValueError:
            continue
        if d <= ctx.today:
            return d
    raise ValueError(f"no recent date {month}/{day}")


def _recent_month(ctx: _Ctx, month: int, strictly_before: bool) -> Range:
    year = ctx.today.year
    if month > ctx.today.month or (strictly_before and month == ctx.today.month):
        year -= 1
    return ctx.month(year, month)


def _last_weekday(ctx: _Ctx, weekday: int) -> date:
    back = (ctx.today.weekday() - weekday) % 7 or 7
    return ctx.today - timedelta(days=back)


# -- rules: (pattern, resolver) ---------------------------------------------------------------------
Resolver = Callable[[re.Match[str], _Ctx], Range]


def _g(m: re.Match[str], name: str) -> str:
    return (m.group(name) or "").lower()


def _rel_day(m: re.Match[str], ctx: _Ctx) -> Range:
    word = " ".join(_g(m, "w").split())
    offset = {
        "today": 0,
        "tonight": 0,
        "yesterday": -1,
        "tomorrow": 1,
        "the day before yesterday": -2,
    }[word]
    d = ctx.today + timedelta(days=offset)
    if word == "tonight":
        return ctx.hours(d, 18, 24)
    return ctx.days(d)


def _part_of_day(m: re.Match[str], ctx: _Ctx) -> Range:
    part = _g(m, "part")
    if part == "night":  # "last night"
        return ctx.hours(ctx.today - timedelta(days=1), 18, 30)
    start, end = {"morning": (0, 12), "afternoon": (12, 18), "evening": (18, 24)}[part]
    return ctx.hours(ctx.today, start, end)


def _this_last_period(m: re.Match[str], ctx: _Ctx) -> Range:
    which, unit = _g(m, "which"), _g(m, "unit")
    back = {"this": 0, "current": 0, "last": 1, "previous": 1, "past": 1, "next": -1}[which]
    if unit == "week":
        return ctx.week_of(ctx.today - timedelta(weeks=back))
    if unit == "month":
        d = _shift_months(ctx.today.replace(day=1), back)
        return ctx.month(d.year, d.month)
    if unit == "year":
        return ctx.year(ctx.today.year - back)
    # weekend: Saturday and Sunday of the current (this) or previous (last) ISO week
    monday = ctx.today - timedelta(days=ctx.today.weekday()) - timedelta(weeks=back)
    return ctx.days(monday + timedelta(days=5), 2)


def _week_before_last(m: re.Match[str], ctx: _Ctx) -> Range:
    return ctx.week_of(ctx.today - timedelta(weeks=2))


def _weekday(m: re.Match[str], ctx: _Ctx) -> Range:
    wd = _WEEKDAYS[_g(m, "wd")]
    if _g(m, "which") == "this":
        return ctx.days(ctx.today - timedelta(days=ctx.today.weekday() - wd))
    return ctx.days(_last_weekday(ctx, wd))


def _ago(m: re.Match[str], ctx: _Ctx) -> Range:
    n = min(_number(m.group("n")), _MAX_N)
    unit = _g(m, "unit")
    if unit == "day":
        return ctx.days(ctx.today - timedelta(days=n))
    if unit == "week":
        return ctx.days(ctx.today - timedelta(weeks=n) - timedelta(days=3), 7)
    if unit == "month":
        return ctx.days(_shift_months(ctx.today, n) - timedelta(days=15), 31)
    return ctx.days(_shift_months(ctx.today, 12 * n) - timedelta(days=182), 365)


def _past_span(m: re.Match[str], ctx: _Ctx) -> Range:
    n = min(_number(m.group("n")), _MAX_N) if m.group("n") else 1
    return (ctx.ref_ms - n * _UNIT_MS[_g(m, "unit")], ctx.ref_ms)


def _in_month(m: re.Match[str], ctx: _Ctx) -> Range:
    month = _MONTHS[_g(m, "mon")]
    if m.group("y"):
        return ctx.month(int(m.group("y")), month)
    return _recent_month(ctx, month, strictly_before=_g(m, "which") == "last")


def _year(m: re.Match[str], ctx: _Ctx) -> Range:
    return ctx.year(int(m.group("y")))


def _iso_date(m: re.Match[str], ctx: _Ctx) -> Range:
    return ctx.days(date(int(m.group("y")), int(m.group("mm")), int(m.group("dd"))))


def _day_month(m: re.Match[str], ctx: _Ctx) -> Range:
    month, day = _MONTHS[_g(m, "mon")], int(m.group("dd"))
    if m.group("y"):
        return ctx.days(date(int(m.group("y")), month, day))
    return ctx.days(_recent_day(ctx, month, day))


_RULE_PATTERNS: tuple[tuple[str, Resolver], ...] = (
    (r"(?P<w>today|tonight|yesterday|tomorrow|the\s+day\s+before\s+yesterday)", _rel_day),
    (r"(?:earlier\s+)?this\s+(?P<part>morning|afternoon|evening)", _part_of_day),
    (r"last\s+(?P<part>night)", _part_of_day),
    (
        r"(?:(?:earlier|later)\s+)?(?P<which>this|current|last|previous|next)\s+"
        r"(?P<unit>week|month|year|weekend)",
        _this_last_period,
    ),
    (r"the\s+week\s+before\s+last", _week_before_last),
    (r"(?:(?:on|last)\s+)?" + _WEEKDAY + r"(?P<which>)", _weekday),
    (r"(?P<which>this)\s+" + _WEEKDAY, _weekday),
    (_NUM + r"\s+(?P<unit>day|week|month|year)s?\s+ago", _ago),
    (
        r"(?:(?:in|over|during|for)\s+)?the\s+(?:last|past)\s+(?:" + _NUM + r"\s+)?"
        r"(?P<unit>day|week|month|year)s?",
        _past_span,
    ),
    (
        r"(?:(?:in|over|during|for)\s+)?(?:last|past)\s+" + _NUM + r"\s+"
        r"(?P<unit>day|week|month|year)s?",
        _past_span,
    ),
    (
        r"(?P<pre>(?:in|during|of|by|throughout)\s+)?(?:(?:early|mid|late)\s+)?"
        r"(?:(?P<which>last|this)\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?",
        _in_month,
    ),
    (r"(?:(?:in|during|of|throughout)\s+)?(?P<y>(?:19|20)\d\d)", _year),
    (r"(?:on\s+)?" + _YEAR + r"-(?P<mm>\d{2})-(?P<dd>\d{2})", _iso_date),
    (
        r"(?P<pre>on\s+)?(?:the\s+)?(?P<dd>\d{1,2})"
        + _ORD
        + r"(?:\s+of)?\s+"
        + _MONTH
        + r"(?:,?\s+"
        + _YEAR
        + r")?",
        _day_month,
    ),
    (
        r"(?P<pre>on\s+)?"
        + _MONTH
        + r"\s+(?:the\s+)?(?P<dd>\d{1,2})"
        + _ORD
        + r"(?:,?\s+"
        + _YEAR
        + r")?",
        _day_month,
    ),
)
_RULES: tuple[tuple[re.Pattern[str], Resolver], ...] = tuple(
    (re.compile(_B + pattern + _E, re.IGNORECASE), resolver) for pattern, resolver in _RULE_PATTERNS
)
"""Every date rule, in tie-break order (earlier wins between equal spans)."""

_WRAPPER = re.compile(r"(?P<w>since|after|from|before|until|till|up\s+to)\s+$", re.IGNORECASE)
_ANCHOR = re.compile(
    _B
    + r"(?P<rel>before|after|since|until|till|prior\s+to|following)\s+"
    + r"(?P<phrase>(?:(?:the|my|our|your|his|her|their|its|a|an)\s+|[\w-]+'s\s+)"
    + r"[^\s?.!,;:]+(?:\s+[^\s?.!,;:]+){0,5})",
    re.IGNORECASE,
)
_ANCHOR_STOP = re.compile(
    r"\s+(?:and|but|or|when|while|because|so|did|do|does|was|were|is|are|had|has|have|"
    r"what|who|how|why|where|which|that)\b.*$",
    re.IGNORECASE,
)
_BARE_MONTH = re.compile(r"^\s*" + _MONTH + r"\s*$", re.IGNORECASE)


def _ordinary_word(m: re.Match[str]) -> bool:
    """A month-name match that is really a word: "march"/"may" alone, or "3 may fail"."""
    if _BARE_MONTH.match(m.group(0)):
        return True
    groups = m.re.groupindex
    if "mon" not in groups or "pre" not in groups:
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


def _date_candidates(query: str, ctx: _Ctx) -> Iterable[_Candidate]:
    for pattern, resolver in _RULES:
        for m in pattern.finditer(query):
            start, end = m.start(), m.end()
            wrap = _WRAPPER.search(query, max(0, start - 12), start)
            wrapped = wrap is not None and wrap.end() == start
            if _ordinary_word(m) and not wrapped:  # "since March" is a date, "march on" is not
                continue
            try:
                rng = resolver(m, ctx)
            except (ValueError, OverflowError, OSError, KeyError):
                continue
            if wrap is not None and wrapped:
                word = " ".join(wrap.group("w").lower().split())
                start = wrap.start()
                if word in {"since", "from"}:
                    rng = (rng[0], max(rng[0], ctx.ref_ms))
                elif word == "after":
                    rng = (rng[1], max(rng[1], ctx.ref_ms))
                elif word == "before":
                    rng = (min(0, rng[0]), rng[0])
                else:  # until, till, up to
                    rng = (min(0, rng[1]), rng[1])
            yield _Candidate(start, end, rng)


def _anchor_candidates(query: str) -> Iterable[_Candidate]:
    for m in _ANCHOR.finditer(query):
        phrase = _ANCHOR_STOP.sub("", m.group("phrase")).strip()
        words = phrase.split()
        if words and words[0].lower() in {
            "the",
            "my",
            "our",
            "your",
            "his",
            "her",
            "their",
            "its",
            "a",
            "an",
        }:
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
    rest = re.sub(r"^[\s,;:]+", "", rest)
    return "" if re.fullmatch(r"[\s?.!,;:]*", rest) else rest


def parse_time(query: str, reference_ms: int, tz: tzinfo) -> TimeExpr | None:
    """The first time expression in ``query`` resolved at ``reference_ms`` in ``tz``, or None.

    Never raises on any string (unresolvable dates such as "31 February" are skipped).
    """
    if not isinstance(query, str) or not query.strip():
        return None
    try:
        cal = Calendar(tz)
        ctx = _Ctx(cal, reference_ms, cal.local_date(reference_ms))
    except (ValueError, OverflowError, OSError):
        return None
    dated = list(_date_candidates(query, ctx))
    anchors = [
        a
        for a in _anchor_candidates(query)
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
