"""Rebuild everything derived from events, by part or all (``memtoc rebuild``).

Parts, in the order ``--all`` runs them (each leaves the store consistent on its own):

- **segments**: every session's segmentation is computed from scratch from its live events
  (``Segmenter.scan``, the pure function the pipeline converges to) and compared with what is
  stored; only segments whose row or membership differ are rewritten and queued, segments that no
  longer exist are retired (node, grips, documents), stray membership rows are dropped, nodes of
  missing segments retired, events missing from the BM25 index added; first, session spans
  (SQLite) are widened to cover their events and node rows re-pointed at their latest versions.
  Their nodes are built and the affected days, weeks, months and years rolled up again at once.
- **summaries**: node rows are re-pointed at their latest versions, every segment is summarised
  again with the configured summariser, then every period is rolled up again bottom-up (a period
  left without children is retired). A node whose content changes gets a new version, old
  versions stay; an unchanged one writes nothing. This is
  how existing history is re-summarised after switching the summariser (``summarizer`` is stored
  with each node).
- **grips**: each segment's grips are derived again from its bullets and events (rows changed in
  place are written again); a segment whose grips no longer match its bullets (its events
  changed) is summarised again; grips no bullet cites are dropped; periods citing a grip that
  does not exist are rolled up again.
- **bookmarks**: bookmarks and their checkpoints are deleted and the pipeline's bookmark pass
  replayed over the processed outbox batches in order (what processing those events produced);
  when a bookmark comes back, its last use (``last_relevant_ms``) is kept.
- **docs**: the search documents of every node, grip and bookmark are written again
  (``node_doc``, ``grip_doc``, ``bookmark_doc``) and documents of vanished items deleted.
- **fts**: both BM25 indexes re-indexed from their sources.
- **vectors**: every event and document embedded again by the configured embedder.

After a part that changed documents, the embedding step runs (new documents get vectors) unless
``vectors`` is rebuilt anyway. ``reroll`` — rolling up given periods at once, bottom-up — is the
piece ``forget`` needs too.

Rebuilds are idempotent: a second run finds nothing to change. Run them with no other worker
processing the same PostgreSQL store (on SQLite each session's re-segmentation is one write
transaction, so a concurrent ``memtoc serve`` only waits).
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from memtoc.errors import QueryError
from memtoc.model import Grip, JsonValue
from memtoc.pipeline.grips import segment_grips
from memtoc.pipeline.periods import Calendar, Period
from memtoc.pipeline.segment import fileable
from memtoc.pipeline.toc import TocBuilder, grip_doc, node_doc
from memtoc.pipeline.worker import Processor, ProcessReport
from memtoc.retrieval.bookmark_step import BookmarkStep, bookmark_doc, checkpoint_job
from memtoc.store.base import DocRow, PipelineStore, SegmentRecord
from memtoc.store.derived import DerivedStore
from memtoc.store.event_checks import storable_text
from memtoc.text.fts_text import search_text

PARTS: tuple[str, ...] = ("segments", "summaries", "grips", "bookmarks", "docs", "fts", "vectors")
PERIOD_ORDER: tuple[str, ...] = ("day", "week", "month", "year")
_FAR_PAST = -(1 << 62)
_DOCS_BATCH = 500


@dataclass(slots=True)
class RebuildReport:
    """What ``Rebuilder.run`` did, per part (counts), and how long it took."""

    parts: dict[str, dict[str, JsonValue]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, JsonValue]:
        """Each part's counts under its name, then ``notes`` and ``seconds``."""
        return {
            **{k: dict(v) for k, v in self.parts.items()},
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class RerollReport:
    rerolled: int = 0
    retired: int = 0
    stale: int = 0
    node_ids: tuple[str, ...] = ()
    """Every period visited (rebuilt, retired or left stale), bottom-up."""


def reroll(
    store: PipelineStore,
    builder: TocBuilder,
    calendar: Calendar,
    project: str,
    node_ids: Iterable[str],
    *,
    now_ms: int,
) -> RerollReport:
    """Roll up the given periods (node ids of days, weeks, months or years) and every period
    above them (``Calendar.summary_parents`` and ``parents``: a day's week and month, a week's
    months, a month's year) at once, bottom-up, whatever their age; clear their rollup marks (unless a concurrent change
    made a build stale, which leaves the mark for the next rollup)."""
    levels: dict[str, dict[str, Period]] = {lvl: {} for lvl in PERIOD_ORDER}
    todo: list[Period] = []
    for node_id in node_ids:
        try:
            todo.append(calendar.from_node_id(node_id))
        except QueryError:
            continue
    while todo:  # upward: the periods summarised from it and those listing it as a child
        period = todo.pop()
        if period.node_id in levels[period.level]:
            continue
        levels[period.level][period.node_id] = period
        todo.extend({*calendar.summary_parents(period), *calendar.parents(period)})
    rerolled = retired = stale = 0
    visited: list[str] = []
    for lvl in PERIOD_ORDER:
        # the marks as they stand once the level below is built (it marked these)
        marks = {m.node_id: m.seq for m in store.dirty_periods(lvl) if m.project == project}
        for node_id, period in sorted(levels[lvl].items()):
            visited.append(node_id)
            outcome = builder.build_period(
                project, period, activity_ms=min(period.end_ms - 1, now_ms)
            )
            if outcome.stale:
                stale += 1
                continue
            if node_id in marks:
                store.clear_dirty(project, node_id, marks[node_id])
            rerolled += int(not outcome.retired)
            retired += int(outcome.retired)
    return RerollReport(rerolled, retired, stale, tuple(visited))


def _grip_rows(grips: Iterable[Grip]) -> list[Grip]:
    """Grips as a store holds them (excerpts through ``storable_text``), in id order."""
    return sorted(
        (dataclasses.replace(g, excerpt=storable_text(g.excerpt)) for g in grips),
        key=lambda g: g.grip_id,
    )


def _shape(seg: SegmentRecord) -> tuple[object, ...]:
    return (
        seg.session_id,
        seg.start_ms,
        seg.end_ms,
        seg.first_seq,
        seg.last_seq,
        seg.event_count,
        seg.token_count,
        seg.first_event_id,
        seg.last_event_id,
    )


class Rebuilder:
    """Runs rebuild parts over one store with the pipeline's own components."""

    def __init__(
        self,
        processor: Processor,
        ops: DerivedStore,
        *,
        bookmarks: BookmarkStep | None = None,
        vectors: Callable[[], dict[str, JsonValue]] | None = None,
    ) -> None:
        """``bookmarks``: the pipeline's bookmark pass (None: bookmarks are not rebuilt);
        ``vectors``: re-embeds everything and reports (None: no embedder configured)."""
        self.processor = processor
        self.store = processor.store
        self.ops = ops
        self.calendar = processor.calendar
        self.bookmark_step = bookmarks
        self.embed_all = vectors

    def run(self, parts: Iterable[str], *, project: str | None = None) -> RebuildReport:
        """Rebuild ``parts`` (names from ``PARTS``) in dependency order, for ``project`` or all."""
        wanted = set(parts)
        unknown = wanted - set(PARTS)
        if unknown:
            raise QueryError(
                f"unknown rebuild part(s) {', '.join(sorted(unknown))} (expected {', '.join(PARTS)})"
            )
        if project is not None and project not in self.store.projects():
            raise QueryError(f"no project {project!r} in the store")
        report = RebuildReport()
        started = time.perf_counter()
        docs_changed = False
        for part in PARTS:
            if part not in wanted:
                continue
            t0 = time.perf_counter()
            if part == "vectors" and project is not None:
                report.notes.append("vectors are rebuilt for every project (one embedding run)")
            result = getattr(self, part)(project, report)
            result["seconds"] = round(time.perf_counter() - t0, 3)
            report.parts[part] = result
            docs_changed = docs_changed or part not in ("fts", "vectors")
        if docs_changed and "vectors" not in wanted and self.processor.index_hook is not None:
            self.processor.index_hook()  # new documents get vectors, vanished ones lose theirs
        report.seconds = time.perf_counter() - started
        return report

    # -- helpers --------------------------------------------------------------------------------
    def _projects(self, project: str | None) -> list[str]:
        return [project] if project is not None else self.store.projects()

    def _build(self) -> ProcessReport:
        built = ProcessReport()
        self.processor.build_segments(built)
        return built

    def _reroll(self, days: dict[str, set[str]]) -> RerollReport:
        total = RerollReport()
        now = self.processor.clock.now_ms()
        for project, ids in sorted(days.items()):
            r = reroll(self.store, self.processor.builder, self.calendar, project, ids, now_ms=now)
            total = RerollReport(
                total.rerolled + r.rerolled,
                total.retired + r.retired,
                total.stale + r.stale,
                (*total.node_ids, *r.node_ids),
            )
        return total

    def _day(self, ts_ms: int) -> str:
        return self.calendar.period_of("day", ts_ms).node_id

    def _retire_segment_nodes(self, project: str | None, days: dict[str, set[str]]) -> int:
        """Retire segment nodes whose segment row does not exist."""
        extra = self.ops.nodes_without_segment(project)
        for proj, node_id in extra:
            node = self.store.get_node(proj, node_id)
            days[proj].add(self._day(node.start_ms))
            with self.store.transaction():
                self.store.delete_node(proj, node_id)
        return len(extra)

    # -- parts ----------------------------------------------------------------------------------
    def segments(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        days: dict[str, set[str]] = defaultdict(set)
        written = removed = refiled = indexed = 0
        spans = self.ops.repair_session_spans()  # session reads search within them
        pointers = self.ops.repair_node_pointers()  # rollups find children by them
        sessions = self.ops.sessions(project)
        for proj, session_id in sessions:
            with self.store.transaction():  # SQLite: the write lock, so nobody files meanwhile
                w, r, f, i = self._resegment(proj, session_id, days)
            written, removed, refiled, indexed = written + w, removed + r, refiled + f, indexed + i
        stray = self.ops.stray_members()
        if project is not None:
            stray = [s for s, (p, _) in self.ops.filing_of(stray).items() if p == project]
        self.ops.unfile(stray)
        retired = self._retire_segment_nodes(project, days)
        missing = self.ops.segments_without_node(project)
        for proj, node_id in missing:
            self.ops.queue_segment_ids(proj, [node_id])
            days[proj].add(self._day(self.store.get_segment(proj, node_id).start_ms))
        built = self._build()
        rolled = self._reroll(days)
        return {
            "sessions": len(sessions),
            "session_spans_repaired": spans,
            "node_rows_repaired": pointers,
            "segments_written": written,
            "segments_removed": removed,
            "events_refiled": refiled,
            "events_indexed": indexed,
            "stray_members": len(stray),
            "nodes_retired": retired,
            "segments_built": built.segments_built,
            "nodes_written": built.nodes_written,
            "periods_rerolled": rolled.rerolled,
            "periods_retired": rolled.retired,
            "failures": [*built.failed_segments],
        }

    def _resegment(
        self, project: str, session_id: str, days: dict[str, set[str]]
    ) -> tuple[int, int, int, int]:
        store, ops = self.store, self.ops
        events = [  # an instant outside 1970..9999 (an older memtoc stored it) is never filed
            item
            for item in store.session_events_from(project, session_id, _FAR_PAST, "")
            if fileable(item[1])
        ]
        desired = self.processor.segmenter.scan(project, session_id, events)
        stored = {s.node_id: s for s in store.segments_from(project, session_id, _FAR_PAST, "")}
        members = ops.members_by_node(project, list(stored))
        filing = ops.filing_of([seq for seq, _ in events])
        wanted: dict[str, set[int]] = defaultdict(set)
        for seq, node_id in desired.membership:
            wanted[node_id].add(seq)
        upserts: list[SegmentRecord] = []
        membership: list[tuple[int, str]] = []
        for rec in desired.upserts:
            old = stored.get(rec.node_id)
            mine = wanted[rec.node_id]
            moved = [s for s in sorted(mine) if filing.get(s) != (project, rec.node_id)]
            unchanged = old is not None and _shape(old) == _shape(rec)
            if unchanged and not moved and members.get(rec.node_id, set()) == mine:
                continue
            upserts.append(dataclasses.replace(rec, closed=old.closed if old else rec.closed))
            membership.extend((s, rec.node_id) for s in moved)
            days[project].add(self._day(rec.start_ms))
        deleted = [node_id for node_id in stored if node_id not in wanted]
        for node_id in deleted:
            days[project].add(self._day(stored[node_id].start_ms))
        seqs = [seq for seq, _ in events]
        present = ops.indexed_seqs(seqs)
        index = [(seq, search_text(ev.text)) for seq, ev in events if seq not in present]
        if upserts or deleted or membership or index:
            # rows still pointing at a rewritten segment that are not its members are re-pointed
            # by another session's ``membership`` or dropped as stray once every session is done
            store.write_segments(upserts, deleted, project, membership, index)
        return len(upserts), len(deleted), len(membership), len(index)

    def summaries(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        days: dict[str, set[str]] = defaultdict(set)
        pointers = self.ops.repair_node_pointers()  # rollups find children by them
        retired = self._retire_segment_nodes(project, days)
        queued = self.ops.queue_segments(project)
        built = self._build()
        for proj in self._projects(project):
            for node in self.store.list_nodes(proj):
                days[proj].add(
                    self._day(node.start_ms) if node.level == "segment" else node.node_id
                )
        rolled = self._reroll(days)
        return {
            "node_rows_repaired": pointers,
            "segments_queued": queued,
            "segments_built": built.segments_built,
            "nodes_written": built.nodes_written,
            "nodes_retired": retired,
            "periods_rerolled": rolled.rerolled,
            "periods_retired": rolled.retired,
            "summarizer": self.processor.builder.summarizer.name,
            "failures": [*built.failed_segments],
        }

    def grips(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        restored = resummarised = dropped = rewritten = 0
        days: dict[str, set[str]] = defaultdict(set)
        nodes: set[tuple[str, str]] = set()
        for proj in self._projects(project):
            for node in self.store.list_nodes(proj):
                nodes.add((proj, node.node_id))
                if node.level != "segment":
                    continue
                events = self.store.segment_member_events(proj, node.node_id)
                texts = [b.text for b in node.bullets]
                grips = segment_grips(proj, node.node_id, node.session_id or "", events, texts)
                if [(g.grip_id,) for g in grips] != [b.grip_ids for b in node.bullets]:
                    self.ops.queue_segment_ids(proj, [node.node_id])
                    resummarised += 1
                    continue
                stored = self.store.grips_for_node(proj, node.node_id)
                with self.store.transaction():
                    if _grip_rows(stored) != _grip_rows(grips):
                        # a row changed in place: writing a grip keeps the first row of its id
                        self.store.replace_node_grips(proj, node.node_id, [])
                        rewritten += 1
                    restored += self.store.replace_node_grips(proj, node.node_id, grips)
                    self.store.put_docs([grip_doc(g) for g in grips])
        orphans: dict[tuple[str, str], int] = defaultdict(int)
        after = ""
        while batch := self.ops.scan_grips(after, 1_000):
            after = batch[-1].grip_id
            for g in batch:
                if (g.project, g.toc_node_id) not in nodes and (project in (None, g.project)):
                    orphans[(g.project, g.toc_node_id)] += 1
        for (proj, node_id), n in sorted(orphans.items()):
            with self.store.transaction():
                self.store.replace_node_grips(proj, node_id, [])
            dropped += n
        built = self._build()
        for proj in self._projects(project):
            for node in self.store.list_nodes(proj):
                if node.level == "segment":
                    continue
                cited = [g for b in node.bullets for g in b.grip_ids]
                if len(self.ops.existing_grips(cited)) < len(set(cited)):
                    days[proj].add(node.node_id)
        rolled = self._reroll(days)
        return {
            "grips_restored": restored,
            "grip_sets_rewritten": rewritten,
            "grips_dropped": dropped,
            "segments_resummarised": built.segments_built,
            "segments_stale": resummarised,
            "periods_rerolled": rolled.rerolled,
        }

    def bookmarks(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        step = self.bookmark_step
        if step is None or not step.config.enabled:
            report.notes.append("bookmarks are disabled (setting bookmarks): not rebuilt")
            return {"skipped": True}
        marks = self.store.list_bookmarks(project)
        usage = {b.bookmark_id: b.last_relevant_ms for b in marks}
        deleted = self.store.delete_bookmarks(list(usage))
        self.ops.delete_checkpoints([checkpoint_job(p, s) for p, s in self.ops.sessions(project)])
        passes = 0
        for first, last in self.ops.filed_ranges():
            events = [
                e for _, e in self.store.events_by_seq(first, last) if project in (None, e.project)
            ]
            if events:
                passes += step.after_events(events).passes
        kept = 0
        now = {b.bookmark_id for b in self.store.list_bookmarks(project)}
        for bookmark_id, used in usage.items():
            if bookmark_id in now:
                kept += self.store.touch_bookmarks([bookmark_id], used)
        return {
            "deleted": deleted,
            "written": len(now),
            "passes": passes,
            "usage_kept": kept,
        }

    def docs(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        dropped = self.ops.drop_stale_docs()
        written = 0

        def put(docs: Sequence[DocRow]) -> None:
            nonlocal written
            for i in range(0, len(docs), _DOCS_BATCH):
                with self.store.transaction():
                    self.store.put_docs(docs[i : i + _DOCS_BATCH])
            written += len(docs)

        for proj in self._projects(project):
            nodes = self.store.list_nodes(proj)
            put([node_doc(n) for n in nodes])
            put(
                [
                    grip_doc(g)
                    for n in nodes
                    if n.level == "segment"
                    for g in self.store.grips_for_node(proj, n.node_id)
                ]
            )
            put([bookmark_doc(b) for b in self.store.list_bookmarks(proj)])
        # the documents' BM25 index goes with them (rows of deleted documents cannot be told apart)
        indexed = self.ops.rebuild_text_index(events=False)["docs"]
        return {"documents": written, "stale_dropped": dropped, "indexed": indexed}

    def fts(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        if project is not None:
            report.notes.append("the BM25 indexes are rebuilt for every project")
        return dict(self.ops.rebuild_text_index())

    def vectors(self, project: str | None, report: RebuildReport) -> dict[str, JsonValue]:
        if self.embed_all is None:
            report.notes.append("no embedder configured: vectors not rebuilt")
            return {"skipped": True}
        return self.embed_all()
