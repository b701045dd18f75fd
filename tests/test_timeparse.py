"""Time expressions: a table of expressions with exact ranges at a fixed reference time, DST and
year boundaries, anchors ("before the migration") and their resolution, and a no-crash property."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtoc.model import Event
from memtoc.retrieval.timeparse import parse_time, resolve_anchor
from memtoc.text.keyphrases import key_terms

LONDON = ZoneInfo("Europe/London")
H = 3_600_000
D = 24 * H


def L(y: int, m: int, d: int, h: int = 0, mi: int = 0, tz: ZoneInfo = LONDON) -> int:
    """Epoch ms of a local wall-clock time."""
    return int(datetime(y, m, d, h, mi, tzinfo=tz).timestamp() * 1000)


REF = L(2024, 3, 20, 15)  # Wednesday 20 March 2024, 15:00 GMT (before the clocks go forward)

TABLE: list[tuple[str, int, int]] = [
    ("yesterday", L(2024, 3, 19), L(2024, 3, 20)),
    ("today", L(2024, 3, 20), L(2024, 3, 21)),
    ("tomorrow", L(2024, 3, 21), L(2024, 3, 22)),
    ("the day before yesterday", L(2024, 3, 18), L(2024, 3, 19)),
    ("this morning", L(2024, 3, 20, 4, 30), L(2024, 3, 20, 12, 30)),
    ("last night", L(2024, 3, 19, 17, 30), L(2024, 3, 20, 6, 30)),
    ("last week", L(2024, 3, 11), L(2024, 3, 18)),
    ("this week", L(2024, 3, 18), L(2024, 3, 25)),
    ("the week before last", L(2024, 3, 4), L(2024, 3, 11)),
    ("last weekend", L(2024, 3, 16), L(2024, 3, 18)),
    ("this weekend", L(2024, 3, 23), L(2024, 3, 25)),
    ("last month", L(2024, 2, 1), L(2024, 3, 1)),
    ("this month", L(2024, 3, 1), L(2024, 4, 1)),
    ("last year", L(2023, 1, 1), L(2024, 1, 1)),
    ("this year", L(2024, 1, 1), L(2025, 1, 1)),
    ("in March", L(2024, 3, 1), L(2024, 4, 1)),
    ("last March", L(2023, 3, 1), L(2023, 4, 1)),
    ("in December", L(2023, 12, 1), L(2024, 1, 1)),
    ("in May", L(2023, 5, 1), L(2023, 6, 1)),
    ("in March 2023", L(2023, 3, 1), L(2023, 4, 1)),
    ("during Feb 2022", L(2022, 2, 1), L(2022, 3, 1)),
    ("in early June 2023", L(2023, 6, 1), L(2023, 6, 11)),
    ("2023", L(2023, 1, 1), L(2024, 1, 1)),
    ("in 2022", L(2022, 1, 1), L(2023, 1, 1)),
    ("on 8 May", L(2023, 5, 8), L(2023, 5, 9)),
    ("8 May 2023", L(2023, 5, 8), L(2023, 5, 9)),
    ("May 8th", L(2023, 5, 8), L(2023, 5, 9)),
    ("the 8th of May", L(2023, 5, 8), L(2023, 5, 9)),
    ("March 3rd", L(2024, 3, 3), L(2024, 3, 4)),
    ("on 2024-02-29", L(2024, 2, 29), L(2024, 3, 1)),
    ("3 days ago", L(2024, 3, 17), L(2024, 3, 18)),
    ("five days ago", L(2024, 3, 15), L(2024, 3, 16)),
    ("a few days ago", L(2024, 3, 17), L(2024, 3, 18)),
    ("two weeks ago", L(2024, 3, 3), L(2024, 3, 10)),
    ("a couple of weeks ago", L(2024, 3, 3), L(2024, 3, 10)),
    ("a month ago", L(2024, 2, 5), L(2024, 3, 7)),
    ("a year ago", L(2022, 9, 19), L(2023, 9, 19)),
    ("since Monday", L(2024, 3, 18), REF),
    ("last Monday", L(2024, 3, 18), L(2024, 3, 19)),
    ("on Friday", L(2024, 3, 15), L(2024, 3, 16)),
    ("this Monday", L(2024, 3, 18), L(2024, 3, 19)),
    ("the last 3 days", REF - 3 * D, REF),
    ("in the past two weeks", REF - 14 * D, REF),
    ("before 8 May", 0, L(2023, 5, 8)),
    ("after 8 May 2023", L(2023, 5, 9), REF),
    ("until last week", 0, L(2024, 3, 18)),
    ("since March", L(2024, 3, 1), REF),
]


@pytest.mark.parametrize(("expr", "start", "end"), TABLE, ids=[t[0] for t in TABLE])
def test_expression_table(expr: str, start: int, end: int) -> None:
    found = parse_time(expr, REF, LONDON)
    assert found is not None, expr
    assert found.range == (start, end)
    assert found.matched == expr
    assert found.rest == ""
    assert found.anchor is None and found.relation is None


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 30


@pytest.mark.parametrize(
    ("query", "rest", "start", "end"),
    [
        (
            "What did Melanie do last weekend?",
            "What did Melanie do?",
            L(2024, 3, 16),
            L(2024, 3, 18),
        ),
        (
            "which tests failed yesterday in CI",
            "which tests failed in CI",
            L(2024, 3, 19),
            L(2024, 3, 20),
        ),
        (
            "What did we decide about caching on 8 May?",
            "What did we decide about caching?",
            L(2023, 5, 8),
            L(2023, 5, 9),
        ),
        (
            "Two weeks ago we fixed the JWT bug",
            "we fixed the JWT bug",
            L(2024, 3, 3),
            L(2024, 3, 10),
        ),
    ],
)
def test_expression_inside_a_question(query: str, rest: str, start: int, end: int) -> None:
    found = parse_time(query, REF, LONDON)
    assert found is not None
    assert found.range == (start, end)
    assert found.rest == rest


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the LGBTQ support group?",
        "What is Melanie's favourite book?",
        "items 3 may fail under load",
        "we march on regardless",
        "port 8080 is open",
        "31 February",
        "what happened after that?",
        "after login the token is refreshed",
        "",
        "   ",
    ],
)
def test_no_expression(query: str) -> None:
    assert parse_time(query, REF, LONDON) is None


@pytest.mark.parametrize(
    ("query", "anchor", "relation", "rest"),
    [
        ("What did we change before the migration?", "migration", "before", "What did we change?"),
        ("after the migration to postgres", "migration to postgres", "after", ""),
        ("since the outage, how often did it fail?", "outage", "after", "how often did it fail?"),
        (
            "What did Melanie do after Melanie's birthday party?",
            "Melanie's birthday party",
            "after",
            "What did Melanie do?",
        ),
        ("until our launch what was the plan", "launch", "before", "what was the plan"),
    ],
)
def test_anchor_expressions(query: str, anchor: str, relation: str, rest: str) -> None:
    found = parse_time(query, REF, LONDON)
    assert found is not None
    assert found.range is None
    assert (found.anchor, found.relation, found.rest) == (anchor, relation, rest)


def test_a_date_after_before_is_a_range_not_an_anchor() -> None:
    found = parse_time("what broke after the 8th of May?", REF, LONDON)
    assert found is not None
    assert found.anchor is None
    assert found.range == (L(2023, 5, 9), REF)


def test_leftmost_expression_wins() -> None:
    found = parse_time("yesterday, not last week", REF, LONDON)
    assert found is not None and found.matched == "yesterday"


# -- parts of the day, hours ago, weekends, spans (real coding questions) ---------------------------
M = 60_000
PARTS_TABLE: list[tuple[str, int, int]] = [
    # a part of the day after the day it narrows (REF: Wednesday 20 March 2024, 15:00)
    ("yesterday evening", L(2024, 3, 19, 17, 30), L(2024, 3, 20)),
    ("Friday evening", L(2024, 3, 15, 17, 30), L(2024, 3, 16)),
    ("On Wednesday morning", L(2024, 3, 13, 4, 30), L(2024, 3, 13, 12, 30)),
    ("Last Friday morning", L(2024, 3, 15, 4, 30), L(2024, 3, 15, 12, 30)),
    ("Monday evening", L(2024, 3, 18, 17, 30), L(2024, 3, 19)),
    ("Tuesday afternoon", L(2024, 3, 19, 11, 30), L(2024, 3, 19, 18, 30)),
    ("Monday late afternoon", L(2024, 3, 18, 14, 30), L(2024, 3, 18, 18, 30)),
    ("Yesterday around lunchtime", L(2024, 3, 19, 11, 30), L(2024, 3, 19, 14)),
    ("yesterday in the morning", L(2024, 3, 19, 4, 30), L(2024, 3, 19, 12, 30)),
    ("Monday night", L(2024, 3, 18, 17, 30), L(2024, 3, 19, 6, 30)),
    ("March 12 in the evening", L(2024, 3, 12, 17, 30), L(2024, 3, 13)),
    # ... or before it
    ("Around lunchtime today", L(2024, 3, 20, 11, 30), L(2024, 3, 20, 14)),
    ("Right after lunch today", L(2024, 3, 20, 13), L(2024, 3, 20, 16)),
    ("the evening of March 17", L(2024, 3, 17, 17, 30), L(2024, 3, 18)),
    ("the evening of the 17th", L(2024, 3, 17, 17, 30), L(2024, 3, 18)),
    ("the morning of 2024-03-04", L(2024, 3, 4, 4, 30), L(2024, 3, 4, 12, 30)),
    ("Late yesterday evening", L(2024, 3, 19, 20, 30), L(2024, 3, 20)),
    ("late yesterday", L(2024, 3, 19, 15, 30), L(2024, 3, 20)),
    ("Late this morning", L(2024, 3, 20, 9, 30), L(2024, 3, 20, 12, 30)),
    ("first thing this morning", L(2024, 3, 20, 4, 30), L(2024, 3, 20, 12, 30)),
    ("late last night", L(2024, 3, 19, 20, 30), L(2024, 3, 20, 5, 30)),
    ("tonight", L(2024, 3, 20, 17, 30), L(2024, 3, 21, 6, 30)),
    ("in the middle of this afternoon", L(2024, 3, 20, 13, 30), L(2024, 3, 20, 16, 30)),
    ("just before leaving this afternoon", L(2024, 3, 20, 14, 30), L(2024, 3, 20, 18, 30)),
    ("Earlier today", L(2024, 3, 20), REF),
    ("Earlier this afternoon", L(2024, 3, 20, 11, 30), REF),
    ("earlier this week", L(2024, 3, 18), REF),
    # a part of the day alone: the most recent one that has begun
    ("at the end of the afternoon", L(2024, 3, 20, 14, 30), L(2024, 3, 20, 18, 30)),
    ("at the start of the evening", L(2024, 3, 19, 17, 30), L(2024, 3, 19, 21, 30)),
    ("in the middle of the night", L(2024, 3, 19, 23, 30), L(2024, 3, 20, 4, 30)),
    ("later in the morning", L(2024, 3, 20, 4, 30), L(2024, 3, 20, 12, 30)),
    ("around lunchtime", L(2024, 3, 20, 11, 30), L(2024, 3, 20, 14)),
    ("after lunch", L(2024, 3, 20, 13), L(2024, 3, 20, 16)),
    ("before noon", L(2024, 3, 20, 4, 30), L(2024, 3, 20, 12, 30)),
    # clock times: "at" +- 30 minutes, "around" +- an hour, inside their day
    ("yesterday at 3pm", L(2024, 3, 19, 14, 30), L(2024, 3, 19, 15, 30)),
    ("Friday around 10:30", L(2024, 3, 15, 9, 30), L(2024, 3, 15, 11, 30)),
    ("at 3 p.m. yesterday", L(2024, 3, 19, 14, 30), L(2024, 3, 19, 15, 30)),
    ("on Mar 12 at 9:15 am", L(2024, 3, 12, 8, 45), L(2024, 3, 12, 9, 45)),
    ("at 3pm", L(2024, 3, 20, 14, 30), L(2024, 3, 20, 15, 30)),
    ("at 23:45", L(2024, 3, 19, 23, 15), L(2024, 3, 20)),
    ("at 15h30", L(2024, 3, 19, 15), L(2024, 3, 19, 16)),
    # minutes and hours ago: ref - N, +- N/2 (at least 10 minutes), never after ref
    ("about an hour ago", REF - 90 * M, REF - 30 * M),
    ("a couple of hours ago", REF - 180 * M, REF - 60 * M),
    ("three hours ago", REF - 270 * M, REF - 90 * M),
    ("half an hour ago", REF - 45 * M, REF - 15 * M),
    ("5 minutes ago", REF - 15 * M, REF),
    ("an hour or so ago", REF - 90 * M, REF - 30 * M),
    ("in the last hour", REF - 60 * M, REF),
    ("the past 30 minutes", REF - 30 * M, REF),
    ("within the last 2 hours", REF - 120 * M, REF),
    # weekends
    ("over the weekend", L(2024, 3, 16), L(2024, 3, 18)),
    ("during the weekend", L(2024, 3, 16), L(2024, 3, 18)),
    ("before the weekend", L(2024, 3, 15), L(2024, 3, 16)),
    ("after the weekend", L(2024, 3, 18), L(2024, 3, 19)),
    # a weekday beside a date: the date wins
    ("on Tuesday 12 March", L(2024, 3, 12), L(2024, 3, 13)),
    ("on Monday 12 March", L(2024, 3, 12), L(2024, 3, 13)),
    ("Tue, Mar 12", L(2024, 3, 12), L(2024, 3, 13)),
    ("Tuesday 2024-03-12", L(2024, 3, 12), L(2024, 3, 13)),
    ("on the 17th", L(2024, 3, 17), L(2024, 3, 18)),
    ("Friday the 12th", L(2024, 1, 12), L(2024, 1, 13)),
    ("Tuesday the 12th", L(2024, 3, 12), L(2024, 3, 13)),
    # parts of a month
    ("in mid-February", L(2024, 2, 11), L(2024, 2, 21)),
    ("at the end of January", L(2024, 1, 21), L(2024, 2, 1)),
    ("early March", L(2024, 3, 1), L(2024, 3, 11)),
    ("late February 2023", L(2023, 2, 21), L(2023, 3, 1)),
    ("the beginning of December", L(2023, 12, 1), L(2023, 12, 11)),
    # two dates: one window over both
    ("between Feb 12 and Feb 17", L(2024, 2, 12), L(2024, 2, 18)),
    ("from 4 March to 8 March", L(2024, 3, 4), L(2024, 3, 9)),
    ("on Mar 4 and Mar 8", L(2024, 3, 4), L(2024, 3, 9)),
    ("yesterday and today", L(2024, 3, 19), L(2024, 3, 21)),
]


@pytest.mark.parametrize(("expr", "start", "end"), PARTS_TABLE, ids=[t[0] for t in PARTS_TABLE])
def test_parts_of_day_hours_weekends_and_spans(expr: str, start: int, end: int) -> None:
    found = parse_time(expr, REF, LONDON)
    assert found is not None, expr
    assert (found.range, found.matched, found.rest) == ((start, end), expr, "")


@pytest.mark.parametrize(
    ("query", "matched", "rest", "start", "end"),
    [
        (
            "What feature did we build on Friday evening and finally commit over the weekend?",
            "on Friday evening",
            "What feature did we build and finally commit over the weekend?",
            L(2024, 3, 15, 17, 30),
            L(2024, 3, 16),
        ),
        (
            "In the first session on Tuesday Feb 13, which file did we fill in?",
            "on Tuesday Feb 13",
            "In the first session, which file did we fill in?",
            L(2024, 2, 13),
            L(2024, 2, 14),
        ),
        (
            "What was the most recent change we made, about an hour ago?",
            "about an hour ago",
            "What was the most recent change we made?",
            REF - 90 * M,
            REF - 30 * M,
        ),
        (
            "How did the rule change between Feb 12 and Feb 17?",
            "between Feb 12 and Feb 17",
            "How did the rule change?",
            L(2024, 2, 12),
            L(2024, 2, 18),
        ),
        (
            "On Nov 13, 2023 at 21:12 we merged it",
            "On Nov 13, 2023 at 21:12",
            "we merged it",
            L(2023, 11, 13, 20, 42),
            L(2023, 11, 13, 21, 42),
        ),
        (
            "What did we do since yesterday afternoon?",
            "since yesterday afternoon",
            "What did we do?",
            L(2024, 3, 19, 11, 30),
            REF,
        ),
    ],
)
def test_new_forms_inside_a_question(
    query: str, matched: str, rest: str, start: int, end: int
) -> None:
    found = parse_time(query, REF, LONDON)
    assert found is not None
    assert (found.matched, found.rest, found.range) == (matched, rest, (start, end))


def test_a_weekday_next_to_a_date_takes_the_date() -> None:
    """The weekday alone is relative to the reference ("on Tuesday" = 24 Feb here); the date
    beside it is what the speaker meant, whether or not the two agree."""
    paris = ZoneInfo("Europe/Paris")
    ref = L(2026, 3, 2, 11, 17, tz=paris)  # Monday 2 March 2026
    for text in ("on Tuesday Feb 17", "Tuesday, 17 February", "on Thursday Feb 17"):
        found = parse_time(f"In the first session {text}, which file?", ref, paris)
        assert found is not None and found.matched == text
        assert found.range == (L(2026, 2, 17, tz=paris), L(2026, 2, 18, tz=paris))


def test_before_lunch_and_hours_ago_before_the_part_has_begun() -> None:
    """At 08:00 the most recent lunchtime is yesterday's; "an hour ago" stays before the ref."""
    ref = L(2024, 3, 20, 8)
    lunch = parse_time("around lunchtime", ref, LONDON)
    assert lunch is not None and lunch.range == (L(2024, 3, 19, 11, 30), L(2024, 3, 19, 14))
    ago = parse_time("10 minutes ago", ref, LONDON)
    assert ago is not None and ago.range == (ref - 20 * M, ref)


