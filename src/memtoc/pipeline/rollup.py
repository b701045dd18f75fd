"""Rollups: day ◀ segments, week ◀ days, month ◀ days (listing its weeks), year ◀ months.

A period is *dirty* when one of the nodes it is summarised from got a new version (or was
retired); the mark (``rollup_dirty``, written in the same transaction as the child) carries the
latest data instant among the changes (``activity_ms``).

**Periods exist as soon as they have content.** A dirty period without a node is built at once,
whatever its age, so the current year, month, week and day are in the TOC right after the first
``process`` that files their first segment. Their summaries are provisional and are rebuilt as
their children change; the level's minimum age (day 1 h, week and month 24 h, year 7 days by
default) throttles that re-summarising, never the existence. A dirty period that has a node is
*due* once the clock passes either

- ``min(activity_ms, period end) + age`` — it has been quiet for the age (history that was just
  imported rolls up at once, since its periods ended long ago), or
- the node's last version + age — a period that keeps changing is still re-summarised once per
  age (a live year at most weekly, a live day at most hourly).

``force`` ignores the ages.

One run goes bottom-up — days, then weeks, months and years — so the marks a day leaves on its
week and month (and a week on its months) are seen in the same run, and ``rollup(force=True)`` after processing yields the
whole TOC. Before each level a back-fill sweep marks every period whose children exist but whose
own node does not (however old), so no period is ever missed (a month is found through its weeks'
first months; the second month of a straddling week is marked by its days). The marks are the
job's checkpoint: a run that dies half-way resumes where it stopped, and a second run finds
nothing dirty and writes nothing (idempotent). A summary per level is kept in the ``rollup:{level}``
checkpoint.

Periods are summarised outside any transaction and written in batches (``WRITE_BATCH``: one
transaction writes the nodes and clears their marks; a failed write rolls the batch back and its
periods are built one by one). Several workers may roll up at once (team mode). A build whose
children (a month's: its days and the weeks it lists) changed while it was summarised writes
nothing (``TocBuilder.write_period`` checks under the node's lock) and is built again from the new
children; the mark is cleared only after a build that was not stale, and
``clear_dirty`` keeps a mark re-set meanwhile (each marking gets a greater generation, ``seq``, from
the store's counter — not a clock time, which equal or skewed clocks would repeat), so the last version written is always built from
the latest children.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from memtoc.clock import Clock
from memtoc.errors import NotFoundError, QueryError
from memtoc.model import JsonValue, Summary
from memtoc.pipeline.periods import PERIOD_LEVELS, Calendar, Period
from memtoc.pipeline.summary_pool import Pending, SummaryPool
from memtoc.pipeline.toc import (
    WRITE_BATCH,
    WRITE_BATCH_S,
    BuildOutcome,
    PeriodJob,
    PreparedPeriod,
    TocBuilder,
    summarize_period,
)
from memtoc.store.base import DirtyPeriod, PipelineStore

PeriodMade = tuple[Summary, list[tuple[str, ...]]]

ROLLUP_ORDER: tuple[str, ...] = tuple(reversed(PERIOD_LEVELS))
"""Bottom-up: day, week, month, year."""
CHILD_LEVEL = {"day": "segment", "week": "day", "month": "week", "year": "month"}
STALE_RETRIES = 3
"""Rebuilds of a period whose children changed while it was summarised, before leaving it dirty."""


@dataclass(frozen=True, slots=True)
class RollupAges:
    """Minimum age (ms) of a dirty period before it rolls up, per level."""

    day_ms: int = 60 * 60_000
    week_ms: int = 24 * 60 * 60_000
    month_ms: int = 24 * 60 * 60_000
    year_ms: int = 7 * 24 * 60 * 60_000

    def of(self, level: str) -> int:
        return {
            "day": self.day_ms,
            "week": self.week_ms,
            "month": self.month_ms,
            "year": self.year_ms,
        }[level]


@dataclass(slots=True)
class RollupReport:
    """What one rollup run did, per level."""

    rolled: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLLUP_ORDER, 0))
    """Periods (re)built per level (whether or not their content changed)."""
    written: int = 0
    """New node versions written."""
    retired: int = 0
    pending: int = 0
    """Dirty periods not yet due."""
    failures: list[str] = field(default_factory=list)
    stale: int = 0
    """Periods left dirty because their children kept changing while they were rebuilt."""

    def merge(self, other: RollupReport) -> None:
        for level, n in other.rolled.items():
            self.rolled[level] = self.rolled.get(level, 0) + n
        self.written += other.written
        self.retired += other.retired
        self.pending = other.pending
        self.failures.extend(other.failures)
        self.stale += other.stale

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "rolled": dict(self.rolled),
            "written": self.written,
            "retired": self.retired,
            "pending": self.pending,
            "failures": list(self.failures),
            "stale": self.stale,
        }


def run_rollups(
    store: PipelineStore,
    builder: TocBuilder,
    calendar: Calendar,
    clock: Clock,
    ages: RollupAges,
    *,
    force: bool = False,
    level: str | None = None,
    pool: SummaryPool | None = None,
) -> RollupReport:
    """Roll up every due dirty period, bottom-up; ``level`` restricts the run to one level.
    A level's periods are read, summarised (in ``pool``'s worker processes when there are many)
    and written in order, in batches."""
    if level is not None and level not in ROLLUP_ORDER:
        raise QueryError(f"not a rollup level: {level!r} (day, week, month or year)")
    report = RollupReport()
    _upgrade_scheme(store, calendar, clock.now_ms())
    for lvl in ROLLUP_ORDER:
        if level is not None and lvl != level:
            continue
        now = clock.now_ms()
        _backfill(store, lvl, now)
        rolled = pending = 0
        due: list[tuple[DirtyPeriod, Period]] = []
        for mark in store.dirty_periods(lvl):
            period = calendar.from_node_id(mark.node_id)
            if not force and not _due(store, mark, period, ages.of(lvl), now):
                pending += 1
                continue
            due.append((mark, period))
        submit = (pool or SummaryPool(builder.summarizer, 0)).round(len(due))
        jobs: list[tuple[DirtyPeriod, PeriodJob, Pending[PeriodMade] | None]] = []
        for mark, period in due:
            try:
                job = builder.period_job(mark.project, period, activity_ms=mark.activity_ms)
            except Exception as exc:  # one bad period must not stop the others
                report.failures.append(
                    f"{mark.project} {mark.node_id}: {type(exc).__name__}: {exc}"
                )
                continue
            jobs.append((mark, job, submit(summarize_period, job) if job.children else None))
        batch: list[tuple[DirtyPeriod, PreparedPeriod]] = []
        started = 0.0
        for mark, job, made in jobs:
            try:
                prepared = builder.period_node(job, made.result() if made is not None else None)
            except Exception as exc:  # one bad period must not stop the others
                report.failures.append(
                    f"{mark.project} {mark.node_id}: {type(exc).__name__}: {exc}"
                )
                continue
            if not batch:
                started = time.perf_counter()
            batch.append((mark, prepared))
            if len(batch) >= WRITE_BATCH or time.perf_counter() - started >= WRITE_BATCH_S:
                rolled += _write_periods(store, builder, batch, report)
                batch = []
        rolled += _write_periods(store, builder, batch, report)
        if pool is not None:
            pool.settle()
        report.rolled[lvl] = rolled
        report.pending += pending
        store.set_checkpoint(
            f"rollup:{lvl}",
            {"last_run_ms": now, "rolled": rolled, "pending": pending, "forced": force},
        )
    return report


def _due(store: PipelineStore, mark: DirtyPeriod, period: Period, age_ms: int, now: int) -> bool:
    """Quiet for ``age_ms``, or never built, or last built ``age_ms`` ago (module docstring)."""
    if now >= min(mark.activity_ms, period.end_ms) + age_ms:
        return True
    try:
        node = store.get_node(mark.project, mark.node_id)
    except NotFoundError:
        return True  # no node yet: a period exists as soon as it has content
    return now >= node.created_ms + age_ms


def _build(builder: TocBuilder, mark: DirtyPeriod, period: Period) -> BuildOutcome:
    """Build one period; when another worker changed its children meanwhile (a ``stale`` outcome,
    nothing written) build again from the new children, a few times at most."""
    outcome = builder.build_period(mark.project, period, activity_ms=mark.activity_ms)
    for _ in range(STALE_RETRIES):
        if not outcome.stale:
            break
        outcome = builder.build_period(mark.project, period, activity_ms=mark.activity_ms)
    return outcome


def _write_periods(
    store: PipelineStore,
    builder: TocBuilder,
    batch: list[tuple[DirtyPeriod, PreparedPeriod]],
    report: RollupReport,
) -> int:
    """Write prepared periods and clear their marks in one transaction; return how many rolled.
    A stale one (its children changed since they were read) is built again on its own; when a
    write fails, the batch is rolled back and each period built on its own, as if never batched."""
    if not batch:
        return 0
    try:
        with store.transaction():
            outcomes = [builder.write_period(prepared) for _, prepared in batch]
            for (mark, _), outcome in zip(batch, outcomes, strict=True):
                if not outcome.stale:
                    store.clear_dirty(mark.project, mark.node_id, mark.seq)
    except Exception:
        return sum(_build_one(store, builder, mark, p.period, report) for mark, p in batch)
    rolled = 0
    for (mark, prepared), outcome in zip(batch, outcomes, strict=True):
        if outcome.stale:
            rolled += _build_one(store, builder, mark, prepared.period, report)
            continue
        rolled += 1
        report.written += int(outcome.written)
        report.retired += int(outcome.retired)
    return rolled


def _build_one(
    store: PipelineStore,
    builder: TocBuilder,
    mark: DirtyPeriod,
    period: Period,
    report: RollupReport,
) -> int:
    """Build one period and clear its mark on their own; 1 when it rolled, 0 when it failed or
    stayed stale (its mark is left for a later run)."""
    try:
        outcome = _build(builder, mark, period)
    except Exception as exc:  # one bad period must not stop the others
        report.failures.append(f"{mark.project} {mark.node_id}: {type(exc).__name__}: {exc}")
        return 0
    if outcome.stale:  # children kept changing under us: leave the mark for a later run
        report.stale += 1
        return 0
    store.clear_dirty(mark.project, mark.node_id, mark.seq)
    report.written += int(outcome.written)
    report.retired += int(outcome.retired)
    return 1


SCHEME = 2
"""Version of the period hierarchy (1: a week under the month of its Thursday, months summarised
from weeks; 2: a week under every month it overlaps, months summarised from their days)."""


def _upgrade_scheme(store: PipelineStore, calendar: Calendar, now: int) -> None:
    """Once per store written under an older scheme: mark every day's week and month dirty, so
    weeks get both parents and months are re-summarised from their days at the next run."""
    if store.get_checkpoint("rollup:scheme") == SCHEME:
        return
    for project in store.projects():
        marks: dict[str, DirtyPeriod] = {}
        for day in store.list_nodes(project, level="day"):
            for p in calendar.summary_parents(calendar.from_node_id(day.node_id)):
                marks[p.node_id] = DirtyPeriod(project, p.node_id, p.level, p.end_ms, now)
        store.mark_dirty(list(marks.values()))
    store.set_checkpoint("rollup:scheme", SCHEME)


def _backfill(store: PipelineStore, level: str, now: int) -> None:
    """Mark periods of ``level`` that have child nodes but no node of their own."""
    orphans = store.orphan_parent_ids(CHILD_LEVEL[level])
    if orphans:
        store.mark_dirty([DirtyPeriod(p, node_id, level, end, now) for p, node_id, end in orphans])
