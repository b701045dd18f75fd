"""The rules behind ``timeparse.parse_time``: the vocabulary of time expressions (numbers,
months, weekdays, parts of the day and their modifiers), how each rule's match resolves to a
window or a day at a reference instant in a time zone (``Ctx``), and the key words that decide
which rules can match a text at all (``key_words``, a cheap scan: a rule's regular expression runs
only when its key words occur). What each form means is tabled in ``timeparse``'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from memtoc.pipeline.periods import Calendar

Range = tuple[int, int]

_DAY_MS = 86_400_000
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000
_MAX_N = 10_000
_UNIT_MS = {
    "minute": _MINUTE_MS,
    "hour": _HOUR_MS,
    "day": _DAY_MS,
    "week": 7 * _DAY_MS,
    "month": 30 * _DAY_MS,
    "year": 365 * _DAY_MS,
}
_AGO_MIN_TOLERANCE_MS = 10 * _MINUTE_MS
""""N minutes|hours ago" is ``ref - N`` ± N/2, and at least ± this (message times vs rounding)."""

PART_SLACK_MIN = 30
"""Minutes added on each side of a part-of-day window (speakers round to the part they mean)."""

CLOCK_TOLERANCE_MIN = 30
"""A clock time is a window: "at 3pm" = 14:30-15:30; "around 3pm" twice as wide."""
PartKey = str | tuple[int, int]
"""A ``PARTS`` key, or a clock time's window in minutes after midnight."""

PARTS: dict[str, tuple[int, int]] = {
    "morning": (5 * 60, 12 * 60),
    "early morning": (5 * 60, 9 * 60),
    "mid morning": (9 * 60, 11 * 60),
    "late morning": (10 * 60, 12 * 60),
    "afternoon": (12 * 60, 18 * 60),
    "early afternoon": (12 * 60, 15 * 60),
    "mid afternoon": (14 * 60, 16 * 60),
    "late afternoon": (15 * 60, 18 * 60),
    "evening": (18 * 60, 24 * 60),
    "early evening": (18 * 60, 21 * 60),
    "mid evening": (20 * 60, 22 * 60),
    "late evening": (21 * 60, 24 * 60),
    "night": (18 * 60, 30 * 60),
    "early night": (18 * 60, 24 * 60),
    "mid night": (24 * 60, 28 * 60),
    "late night": (21 * 60, 29 * 60),
    "lunch": (12 * 60, 13 * 60 + 30),
    "before lunch": (10 * 60, 12 * 60),
    "after lunch": (13 * 60 + 30, 15 * 60 + 30),
    "noon": (11 * 60 + 30, 12 * 60 + 30),
    "early day": (5 * 60, 9 * 60),
    "late day": (16 * 60, 24 * 60),
}
"""Parts of the day: local wall-clock minutes after midnight ``[start, end)`` (module docstring)."""


# -- vocabulary ---------------------------------------------------------------------------------
_NUMBERS: dict[str, float] = {
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
    "half an": 0.5,
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
MONTH = (
    r"(?P<mon>" + "|".join(sorted((re.escape(m) for m in _MONTHS), key=len, reverse=True)) + r")\.?"
)
WEEKDAYS = {
    d: i
    for i, d in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
_WEEKDAY = r"(?P<wd>" + "|".join(WEEKDAYS) + r")"
WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4}
WEEKDAY_ABBR |= {"sat": 5, "sun": 6}
_WD_PREFIX = (
    r"(?:(?P<wdp>"
    + "|".join(list(WEEKDAYS) + sorted(WEEKDAY_ABBR, key=len, reverse=True))
    + r")\.?,?\s+)?"
)
"""A weekday written beside a date ("Tuesday Feb 17", "Tue, 17 Feb"): part of the date."""
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>\d{4})"
WORD_START = r"(?<![\w'-])"  # left word boundary that also refuses "-" and "'" (ids, possessives)
_E = r"(?![\w-])"