@pytest.mark.parametrize(
    "query",
    [
        "Good morning, can you look at the build?",
        "we deploy in the morning",
        "the 3rd attempt failed",
        "I sat the 3rd exam",
        "a last minute change",
        "at 3 we start",
        "port 8080 at 10.30",
        "at 13pm",
        "after the evening standup",  # an anchor (an event), not a part of the day
    ],
)
def test_no_new_date(query: str) -> None:
    found = parse_time(query, REF, LONDON)
    assert found is None or found.range is None


# -- parts of the day across DST changes -----------------------------------------------------------
def test_evening_and_night_on_the_spring_dst_day() -> None:
    """31 March 2024: London's clocks go from 01:00 to 02:00. Wall-clock hours stay wall-clock."""
    evening = parse_time("Sunday evening", L(2024, 4, 2, 12), LONDON)
    assert evening is not None
    assert evening.range == (L(2024, 3, 31, 17, 30), L(2024, 4, 1))
    assert evening.range[1] - evening.range[0] == 6 * H + 30 * M
    night = parse_time("last night", L(2024, 3, 31, 12), LONDON)
    assert night is not None
    assert night.range == (L(2024, 3, 30, 17, 30), L(2024, 3, 31, 6, 30))
    assert night.range[1] - night.range[0] == 12 * H  # 13 h on the wall, one hour skipped
    morning = parse_time("this morning", L(2024, 3, 31, 13), LONDON)
    assert morning is not None and morning.range == (L(2024, 3, 31, 4, 30), L(2024, 3, 31, 12, 30))


