"""The TOC pipeline end to end through the outbox: append events → Processor.run → rollup.

Real SQLite, the real extractive summariser and token counter. The builder is never called
directly: everything goes through ``Processor``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError, StoreError, SummarizerError
from memtoc.ids import derived_ulid
from memtoc.model import Event, Grip, Summary
from memtoc.pipeline.periods import Calendar
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.toc import BuildOutcome, PreparedPeriod
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import TokenCounter, default_counter
from pipeline_support import (
    check_consistency,
    counts,
    make_events,
    shuffled_batches,
    toc_snapshot,
)

T0 = int(datetime(2024, 1, 8, 9, 0, tzinfo=UTC).timestamp() * 1000)
FAR_FUTURE = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)
UTC_ZONE = ZoneInfo("UTC")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return default_counter()


def open_store(path: Path, clock: ManualClock) -> SqliteStore:
    return SqliteStore(path, durability="off", clock=clock)


def processor(
    store: SqliteStore,
    counter: TokenCounter,
    clock: ManualClock,
    *,
    summarizer: ExtractiveSummarizer | None = None,
    tz: ZoneInfo = UTC_ZONE,
    config: PipelineConfig | None = None,
) -> Processor:
    return Processor(
        store,
        summarizer or ExtractiveSummarizer(counter),
        counter,
        config or PipelineConfig(),
        clock,
        tz,
    )


def build(
    path: Path,
    counter: TokenCounter,
    batches: Sequence[Sequence[Event]],
    *,
    run_every: int = 1,
    tz: ZoneInfo = UTC_ZONE,
) -> SqliteStore:
    """Append ``batches`` (processing after every ``run_every`` batches), then run to idle and
    force the rollups."""
    clock = ManualClock(FAR_FUTURE)
    store = open_store(path, clock)
    proc = processor(store, counter, clock, tz=tz)
    for i, batch in enumerate(batches, 1):
        store.append_events(batch)
        if i % run_every == 0:
            proc.run()
    proc.run()
    proc.rollup(force=True)
    return store


@pytest.fixture(scope="module")
def corpus() -> list[Event]:
    return make_events(seed=3, sessions=24, per_session=(15, 60), start_ms=T0, big_every=97)


def test_end_to_end_toc_is_complete_and_consistent(
    tmp_path: Path, counter: TokenCounter, corpus: list[Event]
) -> None:
    batches = [corpus[i : i + 200] for i in range(0, len(corpus), 200)]
    store = build(tmp_path / "a.db", counter, batches)
    check_consistency(store, counter)
    levels = store.stats()["nodes"]
    assert isinstance(levels, dict)
    assert set(levels) == {"segment", "day", "week", "month", "year"}
    assert levels["segment"] > 24  # pauses and the token cap split sessions
    # Segments of one session: a 45-minute pause always starts a new segment.
    assert store.outbox_counts() == {"pending": 0, "done": len(batches), "failed": 0}
    # Search documents mirror the latest nodes and grips.
    docs = store.connection.execute("SELECT kind, COUNT(*) FROM docs GROUP BY kind").fetchall()
    grips = store.connection.execute("SELECT COUNT(*) FROM grips").fetchone()[0]
    nodes = sum(int(v) for v in levels.values())
    assert dict(docs) == {"node": nodes, "grip": grips}
    hit = store.connection.execute(
        "SELECT COUNT(*) FROM docs_fts WHERE docs_fts MATCH 'flexbox OR vacuum OR jwt'"
    ).fetchone()[0]
    assert hit > 0
    # What a rollup's staleness check reads: the listed nodes' ids and versions, same order.
    months = store.list_nodes("alpha", level="month")
    for kw in ({}, {"level": "day"}, {"parent_id": months[0].node_id},
               {"level": "day", "since_ms": months[0].start_ms, "until_ms": months[0].end_ms}):  # fmt: skip
        assert store.list_node_versions("alpha", **kw) == [  # type: ignore[arg-type]
            (n.node_id, n.version)
            for n in store.list_nodes("alpha", **kw)  # type: ignore[arg-type]
        ]


def test_second_run_and_rollup_write_nothing(
    tmp_path: Path, counter: TokenCounter, corpus: list[Event]
) -> None:
    store = build(tmp_path / "a.db", counter, [corpus])
    before = counts(store)
    snap = toc_snapshot(store)
    clock = ManualClock(FAR_FUTURE + 86_400_000)
    proc = processor(store, counter, clock)
    report = proc.run()
    roll = proc.rollup(force=True)
    assert (report.entries, report.segments_built, report.nodes_written) == (0, 0, 0)
    assert roll.written == 0 and sum(roll.rolled.values()) == 0
    assert counts(store) == before
    assert toc_snapshot(store) == snap
    # Re-ingesting the same events is a no-op for the pipeline too.
    assert store.append_events(corpus[:50]).inserted == 0
    assert proc.run().nodes_written == 0 and counts(store) == before


def test_batch_size_and_arrival_order_do_not_change_the_toc(
    tmp_path: Path, counter: TokenCounter, corpus: list[Event]
) -> None:
    in_order = sorted(corpus, key=lambda e: (e.ts_ms, e.event_id))
    reference = toc_snapshot(build(tmp_path / "ref.db", counter, [in_order]))
    small = [in_order[i : i + 37] for i in range(0, len(in_order), 37)]
    assert toc_snapshot(build(tmp_path / "small.db", counter, small)) == reference
    shuffled = shuffled_batches(corpus, 113, seed=5)
    store = build(tmp_path / "shuffled.db", counter, shuffled, run_every=2)
    check_consistency(store, counter)
    assert toc_snapshot(store) == reference
    backwards = [list(reversed(b)) for b in reversed(small)]
    assert toc_snapshot(build(tmp_path / "back.db", counter, backwards)) == reference


def test_a_straddling_week_that_changes_rolls_up_both_its_months_again(
    tmp_path: Path, counter: TokenCounter
) -> None:
    """A month lists the weeks of its days and does not repeat their lines. 2024-W09 runs from
    26 February to 3 March: beta's history added in February changes the week's lines, so March
    (whose days did not change) must be summarised again too — the incremental build equals the
    one built from all the history at once."""
    start = int(datetime(2024, 2, 26, tzinfo=UTC).timestamp() * 1000)
    events = make_events(
        seed=0, sessions=12, per_session=(8, 20), start_ms=start, spread_ms=6 * 86_400_000
    )
    reference = toc_snapshot(build(tmp_path / "ref.db", counter, [events]))
    store = build(tmp_path / "inc.db", counter, [events[:56]])
    proc = processor(store, counter, ManualClock(FAR_FUTURE))
    store.append_events(events[56:])
    proc.run(rollup=False)
    proc.rollup(force=True, level="day")
    dirty = {(m.project, m.node_id) for m in store.dirty_periods("month")}
    assert ("beta", "toc:month:2024-02") in dirty and ("beta", "toc:month:2024-03") not in dirty
    proc.rollup(force=True)
    assert toc_snapshot(store) == reference


def test_a_late_event_joins_its_segment_and_a_front_insert_renames_it(
    tmp_path: Path, counter: TokenCounter
) -> None:
    def ev(i: int, minute: int, text: str) -> Event:
        t = T0 + minute * 60_000
        return Event(derived_ulid(t, f"late:{i}"), "s1", "p", "a", t, "user_message", "user", text)

    clock = ManualClock(FAR_FUTURE)
    store = open_store(tmp_path / "l.db", clock)
    proc = processor(store, counter, clock)
    store.append_events([ev(1, 0, "deploy the cache"), ev(2, 10, "cache deployed")])
    proc.run()
    (seg,) = store.list_nodes("p", level="segment")
    # An event between them joins the segment (same id, new version).
    store.append_events([ev(3, 5, "warming the cache")])
    proc.run()
    (same,) = store.list_nodes("p", level="segment")
    assert same.node_id == seg.node_id and same.event_count == 3 and same.version == 2
    # An event 20 minutes before the first joins at the front: the segment is re-identified.
    store.append_events([ev(4, -20, "plan the cache rollout")])
    proc.run()
    proc.rollup(force=True)
    (front,) = store.list_nodes("p", level="segment")
    assert front.node_id != seg.node_id and front.event_count == 4
    assert front.node_id == Calendar(UTC_ZONE).segment_node_id(T0 - 20 * 60_000, front.node_id[-6:])
    check_consistency(store, counter)
    day = store.find_node(front.parent_id or "", "p")
    assert day.child_node_ids == (front.node_id,)


class FlakySummarizer(ExtractiveSummarizer):
    """The extractive summariser, failing for segments that mention ``poison`` while ``broken``."""

    name = "flaky/1"

    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(counter)
        self.broken = True

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        if self.broken and any("poison" in e.text for e in events):
            raise SummarizerError("backend exploded on poison")
        return super().summarize_events(events, context)


def test_failures_are_quarantined_and_retried(tmp_path: Path, counter: TokenCounter) -> None:
    clock = ManualClock(FAR_FUTURE)
    store = open_store(tmp_path / "f.db", clock)
    flaky = FlakySummarizer(counter)
    proc = processor(store, counter, clock, summarizer=flaky)
    events = make_events(seed=9, sessions=6, per_session=(10, 20), start_ms=T0)
    poisoned = Event(
        derived_ulid(T0 - 86_400_000, "poison"),
        "poison-session",
        "alpha",
        "a",
        T0 - 86_400_000,
        "user_message",
        "user",
        "this message is poison for the summariser",
    )
    store.append_events(events[:40])
    store.add_outbox("events", {"first_seq": 10**9, "last_seq": 10**9 + 5})  # impossible range
    store.add_outbox("events", {"first_seq": 5})  # malformed
    store.add_outbox("reindex", {})  # a kind nobody handles (yet)
    store.append_events([poisoned, *events[40:]])
    report = proc.run()
    assert len(report.failed_entries) == 3
    assert any("impossible seq range" in f or "no events" in f for f in report.failed_entries)
    assert len(report.failed_segments) == 1 and "poison" in report.failed_segments[0]
    assert store.outbox_counts()["failed"] == 3
    # Later entries were still processed: every event but the poisoned one's segment is built.
    assert report.entries == 2 and report.events == len(events) + 1
    (failed,) = store.failed_segments()
    assert failed.session_id == "poison-session" and "exploded" in (failed.error or "")
    # Fix the backend, register the handler, retry: everything completes.
    flaky.broken = False
    handled: list[int] = []
    proc.handlers["reindex"] = lambda entry: handled.append(entry.entry_id)
    assert proc.retry_failed() == 4
    again = proc.run()
    proc.rollup(force=True)
    assert again.segments_built == 1 and len(handled) == 1
    assert len(again.failed_entries) == 2  # the bad payloads fail again, with their reasons
    assert store.failed_segments() == []
    check_consistency(store, counter)


def test_a_failed_write_rolls_back_its_batch_and_quarantines_only_its_segments(
    tmp_path: Path, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments are written in batches: a write failing half-way (its node already put) rolls
    the batch back, the batch is written again segment by segment, and only the failing
    session's segments are quarantined, with nothing of theirs left behind."""
    clock = ManualClock(FAR_FUTURE)
    store = open_store(tmp_path / "w.db", clock)
    proc = processor(store, counter, clock)
    events = make_events(seed=9, sessions=6, per_session=(10, 20), start_ms=T0)
    target = events[0].session_id
    store.append_events(events)
    put_grips = store.replace_node_grips

    def failing(project: str, node_id: str, grips: Sequence[Grip]) -> int:
        if grips and grips[0].session_id == target:
            raise StoreError("disk said no")
        return put_grips(project, node_id, grips)

    monkeypatch.setattr(store, "replace_node_grips", failing)
    report = proc.run()
    failed = store.failed_segments()
    assert failed and {s.session_id for s in failed} == {target}
    assert len(report.failed_segments) == len(failed) and report.segments_built > 0
    nodes = store.list_nodes("alpha") + store.list_nodes("beta")
    assert target not in {n.session_id for n in nodes}  # the put_node before the failure is gone
    built = {n.node_id for n in nodes if n.level == "segment"}
    sessions = {e.session_id for e in events} - {target}
    assert {n.session_id for n in nodes if n.level == "segment"} == sessions
    for seg in failed:
        assert seg.node_id not in built
        with pytest.raises(NotFoundError):
            store.get_node(seg.project, seg.node_id)
    monkeypatch.undo()
    assert proc.retry_failed() == len(failed)
    assert proc.run().segments_built == len(failed)
    proc.rollup(force=True)
    check_consistency(store, counter)


