"""The pipeline worker: drains the outbox into segments, builds their nodes, runs due rollups.

``Processor.run`` repeats three steps until the outbox is empty (or once, ``until_idle=False``):

1. **Drain.** Claim pending outbox entries in order. An ``events`` entry (``first_seq``,
   ``last_seq``) is segmented (``Segmenter``) and its membership, segment rows, ``events_fts``
   entries and completion are committed in *one* transaction, so a crash either keeps all of an
   entry or none of it; re-running an entry skips events already assigned (delivery is at least
   once, the effect exactly once). An entry that raises is marked failed with its error
   (``Store.fail_outbox``) and the queue moves on.
2. **Build.** Every segment whose membership changed (``built = 0``) is summarised and written
   (``TocBuilder.build_segment``), one transaction per segment; open segments are built too, so
   the TOC is never empty, and rebuilt when they grow. A segment whose build raises is
   quarantined with its error (``PipelineStore.fail_segment``) and skipped until
   ``retry_failed``.
3. **Roll up** the periods that are due (``rollup.run_rollups`` with the configured ages).

Everything is keyed deterministically — membership by event seq, segment ids by their first
event, grips by content, node versions by content comparison — so a run killed at any point and
restarted ends in the same TOC as an uninterrupted one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo

from memtoc.clock import Clock
from memtoc.config import DEFAULTS, Settings
from memtoc.errors import StoreError
from memtoc.model import Event, Grip, JsonValue, OutboxEntry, Summary
from memtoc.pipeline.periods import Calendar
from memtoc.pipeline.rollup import RollupAges, RollupReport, run_rollups
from memtoc.pipeline.segment import Segmenter
from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summary_pool import Pending, SummaryPool, default_workers, parse_workers
from memtoc.pipeline.toc import (
    WRITE_BATCH,
    WRITE_BATCH_S,
    PreparedSegment,
    SegmentJob,
    TocBuilder,
    summarize_segment,
)
from memtoc.store.base import DirtyPeriod, PipelineStore, SegmentRecord
from memtoc.text.fts_text import search_text
from memtoc.text.tokens import TokenCounter

_MINUTE = 60_000


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """The pipeline's knobs (filled from ``Settings`` at the entry points)."""

    segment_gap_minutes: int = DEFAULTS["segment_gap_minutes"]
    segment_max_tokens: int = DEFAULTS["segment_max_tokens"]
    segment_overlap_minutes: int = DEFAULTS["segment_overlap_minutes"]
    segment_overlap_tokens: int = DEFAULTS["segment_overlap_tokens"]
    rollup_day_age_minutes: int = DEFAULTS["rollup_day_age_minutes"]
    rollup_week_age_minutes: int = DEFAULTS["rollup_week_age_minutes"]
    rollup_month_age_minutes: int = DEFAULTS["rollup_month_age_minutes"]
    rollup_year_age_minutes: int = DEFAULTS["rollup_year_age_minutes"]
    expand_window_minutes: int = 60
    """How far (in time) ``expand`` reaches around a grip for its before/after events."""
    claim_batch: int = 8
    """Outbox entries claimed at a time (each is still committed on its own)."""
    build_batch: int = 256
    """Segments fetched per build round."""
    idle_poll_s: float = 0.05
    """How long a worker waits before asking again when pending entries are held by others."""
    workers: int | None = None
    """Processes that summarise large rounds (``summary_pool``); None: the cores this process
    may use; 0 or 1: none (everything in this process)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> PipelineConfig:
        """The settings' segment and rollup values; the other knobs keep their defaults."""
        return cls(
            segment_gap_minutes=settings.segment_gap_minutes,
            segment_max_tokens=settings.segment_max_tokens,
            segment_overlap_minutes=settings.segment_overlap_minutes,
            segment_overlap_tokens=settings.segment_overlap_tokens,
            rollup_day_age_minutes=settings.rollup_day_age_minutes,
            rollup_week_age_minutes=settings.rollup_week_age_minutes,
            rollup_month_age_minutes=settings.rollup_month_age_minutes,
            rollup_year_age_minutes=settings.rollup_year_age_minutes,
            workers=(
                None
                if settings.pipeline_workers == "auto"
                else parse_workers(settings.pipeline_workers)
            ),
        )

    @property
    def rollup_ages(self) -> RollupAges:
        return RollupAges(
            day_ms=self.rollup_day_age_minutes * _MINUTE,
            week_ms=self.rollup_week_age_minutes * _MINUTE,
            month_ms=self.rollup_month_age_minutes * _MINUTE,
            year_ms=self.rollup_year_age_minutes * _MINUTE,
        )