def test_night_and_hours_ago_on_the_autumn_dst_day() -> None:
    """27 October 2024: London's clocks go back from 02:00 to 01:00 (a 25-hour day)."""
    night = parse_time("late last night", L(2024, 10, 27, 12), LONDON)
    assert night is not None
    assert night.range == (L(2024, 10, 26, 20, 30), L(2024, 10, 27, 5, 30))
    assert night.range[1] - night.range[0] == 10 * H  # 9 h on the wall, one hour repeated
    ref = L(2024, 10, 27, 2, 30)  # 02:30 GMT, 2.5 h of real time after midnight BST
    ago = parse_time("two hours ago", ref, LONDON)
    assert ago is not None and ago.range == (ref - 3 * H, ref - 1 * H)
    morning = parse_time("Sunday morning", L(2024, 10, 28, 9), LONDON)
    assert morning is not None
    assert morning.range == (L(2024, 10, 27, 4, 30), L(2024, 10, 27, 12, 30))


def test_parts_of_day_in_the_corpora_zones() -> None:
    """Paris and New York: a part of the day is the developer's local wall clock."""
    ny = ZoneInfo("America/New_York")
    ref = L(2026, 7, 8, 11, tz=ny)  # Wednesday
    found = parse_time("On Monday evening we added a delete hotkey", ref, ny)
    assert found is not None
    assert found.range == (L(2026, 7, 6, 17, 30, tz=ny), L(2026, 7, 7, tz=ny))
    paris = ZoneInfo("Europe/Paris")
    ref = L(2026, 2, 25, 10, tz=paris)
    found = parse_time("Yesterday around lunchtime we shrank the prompts", ref, paris)
    assert found is not None
    assert found.range == (L(2026, 2, 24, 11, 30, tz=paris), L(2026, 2, 24, 14, tz=paris))