# parts of the day
_PART_WORD = r"(?P<part>morning|afternoon|evening|night|lunch\s*time|lunch|noon|midday)"
_PART_MOD = (
    r"(?P<mod>early|late|mid|middle\s+of(?:\s+the)?|(?:very\s+)?(?:end|start|beginning)\s+of"
    r"(?:\s+the)?|towards\s+the\s+end\s+of(?:\s+the)?|first\s+thing(?:\s+in\s+the)?)"
)
_PART_PHRASE = (
    r"(?:(?:in|during|on|at|around|about|by|towards?|over|from)\s+)?(?:the\s+)?"
    + r"(?:"
    + _PART_MOD
    + r"[\s-]*)?"
    + r"(?:(?:right|just|shortly|straight)\s+)?(?:(?P<ba>before|after)\s+)?"
    + _PART_WORD
)
RIGHT_PART = re.compile(r"\s*,?\s*" + _PART_PHRASE + _E, re.IGNORECASE)
"""A part of the day right after a day ("Friday evening", "yesterday around lunchtime")."""
LEFT_PART = re.compile(WORD_START + _PART_PHRASE + r"\s*,?\s*(?:of\s+|on\s+)?$", re.IGNORECASE)
"""A part of the day right before a day ("the evening of June 27", "around lunchtime today")."""
LEFT_MOD = re.compile(
    WORD_START
    + r"(?P<mod>early|late|earlier|later|first\s+thing|(?:just|right|shortly)\s+before\s+"
    r"leaving|(?:(?:in|at|towards?|by)\s+)?the\s+(?:very\s+)?(?:end|start|beginning|middle)\s+of)"
    r"\s+$",
    re.IGNORECASE,
)
"""A modifier right before a day or a part ("late yesterday evening", "earlier this afternoon")."""
CLOCK = (
    r"(?P<cprep>at|around|about|approximately|roughly|circa)\s+(?P<h>\d{1,2})"
    r"(?:[:h](?P<mi>[0-5]\d))?(?:\s*(?P<ampm>[ap]\.?m\b\.?))?"
)
"""A clock time after a preposition ("at 3pm", "around 10:30", "at 15h30")."""
RIGHT_CLOCK = re.compile(r"\s*,?\s*" + CLOCK + _E, re.IGNORECASE)
"""A clock time right after a day ("yesterday at 3pm", "Friday around 10:30")."""
LEFT_CLOCK = re.compile(WORD_START + CLOCK + r"\s*,?\s*(?:on\s+)?$", re.IGNORECASE)
"""A clock time right before a day ("at 3pm yesterday", "around 10:30 on Friday")."""
LEFT_SPAN = 60
"""Characters read left of an expression for a part of the day or a modifier."""


def _number(text: str) -> float:
    word = " ".join(text.lower().split())
    return int(word) if word.isdigit() else _NUMBERS[word]


_MOD_KINDS = {
    "early": "early",
    "start": "early",
    "beginning": "early",
    "mid": "mid",
    "middle": "mid",
    "late": "late",
    "end": "late",
    "towards": "late",
    "leaving": "late",
}
_MOD_SKIP = frozenset(("at", "in", "by", "toward", "the", "very", "just", "right", "shortly"))


def mod_kind(mod: str) -> str | None:
    """A modifier as ``early``/``mid``/``late`` ("the end of" → late, "just before leaving" →
    late); None when it does not move the clock ("first thing", "earlier", "later")."""
    words = mod.lower().replace("-", " ").split()
    if words[-1:] == ["leaving"]:
        return "late"
    for word in words:
        if word not in _MOD_SKIP:
            return _MOD_KINDS.get(word)
    return None


def part_key(part: str, mod: str | None, before_after: str | None) -> str | None:
    """The ``PARTS`` key of a part-of-day phrase (None: not a part of the day)."""
    part = " ".join(part.lower().split())
    if part.startswith("lunch"):
        return f"{before_after} lunch" if before_after else "lunch"
    if part in ("noon", "midday"):
        return {"before": "morning", "after": "afternoon"}.get(before_after or "", "noon")
    if before_after:  # "after the evening" is not a part of the day
        return None
    kind = mod_kind(mod) if mod else None
    key = f"{kind} {part}" if kind else part
    return key if key in PARTS else part


