"""Forget: select events, purge them physically, and re-derive everything built from them.

``forget`` runs in two phases, both under ``PRAGMA secure_delete = ON``:

1. **Purge** (one transaction). For every session holding a forgotten event that was filed, the
   session's segments from the earliest affected one onward are retired (segment rows, nodes and
   *all* their versions, grips, search documents) and their events taken out of ``events_fts``;
   the forgotten events become tombstones (text and metadata purged, ``forgotten_ms`` set; the row
   stays so re-importing the transcript is still a duplicate); their vectors and every bookmark
   citing them are deleted; the surviving events are re-filed with the pipeline's own
   ``Segmenter`` (the segmentation is a pure function of a session's events, so the result is
   what the pipeline would have built had the events never existed); an audit row (ids and
   counts, never content) and a ``forget`` outbox entry naming the affected days are written.
2. **Re-derive** (``finish``, also the ``forget`` outbox handler, so a crash between the phases is
   completed by the next ``memtoc process``): the queued segments are summarised again from the
   remaining events (new grips, documents), the affected days, weeks, months and years are rolled
   up again bottom-up at once (or retired when emptied: ``derived.rebuild.reroll``, which
   ``memtoc rebuild`` uses too), their older versions and any retired
   node overlapping the forgotten span are deleted, vectors of changed documents are dropped (and
   re-embedded when an embedder is configured), and ``store/sqlite/scrub.py`` erases the bytes:
   the FTS indexes merged (deleted terms leave them), every table that can hold text rewritten
   (copies SQLite left in rebalanced pages' free space are gone), the WAL truncated once every
   reader on an older snapshot has finished (or the scrub stays pending, visibly, until then).

Selectors (``ForgetSelector``): explicit event ids, a session, a time range, or a query; several
combine with AND, ``project`` narrows any of them. A query selects **every** live event whose text
or metadata (keys and values) contains each of its words — a literal scan, not a ranked search: a
ranking would stop at some number of hits, and a forget must not leave matches behind silently.
Whoever wants a ceiling passes ``max_events`` (the CLI's ``--limit``): above it the forget is
refused with the count, never cut. A ``dry_run`` reports the whole selection and changes nothing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from memtoc import forget_log
from memtoc.derived.rebuild import reroll
from memtoc.errors import QueryError
from memtoc.model import JsonValue, OutboxEntry, iso_ms
from memtoc.pipeline.worker import Processor, ProcessReport
from memtoc.store.base import DirtyPeriod
from memtoc.store.capabilities import (
    EventRef,
    ForgetLogged,
    ForgetStore,
    LoggedForgetStore,
    generation_key,
)
from memtoc.text.fts_text import search_text

OUTBOX_KIND = "forget"


@dataclass(frozen=True, slots=True)
class ForgetSelector:
    """Which events to forget: every given filter must hold (AND)."""

    event_ids: tuple[str, ...] | None = None
    session_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    project: str | None = None
    query: str | None = None
    """Words that must all occur in an event's text or metadata; never stored (the audit says
    only that one was used)."""

    def validate(self) -> None:
        """Refuse a selector that names nothing (``project`` alone would be the whole project)."""
        if (
            self.event_ids is None
            and self.session_id is None
            and self.since_ms is None
            and self.until_ms is None
            and self.query is None
        ):
            raise QueryError(
                "forget needs a selector: event ids, a session, a time range or a query"
            )
        if self.event_ids is not None and not self.event_ids:
            raise QueryError("forget: the list of event ids is empty")
        if self.query is not None and not self.words:
            raise QueryError("forget: the query is empty")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        ):
            raise QueryError(
                f"forget: empty time range (since {iso_ms(self.since_ms)} is not before "
                f"until {iso_ms(self.until_ms)})"
            )

    @property
    def words(self) -> tuple[str, ...]:
        """The query's words (split on white space)."""
        return tuple(self.query.split()) if self.query is not None else ()

    def describe(self) -> dict[str, JsonValue]:
        """The selector for reports and the audit log: no content, not even the query's text."""
        return {
            "event_ids": len(self.event_ids) if self.event_ids is not None else None,
            "session_id": self.session_id,
            "since": iso_ms(self.since_ms) if self.since_ms is not None else None,
            "until": iso_ms(self.until_ms) if self.until_ms is not None else None,
            "project": self.project,
            "query": self.query is not None,
        }