# -- DST and year boundaries ------------------------------------------------------------------------
def test_last_week_across_the_spring_dst_change() -> None:
    ref = L(2024, 4, 2, 12)  # Tuesday after the clocks went forward (Sunday 31 March)
    found = parse_time("last week", ref, LONDON)
    assert found is not None and found.range == (L(2024, 3, 25), L(2024, 4, 1))
    assert found.range[1] - found.range[0] == 7 * D - H


def test_yesterday_is_23_or_25_hours_on_dst_days() -> None:
    spring = parse_time("yesterday", L(2024, 4, 1, 12), LONDON)
    autumn = parse_time("yesterday", L(2024, 10, 28, 12), LONDON)
    assert spring is not None and spring.range == (L(2024, 3, 31), L(2024, 4, 1))
    assert spring.range[1] - spring.range[0] == 23 * H
    assert autumn is not None and autumn.range == (L(2024, 10, 27), L(2024, 10, 28))
    assert autumn.range[1] - autumn.range[0] == 25 * H


@pytest.mark.parametrize(
    ("expr", "start", "end"),
    [
        ("last week", L(2024, 12, 23), L(2024, 12, 30)),  # ISO 2024-W52
        ("this week", L(2024, 12, 30), L(2025, 1, 6)),  # ISO 2025-W01 starts in December
        ("in December", L(2024, 12, 1), L(2025, 1, 1)),
        ("last month", L(2024, 12, 1), L(2025, 1, 1)),
        ("last year", L(2024, 1, 1), L(2025, 1, 1)),
        ("on 31 December", L(2024, 12, 31), L(2025, 1, 1)),
        ("yesterday", L(2025, 1, 1), L(2025, 1, 2)),
        ("in January", L(2025, 1, 1), L(2025, 2, 1)),
        ("last weekend", L(2024, 12, 28), L(2024, 12, 30)),
    ],
)
def test_year_boundary(expr: str, start: int, end: int) -> None:
    ref = L(2025, 1, 2, 9)  # Thursday 2 January 2025
    found = parse_time(expr, ref, LONDON)
    assert found is not None and found.range == (start, end)