@dataclass(slots=True)
class ProcessReport:
    """What one ``Processor.run`` did."""

    entries: int = 0
    """Outbox entries completed."""
    events: int = 0
    """Events newly filed into segments."""
    segments_built: int = 0
    nodes_written: int = 0
    """New node versions (segments and periods)."""
    failed_entries: list[str] = field(default_factory=list)
    failed_segments: list[str] = field(default_factory=list)
    rollup: RollupReport = field(default_factory=RollupReport)
    seconds: float = 0.0

    @property
    def failures(self) -> int:
        return len(self.failed_entries) + len(self.failed_segments) + len(self.rollup.failures)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "entries": self.entries,
            "events": self.events,
            "segments_built": self.segments_built,
            "nodes_written": self.nodes_written,
            "failures": self.failures,
            "failed_entries": list(self.failed_entries),
            "failed_segments": list(self.failed_segments),
            "rollup": self.rollup.to_dict(),
            "seconds": round(self.seconds, 3),
        }


SegmentMade = tuple[Summary, list[Grip]]

EntryHandler = Callable[[OutboxEntry], None]
"""Handles an outbox entry of another kind (registered by the caller, e.g. ``forget``)."""

EventsHook = Callable[[Sequence[Event]], object]
"""Called with the events of each ``events`` entry once they are filed (the bookmark step,
``memtoc.retrieval.bookmark_step``). A hook that raises is reported in ``failed_entries`` and the
entry stays done: hooks keep their own checkpoints and catch up on the next call."""