@dataclass(slots=True)
class ForgetReport:
    """What a forget selected and did (``to_dict`` is the JSON of CLI, MCP and HTTP)."""

    dry_run: bool
    selector: dict[str, JsonValue]
    event_ids: list[str] = field(default_factory=list)
    """Events forgotten now (or that would be, in a dry run), in time order."""
    already_forgotten: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Requested ids that are not in the store."""
    sessions: int = 0
    projects: list[str] = field(default_factory=list)
    segments_removed: int = 0
    """Segments retired (their events were re-filed, or all forgotten)."""
    segments_rebuilt: int = 0
    grips_dropped: int = 0
    bookmarks_removed: int = 0
    vectors_removed: int = 0
    periods_rerolled: int = 0
    periods_retired: int = 0
    versions_purged: int = 0
    audit_id: int | None = None
    wal_truncated: bool | None = None
    """False: a reader on an older snapshot outlasted the wait; the WAL still holds the old
    pages until it ends (``status`` shows it; the next ``process`` finishes it)."""
    tables_rewritten: int = 0
    scrub_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def events(self) -> int:
        return len(self.event_ids)

    def counts(self) -> dict[str, JsonValue]:
        return {
            "events": self.events,
            "already_forgotten": len(self.already_forgotten),
            "missing": len(self.missing),
            "sessions": self.sessions,
            "segments_removed": self.segments_removed,
            "segments_rebuilt": self.segments_rebuilt,
            "grips_dropped": self.grips_dropped,
            "bookmarks_removed": self.bookmarks_removed,
            "vectors_removed": self.vectors_removed,
            "periods_rerolled": self.periods_rerolled,
            "periods_retired": self.periods_retired,
            "versions_purged": self.versions_purged,
        }

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "dry_run": self.dry_run,
            "selector": dict(self.selector),
            "event_ids": list(self.event_ids),
            "already_forgotten": list(self.already_forgotten),
            "missing": list(self.missing),
            "projects": list(self.projects),
            **self.counts(),
            "audit_id": self.audit_id,
            "wal_truncated": self.wal_truncated,
            "tables_rewritten": self.tables_rewritten,
            "scrub_seconds": round(self.scrub_seconds, 3),
            "seconds": round(self.seconds, 3),
        }


def select(store: ForgetStore, selector: ForgetSelector) -> tuple[list[EventRef], list[str]]:
    """The events the selector names (tombstones flagged) and the requested ids not stored."""
    selector.validate()
    refs = store.select_events(
        event_ids=list(selector.event_ids) if selector.event_ids is not None else None,
        project=selector.project,
        session_id=selector.session_id,
        since_ms=selector.since_ms,
        until_ms=selector.until_ms,
        contains=selector.words or None,
    )
    missing: list[str] = []
    if selector.event_ids is not None:
        stored = set(store.select_events(event_ids=list(selector.event_ids)))
        known = {r.event_id for r in stored}
        missing = [i for i in dict.fromkeys(selector.event_ids) if i not in known]
    return refs, missing


def forget(
    processor: Processor,
    store: ForgetStore,
    selector: ForgetSelector,
    *,
    dry_run: bool = False,
    max_events: int | None = None,
    described: dict[str, JsonValue] | None = None,
    log: bool = True,
) -> ForgetReport:
    """Forget the selected events (see the module docstring); ``dry_run`` changes nothing.
    ``max_events``: refuse (``QueryError``, nothing changed) when more live events match.
    ``described`` replaces the selector's description in the report and audit (executing a
    confirmed plan: the user's selector, resolved to the plan's ids). ``log``: record it in the
    forget log beside the store first (``memtoc.forget_log``; off only when re-applying it)."""
    started = time.perf_counter()
    refs, missing = select(store, selector)
    live = [r for r in refs if not r.forgotten]
    if max_events is not None and len(live) > max_events and not dry_run:
        raise QueryError(
            f"forget: {len(live)} events match, more than the limit of {max_events}; nothing "
            "was forgotten (narrow the selection, or raise the limit to forget them all)"
        )
    report = ForgetReport(
        dry_run=dry_run,
        selector=described if described is not None else selector.describe(),
        event_ids=[r.event_id for r in live],
        already_forgotten=[r.event_id for r in refs if r.forgotten],
        missing=missing,
        sessions=len({(r.project, r.session_id) for r in live}),
        projects=sorted({r.project for r in live}),
    )
    if dry_run or not live:
        report.seconds = time.perf_counter() - started
        return report
    now = processor.clock.now_ms()
    # the log first (synced): a restore of an older backup, or a crash before the commit below,
    # is then repaired by forgetting again (forget_log.reconcile)
    logged = None
    if log and isinstance(store, ForgetLogged):
        logged = forget_log.append(forget_log.log_path(store.path), now, live)
    with store.forget_guard():
        with store.transaction():
            payload = _purge(processor, store, live, now, report)
            if logged is not None:
                store.set_meta(forget_log.APPLIED_KEY, str(logged))
            report.audit_id = store.write_audit(
                now, report.selector, report.event_ids, report.counts()
            )
            payload["audit_id"] = report.audit_id
            entry_id = store.add_outbox(OUTBOX_KIND, payload)
        finish(processor, store, payload, report)
        store.complete_outbox([entry_id])
    report.seconds = time.perf_counter() - started
    return report


def _purge(
    processor: Processor,
    store: ForgetStore,
    live: list[EventRef],
    now: int,
    report: ForgetReport,
) -> dict[str, JsonValue]:
    """Phase 1, inside the caller's transaction; returns the ``forget`` outbox payload."""
    calendar = processor.calendar
    filed = store.segments_of([r.seq for r in live])
    sessions: dict[tuple[str, str], set[str]] = defaultdict(set)
    for ref in live:
        if ref.seq in filed:
            sessions[(ref.project, ref.session_id)].add(filed[ref.seq][1])
    days: dict[str, set[str]] = defaultdict(set)
    anchors: dict[tuple[str, str], tuple[int, str]] = {}
    for (project, session_id), node_ids in sorted(sessions.items()):
        segs = [store.get_segment(project, n) for n in node_ids]
        anchor = min(segs, key=lambda s: (s.start_ms, s.first_event_id))
        anchors[(project, session_id)] = (anchor.start_ms, anchor.first_event_id)
        old = store.segments_from(project, session_id, anchor.start_ms, anchor.first_event_id)
        old_ids = [s.node_id for s in old]
        report.grips_dropped += sum(len(store.grips_for_node(project, n)) for n in old_ids)
        store.unfile_events(sorted(store.members_of(project, old_ids)))
        store.write_segments([], old_ids, project, [], [])
        report.versions_purged += store.purge_node_versions(project, old_ids)
        report.segments_removed += len(old_ids)
        days[project].update(calendar.period_of("day", s.start_ms).node_id for s in old)
    store.tombstone_events([r.seq for r in live], now)
    report.vectors_removed += store.purge_event_vectors(live)
    report.bookmarks_removed += store.delete_bookmarks(
        store.bookmarks_citing([r.event_id for r in live])
    )
    # Re-file the survivors: the session's segmentation is a pure function of its events.
    for (project, session_id), (start_ms, first_id) in sorted(anchors.items()):
        survivors = store.session_events_from(project, session_id, start_ms, first_id)
        if not survivors:
            continue
        for proj, res in processor.segmenter.assign(survivors).items():
            indexed = [(seq, search_text(text)) for seq, text in res.index_events]
            store.write_segments(res.upserts, res.deleted, proj, res.membership, indexed)
            days[proj].update(calendar.period_of("day", u.start_ms).node_id for u in res.upserts)
    marks = [
        DirtyPeriod(project, day_id, "day", now, now)
        for project, ids in days.items()
        for day_id in sorted(ids)
    ]
    store.mark_dirty(marks)
    spans: dict[str, JsonValue] = {}
    for project in sorted({r.project for r in live}):
        times = [r.ts_ms for r in live if r.project == project]
        spans[project] = {
            "days": sorted(days.get(project, ())),
            "since_ms": min(times),
            "until_ms": max(times),
        }
    return {"projects": spans}