def test_other_time_zone() -> None:
    ny = ZoneInfo("America/New_York")
    ref = L(2024, 3, 20, 15)  # 11:00 in New York
    found = parse_time("yesterday", ref, ny)
    assert found is not None and found.range == (L(2024, 3, 19, tz=ny), L(2024, 3, 20, tz=ny))
    assert found.range[0] - L(2024, 3, 19) == 4 * H  # New York is on EDT (UTC-4), London on GMT


def test_feb_29_without_a_year_is_the_last_leap_day() -> None:
    found = parse_time("on 29 February", L(2025, 6, 1, 12), LONDON)
    assert found is not None and found.range == (L(2024, 2, 29), L(2024, 3, 1))


# -- anchors ---------------------------------------------------------------------------------------
def _event(n: int, ts: int, text: str) -> Event:
    return Event(f"E{n:025d}", "s1", "p", "test", ts, "user_message", "user", text)


EVENTS = [
    _event(1, L(2024, 1, 10, 9), "We are planning the database migration to postgres next week"),
    _event(2, L(2024, 1, 17, 14), "The migration to postgres finished, all tables copied"),
    _event(3, L(2024, 2, 1, 10), "Unrelated chat about CSS flexbox layout"),
]


def term_search(query: str) -> list[Event]:
    """A real (small) search: events ranked by shared key terms with the query, best first."""
    terms = key_terms(query)
    scored = [(len(terms & key_terms(e.text)), e) for e in EVENTS]
    return [e for s, e in sorted(scored, key=lambda t: (-t[0], t[1].ts_ms)) if s > 0]


