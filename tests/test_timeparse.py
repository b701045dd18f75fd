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


def L(y: int, m: int, d: int, h: int = 0, tz: ZoneInfo = LONDON) -> int:
    """Epoch ms of a local wall-clock time."""
    return int(datetime(y, m, d, h, tzinfo=tz).timestamp() * 1000)


REF = L(2024, 3, 20, 15)  # Wednesday 20 March 2024, 15:00 GMT (before the clocks go forward)

TABLE: list[tuple[str, int, int]] = [
    ("yesterday", L(2024, 3, 19), L(2024, 3, 20)),
    ("today", L(2024, 3, 20), L(2024, 3, 21)),
    ("tomorrow", L(2024, 3, 21), L(2024, 3, 22)),
    ("the day before yesterday", L(2024, 3, 18), L(2024, 3, 19)),
    ("this morning", L(2024, 3, 20, 0), L(2024, 3, 20, 12)),
    ("last night", L(2024, 3, 19, 18), L(2024, 3, 20, 6)),
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
    ("in early June 2023", L(2023, 6, 1), L(2023, 7, 1)),
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
            assert found.range[0] <= found.range[1]
        else:
            assert found.anchor and found.relation in {"before", "after"}
