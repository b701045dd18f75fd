"""The TOC builder: turns a segment's events, or a period's children, into a versioned node.

``build_segment`` summarises a segment (``Summarizer.summarize_events`` with the previous segment's
overlap as context), grips every bullet to its events, and writes the node, its grips and their
search documents in one transaction — only as a new version when the content changed
(``Store.put_node`` compares). A written segment marks its day dirty for the rollups.

``build_period`` does the same for a day, ISO week, month or year from its children's latest nodes
(``summarize_children``); each bullet inherits the grips of the child bullets it matches. A month
is summarised from its *days* (a week can straddle two months) and lists as children the weeks
that overlap it; the others summarise and list the same children. A period left without children
is retired. A written or retired period marks dirty the periods summarised from it
(``Calendar.summary_parents``: a day its week and month, a week the months that list it, a month
its year).

Summaries are computed *outside* the write transaction (an LLM call may take seconds), so the
store is locked only to write: ``prepare_segment`` / ``prepare_period`` read and summarise,
``write_segment`` / ``write_period`` write. The worker and the rollups write prepared nodes in
batches (``WRITE_BATCH`` nodes or ``WRITE_BATCH_S`` seconds, one transaction each); when a write
fails, the batch is rolled back and its nodes are written one by one, so only the failing one is
quarantined, as without batching. That leaves a race between workers rolling up one period: the
write transaction takes the node's lock (``PipelineStore.lock_node``) and re-reads the versions of
the nodes it was built from (``input_versions``: the children, and a month's listed weeks, whose
lines it avoids); if they differ from the ones summarised, nothing is written and the outcome is
``stale`` (the rollup runner builds again), so a parent is never replaced by one built from older
children.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.clock import Clock
from memtoc.errors import NotFoundError
from memtoc.model import Bullet, Event, Grip, Summary, TocNode
from memtoc.pipeline.grips import inherited_grips, segment_grips
from memtoc.pipeline.periods import Calendar, Period
from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summarize.extractive import bookkeeping_summary, empty_summary
from memtoc.store.base import DirtyPeriod, DocRow, PipelineStore, SegmentRecord, Store
from memtoc.text.fts_text import search_text
from memtoc.text.tokens import TokenCounter

WRITE_BATCH = 64
"""Prepared nodes written in one transaction at most: one commit (and one flush of the full-text
indexes' pending terms) for many nodes, instead of one each."""
WRITE_BATCH_S = 1.0
"""Seconds after the first prepared node of a batch when the batch is written however small (a
slow summariser's nodes still show up as they come)."""
_HEAD_CHARS_PER_TOKEN = 8
"""Characters of a long text counted first to see whether it can fit the overlap at all (a
prefix has at most one token fewer than the whole text has up to the cut)."""


def node_summary(node: TocNode) -> Summary:
    """A stored node's summary, as ``summarize_children`` takes it."""
    return Summary(
        title=node.title,
        bullets=tuple(b.text for b in node.bullets),
        keywords=node.keywords,
        abstract=node.abstract,
        overview=node.overview,
        backend=node.summarizer,
        degraded=node.degraded,
        thread=node.session_id,
    )


def node_text(node: TocNode) -> str:
    """What a node's search document holds before indexing: title, bullets, keywords and L0."""
    return "\n".join(
        part
        for part in (
            node.title,
            *(b.text for b in node.bullets),
            " ".join(node.keywords),
            node.abstract,
        )
        if part
    )


def node_doc(node: TocNode) -> DocRow:
    """The search document of a node (``node_text``, with its identifier forms)."""
    return DocRow("node", node.node_id, node.project, node.start_ms, search_text(node_text(node)))


def grip_doc(grip: Grip) -> DocRow:
    return DocRow("grip", grip.grip_id, grip.project, grip.ts_ms, search_text(grip.excerpt))


@dataclass(frozen=True, slots=True)
class BuildOutcome:
    node_id: str
    written: bool
    """A new node version was written (False: content unchanged, or the node was retired)."""
    retired: bool = False
    stale: bool = False
    """The segment changed while it was being summarised; it stays queued for another build."""


@dataclass(frozen=True, slots=True)
class PreparedSegment:
    """A segment's node and grips, summarised from the events read with ``seg`` (not written)."""

    seg: SegmentRecord
    node: TocNode
    grips: list[Grip]
    day: Period


@dataclass(frozen=True, slots=True)
class PreparedPeriod:
    """A period's node summarised from ``children`` (None: it has none, so it is retired) and
    the periods to mark dirty when it is written (not written yet)."""

    project: str
    period: Period
    children: list[TocNode]
    marks: list[DirtyPeriod]
    node: TocNode | None
    inputs: list[tuple[str, int]]
    """``(node_id, version)`` of the nodes it was built from (``TocBuilder.input_versions``)."""


@dataclass(frozen=True, slots=True)
class SegmentJob:
    """A segment as read for summarising: its member events and the previous segment's overlap
    (``TocBuilder.segment_job``)."""

    seg: SegmentRecord
    members: list[Event]
    context: list[Event]


@dataclass(frozen=True, slots=True)
class PeriodJob:
    """A period as read for summarising (``TocBuilder.period_job``): the children it is
    summarised from, the ones it lists (a month's weeks), its parents and the marks to leave."""

    project: str
    period: Period
    children: list[TocNode]
    listed: list[TocNode]
    parents: tuple[Period, ...]
    marks: list[DirtyPeriod]
    inputs: list[tuple[str, int]]
    avoid: frozenset[str]


def summarize_segment(summarizer: Summarizer, job: SegmentJob) -> tuple[Summary, list[Grip]]:
    """A segment's summary and the grips of its bullets; reads nothing (a pure function of the
    job), so a worker process gives what this process would."""
    seg, members = job.seg, job.members
    # an agent's bookkeeping (warm-up prompts, command wrappers, notices) is never summarised
    events = [e for e in members if not e.bookkeeping]
    if events:
        summary = summarizer.summarize_events(events, job.context)
    elif members:  # nothing but bookkeeping: described as such, no summariser asked
        events = members
        summary = bookkeeping_summary(members, summarizer.name)
    else:
        summary = empty_summary(summarizer.name)
    grips = segment_grips(seg.project, seg.node_id, seg.session_id, events, summary.bullets)
    return summary, grips


def summarize_period(
    summarizer: Summarizer, job: PeriodJob
) -> tuple[Summary, list[tuple[str, ...]]]:
    """A period's summary from its children and, per bullet, the grips it inherits; reads
    nothing (a pure function of the job)."""
    summary = summarizer.summarize_children(
        [node_summary(c) for c in job.children], job.period.level, avoid=job.avoid
    )
    return summary, inherited_grips(summary.bullets, job.children)


class TocBuilder:
    """Builds segment and period nodes into a ``PipelineStore``."""

    def __init__(
        self,
        store: PipelineStore,
        summarizer: Summarizer,
        counter: TokenCounter,
        calendar: Calendar,
        clock: Clock,
        *,
        overlap_ms: int,
        overlap_tokens: int,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.counter = counter
        self.calendar = calendar
        self.clock = clock
        self.overlap_ms = overlap_ms
        self.overlap_tokens = overlap_tokens

    # -- segments -------------------------------------------------------------------------------
    def context_for(self, seg: SegmentRecord) -> list[Event]:
        """The previous segment's last events within the overlap window and token budget."""
        prev = self.store.previous_segment(seg)
        if prev is None or seg.start_ms - (prev.end_ms - 1) > self.overlap_ms:
            return []
        out: list[Event] = []
        used = 0
        for ev in reversed(self.store.segment_member_events(prev.project, prev.node_id)):
            if seg.start_ms - ev.ts_ms > self.overlap_ms:
                break
            left = self.overlap_tokens - used
            head = ev.text[: _HEAD_CHARS_PER_TOKEN * (left + 2)]
            if len(head) < len(ev.text) and self.counter.count(head) - 1 > left:
                break  # a long output: its head alone is over what is left (no need to count it)
            used += self.counter.count(ev.text)
            if used > self.overlap_tokens:
                break
            out.append(ev)
        out.reverse()
        return out

    def build_segment(self, seg: SegmentRecord) -> BuildOutcome:
        """Summarise, grip and write one segment (``prepare_segment`` then ``write_segment``)."""
        return self.write_segment(self.prepare_segment(seg))

    def prepare_segment(self, seg: SegmentRecord) -> PreparedSegment:
        """The segment's node and grips, from its events: reads only (no lock held while the
        summariser runs)."""
        job = self.segment_job(seg)
        return self.segment_node(job, summarize_segment(self.summarizer, job))

    def segment_job(self, seg: SegmentRecord) -> SegmentJob:
        """What summarising ``seg`` needs, read from the store (``summarize_segment`` then
        reads nothing, so it can run in another process: ``summary_pool``)."""
        members = self.store.segment_member_events(seg.project, seg.node_id)
        # an agent's bookkeeping (warm-up prompts, command wrappers, notices) is never summarised
        said = any(not e.bookkeeping for e in members)
        context = [e for e in self.context_for(seg) if not e.bookkeeping] if said else []
        return SegmentJob(seg, members, context)

    def segment_node(self, job: SegmentJob, made: tuple[Summary, list[Grip]]) -> PreparedSegment:
        """The prepared node of a segment summarised as ``made`` (``summarize_segment``)."""
        seg = job.seg
        summary, grips = made
        day = self.calendar.period_of("day", seg.start_ms)
        node = TocNode(
            node_id=seg.node_id,
            project=seg.project,
            level="segment",
            title=summary.title,
            start_ms=seg.start_ms,
            end_ms=seg.end_ms,
            bullets=tuple(
                Bullet(t, (g.grip_id,)) for t, g in zip(summary.bullets, grips, strict=True)
            ),
            keywords=summary.keywords,
            abstract=summary.abstract,
            overview=summary.overview,
            parent_id=day.node_id,
            parent_ids=(day.node_id,),
            session_id=seg.session_id,
            event_count=seg.event_count,
            token_count=seg.token_count,
            summarizer=summary.backend,
            degraded=summary.degraded,
        )
        return PreparedSegment(seg, node, grips, day)

    def write_segment(self, prepared: PreparedSegment) -> BuildOutcome:
        """Write a prepared segment in one transaction (joining the caller's, if any): nothing
        when its membership changed since it was read (``stale``)."""
        seg, node, grips, day = prepared.seg, prepared.node, prepared.grips, prepared.day
        with self.store.transaction():
            try:
                current: SegmentRecord | None = self.store.get_segment(seg.project, seg.node_id)
            except NotFoundError:  # re-segmented away while we summarised
                current = None
            if current is None or _membership(current) != _membership(seg):
                return BuildOutcome(seg.node_id, False, stale=True)
            stored, written = self.store.put_node(node)
            self.store.replace_node_grips(seg.project, seg.node_id, grips)
            if written:
                self.store.put_docs([node_doc(stored), *(grip_doc(g) for g in grips)])
                self.store.mark_dirty(
                    [DirtyPeriod(seg.project, day.node_id, "day", seg.end_ms, self.clock.now_ms())]
                )
            self.store.mark_segment_built(seg.project, seg.node_id)
        return BuildOutcome(seg.node_id, written)

    # -- periods --------------------------------------------------------------------------------
    def summary_children(self, project: str, period: Period) -> list[TocNode]:
        """The nodes a period is summarised from: a month's days, otherwise its children."""
        if period.level == "month":
            return self.store.list_nodes(
                project, level="day", since_ms=period.start_ms, until_ms=period.end_ms
            )
        return self.store.list_nodes(project, parent_id=period.node_id)

    def input_versions(self, project: str, period: Period) -> list[tuple[str, int]]:
        """``(node_id, version)`` of every node a period is built from, their content not read:
        ``summary_children``, and for a month also the weeks it lists (``weeks_of_days``: their
        ids are its children and their lines the ones it avoids)."""
        if period.level != "month":
            return self.store.list_node_versions(project, parent_id=period.node_id)
        days = self.store.list_node_versions(
            project, level="day", since_ms=period.start_ms, until_ms=period.end_ms
        )
        calendar = self.calendar
        wanted = {calendar.parents(calendar.from_node_id(day_id))[0].node_id for day_id, _ in days}
        weeks = self.store.list_node_versions(
            project, level="week", since_ms=period.start_ms, until_ms=period.end_ms
        )
        return days + [w for w in weeks if w[0] in wanted]

    def build_period(self, project: str, period: Period, *, activity_ms: int) -> BuildOutcome:
        """(Re)build a period node from its children; retire it when it has none left
        (``prepare_period`` then ``write_period``)."""
        return self.write_period(self.prepare_period(project, period, activity_ms=activity_ms))

    def prepare_period(self, project: str, period: Period, *, activity_ms: int) -> PreparedPeriod:
        """The period's node from its children's latest nodes (None when it has none): reads
        only (no lock held while the summariser runs)."""
        job = self.period_job(project, period, activity_ms=activity_ms)
        if not job.children:
            return self.period_node(job, None)
        return self.period_node(job, summarize_period(self.summarizer, job))

    def period_job(self, project: str, period: Period, *, activity_ms: int) -> PeriodJob:
        """What summarising a period needs, read from the store (``summarize_period`` then reads
        nothing, so it can run in another process: ``summary_pool``)."""
        children = self.summary_children(project, period)
        parents = self.calendar.parents(period)
        marked = self.calendar.summary_parents(period)
        if period.level == "week":  # the months its days lie in (one or two), which list it
            held = {self.calendar.period_of("month", d.start_ms) for d in children}
            parents = marked = tuple(p for p in parents if p in held) or parents
        now = self.clock.now_ms()
        marks = [DirtyPeriod(project, p.node_id, p.level, activity_ms, now) for p in marked]
        listed = children
        inputs = _versions(children)
        if children and period.level == "month":  # the weeks of its days (one may lie in two)
            listed = weeks_of_days(self.store, project, period.start_ms, period.end_ms, children)
            inputs += _versions(listed)
        avoid = (
            frozenset(b.text for c in listed for b in c.bullets)
            if listed is not children
            else frozenset()
        )
        return PeriodJob(project, period, children, listed, tuple(parents), marks, inputs, avoid)

    def period_node(
        self, job: PeriodJob, made: tuple[Summary, list[tuple[str, ...]]] | None
    ) -> PreparedPeriod:
        """The prepared node of a period summarised as ``made`` (``summarize_period``; None: it
        has no children, so it is retired)."""
        project, period, children, parents = job.project, job.period, job.children, job.parents
        if made is None:
            return PreparedPeriod(project, period, children, job.marks, None, [])
        summary, grips = made
        node = TocNode(
            node_id=period.node_id,
            project=project,
            level=period.level,
            title=summary.title,
            start_ms=period.start_ms,
            end_ms=period.end_ms,
            bullets=tuple(Bullet(t, g) for t, g in zip(summary.bullets, grips, strict=True)),
            keywords=summary.keywords,
            child_node_ids=tuple(c.node_id for c in job.listed),
            abstract=summary.abstract,
            overview=summary.overview,
            parent_id=parents[0].node_id if parents else None,
            parent_ids=tuple(p.node_id for p in parents),
            event_count=sum(c.event_count for c in children),
            token_count=sum(c.token_count for c in children),
            summarizer=summary.backend,
            degraded=summary.degraded,
        )
        return PreparedPeriod(project, period, children, job.marks, node, job.inputs)

    def write_period(self, prepared: PreparedPeriod) -> BuildOutcome:
        """Write (or retire) a prepared period in one transaction (joining the caller's, if
        any): nothing when its children changed since they were read (``stale``)."""
        project, period, marks = prepared.project, prepared.period, prepared.marks
        node = prepared.node
        if node is None:
            with self.store.transaction():
                self.store.lock_node(project, period.node_id)
                if self.input_versions(project, period):
                    return BuildOutcome(period.node_id, False, stale=True)
                existed = bool(self.store.node_versions(project, period.node_id))
                if existed:
                    self.store.delete_node(project, period.node_id)
                    self.store.mark_dirty(marks)
            return BuildOutcome(period.node_id, False, retired=existed)
        with self.store.transaction():
            # Another worker may have rolled this period up from newer children meanwhile: under
            # the node's lock, write only if the nodes it was built from are still the latest.
            self.store.lock_node(project, period.node_id)
            if self.input_versions(project, period) != prepared.inputs:
                return BuildOutcome(period.node_id, False, stale=True)
            stored, written = self.store.put_node(node)
            if written:
                self.store.put_docs([node_doc(stored)])
                self.store.mark_dirty(marks)
        return BuildOutcome(period.node_id, written)


def weeks_of_days(
    store: Store, project: str, start_ms: int, end_ms: int, days: list[TocNode]
) -> list[TocNode]:
    """The week nodes that hold one of ``days`` (the days of a month ``[start_ms, end_ms)``): a
    month's children. A week straddling two months is a child of each month it has days in."""
    wanted = {d.parent_id for d in days}
    weeks = store.list_nodes(project, level="week", since_ms=start_ms, until_ms=end_ms)
    return [w for w in weeks if w.node_id in wanted]


def _versions(nodes: list[TocNode]) -> list[tuple[str, int]]:
    return [(n.node_id, n.version) for n in nodes]


def _membership(seg: SegmentRecord) -> tuple[object, ...]:
    return (seg.start_ms, seg.end_ms, seg.event_count, seg.first_event_id, seg.last_event_id)