def test_resolve_anchor_with_a_search_callable() -> None:
    found = parse_time("what did we change after the migration to postgres finished?", REF, LONDON)
    assert found is not None and found.anchor is not None and found.relation == "after"
    ts = resolve_anchor(term_search, found.anchor, relation=found.relation)
    assert ts == EVENTS[1].ts_ms
    assert found.anchored_range(ts, REF) == (EVENTS[1].ts_ms, REF)
    assert resolve_anchor(term_search, "kubernetes autoscaler") is None
    assert resolve_anchor(term_search, "migration postgres", not_after_ms=L(2024, 1, 12)) == (
        EVENTS[0].ts_ms
    )


@dataclass
class _Hit:
    start_ms: int
    end_ms: int


@dataclass
class _Result:
    items: list[_Hit]


class _FakeMemory:
    def search(self, query: str) -> _Result:
        return _Result([_Hit(1_000, 5_000)] if "deploy" in query else [])


def test_resolve_anchor_through_a_search_method_and_spans() -> None:
    memory = _FakeMemory()
    assert resolve_anchor(memory, "the deploy", relation="before") == 1_000
    assert resolve_anchor(memory, "the deploy", relation="after") == 5_000
    assert resolve_anchor(memory, "nothing here") is None
    assert resolve_anchor(memory, "   ") is None


