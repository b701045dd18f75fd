"""Concurrent rollups (team mode): two workers rolling up one period never leave a parent built
from stale children.

A rollup summarises a period's children outside its write transaction (an LLM call may take
seconds). If another worker files a new child and rolls the period up meanwhile, the slow worker
must not overwrite that newer version with one built from the children it read first: under the
node's lock it re-reads the children and, when they changed, builds again.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.model import Event, Summary
from memtoc.pipeline.rollup import RollupReport
from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.store.base import PipelineStore
from memtoc.store.postgres import PostgresStore
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import default_counter
from pipeline_support import make_events, toc_snapshot

T0 = int(datetime(2024, 3, 4, 9, 0, tzinfo=UTC).timestamp() * 1000)
FAR_FUTURE = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)


class GatedSummarizer:
    """The extractive summariser, whose first ``summarize_children`` call stops half-way (after
    the children were read) until the test releases it: a slow LLM, made deterministic."""

    def __init__(self) -> None:
        self.inner: Summarizer = ExtractiveSummarizer(default_counter())
        self.name = self.inner.name
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        return self.inner.summarize_events(events, context)

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.release.wait(timeout=30)
        return self.inner.summarize_children(children, level, avoid=avoid)


def processor(store: PipelineStore, summarizer: Summarizer | None = None) -> Processor:
    counter = default_counter()
    return Processor(
        store,
        summarizer or ExtractiveSummarizer(counter),
        counter,
        PipelineConfig(),
        ManualClock(FAR_FUTURE),
        ZoneInfo("UTC"),
    )


def open_pg(url: str) -> PostgresStore:
    return PostgresStore(url, clock=ManualClock(FAR_FUTURE), pool_size=2)


def day_events(session: str, start_ms: int, n: int, topic: str) -> list[Event]:
    return [
        Event(
            event_id=f"01HX{session.upper()}{i:06d}".ljust(26, "0")[:26],
            session_id=session,
            project="alpha",
            agent="test",
            ts_ms=start_ms + i * 60_000,
            event_type="user_message" if i % 2 == 0 else "assistant_message",
            role="user" if i % 2 == 0 else "assistant",
            text=f"{topic} step {i}: the {topic} parser rejects {topic} tokens in module {i}",
        )
        for i in range(n)
    ]


def single_worker_toc(tmp_path: Path, events: Sequence[Event]) -> dict[tuple[str, str], object]:
    store = SqliteStore(tmp_path / "ref.db", durability="off", clock=ManualClock(FAR_FUTURE))
    try:
        store.append_events(list(events))
        proc = processor(store)
        proc.run(rollup=False)
        proc.rollup(force=True)
        return toc_snapshot(store)
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_opener(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[PipelineStore, PipelineStore]]:
    """Two handles on one store (two workers): a PostgreSQL database, or one SQLite file."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        a, b = open_pg(url), open_pg(url)
    else:
        path = tmp_path / "shared.db"
        a = SqliteStore(path, durability="off", clock=ManualClock(FAR_FUTURE))
        b = SqliteStore(path, durability="off", clock=ManualClock(FAR_FUTURE))
    yield a, b
    a.close()
    b.close()


def test_a_slow_rollup_does_not_overwrite_a_newer_parent(
    store_opener: tuple[PipelineStore, PipelineStore], tmp_path: Path
) -> None:
    store_a, store_b = store_opener
    first = day_events("s1", T0, 6, "lexer")
    second = day_events("s2", T0 + 3 * 3_600_000, 6, "cache")
    store_a.append_events(first)
    processor(store_a).run(rollup=False)  # one segment; its day is dirty

    gated = GatedSummarizer()
    slow = processor(store_a, gated)
    result: dict[str, RollupReport] = {}

    def slow_rollup() -> None:
        result["report"] = slow.rollup(force=True, level="day")

    thread = threading.Thread(target=slow_rollup)
    thread.start()
    try:
        assert gated.entered.wait(timeout=30)  # worker A has read the day's one child
        # worker B files a second segment of the same day and rolls the day up first
        store_b.append_events(second)
        fast = processor(store_b)
        fast.run(rollup=False)
        assert fast.rollup(force=True, level="day").written == 1
    finally:
        gated.release.set()
        thread.join(timeout=60)
    assert not thread.is_alive()

    day = store_b.find_node("toc:day:2024-03-04", "alpha")
    segments = [n.node_id for n in store_b.list_nodes("alpha", level="segment")]
    assert len(segments) == 2
    assert list(day.child_node_ids) == segments  # not the one-child version worker A read
    assert store_b.node_versions("alpha", day.node_id) == [1]  # A wrote nothing stale
    assert gated.calls == 2  # A noticed, and summarised the new children again
    report = result["report"]
    assert report.stale == 0 and report.written == 0

    # finishing the TOC gives exactly what one worker builds from all the events
    processor(store_a).rollup(force=True)
    assert toc_snapshot(store_a) == single_worker_toc(tmp_path, [*first, *second])