def test_a_failed_period_write_leaves_the_other_periods_rolled(
    tmp_path: Path, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Periods are written in batches too: one failing write is reported, its mark kept, and
    every other period of the batch rolls up."""
    clock = ManualClock(FAR_FUTURE)
    store = open_store(tmp_path / "r.db", clock)
    proc = processor(store, counter, clock)
    store.append_events(make_events(seed=9, sessions=6, per_session=(10, 20), start_ms=T0))
    proc.run(rollup=False)
    days = store.dirty_periods("day")
    assert len(days) > 2
    bad = days[1].node_id
    write = proc.builder.write_period

    def failing(prepared: PreparedPeriod) -> BuildOutcome:
        if prepared.period.node_id == bad:
            raise StoreError("disk said no")
        return write(prepared)

    monkeypatch.setattr(proc.builder, "write_period", failing)
    report = proc.rollup(force=True)
    assert len(report.failures) == 1 and bad in report.failures[0]
    assert report.rolled["day"] == len(days) - 1
    assert [m.node_id for m in store.dirty_periods("day")] == [bad]
    monkeypatch.undo()
    assert proc.rollup(force=True).rolled["day"] == 1
    check_consistency(store, counter)


def test_periods_exist_at_once_and_ages_throttle_resummarising(
    tmp_path: Path, counter: TokenCounter
) -> None:
    """A period with content gets a node in the first run, whatever its age; after that its
    re-summarising waits for the level's age (quiet for it, or last built that long ago); a period
    of long-past history rolls up at once; ``force`` ignores the ages."""
    now = T0 + 10 * 60_000
    clock = ManualClock(now)
    store = open_store(tmp_path / "r.db", clock)
    proc = processor(store, counter, clock)
    live = make_events(
        seed=1, sessions=1, per_session=(5, 5), start_ms=now - 30 * 60_000, spread_ms=1
    )
    live = [e for e in live if e.ts_ms <= now]
    assert live
    old = make_events(seed=2, sessions=3, per_session=(5, 8), start_ms=T0 - 400 * 86_400_000)
    store.append_events(live + old)
    report = proc.run()
    assert report.rollup is not None and report.rollup.pending == 0
    project = live[0].project
    cal = Calendar(UTC_ZONE)
    chain = {p.level: p.node_id for p in cal.chain(live[-1].ts_ms)}
    for level, node_id in chain.items():  # today's day, week, month and year exist at once
        assert node_id in {n.node_id for n in store.list_nodes(project, level=level)}, level
    check_consistency(store, counter)
    # New activity today: the day is dirty, but was built minutes ago and is not quiet yet.
    later = [
        Event(
            derived_ulid(now + 20 * 60_000 + i, f"late{i}"),
            live[0].session_id + "-b",
            project,
            "a",
            now + 20 * 60_000 + i * 1000,
            "user_message",
            "user",
            f"step {i}: the release checklist needs a rollback section",
        )
        for i in range(3)
    ]
    clock.set(now + 55 * 60_000)  # the new session's segment is closed (30-minute gap)
    store.append_events(later)
    again = proc.run()
    assert again.segments_built >= 1 and again.rollup is not None
    assert again.rollup.rolled["day"] == 0 and again.rollup.pending >= 1
    day = store.get_node(project, chain["day"])
    assert day.version == 1
    kids = {c.node_id for c in store.list_nodes(project, parent_id=chain["day"])}
    assert kids - set(day.child_node_ids)  # the new segment is reachable before the day's rebuild
    # An hour after its last build the day is re-summarised, though activity was recent.
    clock.advance(61 * 60_000 - (clock.now_ms() - day.created_ms) + 1)
    third = proc.rollup(level="day")
    assert third.rolled["day"] == 1
    assert set(store.get_node(project, chain["day"]).child_node_ids) == kids
    assert proc.rollup(level="day").rolled["day"] == 0  # idempotent
    assert proc.rollup().pending >= 1  # the week waits for its own age
    forced = proc.rollup(force=True)
    assert forced.rolled["week"] >= 1 and forced.pending == 0
    check_consistency(store, counter)
    checkpoint = store.get_checkpoint("rollup:year")
    assert isinstance(checkpoint, dict) and checkpoint["forced"] is True


BOUNDARIES = [
    ("America/New_York", datetime(2024, 3, 10, 6, 30, tzinfo=UTC)),  # DST starts
    ("Europe/London", datetime(2024, 10, 27, 0, 30, tzinfo=UTC)),  # DST ends
    ("Australia/Lord_Howe", datetime(2024, 4, 6, 14, 45, tzinfo=UTC)),
    ("Asia/Kolkata", datetime(2023, 12, 31, 18, 0, tzinfo=UTC)),  # new year, +05:30
    ("UTC", datetime(2020, 12, 31, 23, 0, tzinfo=UTC)),  # ISO week 53
    ("UTC", datetime(2024, 1, 31, 23, 30, tzinfo=UTC)),  # month end mid-week
]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    case=st.sampled_from(BOUNDARIES),
    offsets=st.lists(st.integers(-36 * 60, 36 * 60), min_size=1, max_size=25),
)
def test_nesting_across_boundaries(
    counter: TokenCounter, case: tuple[str, datetime], offsets: list[int]
) -> None:
    zone, moment = case
    tz = ZoneInfo(zone)
    base = int(moment.timestamp() * 1000)
    events = [
        Event(
            derived_ulid(base + m * 60_000, f"b{i}"),
            f"s{i % 3}",
            "p",
            "a",
            base + m * 60_000,
            "assistant_message",
            "assistant",
            f"step {i}: tuned the {['cache', 'index', 'router'][i % 3]} for release {m}",
        )
        for i, m in enumerate(offsets)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "b.db", counter, [events], tz=tz)
        try:
            check_consistency(store, counter)
            cal = Calendar(tz)
            for node in store.list_nodes("p"):
                if node.parent_id is None:
                    assert node.level == "year"
                    continue
                parent = store.get_node("p", node.parent_id)
                if node.level == "segment":
                    assert cal.from_node_id(parent.node_id).contains(node.start_ms)
                elif node.level == "day":
                    assert parent.start_ms <= node.start_ms and node.end_ms <= parent.end_ms
                elif node.level == "week":  # under every month holding one of its days
                    days = store.list_nodes("p", parent_id=node.node_id)
                    held = sorted({cal.period_of("month", d.start_ms).node_id for d in days})
                    assert list(node.parents) == held and node.parent_id == held[0]
                    for pid in node.parents:  # each parent exists and lists the week
                        assert node.node_id in store.get_node("p", pid).child_node_ids
                else:
                    assert parent.start_ms <= node.start_ms and node.end_ms <= parent.end_ms
        finally:
            store.close()