# -- never raises ----------------------------------------------------------------------------------
_WORDS = [
    "last", "this", "next", "week", "weekend", "month", "year", "in", "on", "since", "before",
    "after", "until", "the", "a", "couple", "of", "few", "two", "99999999", "0", "days", "ago",
    "May", "march", "Feb", "29", "31", "8th", "2023", "0000", "9999", "-", "?", "Monday",
    "yesterday", "migration", "'s", "past", "night", "morning", "1970-01-01", "2024-13-45",
    "evening", "afternoon", "lunchtime", "lunch", "noon", "around", "late", "early", "earlier",
    "hours", "minutes", "hour", "half", "an", "between", "and", "to", "from", "the 17th",
    "mid-February", "Tuesday", "Tue,", "first thing", "end", "middle", "over", "leaving", "just",
]  # fmt: skip
ZONES = [ZoneInfo(z) for z in ("UTC", "Europe/London", "America/Santiago", "Asia/Kathmandu")]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=80), st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join)),
    st.integers(min_value=-(10**16), max_value=10**16),
    st.sampled_from(ZONES),
)
def test_never_raises(query: str, ref: int, tz: ZoneInfo) -> None:
    found = parse_time(query, ref, tz)
    if found is not None:
        assert found.matched and found.matched in query
        assert isinstance(found.rest, str)
        if found.range is not None:
            assert found.range[0] < found.range[1]  # never an empty window
        else:
            assert found.anchor and found.relation in {"before", "after"}