# -- resolution helpers ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ctx:
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

    def wall(self, d: date, minute: int) -> int:
        """The instant of local wall-clock ``minute`` after ``d``'s midnight (may pass midnight)."""
        days, minute = divmod(minute, 24 * 60)
        d += timedelta(days=days)
        if minute == 0:
            return self.cal.day_start(d)
        local = datetime(d.year, d.month, d.day, minute // 60, minute % 60, tzinfo=self.cal.tz)
        return int(local.timestamp() * 1000)

    def part(self, d: date, key: PartKey) -> Range:
        """The window of part of the day ``key`` on ``d``, widened by ``PART_SLACK_MIN`` each side
        and kept inside the day unless the part runs past midnight (a night); a clock time's
        window (minutes) is not widened, but kept inside the day too."""
        lo, hi = key if isinstance(key, tuple) else PARTS[key]
        night = hi > 24 * 60 and not isinstance(key, tuple)
        if not isinstance(key, tuple):
            lo, hi = lo - PART_SLACK_MIN, hi + PART_SLACK_MIN
        start, end = self.wall(d, lo), self.wall(d, hi)
        if not night:
            day_start, day_end = self.days(d)
            start, end = max(start, day_start), min(end, day_end)
        return (start, max(end, start + 1))


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


def _recent_day(ctx: Ctx, month: int, day: int) -> date:
    """The most recent ``month``/``day`` not after today (skipping years where it does not exist)."""
    for year in range(ctx.today.year, ctx.today.year - 9, -1):
        try:
            d = date(year, month, day)
        except ValueError:
            continue
        if d <= ctx.today:
            return d
    raise ValueError(f"no recent date {month}/{day}")


def _recent_month(ctx: Ctx, month: int, strictly_before: bool) -> tuple[int, int]:
    year = ctx.today.year
    if month > ctx.today.month or (strictly_before and month == ctx.today.month):
        year -= 1
    return year, month


def _last_weekday(ctx: Ctx, weekday: int) -> date:
    back = (ctx.today.weekday() - weekday) % 7 or 7
    return ctx.today - timedelta(days=back)


def _last_weekend(ctx: Ctx) -> date:
    """The Saturday of the most recent weekend that has begun by today."""
    return ctx.today - timedelta(days=(ctx.today.weekday() - 5) % 7)


# -- rules: (pattern, resolver, key words) -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Day:
    """A resolved day (which a part of the day may narrow), and its part of the day if named."""

    day: date
    part: PartKey | None = None


_Value = Range | Day
Resolver = Callable[[re.Match[str], Ctx], _Value]


def _g(m: re.Match[str], name: str) -> str:
    return (m.group(name) or "").lower()


def _rel_day(m: re.Match[str], ctx: Ctx) -> _Value:
    word = " ".join(_g(m, "w").split())
    offset = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1}.get(word, -2)
    d = ctx.today + timedelta(days=offset)
    return Day(d, "night" if word == "tonight" else None)


def _this_part(m: re.Match[str], ctx: Ctx) -> _Value:
    return Day(ctx.today, _g(m, "part"))


def _last_part(m: re.Match[str], ctx: Ctx) -> _Value:
    return Day(ctx.today - timedelta(days=1), _g(m, "part"))


def _bare_part(m: re.Match[str], ctx: Ctx) -> _Value:
    """A part of the day without a day: the most recent one that has begun by ``ref``."""
    mod = m.groupdict().get("mod")
    key = part_key(m.group("part"), mod, m.groupdict().get("ba"))
    if key is None:
        raise ValueError("not a part of the day")
    d = ctx.today
    if ctx.wall(d, PARTS[key][0]) > ctx.ref_ms:
        d -= timedelta(days=1)
    if (mod or "").lower() == "earlier":
        return end_at_ref(ctx.part(d, key), ctx.ref_ms)
    return Day(d, key)


def clock_window(m: re.Match[str]) -> tuple[int, int] | None:
    """The minutes after midnight a clock time means: "at 3pm" ± 30 minutes, "around 15:30"
    ± an hour (None: not a clock time — "at 3" needs minutes or am/pm)."""
    hour, minute, ampm = int(m.group("h")), int(m.group("mi") or 0), _g(m, "ampm")
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.startswith("p") else 0)
    elif m.group("mi") is None or hour > 23:
        return None
    at = hour * 60 + minute
    tolerance = CLOCK_TOLERANCE_MIN * (1 if _g(m, "cprep") == "at" else 2)
    return (at - tolerance, at + tolerance)


