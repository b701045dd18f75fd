"""Calendar periods: node ids, DST-safe spans, ISO weeks in every month they overlap."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtoc.errors import QueryError
from memtoc.pipeline.periods import Calendar, parse_node_id

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",  # 30-minute DST shift
    "Asia/Kolkata",  # +05:30, no DST
    "America/Santiago",  # DST changes at midnight (local midnight can be skipped)
    "Pacific/Apia",  # skipped a whole day (2011-12-30)
]
LO = int(datetime(1995, 1, 1, tzinfo=UTC).timestamp() * 1000)
HI = int(datetime(2040, 1, 1, tzinfo=UTC).timestamp() * 1000)
instants = st.integers(min_value=LO, max_value=HI)
zones = st.sampled_from(ZONES)


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, tz: str = "UTC") -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def test_node_ids_follow_the_design() -> None:
    cal = Calendar(ZoneInfo("UTC"))
    t = ms(2024, 1, 18, 10, 0)
    ids = [p.node_id for p in cal.chain(t)]
    assert ids == ["toc:day:2024-01-18", "toc:week:2024-W03", "toc:month:2024-01", "toc:year:2024"]
    assert cal.segment_node_id(t, "abc123") == "toc:segment:2024-01-18T10:00:abc123"
    assert parse_node_id("toc:segment:2024-01-18T10:00:abc123") == (
        "segment",
        "2024-01-18T10:00:abc123",
    )
    with pytest.raises(QueryError):
        parse_node_id("toc:decade:2020")


def test_periods_use_the_configured_zone() -> None:
    # 2024-01-18 03:00 UTC is still the 17th in New York.
    t = ms(2024, 1, 18, 3, 0)
    assert Calendar(ZoneInfo("UTC")).period_of("day", t).key == "2024-01-18"
    assert Calendar(ZoneInfo("America/New_York")).period_of("day", t).key == "2024-01-17"
    assert (
        Calendar(ZoneInfo("America/New_York")).segment_node_id(t, "x")
        == "toc:segment:2024-01-17T22:00:x"
    )


def test_dst_days_are_23_and_25_hours() -> None:
    cal = Calendar(ZoneInfo("America/New_York"))
    spring = cal.from_key("day", "2024-03-10")
    autumn = cal.from_key("day", "2024-11-03")
    assert spring.end_ms - spring.start_ms == 23 * 3_600_000
    assert autumn.end_ms - autumn.start_ms == 25 * 3_600_000
    lord_howe = Calendar(ZoneInfo("Australia/Lord_Howe")).from_key("day", "2024-04-07")
    assert lord_howe.end_ms - lord_howe.start_ms == int(24.5 * 3_600_000)


def test_a_skipped_midnight_starts_the_day_when_clocks_jump() -> None:
    # Santiago springs forward at 00:00 on 2024-09-08: local 00:00-00:59 does not exist.
    cal = Calendar(ZoneInfo("America/Santiago"))
    day = cal.from_key("day", "2024-09-08")
    assert cal.local(day.start_ms).hour == 1
    assert cal.local(day.start_ms - 1).date() == date(2024, 9, 7)
    assert day.end_ms - day.start_ms == 23 * 3_600_000


def test_a_week_belongs_to_every_month_its_days_belong_to() -> None:
    cal = Calendar(ZoneInfo("UTC"))
    # 2020-W53 runs Monday 2020-12-28 .. Sunday 2021-01-03: under December 2020 and January 2021.
    w = cal.period_of("week", ms(2021, 1, 2, 12))
    assert w.key == "2020-W53"
    assert [p.node_id for p in cal.parents(w)] == ["toc:month:2020-12", "toc:month:2021-01"]
    parent = cal.parent(w)
    assert parent is not None and parent.node_id == "toc:month:2020-12"
    # 2022-W35 runs 2022-08-29 .. 09-04 (its Thursday is 1 September): 31 August stays in August.
    aug31 = cal.period_of("day", ms(2022, 8, 31, 12))
    week = cal.parent(aug31)
    assert week is not None and week.key == "2022-W35"
    assert [p.key for p in cal.parents(week)] == ["2022-08", "2022-09"]
    assert [p.node_id for p in cal.summary_parents(aug31)] == [
        "toc:week:2022-W35",
        "toc:month:2022-08",
    ]
    # A week inside one month has one parent; a month's parent is its year.
    w = cal.period_of("week", ms(2024, 1, 17, 12))
    assert [p.node_id for p in cal.parents(w)] == ["toc:month:2024-01"]
    month = cal.parents(w)[0]
    assert [p.node_id for p in cal.parents(month)] == ["toc:year:2024"]
    # months are summarised from days, but list their weeks and avoid their lines: a week's
    # change makes its months dirty too
    assert cal.summary_parents(w) == cal.parents(w)
    assert [p.key for p in cal.summary_parents(week)] == ["2022-08", "2022-09"]
    assert cal.parent(cal.year(2024)) is None
    assert [p.level for p in cal.chain(ms(2024, 1, 17, 12))] == ["day", "week", "month", "year"]


def test_keys_round_trip_and_bad_keys_fail() -> None:
    cal = Calendar(ZoneInfo("Europe/London"))
    for node_id in (
        "toc:year:2024",
        "toc:month:2024-02",
        "toc:week:2020-W53",
        "toc:day:2024-02-29",
    ):
        assert cal.from_node_id(node_id).node_id == node_id
    for level, key in (("week", "2021-W53"), ("day", "2023-02-29"), ("month", "2024-13")):
        with pytest.raises(QueryError):
            cal.from_key(level, key)
    with pytest.raises(QueryError):
        cal.from_node_id("toc:segment:2024-01-18T10:00:abc")


@settings(max_examples=300, deadline=None)
@given(t=instants, zone=zones)
def test_nesting_invariants(t: int, zone: str) -> None:
    """Every instant lies in its day, week, month and year; a day lies in its week and its month; a
    month in its year; a week's parents are exactly the months holding one of its days."""
    cal = Calendar(ZoneInfo(zone))
    day, week, month, year = (cal.period_of(level, t) for level in ("day", "week", "month", "year"))
    for p in (day, week, month, year):
        assert p.contains(t), (p, t)
    assert week.start_ms <= day.start_ms and day.end_ms <= week.end_ms
    assert month.start_ms <= day.start_ms and day.end_ms <= month.end_ms
    assert year.start_ms <= month.start_ms and month.end_ms <= year.end_ms
    assert cal.parent(day) == week
    assert month in cal.parents(week)  # the day is reachable through the month that holds it
    monday = date.fromisocalendar(int(week.key[:4]), int(week.key[6:]), 1)
    months_of_days = {
        cal.period_of("month", cal.day_start(monday + timedelta(i))).node_id for i in range(7)
    }
    assert {p.node_id for p in cal.parents(week)} == months_of_days
    assert cal.summary_parents(day) == (week, month)
    assert cal.parents(month) == (year,)
    assert cal.local_date(day.start_ms) == date.fromisoformat(day.key)