# -- properties of parts of the day ------------------------------------------------------------------
_DAY_WORDS = [
    "today", "yesterday", "on Monday", "last Friday", "Tuesday", "this Wednesday", "on 3 March",
    "March 12th", "the day before yesterday", "2 days ago", "on the 5th", "Feb 29",
]  # fmt: skip
_PART_AFTER = [
    " morning", " afternoon", " evening", " around lunchtime", " late afternoon", " early morning",
    " after lunch", " in the morning", " at noon", ", in the evening", " mid-afternoon",
    " at the end of the afternoon", " before lunch", " late evening", " at 3pm", " around 23:45",
    " at 00:10", ", at 9:15 am",
]  # fmt: skip
_PART_BEFORE = ["the evening of ", "around lunchtime ", "late ", "early ", "the morning of "]
SANE = [ZoneInfo(z) for z in ("UTC", "Europe/Paris", "America/New_York", "America/Santiago",
                              "Asia/Kathmandu", "Australia/Lord_Howe")]  # fmt: skip
_REFS = st.integers(min_value=L(2000, 1, 1), max_value=L(2090, 1, 1))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_DAY_WORDS),
    st.one_of(
        st.sampled_from(_PART_AFTER).map(lambda p: ("", p)),
        st.sampled_from(_PART_BEFORE).map(lambda p: (p, "")),
    ),
    _REFS,
    st.sampled_from(SANE),
)
def test_a_part_of_the_day_nests_inside_its_day(
    day: str, part: tuple[str, str], ref: int, tz: ZoneInfo
) -> None:
    """Both "<day> <part>" and "<part> <day>" are non-empty windows inside the day alone, which lies
    within a year (eight, for 29 February) before the reference and a week after it ("this
    Wednesday" is the current ISO week's)."""
    before, after = part
    if before.endswith("of ") and day.startswith("on "):
        day = day[3:]  # "the evening of the 5th", not "the evening of on the 5th"
    whole = parse_time(day, ref, tz)
    if whole is None:  # "on the 5th" alone needs "on": only that one
        assert day == "the 5th"
        whole = parse_time(f"on {day}", ref, tz)
    phrase = f"{before}{day}{after}"
    narrowed = parse_time(phrase, ref, tz)
    assert whole is not None and whole.range is not None
    assert narrowed is not None and narrowed.range is not None, phrase
    assert narrowed.matched == phrase
    lo, hi = narrowed.range
    assert whole.range[0] <= lo < hi <= whole.range[1], phrase
    assert hi - lo < whole.range[1] - whole.range[0], phrase
    assert ref - 9 * 366 * D <= whole.range[0] and whole.range[1] <= ref + 7 * D


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=500),
    st.sampled_from(["minute", "hour"]),
    st.sampled_from(["", "about ", "around "]),
    _REFS,
    st.sampled_from(SANE),
)
def test_n_units_ago_is_a_window_around_that_instant(
    n: int, unit: str, prefix: str, ref: int, tz: ZoneInfo
) -> None:
    """A window for "N hours ago" holds ref - N hours, ends by ref, and widens with N."""
    size = n * (H if unit == "hour" else 60_000)
    found = parse_time(f"{prefix}{n} {unit}{'s' if n > 1 else ''} ago", ref, tz)
    assert found is not None and found.range is not None
    lo, hi = found.range
    assert lo <= ref - size < hi <= ref
    assert hi - lo <= max(size, 20 * 60_000)
    wider = parse_time(f"{n * 2} {unit}s ago", ref, tz)
    assert wider is not None and wider.range is not None
    assert wider.range[1] - wider.range[0] >= hi - lo