def finish(
    processor: Processor,
    store: ForgetStore,
    payload: dict[str, JsonValue],
    report: ForgetReport | None = None,
) -> ForgetReport:
    """Phase 2: rebuild segments, re-roll the affected periods, purge stale copies, scrub."""
    out = report or ForgetReport(dry_run=False, selector={})
    built = ProcessReport()
    processor.build_segments(built)
    out.segments_rebuilt += built.segments_built
    calendar = processor.calendar
    projects = payload.get("projects") or {}
    for project, info in sorted(projects.items()):
        # the affected days and every period above them, at once (``derived.rebuild.reroll``)
        rolled = reroll(
            store,
            processor.builder,
            calendar,
            project,
            info["days"],
            now_ms=processor.clock.now_ms(),
        )
        out.periods_rerolled += rolled.rerolled
        out.periods_retired += rolled.retired
        touched = list(rolled.node_ids)
        retired = store.retired_nodes_overlapping(
            project, int(info["since_ms"]), int(info["until_ms"])
        )
        out.versions_purged += store.purge_node_versions(project, [*touched, *retired])
    _refresh_vectors(processor, store, out)
    scrubbed = store.scrub(processor.clock.now_ms())
    out.wal_truncated = scrubbed.wal_truncated
    out.tables_rewritten = scrubbed.tables
    out.scrub_seconds = scrubbed.seconds
    audit_id = payload.get("audit_id")
    if isinstance(audit_id, int):
        store.update_audit_counts(audit_id, out.counts())
    return out