@settings(max_examples=200, deadline=None)
@given(t=instants, zone=zones, level=st.sampled_from(["day", "week", "month", "year"]))
def test_periods_tile_time(t: int, zone: str, level: str) -> None:
    """Consecutive periods of a level meet exactly: no gap, no overlap."""
    cal = Calendar(ZoneInfo(zone))
    p = cal.period_of(level, t)
    nxt = cal.period_of(level, p.end_ms)
    prev = cal.period_of(level, p.start_ms - 1)
    assert nxt.start_ms == p.end_ms and nxt.key > p.key
    assert prev.end_ms == p.start_ms and prev.key < p.key
    hours = (p.end_ms - p.start_ms) / 3_600_000
    bounds = {"day": (22, 26), "week": (7 * 24 - 26, 7 * 24 + 2), "month": (27 * 24, 31 * 24 + 2)}
    lo, hi = bounds.get(level, (364 * 24, 366 * 24 + 2))
    assert lo <= hours <= hi


@settings(max_examples=100, deadline=None)
@given(d=st.dates(min_value=date(1996, 1, 1), max_value=date(2039, 1, 1)), zone=zones)
def test_each_day_belongs_to_exactly_one_week(d: date, zone: str) -> None:
    cal = Calendar(ZoneInfo(zone))
    day = cal.day(d)
    if day.start_ms == day.end_ms:  # a skipped date (Apia, 2011-12-30) has no instants
        return
    weeks = {cal.period_of("week", day.start_ms), cal.period_of("week", day.end_ms - 1)}
    assert weeks == {cal.week(d)}
    monday = d - timedelta(days=d.weekday())
    assert cal.week(d).start_ms == cal.day_start(monday)
