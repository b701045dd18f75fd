"""Calendar periods of the table of contents, computed in one configured time zone.

A ``Calendar`` maps an instant (epoch ms, UTC) to its day, ISO week, month and year in a
``zoneinfo.ZoneInfo`` (or any ``tzinfo``) and gives each period its node id (DESIGN §2) and its
span ``[start_ms, end_ms)`` as UTC instants.

Boundaries are *local midnights converted to UTC*, so a day is 23 or 25 hours long across a DST
change, and a day whose midnight does not exist (a zone that springs forward at 00:00) starts at
the first instant that does. Everything is derived from ``Calendar.day_start``, which is why the
periods of one level tile time exactly.

The hierarchy is year > month > week > day (> segment). ISO weeks straddle months and years, so
**a week belongs to every month its days belong to** (one or two): ``parents()`` gives the months
of its first and last day, and in the TOC a month's children are the weeks that hold one of its
days (``TocBuilder``, ``node_view.children_of``) — 31 August stays in August even when its week runs
into September. Months are summarised from their own *days* (``summary_parents``), so a month's
summary says nothing about the days of a straddling week that lie in the neighbouring month. A
week's ``parent()`` — the first of its parents — is its ``parent_id`` (breadcrumbs). The
invariants (tested with hypothesis over instants and zones):

- every instant lies in exactly one day, one week, one month and one year (periods of a level
  tile time: each period's end is the next one's start);
- a day lies inside its week; a month lies inside its year; a day lies inside its month;
- a week's parents are exactly the months that contain one of its days, and each parent's year
  contains the week's days in that month (so every day is reachable year → month → week → day
  through the month that contains it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from memtoc.errors import QueryError

_DAY_MS = 86_400_000
PERIOD_LEVELS: tuple[str, ...] = ("year", "month", "week", "day")
"""Period levels from the root down (segments sit below days)."""

_KEY_PATTERNS = {
    "year": re.compile(r"^(\d{4})$"),
    "month": re.compile(r"^(\d{4})-(\d{2})$"),
    "week": re.compile(r"^(\d{4})-W(\d{2})$"),
    "day": re.compile(r"^(\d{4})-(\d{2})-(\d{2})$"),
}


@dataclass(frozen=True, slots=True)
class Period:
    """One calendar period: its level, key (``2024-W03``) and UTC span ``[start_ms, end_ms)``."""

    level: str
    key: str
    start_ms: int
    end_ms: int

    @property
    def node_id(self) -> str:
        return f"toc:{self.level}:{self.key}"

    def contains(self, ts_ms: int) -> bool:
        return self.start_ms <= ts_ms < self.end_ms


def parse_node_id(node_id: str) -> tuple[str, str]:
    """``toc:week:2024-W03`` → ``("week", "2024-W03")``; segments keep their time and suffix."""
    parts = node_id.split(":", 2)
    if len(parts) != 3 or parts[0] != "toc" or parts[1] not in (*PERIOD_LEVELS, "segment"):
        raise QueryError(f"not a TOC node id: {node_id!r}")
    return parts[1], parts[2]


class Calendar:
    """Periods in one time zone. Cheap to build; holds no state but the zone."""

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz

    # -- local dates --------------------------------------------------------------------------
    def local_date(self, ts_ms: int) -> date:
        return self.local(ts_ms).date()

    def local(self, ts_ms: int) -> datetime:
        return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).astimezone(self.tz)

    def day_start(self, d: date) -> int:
        """The first instant of local date ``d`` (its midnight, or the end of a DST gap), in ms.

        ``fold=0`` maps a nonexistent midnight to the pre-transition offset, i.e. to the instant
        the clocks jumped, and an ambiguous one to its first occurrence — both the day's start.
        """
        local = datetime(d.year, d.month, d.day, tzinfo=self.tz)
        ms = int(local.timestamp() * 1000)
        # A zone can jump over midnight in a way that maps "midnight" to an instant whose local
        # date is still the previous day; move forward to the first instant of ``d``.
        if self.local_date(ms) < d:
            ms = self._first_instant_of(d, ms)
        return ms

    def _first_instant_of(self, d: date, lo_ms: int) -> int:
        hi_ms = lo_ms + 6 * 3_600_000
        while self.local_date(hi_ms) < d:  # pragma: no cover - no real zone jumps this far
            hi_ms += 6 * 3_600_000
        while hi_ms - lo_ms > 1:
            mid = (lo_ms + hi_ms) // 2
            if self.local_date(mid) < d:
                lo_ms = mid
            else:
                hi_ms = mid
        return hi_ms

    def start_after(self, d: date, days: int) -> int:
        """``day_start(d + days)``, also past 9999-12-31 (which ``date`` cannot represent: the
        periods at the end of year 9999 end there, one day per day after its last midnight)."""
        try:
            return self.day_start(d + timedelta(days))
        except OverflowError:
            return self.day_start(date.max) + ((d - date.max).days + days) * _DAY_MS

    # -- periods of an instant ----------------------------------------------------------------
    def day(self, d: date) -> Period:
        return Period("day", d.isoformat(), self.day_start(d), self.start_after(d, 1))

    def week(self, d: date) -> Period:
        """The ISO week containing local date ``d``."""
        iso_year, iso_week, weekday = d.isocalendar()
        monday = d - timedelta(days=weekday - 1)
        return Period(
            "week",
            f"{iso_year:04d}-W{iso_week:02d}",
            self.day_start(monday),
            self.start_after(monday, 7),
        )

    def month(self, year: int, month: int) -> Period:
        if month == 12:
            end = self.start_after(date(year, 12, 31), 1)
        else:
            end = self.day_start(date(year, month + 1, 1))
        return Period("month", f"{year:04d}-{month:02d}", self.day_start(date(year, month, 1)), end)

    def year(self, year: int) -> Period:
        return Period(
            "year",
            f"{year:04d}",
            self.day_start(date(year, 1, 1)),
            self.start_after(date(year, 12, 31), 1),
        )

    def period_of(self, level: str, ts_ms: int) -> Period:
        """The period of ``level`` that contains ``ts_ms``.

        For ``month`` and ``year`` this is the calendar period of the instant (a week may belong
        to two months: ``parents()``).
        """
        d = self.local_date(ts_ms)
        if level == "day":
            return self.day(d)
        if level == "week":
            return self.week(d)
        if level == "month":
            return self.month(d.year, d.month)
        if level == "year":
            return self.year(d.year)
        raise QueryError(f"not a period level: {level!r}")

    # -- keys and the hierarchy ---------------------------------------------------------------
    def from_key(self, level: str, key: str) -> Period:
        """Parse a period key (``2024``, ``2024-01``, ``2024-W03``, ``2024-01-18``)."""
        pattern = _KEY_PATTERNS.get(level)
        m = pattern.match(key) if pattern else None
        if m is None:
            raise QueryError(f"not a {level} key: {key!r}")
        nums = [int(g) for g in m.groups()]
        try:
            if level == "year":
                return self.year(nums[0])
            if level == "month":
                return self.month(nums[0], nums[1])
            if level == "week":
                return self.week(date.fromisocalendar(nums[0], nums[1], 1))
            return self.day(date(nums[0], nums[1], nums[2]))
        except ValueError as exc:
            raise QueryError(f"not a {level} key: {key!r} ({exc})") from exc

    def from_node_id(self, node_id: str) -> Period:
        level, key = parse_node_id(node_id)
        if level == "segment":
            raise QueryError(f"a segment is not a calendar period: {node_id!r}")
        return self.from_key(level, key)

    def parents(self, period: Period) -> tuple[Period, ...]:
        """The TOC parents: day → its ISO week, week → the months its days lie in (one or two, in
        time order), month → its year, year → none."""
        if period.level == "day":
            return (self.week(date.fromisoformat(period.key)),)
        if period.level == "week":
            iso_year, iso_week = int(period.key[:4]), int(period.key[6:])
            first = date.fromisocalendar(iso_year, iso_week, 1)
            last = date.fromisocalendar(iso_year, iso_week, 7)
            months = [self.month(first.year, first.month)]
            if (last.year, last.month) != (first.year, first.month):
                months.append(self.month(last.year, last.month))
            return tuple(months)
        if period.level == "month":
            return (self.year(int(period.key[:4])),)
        return ()

    def parent(self, period: Period) -> Period | None:
        """The first of ``parents()`` (a week's: the month of its Monday), or None for a year."""
        found = self.parents(period)
        return found[0] if found else None

    def summary_parents(self, period: Period) -> tuple[Period, ...]:
        """The periods whose summary is built from ``period``: a day's week and month (months are
        summarised from their days, not from weeks that may straddle them), a week's months (a
        month lists the weeks of its days and does not repeat their lines), a month's year. A
        change to ``period`` makes these dirty."""
        if period.level == "day":
            d = date.fromisoformat(period.key)
            return (self.week(d), self.month(d.year, d.month))
        if period.level in ("week", "month"):
            return self.parents(period)
        return ()

    def chain(self, ts_ms: int) -> list[Period]:
        """Day, week, month and year that contain an instant (bottom-up): the periods whose
        summaries cover it."""
        return [self.period_of(level, ts_ms) for level in ("day", "week", "month", "year")]

    def segment_node_id(self, start_ms: int, suffix: str) -> str:
        """``toc:segment:2024-01-18T10:00:{suffix}`` with the segment's local start minute."""
        return f"toc:segment:{self.local(start_ms).strftime('%Y-%m-%dT%H:%M')}:{suffix}"