class MonthGate(GatedSummarizer):
    """Stops the first *month* summary half-way (its days and weeks were read)."""

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        if level == "month":
            return super().summarize_children(children, level, avoid=avoid)
        return self.inner.summarize_children(children, level, avoid=avoid)


def month_race_events() -> tuple[list[Event], list[Event]]:
    """Two weeks' history of two projects, and a later part that changes days of every week (so
    each month's weeks get new lines)."""
    events = make_events(
        seed=11, sessions=10, per_session=(12, 30), start_ms=T0, spread_ms=6 * 86_400_000
    )
    return events[:40], events[40:]


def built_then_extended(store: PipelineStore, first: list[Event], later: list[Event]) -> None:
    """``first`` processed and rolled up, then ``later`` appended and processed (rollup left)."""
    store.append_events(first)
    processor(store).run(rollup=False)
    processor(store).rollup(force=True)
    store.append_events(later)
    processor(store).run(rollup=False)


def test_a_month_built_before_its_weeks_is_rebuilt_when_they_change(
    store_opener: tuple[PipelineStore, PipelineStore], tmp_path: Path
) -> None:
    """A month lists its weeks and does not repeat their lines, so it is built from them too:
    worker B rolls the days up, worker A rolls the months up while the weeks are still the old
    ones, then B rolls the weeks up — their new versions must make the months dirty again."""
    store_a, store_b = store_opener
    first, later = month_race_events()
    built_then_extended(store_a, first, later)

    worker_b, worker_a = processor(store_b), processor(store_a)
    assert worker_b.rollup(force=True, level="day").written > 0  # days, weeks and months dirty
    assert worker_a.rollup(force=True, level="month").written > 0  # from the weeks B left
    assert worker_b.rollup(force=True).written > 0  # the weeks, then what they made dirty
    assert store_a.dirty_periods("month") == [] and store_a.dirty_periods("year") == []
    assert toc_snapshot(store_a) == single_worker_toc(tmp_path, [*first, *later])


def test_a_slow_month_build_from_old_weeks_does_not_overwrite_a_newer_month(
    store_opener: tuple[PipelineStore, PipelineStore], tmp_path: Path
) -> None:
    """Worker A reads a month's days and weeks and summarises slowly; meanwhile worker B rolls the
    weeks and the month up. A's month — built from the old weeks — must not be written over B's:
    the write re-checks the weeks' versions as well as the days'."""
    store_a, store_b = store_opener
    first, later = month_race_events()
    built_then_extended(store_a, first, later)
    worker_b = processor(store_b)
    worker_b.rollup(force=True, level="day")  # the weeks and months are dirty, still old

    gated = MonthGate()
    slow = processor(store_a, gated)
    result: dict[str, RollupReport] = {}
    thread = threading.Thread(
        target=lambda: result.update(report=slow.rollup(force=True, level="month"))
    )
    thread.start()
    try:
        assert gated.entered.wait(timeout=30)  # A has read alpha's days and its old weeks
        worker_b.rollup(force=True)  # weeks, then months from the new weeks, then years
        alpha_month = store_b.node_versions("alpha", "toc:month:2024-03")
    finally:
        gated.release.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert store_b.node_versions("alpha", "toc:month:2024-03") == alpha_month  # A wrote nothing
    report = result["report"]
    assert report.written == 0 and report.stale == 0
    processor(store_a).rollup(force=True)
    assert toc_snapshot(store_a) == single_worker_toc(tmp_path, [*first, *later])


def test_concurrent_rollups_on_postgres_equal_a_single_worker_build(
    pg_url: str, tmp_path: Path
) -> None:
    events = make_events(
        seed=11, sessions=10, per_session=(12, 30), start_ms=T0, spread_ms=6 * 86_400_000
    )
    batches = [events[i : i + 40] for i in range(0, len(events), 40)]
    writer = open_pg(pg_url)
    rollers = [open_pg(pg_url) for _ in range(3)]
    done = threading.Event()
    errors: list[BaseException] = []

    def roll(store: PostgresStore) -> None:
        proc = processor(store)
        try:
            while not done.is_set():
                proc.rollup(force=True)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=roll, args=(s,)) for s in rollers]
    for t in threads:
        t.start()
    try:
        feeder = processor(writer)
        for batch in batches:
            writer.append_events(batch)
            feeder.run(rollup=False)
    finally:
        done.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors
    final = processor(writer)
    final.rollup(force=True)
    try:
        assert toc_snapshot(writer) == single_worker_toc(tmp_path, events)
        assert writer.dirty_periods("day") == [] and writer.dirty_periods("year") == []
    finally:
        writer.close()
        for s in rollers:
            s.close()