def finish_entry(processor: Processor, store: ForgetStore, entry: OutboxEntry) -> ForgetReport:
    """The ``forget`` outbox handler: ``finish`` a purge whose re-derivation was cut short."""
    with store.forget_guard():
        return finish(processor, store, dict(entry.payload))


def _refresh_vectors(processor: Processor, store: ForgetStore, out: ForgetReport) -> None:
    """Drop vectors of changed or removed documents (every embedder), re-embed with the
    configured one, and bump each touched embedder's generation so loaded indexes reload."""
    embedders = store.vector_embedders()
    removed, _touched = store.purge_stale_doc_vectors()
    out.vectors_removed += removed
    if processor.index_hook is not None:
        processor.index_hook()
    out.vectors_removed += store.purge_tombstone_vectors()
    if not embedders:
        return

    for name in sorted(embedders):
        key = generation_key(name)
        store.set_meta(key, str(int(store.get_meta(key) or 0) + 1))


def reconcile(processor: Processor, store: LoggedForgetStore) -> forget_log.ReconcileReport | None:
    """Bring the store in step with its forget log (``memtoc.forget_log``: after a restore, a
    copied file, a cut-short forget); None when they already agree."""
    if not forget_log.lagging(store):
        return None
    path = forget_log.log_path(store.path)
    logged = forget_log.read(path)
    report = forget_log.ReconcileReport(logged=len(logged))
    back = forget_log.alive(store, logged)
    if back:
        selector = ForgetSelector(event_ids=tuple(r.event_id for r in back))
        described: dict[str, JsonValue] = {"event_ids": len(back), "reapplied_from_log": True}
        forget(processor, store, selector, described=described, log=False)
    report.reforgotten = [r.event_id for r in back]
    held = {r.event_id for r in store.select_events(event_ids=[e.event_id for e in logged])}
    absent = {e.event_id: e for e in logged if e.event_id not in held}
    now = processor.clock.now_ms()
    report.tombstoned = store.insert_tombstones(
        [(e.event_id, e.ts_ms, e.project, e.session_id) for e in absent.values()], now
    )
    in_log = {e.event_id for e in logged}
    unlogged = [
        forget_log.LoggedEvent(event_id, ts_ms, project, session_id)
        for event_id, ts_ms, project, session_id, _ in store.logged_tombstones()
        if event_id not in in_log
    ]
    if unlogged:
        forget_log.append(path, now, unlogged)
        report.appended = len(unlogged)
    store.set_meta(forget_log.APPLIED_KEY, str(path.stat().st_size if path.exists() else 0))
    return report