def _bare_clock(m: re.Match[str], ctx: Ctx) -> _Value:
    """A clock time without a day: the most recent one not after ``ref``."""
    window = clock_window(m)
    if window is None:
        raise ValueError("not a clock time")
    d = ctx.today
    if ctx.wall(d, sum(window) // 2) > ctx.ref_ms:
        d -= timedelta(days=1)
    return Day(d, window)


def end_at_ref(rng: Range, ref_ms: int) -> Range:
    """``rng`` ended at ``ref_ms`` when that falls inside it ("earlier today")."""
    return (rng[0], ref_ms) if rng[0] < ref_ms < rng[1] else rng


def _this_last_period(m: re.Match[str], ctx: Ctx) -> _Value:
    which, unit = _g(m, "which"), _g(m, "unit")
    back = {"this": 0, "current": 0, "last": 1, "previous": 1, "past": 1, "next": -1}[which]
    if unit == "week":
        rng = ctx.week_of(ctx.today - timedelta(weeks=back))
    elif unit == "month":
        d = _shift_months(ctx.today.replace(day=1), back)
        rng = ctx.month(d.year, d.month)
    elif unit == "year":
        rng = ctx.year(ctx.today.year - back)
    else:  # weekend: Saturday and Sunday of the current (this) or previous (last) ISO week
        monday = ctx.today - timedelta(days=ctx.today.weekday()) - timedelta(weeks=back)
        rng = ctx.days(monday + timedelta(days=5), 2)
    return end_at_ref(rng, ctx.ref_ms) if _g(m, "early") == "earlier" else rng


def _week_before_last(m: re.Match[str], ctx: Ctx) -> _Value:
    return ctx.week_of(ctx.today - timedelta(weeks=2))


def _the_weekend(m: re.Match[str], ctx: Ctx) -> _Value:
    saturday = _last_weekend(ctx)
    rel = _g(m, "rel")
    if rel == "before":
        return Day(saturday - timedelta(days=1))
    if rel == "after":
        if ctx.today < saturday + timedelta(days=2):  # this weekend is not over yet
            saturday -= timedelta(weeks=1)
        return Day(saturday + timedelta(days=2))
    return ctx.days(saturday, 2)


def _weekday(m: re.Match[str], ctx: Ctx) -> _Value:
    wd = WEEKDAYS[_g(m, "wd")]
    if _g(m, "which") == "this":
        return Day(ctx.today - timedelta(days=ctx.today.weekday() - wd))
    return Day(_last_weekday(ctx, wd))


def _ago(m: re.Match[str], ctx: Ctx) -> _Value:
    n = min(_number(m.group("n")), _MAX_N)
    unit = _g(m, "unit")
    if unit.startswith(("h", "m")) and not unit.startswith("mo"):  # hours, minutes
        size = n * (_HOUR_MS if unit.startswith("h") else _MINUTE_MS)
        point, tolerance = ctx.ref_ms - size, max(size / 2, _AGO_MIN_TOLERANCE_MS)
        start = int(point - tolerance)
        return (start, max(start + 1, min(ctx.ref_ms, int(point + tolerance))))
    if n != int(n):
        raise ValueError("half a day ago")
    n = int(n)
    if unit == "day":
        return Day(ctx.today - timedelta(days=n))
    if unit == "week":
        return ctx.days(ctx.today - timedelta(weeks=n) - timedelta(days=3), 7)
    if unit == "month":
        return ctx.days(_shift_months(ctx.today, n) - timedelta(days=15), 31)
    return ctx.days(_shift_months(ctx.today, 12 * n) - timedelta(days=182), 365)


def _past_span(m: re.Match[str], ctx: Ctx) -> _Value:
    unit = _g(m, "unit")
    unit = {"hr": "hour", "min": "minute"}.get(unit, unit)
    if m.group("n") is None and unit == "minute":
        raise ValueError("'the last minute' is an idiom")
    n = min(_number(m.group("n")), _MAX_N) if m.group("n") else 1
    if n <= 0:
        raise ValueError("an empty span")
    return (int(ctx.ref_ms - n * _UNIT_MS[unit]), ctx.ref_ms)


_THIRDS = {"early": (1, 11), "mid": (11, 21), "late": (21, 32)}


def _in_month(m: re.Match[str], ctx: Ctx) -> _Value:
    month = _MONTHS[_g(m, "mon")]
    if m.group("y"):
        year = int(m.group("y"))
    else:
        year, month = _recent_month(ctx, month, strictly_before=_g(m, "which") == "last")
    whole = ctx.month(year, month)
    third = mod_kind(m.group("third")) if m.group("third") else None
    if third is None:
        return whole
    first, after = _THIRDS[third]
    start = ctx.cal.day_start(date(year, month, first))
    return (start, whole[1] if after > 28 else ctx.cal.day_start(date(year, month, after)))


def _year(m: re.Match[str], ctx: Ctx) -> _Value:
    return ctx.year(int(m.group("y")))


def _iso_date(m: re.Match[str], ctx: Ctx) -> _Value:
    return Day(date(int(m.group("y")), int(m.group("mm")), int(m.group("dd"))))


def _day_month(m: re.Match[str], ctx: Ctx) -> _Value:
    month, day = _MONTHS[_g(m, "mon")], int(m.group("dd"))
    if m.group("y"):
        return Day(date(int(m.group("y")), month, day))
    return Day(_recent_day(ctx, month, day))


def _nth(m: re.Match[str], ctx: Ctx) -> _Value:
    """The most recent "27th" not after today (of that weekday, if one is written beside it)."""
    day = int(m.group("dd"))
    wd = _g(m, "wdp")
    weekday = WEEKDAYS.get(wd, WEEKDAY_ABBR.get(wd))
    first: date | None = None
    month = ctx.today.replace(day=1)
    for back in range(13):
        try:
            d = _shift_months(month, back).replace(day=day)
        except ValueError:
            continue
        if d > ctx.today:
            continue
        if weekday is None or d.weekday() == weekday:
            return Day(d)
        first = first or d
    if first is None:
        raise ValueError(f"no recent day {day}")
    return Day(first)


_MONTH_KEYS = tuple(_MONTHS)
_DIGIT_KEYS = ("0",)
"""Stands for any digit (``key_words``)."""
_PART_KEYS = ("morning", "afternoon", "evening", "night", "lunch", "lunchtime", "noon", "midday")
_WEEKDAY_KEYS = tuple(WEEKDAYS)

_RULE_PATTERNS: tuple[tuple[str, Resolver, tuple[tuple[str, ...], ...]], ...] = (
    (
        r"(?P<w>today|tonight|yesterday|tomorrow|the\s+day\s+before\s+yesterday)",
        _rel_day,
        (("today", "tonight", "yesterday", "tomorrow"),),
    ),
    (r"this\s+(?P<part>morning|afternoon|evening|night)", _this_part, (_PART_KEYS[:4],)),
    (r"last\s+(?P<part>night|evening)", _last_part, (("night", "evening"),)),
    (
        r"(?:(?P<early>earlier|later)\s+)?(?P<which>this|current|last|previous|next|past)\s+"
        r"(?P<unit>week|month|year|weekend)",
        _this_last_period,
        (("week", "weekend", "month", "year", "weeks", "weekends", "months", "years"),),
    ),
    (r"the\s+week\s+before\s+last", _week_before_last, (("week",), ("before",))),
    (
        r"(?:(?P<rel>before|after)|(?:over|during|on|at|across|through)(?:\s+the\s+course\s+of)?)"
        r"\s+the\s+weekend",
        _the_weekend,
        (("weekend",),),
    ),
    (r"(?:(?:on|last)\s+)?" + _WEEKDAY + r"(?P<which>)", _weekday, (_WEEKDAY_KEYS,)),
    (r"(?P<which>this)\s+" + _WEEKDAY, _weekday, (_WEEKDAY_KEYS,)),
    (
        r"(?:(?:about|around|roughly|some|maybe|approximately|only|just)\s+)?"
        + _NUM
        + r"\s+(?P<unit>day|week|month|year|hour|hr|minute|min)s?\s+(?:or\s+so\s+)?ago",
        _ago,
        (("ago",),),
    ),
    (
        r"(?:(?:in|over|during|for|within)\s+)?the\s+(?:last|past)\s+(?:" + _NUM + r"\s+)?"
        r"(?P<unit>day|week|month|year|hour|hr|minute|min)s?",
        _past_span,
        (("last", "past"),),
    ),
    (
        r"(?:(?:in|over|during|for|within)\s+)?(?:last|past)\s+" + _NUM + r"\s+"
        r"(?P<unit>day|week|month|year|hour|hr|minute|min)s?",
        _past_span,
        (("last", "past"),),
    ),
    (
        r"(?P<pre>(?:in|during|of|by|throughout|at|around|towards?|from|until)\s+)?"
        r"(?:(?:the\s+)?(?:very\s+)?(?P<third>early|mid|late|(?:end|start|beginning|middle)"
        r"\s+of)[\s-]+)?(?:(?P<which>last|this)\s+)?" + MONTH + r"(?:,?\s+" + _YEAR + r")?",
        _in_month,
        (_MONTH_KEYS,),
    ),
    (r"(?:(?:in|during|of|throughout)\s+)?(?P<y>(?:19|20)\d\d)", _year, (_DIGIT_KEYS,)),
    (
        r"(?:on\s+)?" + _WD_PREFIX + _YEAR + r"-(?P<mm>\d{2})-(?P<dd>\d{2})",
        _iso_date,
        (("#iso",),),
    ),
    (
        r"(?P<pre>on\s+)?"
        + _WD_PREFIX
        + r"(?:the\s+)?(?P<dd>\d{1,2})"
        + _ORD
        + r"(?:\s+of)?\s+"
        + MONTH
        + r"(?:,?\s+"
        + _YEAR
        + r")?",
        _day_month,
        (_MONTH_KEYS, _DIGIT_KEYS),
    ),
    (
        r"(?P<pre>on\s+)?"
        + _WD_PREFIX
        + MONTH
        + r"\s+(?:the\s+)?(?P<dd>\d{1,2})"
        + _ORD
        + r"(?:,?\s+"
        + _YEAR
        + r")?",
        _day_month,
        (_MONTH_KEYS, _DIGIT_KEYS),
    ),
    (
        r"(?P<pre>on\s+)?" + _WD_PREFIX + r"the\s+(?P<dd>\d{1,2})(?:st|nd|rd|th)",
        _nth,
        (_DIGIT_KEYS, ("st", "nd", "rd", "th")),
    ),
    (
        r"(?:(?:at|by|towards?|near|in|around)\s+)?the\s+(?:very\s+)?(?P<mod>end|start|beginning"
        r"|middle)\s+of\s+the\s+(?P<part>morning|afternoon|evening|night)",
        _bare_part,
        (_PART_KEYS,),
    ),
    (
        r"(?P<mod>earlier|later|early|late)\s+in\s+the\s+(?P<part>morning|afternoon|evening)",
        _bare_part,
        (_PART_KEYS,),
    ),
    (
        r"(?:around|about|at|over|during|by)\s+(?P<part>lunch\s*time|lunch|noon|midday)",
        _bare_part,
        (("lunch", "lunchtime", "noon", "midday"),),
    ),
    (CLOCK, _bare_clock, (_DIGIT_KEYS,)),
    (
        r"(?:(?:right|just|shortly|straight)\s+)?(?P<ba>before|after)\s+(?P<part>lunch\s*time"
        r"|lunch|noon|midday)",
        _bare_part,
        (("lunch", "lunchtime", "noon", "midday"),),
    ),
)


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    resolver: Resolver
    keys: tuple[frozenset[str], ...]
    """Key words: the rule runs only if the text holds one of each group (``key_words``)."""


RULES: tuple[Rule, ...] = tuple(
    Rule(
        re.compile(WORD_START + pattern + _E, re.IGNORECASE), resolver, tuple(map(frozenset, keys))
    )
    for pattern, resolver, keys in _RULE_PATTERNS
)
"""Every date rule, in tie-break order (earlier wins between equal spans)."""

PART_WORDS = frozenset(_PART_KEYS)
MOD_WORDS = frozenset(("early", "earlier", "late", "later", "first", "leaving", "end", "start"))
MOD_WORDS |= {"beginning", "middle"}
_WORD = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
_ISOISH = re.compile(r"\d-\d\d-\d")


def key_words(query: str) -> set[str]:
    """The words of ``query``, plus "0" if it holds a digit and "#iso" if it may hold an ISO date:
    one cheap scan decides which rules can match."""
    low = query.lower()
    keys = set(_WORD.findall(low))
    if _DIGIT.search(low):
        keys.add("0")
        if _ISOISH.search(low):
            keys.add("#iso")
    return keys