class Processor:
    """Drains the outbox and keeps the TOC current. One per store; not thread-safe."""

    def __init__(
        self,
        store: PipelineStore,
        summarizer: Summarizer,
        counter: TokenCounter,
        config: PipelineConfig,
        clock: Clock,
        tz: tzinfo,
        *,
        worker_id: str = "memtoc-worker",
        handlers: Mapping[str, EntryHandler] | None = None,
        index_hook: Callable[[], object] | None = None,
        event_hooks: Sequence[EventsHook] = (),
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.calendar = Calendar(tz)
        self.worker_id = worker_id
        self.handlers = dict(handlers or {})
        self.event_hooks = tuple(event_hooks)
        self.index_hook = index_hook
        """Runs after each build round and after rollups (the embedding step, when configured)."""
        self.segmenter = Segmenter(
            store,
            counter,
            self.calendar,
            gap_ms=config.segment_gap_minutes * _MINUTE,
            max_tokens=config.segment_max_tokens,
        )
        self.builder = TocBuilder(
            store,
            summarizer,
            counter,
            self.calendar,
            clock,
            overlap_ms=config.segment_overlap_minutes * _MINUTE,
            overlap_tokens=config.segment_overlap_tokens,
        )
        workers = config.workers if config.workers is not None else default_workers()
        self.pool = SummaryPool(summarizer, workers)
        self._running = False
        """Where large rounds are summarised; its processes live for one ``run`` / ``rollup``."""

    # -- public -------------------------------------------------------------------------------
    def run(
        self,
        *,
        until_idle: bool = True,
        max_entries: int | None = None,
        progress: Callable[[ProcessReport], None] | None = None,
        rollup: bool = True,
    ) -> ProcessReport:
        """Drain the outbox, build changed segments, then roll up what is due."""
        self._running = True
        try:
            return self._run(until_idle, max_entries, progress, rollup)
        finally:
            self._running = False
            self.pool.close()

    def _run(
        self,
        until_idle: bool,
        max_entries: int | None,
        progress: Callable[[ProcessReport], None] | None,
        rollup: bool,
    ) -> ProcessReport:
        started = time.perf_counter()
        report = ProcessReport()
        while True:
            limit = self.config.claim_batch
            if max_entries is not None:
                limit = min(limit, max_entries - report.entries - len(report.failed_entries))
            claimed = self.store.claim_outbox(self.worker_id, limit) if limit > 0 else []
            filed: list[tuple[OutboxEntry, list[Event]]] = []
            for entry in claimed:
                self._handle(entry, report, filed)
            # the event hooks run while the round's segments are summarised (in the workers)
            self.build_segments(report, functools.partial(self._run_hooks, filed, report))
            self.pool.settle()
            if self.index_hook is not None:
                self.index_hook()
            if progress is not None:
                report.seconds = time.perf_counter() - started
                progress(report)
            if not until_idle:
                break
            if not claimed:
                # Nothing claimable. On a shared (PostgreSQL) outbox, entries may still be pending
                # behind another worker's session lease: wait for them rather than leaving the
                # queue to that one worker. Locally every pending entry is claimable.
                if limit > 0 and self.store.outbox_counts().get("pending", 0) > 0:
                    time.sleep(self.config.idle_poll_s)
                    continue
                break
        self.store.close_idle_segments(
            self.clock.now_ms() - self.config.segment_gap_minutes * _MINUTE
        )
        if rollup:
            roll = self.rollup()
            report.rollup = roll
            report.nodes_written += roll.written
        report.seconds = time.perf_counter() - started
        return report

    def rollup(self, *, force: bool = False, level: str | None = None) -> RollupReport:
        """Roll up dirty periods that are due (all of them with ``force``), bottom-up."""
        try:
            report = run_rollups(
                self.store,
                self.builder,
                self.calendar,
                self.clock,
                self.config.rollup_ages,
                force=force,
                level=level,
                pool=self.pool,
            )
        finally:
            self.pool.close()
        if self.index_hook is not None and report.written:
            self.index_hook()
        return report

    def retry_failed(self) -> int:
        """Put failed outbox entries and quarantined segments back in the queue; return how many."""
        return self.store.retry_failed_outbox() + self.store.retry_failed_segments()

    # -- steps --------------------------------------------------------------------------------
    def _handle(
        self,
        entry: OutboxEntry,
        report: ProcessReport,
        filed: list[tuple[OutboxEntry, list[Event]]],
    ) -> None:
        """File an entry's events (their hooks are left in ``filed``: ``_run_hooks``) or run
        its kind's handler (after the hooks of the entries before it)."""
        try:
            if entry.kind in FILE_KINDS:
                batch = self._batch(entry)
                report.events += self._apply_events(entry, batch)
                filed.append((entry, [e for _, e in batch]))
            elif entry.kind in self.handlers:
                self._run_hooks(filed, report)
                self.handlers[entry.kind](entry)
                self.store.complete_outbox([entry.entry_id])
            else:
                raise StoreError(f"outbox entry {entry.entry_id}: unknown kind {entry.kind!r}")
        except Exception as exc:  # quarantine the entry, keep draining
            message = f"{type(exc).__name__}: {exc}"
            self.store.fail_outbox(entry.entry_id, message)
            report.failed_entries.append(f"entry {entry.entry_id}: {message}")
            return
        report.entries += 1

    def _run_hooks(
        self, filed: list[tuple[OutboxEntry, list[Event]]], report: ProcessReport
    ) -> None:
        """The event hooks (bookmarks) on each filed entry's events (read once with
        ``_apply_events``), in entry order; ``filed`` is emptied."""
        for entry, events in filed:
            for hook in self.event_hooks:
                try:
                    hook(events)
                except Exception as exc:  # the entry is filed; the hook catches up next time
                    name = getattr(hook, "__qualname__", type(hook).__name__)
                    report.failed_entries.append(
                        f"entry {entry.entry_id} hook {name}: {type(exc).__name__}: {exc}"
                    )
        filed.clear()

    def _batch(self, entry: OutboxEntry) -> list[tuple[int, Event]]:
        """The live events of a ``FILE_KINDS`` entry's seq range (at least one)."""
        first, last = _seq_range(entry)
        batch = self.store.events_by_seq(first, last)
        if not batch:
            raise StoreError(f"outbox entry {entry.entry_id}: no events with seq {first}..{last}")
        return batch

    def _apply_events(self, entry: OutboxEntry, batch: list[tuple[int, Event]]) -> int:
        # the full-text forms of the batch's texts are made in the pool while this process
        # segments the batch (a pure function of each text)
        submit = self.pool.round(len(batch), min_jobs=INDEX_MIN_TEXTS)
        texts = [e.text for _, e in batch]
        chunks = [
            (texts[i : i + INDEX_CHUNK], submit(search_texts, texts[i : i + INDEX_CHUNK]))
            for i in range(0, len(texts), INDEX_CHUNK)
        ]
        results = self.segmenter.assign(batch)
        forms: dict[str, str] = {}
        for chunk, made in chunks:
            forms.update(zip(chunk, made.result(), strict=True))
        now = self.clock.now_ms()
        events = 0
        with self.store.transaction():
            for project, res in results.items():
                indexed = [
                    (seq, forms[text] if text in forms else search_text(text))
                    for seq, text in res.index_events
                ]
                self.store.write_segments(
                    res.upserts, res.deleted, project, res.membership, indexed
                )
                if res.deleted:
                    marks = []
                    for node_id in res.deleted:
                        day = self.calendar.from_key("day", node_id.split(":")[2][:10])
                        marks.append(DirtyPeriod(project, day.node_id, "day", day.start_ms, now))
                    self.store.mark_dirty(marks)
                events += res.events
            self.store.complete_outbox([entry.entry_id])
        return events

    def build_segments(
        self, report: ProcessReport, meanwhile: Callable[[], object] | None = None
    ) -> None:
        """Build every queued segment (changed membership), quarantining the ones that fail:
        each is read, summarised outside any transaction (in the worker processes when the round
        is large: ``summary_pool``), then written in order in batches (``WRITE_BATCH``).
        ``meanwhile`` runs once the first round's jobs are handed out, before anything is
        written (the bookmark pass: it writes nothing the builds read). Outside ``run`` (a
        forget's or a rebuild's re-derivation) the pool is shut down before it returns."""
        try:
            self._build_segments(report, meanwhile)
        finally:
            if not self._running:
                self.pool.close()

    def _build_segments(
        self, report: ProcessReport, meanwhile: Callable[[], object] | None
    ) -> None:
        while True:
            todo = self.store.unbuilt_segments(self.config.build_batch)
            if not todo:
                if meanwhile is not None:
                    meanwhile()
                return
            submit = self.pool.round(len(todo))
            pending: list[tuple[SegmentRecord, SegmentJob, Pending[SegmentMade]]] = []
            for seg in todo:
                try:
                    job = self.builder.segment_job(seg)
                except Exception as exc:
                    self._quarantine(seg, exc, report)
                    continue
                pending.append((seg, job, submit(summarize_segment, job)))
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            progressed = False
            batch: list[PreparedSegment] = []
            started = 0.0
            for seg, job, made in pending:
                try:
                    prepared = self.builder.segment_node(job, made.result())
                except Exception as exc:
                    self._quarantine(seg, exc, report)
                    continue
                if not batch:
                    started = time.perf_counter()
                batch.append(prepared)
                if len(batch) >= WRITE_BATCH or time.perf_counter() - started >= WRITE_BATCH_S:
                    progressed |= self._write_segments(batch, report)
                    batch = []
            progressed |= self._write_segments(batch, report)
            if not progressed:  # pragma: no cover - only under a concurrent re-segmentation
                return

    def _write_segments(self, batch: list[PreparedSegment], report: ProcessReport) -> bool:
        """Write prepared segments in one transaction; when one write fails, the batch is rolled
        back and written segment by segment, so only the failing one is quarantined. True when
        one was built (not stale)."""
        if not batch:
            return False
        try:
            with self.store.transaction():
                outcomes = [self.builder.write_segment(p) for p in batch]
        except Exception:
            outcomes = []
            for p in batch:
                try:
                    outcomes.append(self.builder.write_segment(p))
                except Exception as exc:
                    self._quarantine(p.seg, exc, report)
        progressed = False
        for outcome in outcomes:
            if outcome.stale:
                continue
            progressed = True
            report.segments_built += 1
            report.nodes_written += int(outcome.written)
        return progressed

    def _quarantine(self, seg: SegmentRecord, exc: Exception, report: ProcessReport) -> None:
        message = f"{type(exc).__name__}: {exc}"
        self.store.fail_segment(seg.project, seg.node_id, message)
        report.failed_segments.append(f"{seg.project} {seg.node_id}: {message}")


INDEX_CHUNK = 500
"""Texts per full-text job handed to the pool (``search_texts``)."""
INDEX_MIN_TEXTS = 2_000
"""Texts in a batch below which their full-text forms are made in this process."""


def search_texts(summarizer: object, texts: list[str]) -> list[str]:
    """The full-text form (``search_text``) of each text: a pool job (``summary_pool``)."""
    return [search_text(t) for t in texts]


FILE_KINDS = ("events", "refile")
"""Outbox entries that file the events of a seq range: ``events`` (written with the events; the
ranges tile the log, which ``verify`` checks) and ``refile`` (events unfiled to be filed again,
e.g. by a project merge: ``memtoc.merging``)."""


def _seq_range(entry: OutboxEntry) -> tuple[int, int]:
    payload = entry.payload
    try:
        first, last = int(payload["first_seq"]), int(payload["last_seq"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"outbox entry {entry.entry_id}: malformed payload {payload!r}") from exc
    if first < 1 or last < first:
        raise StoreError(f"outbox entry {entry.entry_id}: impossible seq range {first}..{last}")
    return first, last
