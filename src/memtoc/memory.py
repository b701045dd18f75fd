"""The ``Memory`` facade: the one service layer every surface (CLI, MCP, HTTP, hooks) calls.

Build it from settings at an entry point (``Memory.open(settings)``) or from parts in tests and
embedding code (``Memory(store, ...)``). Every collaborator is injected: store, clock, id factory,
redactor, token counter, summariser.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memtoc import forget_log
from memtoc.clock import Clock, SystemClock
from memtoc.config import Settings
from memtoc.errors import EmbedderError, IngestError, QueryError, StoreError
from memtoc.ids import UlidFactory
from memtoc.model import (
    DEFAULT_TYPE_FOR_ROLE,
    Bookmark,
    Event,
    IngestReport,
    JsonValue,
    OutboxEntry,
    TocNode,
    iso_ms,
)
from memtoc.projects import ProjectRegistry, Scope
from memtoc.retrieval.bookmark_decay import effective_importance
from memtoc.retrieval.context import BOOKMARK_POOL, DEFAULT_BUDGET, ContextView, build_context
from memtoc.services import ROLLUP_LEVELS, store_timezone
from memtoc.store.capabilities import FileBackups, ForgetLogged, MemoryStore, ProjectMerging
from memtoc.text.tokens import TokenCounter, default_counter

# What only some verbs need is imported by them (ingest: the importer and redaction; search and
# recall: the ranking, numpy; forget, merge, drill, maintenance): a hook or `memtoc context`
# starts without it (docs/benchmarks.md, "Start-up").
if TYPE_CHECKING:
    from memtoc.derived.rebuild import RebuildReport
    from memtoc.forgetting import ForgetReport
    from memtoc.ingest.importer import CommitInfo, IngestOptions, ProgressFn
    from memtoc.ingest.redact import Redactor
    from memtoc.ingest.sources.base import EventDraft
    from memtoc.merging import MergeReport
    from memtoc.pipeline.embed_step import EmbedReport, EmbedStep
    from memtoc.pipeline.rollup import RollupReport
    from memtoc.pipeline.summarize.base import Summarizer
    from memtoc.pipeline.worker import PipelineConfig, Processor, ProcessReport
    from memtoc.retrieval.bookmark_step import BookmarkConfig, BookmarkReport, BookmarkStep
    from memtoc.retrieval.bookmarks import BookmarkDetector
    from memtoc.retrieval.drill import DrillResult
    from memtoc.retrieval.embedding_index import SemanticIndex
    from memtoc.retrieval.hybrid import Fusion, SearchResult
    from memtoc.retrieval.navigate import ExpandView, NodeView, TimelineView
    from memtoc.retrieval.node_focus import FocusHit
    from memtoc.retrieval.recall import RecallResult
    from memtoc.retrieval.recall_pack import Cite
    from memtoc.store.capabilities import AuditEntry
    from memtoc.store.derived import VerifyReport


log = logging.getLogger("memtoc")
TOUCH_EVERY_MS = 10 * 60_000
"""A bookmark used again within this time is not written again (its decay is in days)."""
FOCUS_CACHE_MS = 60_000
"""How long a focused node view's ranking of a project's events is reused (``Memory.node``)."""
FOCUS_CACHE_SIZE = 8
_R = TypeVar("_R", "SearchResult", "RecallResult")


class Memory:
    """Record, process and recall an agent's history."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        ids: UlidFactory | None = None,
        redactor: Redactor | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        tz: tzinfo | None = None,
        pipeline: PipelineConfig | None = None,
        semantic: SemanticIndex | None = None,
        fusion: Fusion | None = None,
        bookmark_detector: BookmarkDetector | None = None,
        bookmark_config: BookmarkConfig | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._touched: dict[str, int] = {}
        self._focus_cache: dict[tuple[str, str], tuple[int, list[FocusHit]]] = {}
        self._touch_pending: set[str] = set()
        self.clock = clock or SystemClock()
        self.ids = ids or UlidFactory(self.clock)
        self.redactor = redactor
        self.counter = counter or default_counter()
        self._summarizer = summarizer
        self.tz = tz or store_timezone(store, settings.timezone if settings else None)
        self._pipeline = pipeline
        self._processor: Processor | None = None
        # search (memtoc.retrieval.hybrid): the embedder loads lazily, on first search or process
        self._semantic = semantic
        self._fusion = fusion
        self._embed_step: EmbedStep | None = None
        # bookmarks (memtoc.retrieval.bookmark_step): a pass after each filed batch of events
        self._bookmark_detector = bookmark_detector
        self._bookmark_config = bookmark_config
        self._bookmark_step: BookmarkStep | None = None
        self.reconciled: forget_log.ReconcileReport | None = None
        """What ``open`` re-applied from the forget log (``memtoc.forget_log``), if anything."""
        self._logged_notes: set[str] = set()
        self._registry: ProjectRegistry | None = None

    @property
    def summarizer(self) -> Summarizer:
        """The summariser (the extractive default unless one was given)."""
        if self._summarizer is None:
            from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer

            self._summarizer = ExtractiveSummarizer(self.counter)
        return self._summarizer

    @property
    def pipeline(self) -> PipelineConfig:
        """Segmenting and rollup settings (from the settings, else the defaults)."""
        if self._pipeline is None:
            from memtoc.pipeline.worker import PipelineConfig

            s = self.settings
            self._pipeline = PipelineConfig.from_settings(s) if s else PipelineConfig()
        return self._pipeline

    @property
    def fusion(self) -> Fusion:
        """How search fuses BM25 and vector ranks (from the settings, else the defaults)."""
        if self._fusion is None:
            from memtoc.retrieval.hybrid import Fusion, fusion_from_settings

            s = self.settings
            self._fusion = fusion_from_settings(s) if s else Fusion()
        return self._fusion

    @property
    def semantic(self) -> SemanticIndex:
        """Vectors and the embedder (built on first use; pgvector on a PostgreSQL store)."""
        if self._semantic is None:
            from memtoc.retrieval.embedding_index import SemanticIndex

            s = self.settings
            self._semantic = SemanticIndex(
                self.store,
                kind=s.embedder if s else None,
                model=s.embed_model if s else None,
            )
        return self._semantic

    @classmethod
    def open(
        cls, settings: Settings, *, read_only: bool = False, busy_timeout_ms: int = 30_000
    ) -> Memory:
        """A Memory over the store the settings name (created on first use unless read-only).

        ``busy_timeout_ms``: how long a read or write waits for another process's lock (hooks
        pass a short one: they must never stall the agent).
        """
        from memtoc.services import build_summarizer
        from memtoc.store.open import open_store

        store = open_store(
            settings.db,
            durability=settings.durability,
            read_only=read_only,
            busy_timeout_ms=busy_timeout_ms,
        )

        redactor = None
        if settings.redact and not read_only:  # only writes redact
            from memtoc.ingest.redact import Redactor

            redactor = Redactor(disabled=settings.redact_disable)
        counter = default_counter(settings.home / "cache")
        # the extractive default is built on first use (a read needs no summariser)
        extractive = settings.summarizer == "extractive"
        summarizer = None if extractive else build_summarizer(settings, counter)
        memory = cls(
            store, settings=settings, redactor=redactor, counter=counter, summarizer=summarizer
        )
        try:
            memory.reconcile_forget_log()
        except BaseException:
            memory.close()
            raise
        return memory

    def reconcile_forget_log(self) -> forget_log.ReconcileReport | None:
        """Bring a SQLite store in step with its forget log (``memtoc.forget_log``: events
        forgotten since a restored backup was taken are forgotten again); a read-only store in
        which a forgotten event is back is refused. None when nothing needed doing."""
        store = self.store
        if not isinstance(store, ForgetLogged):
            return None  # a server's backups are its operator's (store/postgres/forget.py)
        if store.read_only:
            forget_log.check_read_only(store)
            return None
        if not forget_log.lagging(store):  # the usual case: no need to build the pipeline
            return None
        from memtoc import forgetting

        self.reconciled = forgetting.reconcile(self.processor, store)
        return self.reconciled

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingest -----------------------------------------------------------------------------------
    def _ingest_options(
        self,
        fmt: str,
        project: str | None,
        rescan: bool = False,
        default_cwd: str | None = None,
    ) -> IngestOptions:
        from memtoc.ingest.importer import IngestOptions
        from memtoc.ingest.redact_worker import helper_wanted

        s = self.settings
        if s is None:
            return IngestOptions(
                format=fmt, project=project, rescan=rescan, default_cwd=default_cwd
            )
        return IngestOptions(
            format=fmt,
            project=project or s.project,  # the setting is an explicit project, as on reads
            rescan=rescan,
            default_cwd=default_cwd,
            plain_cache=s.home / "cache" / "plain",
            include_thinking=s.include_thinking,
            follow_symlinks=s.follow_symlinks,
            max_event_bytes=s.max_event_bytes,
            batch_size=s.ingest_batch,
            redact_helper=s.redact and helper_wanted(s.redact_helper),
        )

    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        fmt: str = "auto",
        project: str | None = None,
        rescan: bool = False,
        progress: ProgressFn | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
        default_cwd: str | None = None,
        follow_symlinks: bool | None = None,
    ) -> IngestReport:
        """Import transcript files or folders; re-importing stores nothing twice.

        Files are resumed from their watermark (the byte offset already imported) unless
        ``rescan``, which re-reads everything and reports what is already stored as duplicates.
        ``default_cwd``: the working directory of sessions whose file names none (a hook passes
        the agent's), whose project the one rule then finds — instead of the default project.
        ``follow_symlinks``: follow links leading outside the folders given (default: the
        setting; an evaluation corpus of links to shared transcripts is followed).
        """
        from memtoc.ingest.importer import Importer

        options = self._ingest_options(fmt, project, rescan, default_cwd)
        if follow_symlinks is not None:
            options = dataclasses.replace(options, follow_symlinks=follow_symlinks)
        importer = Importer(
            self.store,
            redactor=self.redactor,
            options=options,
            clock=self.clock,
            on_commit=on_commit,
        )
        return importer.ingest_paths([Path(p) for p in paths], progress=progress)

    def ingest_records(
        self,
        records: Iterable[Mapping[str, JsonValue]],
        *,
        project: str | None = None,
        agent: str = "api",
        on_commit: Callable[[CommitInfo], None] | None = None,
    ) -> IngestReport:
        """Store events given as generic-JSONL-shaped mappings (DESIGN §6); bad ones are rejected."""
        from memtoc.ingest.importer import Importer
        from memtoc.ingest.sources.jsonl import parse_event

        importer = Importer(
            self.store,
            redactor=self.redactor,
            options=self._ingest_options("jsonl", project),
            clock=self.clock,
            on_commit=on_commit,
        )

        def drafts() -> Iterable[tuple[EventDraft | str, str]]:
            for record in records:
                if isinstance(record, Mapping) and "timestamp" not in record:
                    record = {**record, "timestamp": self.clock.now_ms()}
                draft = parse_event(record, agent)
                if isinstance(draft, str):
                    yield draft, ""
                else:
                    yield draft, draft.event_id or self.ids.new(draft.ts_ms)

        return importer.ingest_drafts(drafts(), source="records")

    def remember(
        self,
        text: str,
        *,
        project: str,
        session_id: str = "memory",
        role: str = "user",
        event_type: str | None = None,
        agent: str = "memtoc",
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> Event:
        """Record one event now (a note or decision an agent wants kept) and return it."""
        from memtoc.ingest.importer import Importer
        from memtoc.ingest.sources.base import EventDraft

        draft = EventDraft(
            session_id=session_id,
            ts_ms=self.clock.now_ms(),
            event_type=event_type or DEFAULT_TYPE_FOR_ROLE.get(role, ""),
            role=role,
            text=text,
            metadata=dict(metadata or {}),
            project=project,
            agent=agent,
        )
        importer = Importer(
            self.store, redactor=self.redactor, options=self._ingest_options("jsonl", project)
        )
        event_id = self.ids.new()
        report = importer.ingest_drafts([(draft, event_id)], source="remember")
        if report.rejections:
            raise IngestError(report.rejections[0].reason)
        return self.store.get_event(event_id)

    # -- reading events ---------------------------------------------------------------------------
    def events(
        self,
        *,
        project: str | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        return list(
            self.store.scan_events(
                project=self._id(project) if project is not None else None,
                session_id=session_id,
                since_ms=since_ms,
                until_ms=until_ms,
                limit=limit,
            )
        )

    # -- pipeline ---------------------------------------------------------------------------------
    @property
    def processor(self) -> Processor:
        if self._processor is None:
            from memtoc import forgetting
            from memtoc.pipeline.worker import Processor

            self._processor = Processor(
                self.store,
                self.summarizer,
                self.counter,
                self.pipeline,
                self.clock,
                self.tz,
                # embeddings (pgvector on PostgreSQL) and bookmarks, on both stores
                index_hook=self._embed_new,
                event_hooks=(self.bookmark_step.after_events,),
                # forget: a re-derivation cut short by a crash is finished by the next run
                handlers={forgetting.OUTBOX_KIND: self._finish_forget},
            )
        return self._processor

    def process(
        self,
        *,
        until_idle: bool = True,
        retry_failed: bool = False,
        rollup: bool = True,
        progress: Callable[[ProcessReport], None] | None = None,
    ) -> ProcessReport:
        """Drain the outbox: segments, summaries, grips, search indexes, then due rollups; and
        finish a forget's scrub left pending by a reader (``store/sqlite/scrub.py``)."""
        if retry_failed:
            self.processor.retry_failed()
        report = self.processor.run(until_idle=until_idle, rollup=rollup, progress=progress)
        if not self.store.read_only:
            self.store.finish_scrub(wait=False)
        return report

    def rollup(self, *, force: bool = False, level: str | None = None) -> RollupReport:
        """Roll up dirty days, weeks, months and years (those old enough, or all with ``force``)."""
        if level is not None and level not in ROLLUP_LEVELS:
            raise QueryError(f"--level must be one of {', '.join(ROLLUP_LEVELS)} (got {level!r})")
        return self.processor.rollup(force=force, level=level)

    # -- projects (memtoc.projects: the one rule) ----------------------------------------------------
    @property
    def registry(self) -> ProjectRegistry:
        """The project registry and rule over this store."""
        if self._registry is None:
            self._registry = ProjectRegistry(self.store, self.clock)
        return self._registry

    def scope(
        self,
        project: str | None = None,
        *,
        all_projects: bool = False,
        working_dir: str | Path | None = None,
    ) -> Scope:
        """Which project(s) a read is about: ``project`` (or the ``project`` setting) if given,
        else every project when asked, else the working directory's project, else the only one
        (``memtoc.projects``). Surfaces call this; an unknown project raises
        ``UnknownProjectError`` naming the known ones."""
        explicit = project or (self.settings.project if self.settings else None)
        return self.registry.scope(explicit, all_projects=all_projects, working_dir=working_dir)

    def project_for_write(
        self, project: str | None = None, *, working_dir: str | Path | None = None
    ) -> str:
        """The project a write (``remember``) goes to, by the rule reads use: ``project`` or the
        ``project`` setting (created when new), else the working directory's project (registered
        on first use), else the store's only project, else ``default``. A name given is redacted
        first, as the importer redacts the event's project: the registry never holds a secret the
        event does not, and the event lands in the project registered."""
        explicit = project or (self.settings.project if self.settings else None)
        if explicit:
            if self.redactor is not None:
                explicit, _ = self.redactor.redact(explicit)
            return self.registry.for_write(explicit)
        if working_dir is not None:
            found, _ = self.registry.for_directory(working_dir)
            if found is not None:
                return found.project
        known = self.registry.all(fresh=True)
        if len(known) == 1:
            return known[0].project
        return self.registry.for_write("default")

    def _id(self, project: str) -> str:
        """A project reference (id or name) as its id. A reference the registry does not know is
        taken as an id as is (rows put through the store directly); surfaces resolve names with
        ``scope`` first, which refuses unknown ones."""
        found = self.registry.find(project)
        return found.project if found is not None else project

    def _ids(self, project: str | None, projects: Iterable[str] | None) -> tuple[str, ...] | None:
        """Project references as ids; None (both absent) = every project; ``()`` (an empty
        ``projects`` given, e.g. a working directory with no memory yet) = none."""
        given = None if projects is None else tuple(projects)
        refs = [*([project] if project is not None else []), *(given or ())]
        if not refs:
            return () if given is not None else None
        return tuple(dict.fromkeys(self._id(r) for r in refs))

    def projects(self) -> list[dict[str, JsonValue]]:
        """Every project: id, readable name, root folders and event count (``/v1/projects``,
        ``memtoc projects list``)."""
        return [
            {**p.to_dict(), "events": self.store.count_events(p.project)}
            for p in self.registry.all(fresh=True)
        ]

    def rename_project(self, project: str, name: str) -> dict[str, JsonValue]:
        """Give a project a new readable name; its id (and every stored row) is unchanged."""
        return self.registry.rename(project, name).to_dict()

    def merge_projects(self, source: str, target: str, *, process: bool = True) -> MergeReport:
        """File project ``source``'s memory into ``target`` (names or ids): its events join the
        target and everything derived is rebuilt there (``memtoc.merging``); with ``process``
        the pipeline runs now (else the next ``memtoc process`` does it)."""
        from memtoc.merging import merge_projects

        store = self.store
        if not isinstance(store, ProjectMerging):
            raise StoreError(
                f"{store.location}: projects merge is not available on a PostgreSQL store yet"
            )
        src = self.registry.require(source).project
        dst = self.registry.require(target).project
        self.process(rollup=False)  # what was pending is filed first, under its own project
        report = merge_projects(store, src, dst)
        self.registry.all(fresh=True)
        if process:
            self.process()
        return report

    # -- navigation -------------------------------------------------------------------------------
    def _project(self, project: str | None) -> str:
        """One project for navigation: the given one, else the one rule's (``scope``: the
        ``project`` setting, else the store's only project)."""
        if project is not None:
            return self._id(project)
        scope = self.scope()
        if scope.project is None:
            raise QueryError(scope.note or "no project")
        return scope.project

    def toc(self, project: str | None = None) -> list[TocNode]:
        """The roots of a project's table of contents: its years, oldest first."""
        from memtoc.retrieval import navigate

        return navigate.toc_roots(self.store, self._project(project))

    def toc_hint(self, project: str | None = None) -> str:
        """Why a project's TOC has no years yet, and what to run (for an empty ``toc``)."""
        names = self.store.projects()
        if project is not None and project not in names:
            known = f" (projects: {', '.join(names)})" if names else ""
            return f"no events recorded for project {project!r}{known}: `memtoc ingest` adds them"
        if not names:
            return (
                "the store holds no events yet: `memtoc ingest PATH` (or the agent hooks) add them"
            )
        counts = self.store.outbox_counts()
        if counts.get("pending") or counts.get("claimed"):
            waiting = counts.get("pending", 0) + counts.get("claimed", 0)
            return (
                f"{waiting} batch(es) of events are not filed yet: run `memtoc process` "
                "(a running `memtoc serve` or `memtoc mcp` does it on its own)"
            )
        if counts.get("failed") or self.store.failed_segments(limit=1):
            return (
                "filing failed for some events: see `memtoc status`, then "
                "`memtoc process --retry-failed`"
            )
        return "events are filed but not rolled up into periods yet: run `memtoc rollup`"

    def node(
        self,
        node_id: str,
        *,
        project: str | None = None,
        tier: str = "L0",
        focus: str | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> NodeView:
        """A node's summary and a page of its children (``offset``, ``limit``: default 8, 5 with a
        focus), with its token count; with ``focus`` (a question) the children most about it come first (this memory's
        search over the node's events) and bullets not about it are left out."""
        scoped = self._id(project) if project is not None else None
        from memtoc.retrieval import navigate

        return navigate.node_view(
            self.store,
            self.counter,
            node_id,
            scoped,
            tier=tier,
            now_ms=self.clock.now_ms(),
            focus=focus,
            focus_hits=self._focus_hits,
            offset=offset,
            limit=limit,
        )

    def _focus_hits(self, focus: str, node: TocNode) -> tuple[list[FocusHit], str | None]:
        """The events recall's ranking finds for ``focus`` (``recall.rank_only``: the memory's
        best event ranking, without packing) inside ``node``'s period, with their scores, and
        why it ran degraded (no embedder: BM25 only) or None. The project's ranking is kept for
        ``FOCUS_CACHE_MS`` so walking down a tree with one question ranks once."""
        from memtoc.retrieval.node_focus import FocusHit
        from memtoc.retrieval.recall import rank_only

        now = self.clock.now_ms()
        key = (node.project, focus)
        cached = self._focus_cache.get(key)
        if cached is None or not 0 <= now - cached[0] <= FOCUS_CACHE_MS:
            ranking = rank_only(
                self.store,
                focus,
                projects=(node.project,),
                at_ms=now,
                tz=self.tz,
                semantic=self.semantic,
            )
            ranked = sorted(
                FocusHit(e.ts_ms, ranking.scores[i], e.session_id, e.event_id)
                for i, e in ranking.events.items()
                if i in ranking.scores
            )
            if len(self._focus_cache) >= FOCUS_CACHE_SIZE:
                self._focus_cache.clear()
            cached = self._focus_cache[key] = (now, ranked)
        hits = [h for h in cached[1] if node.start_ms <= h.ts_ms < node.end_ms]
        return hits, self.semantic.degraded or self.semantic.partial

    def expand(
        self, grip_id: str, *, before: int = 3, after: int = 3, focus: str | None = None
    ) -> ExpandView:
        """A grip's events plus ``before``/``after`` neighbours in the same session; with
        ``focus`` (a question), a long event is shown by its passages about it."""
        from memtoc.retrieval import navigate

        return navigate.expand(
            self.store,
            self.counter,
            grip_id,
            before=before,
            after=after,
            window_ms=self.pipeline.expand_window_minutes * 60_000,
            focus=focus,
        )

    def timeline(
        self,
        since_ms: int | None = None,
        until_ms: int | None = None,
        *,
        level: str = "day",
        project: str | None = None,
    ) -> TimelineView:
        """Nodes of one level overlapping ``[since_ms, until_ms)`` (default: the beginning, now),
        in time order — the one timeline every surface returns."""
        until = self.clock.now_ms() if until_ms is None else until_ms
        from memtoc.retrieval import navigate

        return navigate.timeline_view(self.store, self._project(project), since_ms, until, level)

    # -- session-start context and status (surfaces: MCP, hooks) ------------------------------------
    def context(self, project: str | None = None, *, budget: int = DEFAULT_BUDGET) -> ContextView:
        """What an agent should know at session start in ``project``, within ``budget`` tokens.

        ``project`` None: the one rule without a working directory (``scope``: the ``project``
        setting, else the store's only project; surfaces resolve the working directory's with
        ``scope`` first). See ``memtoc.retrieval.context``."""
        name = self._id(project) if project is not None else self.scope().project
        if name is None:
            return ContextView(None, budget, (), "", 0)
        marks = self.bookmarks(name, BOOKMARK_POOL)  # build_context keeps the distinct top ones
        view = build_context(self.store, self.counter, name, budget=budget, bookmarks=marks,
                             name=self.registry.name_of(name))  # fmt: skip
        self._used(item.ref for item in view.items if item.section == "bookmark")
        return view

    def status(self) -> dict[str, JsonValue]:
        """Store counts, queue depth, failures and the backends in use (degraded modes named)."""
        stats = self.store.stats()
        failed_segments = self.store.failed_segments(limit=5)
        embedder = self.semantic.embedder
        return {
            **stats,
            "failures": {
                "outbox": [f"{e.entry_id}: {e.error}" for e in self.store.failed_outbox(limit=5)],
                "segments": [f"{s.node_id}: {s.error}" for s in failed_segments],
            },
            "token_counter": self.counter.name,
            "token_counter_degraded": self.counter.name != "cl100k",
            "summarizer": self.summarizer.name,
            "summarizer_configured": self.settings.summarizer if self.settings else "extractive",
            "embedder": embedder.name if embedder is not None else None,
            "embedder_degraded": self.semantic.degraded or self.semantic.partial,
            "vectors": self.semantic.state().to_dict(),
            "summaries": self._summary_status(),
            # forget (store/sqlite/scrub.py): a forget whose WAL a reader still holds
            "forget_scrub_pending": self._scrub_pending(),
            # serve & status (surfaces/serve.py): the last run of each rollup level
            "rollups": {
                job.removeprefix("rollup:"): value
                for job, value in self.store.list_checkpoints("rollup:").items()
            },
        }

    def _summary_status(self) -> dict[str, JsonValue]:
        """Which backends built the TOC's latest nodes: how many the LLM fallback built
        (``degraded``, with a reason) and how many another backend than the configured one."""

        configured = self.summarizer.name
        by: dict[str, int] = {}
        degraded = other = total = 0
        reason: str | None = None
        for name, fell_back, n, why in self.store.derived().summary_backends():
            by[name] = by.get(name, 0) + n
            total += n
            if fell_back:
                degraded += n
                reason = reason or why
            elif name != configured:
                other += n
        out: dict[str, JsonValue] = {
            "configured": configured,
            "nodes": total,
            "by_backend": dict(by),
            "degraded": degraded,
            "degraded_reason": reason,
            "other_backend": other,
        }
        if degraded or other:
            out["hint"] = "`memtoc rebuild --summaries` re-summarises them"
        return out

    # -- search (memtoc.retrieval.hybrid, teleport, tiers) -----------------------------------------
    def search(
        self,
        query: str,
        *,
        project: str | None = None,
        projects: Iterable[str] | None = None,
        level: str | None = None,
        kinds: Iterable[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        session_id: str | None = None,
        role: str | None = None,
        limit: int = 10,
        depth: str = "L0",
        mode: str = "auto",
        at_ms: int | None = None,
        time_mode: str | None = None,
    ) -> SearchResult:
        """Teleport: BM25 and vectors fused (BM25-only, marked ``degraded``, without an embedder)
        over nodes, grips, bookmarks and events; items at ``depth`` (L0, L1 or L2).

        A time expression in the query ("last week", "before the migration") is resolved at
        ``at_ms`` (default: now) in the store's time zone and applied as ``time_mode`` (``boost``:
        the window's items first; ``filter``: only them; ``off``; see
        ``memtoc.retrieval.time_search``); ``time_range`` reports it."""
        from memtoc.retrieval.hybrid import SearchResult
        from memtoc.retrieval.teleport import SearchFilters
        from memtoc.retrieval.time_search import DEFAULT_TIME_MODE, time_search

        scope = self._ids(project, projects)
        if scope == ():
            return SearchResult(query, "bm25", None, None, depth, ())
        filters = SearchFilters(
            projects=scope,
            kinds=tuple(kinds) if kinds is not None else None,
            levels=(level,) if level is not None else None,
            since_ms=since_ms,
            until_ms=until_ms,
            session_id=session_id,
            role=role,
        )
        result = time_search(
            self.store,
            self.counter,
            query,
            filters,
            reference_ms=at_ms if at_ms is not None else self.clock.now_ms(),
            tz=self.tz,
            time_mode=time_mode or DEFAULT_TIME_MODE,
            semantic=self.semantic,
            limit=limit,
            depth=depth,
            mode=mode,
            fusion=self.fusion,
        )
        self._used(item.id for item in result.items if item.kind == "bookmark")
        return self._provenance(result)

    def _provenance(self, result: _R) -> _R:
        """``result`` with its summaries' provenance: those built by the extractive fallback or
        by another backend than the configured one are listed and named in ``degraded`` (and
        logged once), never passed off as the configured summariser's."""
        from memtoc.retrieval.provenance import summary_provenance

        found = summary_provenance(result.items, self.summarizer.name)
        if found is None:
            return result
        note = found.describe()
        if note not in self._logged_notes:
            self._logged_notes.add(note)
            log.warning("%s", note)
        degraded = "; ".join(x for x in (result.degraded, note) if x)
        return dataclasses.replace(result, summaries=found.to_dict(), degraded=degraded)

    # -- drill-down and time in queries (memtoc.retrieval.drill, time_search) ---------------------
    def drill(
        self,
        query: str,
        *,
        project: str | None = None,
        projects: Iterable[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        at_ms: int | None = None,
        beam: int | None = None,
        segments: int | None = None,
        limit: int = 10,
        depth: str = "L0",
    ) -> DrillResult:
        """Drill-down: year → month → week → day → segment, each step inside the chosen parents'
        periods, then the best events there (fallback: flat search). A time expression in the
        query is resolved at ``at_ms`` (default: now) and restricts the roots."""
        from memtoc.retrieval.drill import DEFAULT_BEAM, DEFAULT_SEGMENTS, drill
        from memtoc.retrieval.drill_result import DrillResult

        scope = self._ids(project, projects)
        if scope == ():
            return DrillResult(query, depth, (), ())
        return drill(
            self.store,
            self.counter,
            query,
            projects=list(scope) if scope else None,
            semantic=self.semantic,
            at_ms=at_ms if at_ms is not None else self.clock.now_ms(),
            tz=self.tz,
            since_ms=since_ms,
            until_ms=until_ms,
            beam=beam if beam is not None else DEFAULT_BEAM,
            segments=segments if segments is not None else DEFAULT_SEGMENTS,
            limit=limit,
            depth=depth,
        )

    # -- recall: budgeted context (memtoc.retrieval.recall) ---------------------------------------
    def recall(
        self,
        query: str,
        *,
        budget: int = 1_000,
        project: str | None = None,
        projects: Iterable[str] | None = None,
        at_ms: int | None = None,
        time_limit_ms: float | None = None,
        cite: Cite = False,
    ) -> RecallResult:
        """The best context for ``query`` within ``budget`` tokens: matching bookmarks (their
        events), then events, grips and segments by recall's ranking, each stepped down a tier
        rather than cut, in time order. ``at_ms`` (default: now) is the reference time of "last
        week"; ``time_limit_ms`` (default: setting ``recall_time_limit_ms``, 1,000) returns the
        best so far, marked ``truncated``."""
        from memtoc.retrieval.recall import DEFAULT_TIME_LIMIT_MS, RecallResult
        from memtoc.retrieval.recall import recall as assemble_recall

        scope = self._ids(project, projects)
        at = at_ms if at_ms is not None else self.clock.now_ms()
        if scope == ():
            return RecallResult(query, budget, 0, (), at, "bm25", None, False, cite=cite)
        limit = time_limit_ms
        if limit is None:
            s = self.settings
            limit = s.recall_time_limit_ms if s is not None else DEFAULT_TIME_LIMIT_MS
        # loading (the embedder, its vectors and vocabulary) is not charged to the time limit
        self.warm()
        result = assemble_recall(
            self.store,
            self.counter,
            query,
            budget=budget,
            projects=scope,
            at_ms=at,
            tz=self.tz,
            semantic=self.semantic,
            time_limit_ms=limit,
            cite=cite,
        )
        self._used(item.id for item in result.items if item.kind == "bookmark")
        if result.truncated:
            log.warning("recall %r cut by its time limit: %s", query[:80], result.degraded)
        return self._provenance(result)

    def warm(self) -> float:
        """Load what a first query would (the embedder, its vectors, its vocabulary) and return
        the seconds it took: queries call it before their clock starts, and long-lived processes
        (``memtoc mcp``, ``memtoc serve``) at start-up, so no time limit pays for loading."""
        started = time.perf_counter()
        self.semantic.warm(vocabulary=True)
        return time.perf_counter() - started

    def _embed_new(self) -> EmbedReport | None:
        if self._embed_step is None:
            self._embed_step = self.semantic.embed_step()
        if self._embed_step is None:
            return None
        try:
            report = self._embed_step.run()
            if report.changed:
                self.semantic.invalidate()
            return report
        except EmbedderError as exc:
            # A failing embedder must not stop the pipeline: search degrades to BM25-only and
            # reports why (status, search output, log); `rebuild --vectors` catches up later.
            log.warning("embedding failed, search continues BM25-only: %s", exc)
            self.semantic.mark_failed(f"failed while embedding: {exc}")
            self._embed_step = None
            return None

    def rebuild_fts(self) -> dict[str, int]:
        """Re-index events and docs for BM25 with the current tokenisation (``rebuild --fts``)."""

        return self.store.derived().rebuild_text_index()

    def rebuild_vectors(self) -> EmbedReport:
        """Re-embed every event and doc with the configured embedder (``memtoc rebuild --vectors``)."""
        step = self.semantic.embed_step()
        if step is None:
            raise EmbedderError(self.semantic.degraded or "no embedder")
        report = step.rebuild()
        self._embed_step = None
        self.semantic.invalidate()
        return report

    def rebuild(
        self, parts: Iterable[str] | None = None, *, project: str | None = None
    ) -> RebuildReport:
        """Re-derive ``parts`` of what is built from events (``memtoc rebuild``; see
        ``memtoc.derived.rebuild``): segments, summaries (nodes and their versions), grips,
        bookmarks, search docs, FTS, vectors — by part or all. Summaries are rebuilt with the
        configured summariser, vectors with the configured embedder (skipped, with a note,
        without one)."""
        from memtoc.derived.rebuild import PARTS, Rebuilder

        parts = PARTS if parts is None else parts

        def vectors() -> dict[str, JsonValue]:
            embedder = self.semantic.embedder
            assert embedder is not None
            return {"embedder": embedder.name, **self.rebuild_vectors().to_dict()}

        rebuilder = Rebuilder(
            self.processor,
            self.store.derived(),
            bookmarks=self.bookmark_step,
            vectors=vectors if self.semantic.embedder is not None else None,
        )
        report = rebuilder.run(parts, project=project)
        if "vectors" in set(parts) and self.semantic.embedder is None:
            report.notes.append(f"vectors not rebuilt: {self.semantic.degraded}")
        return report

    # -- bookmarks (memtoc.retrieval.bookmarks, bookmark_step) -------------------------------------
    @property
    def bookmark_step(self) -> BookmarkStep:
        """The bookmark pass the pipeline runs after filing events (LLM detector when the
        summariser is an LLM backend, else extractive)."""
        if self._bookmark_step is None:
            from memtoc.retrieval.bookmark_step import BookmarkConfig, BookmarkStep

            config = self._bookmark_config or (
                BookmarkConfig.from_settings(self.settings) if self.settings else BookmarkConfig()
            )
            detector = self._bookmark_detector
            if detector is None and self.settings is not None:
                from memtoc.retrieval.bookmarks_llm import build_bookmark_detector

                detector = build_bookmark_detector(self.settings)
            self._bookmark_step = BookmarkStep(
                self.store,
                self.counter,
                self.clock,
                detector=detector,
                config=config,
            )
        return self._bookmark_step

    def bookmarks(
        self, project: str | None = None, limit: int = 20, *, touch: bool = False
    ) -> list[Bookmark]:
        """Bookmarks (one project or all), by importance with decay at this memory's clock.

        ``touch`` marks the returned ones as used now (their decay restarts).
        """
        now = self.clock.now_ms()
        marks = self.store.list_bookmarks(self._id(project) if project is not None else None)
        marks.sort(key=lambda b: (-effective_importance(b, now), -b.created_ms, b.bookmark_id))
        chosen = marks[: max(0, limit)]
        if touch and chosen:
            self.store.touch_bookmarks([b.bookmark_id for b in chosen], now)
        return chosen

    def refresh_bookmarks(self, project: str | None = None, *, rebuild: bool = False) -> int:
        """Re-scan events for bookmarks; return how many were written (0 when nothing changed)."""
        return self.refresh_bookmarks_report(project, rebuild=rebuild).written

    def refresh_bookmarks_report(
        self, project: str | None = None, *, rebuild: bool = False
    ) -> BookmarkReport:
        """``refresh_bookmarks`` with the full report (passes, deletions, degraded detectors)."""
        return self.bookmark_step.refresh(project, rebuild=rebuild)

    def touch_bookmarks(self, bookmark_ids: Iterable[str]) -> int:
        """Mark bookmarks as used now (their decay restarts); return how many changed."""
        return self.store.touch_bookmarks(list(bookmark_ids), self.clock.now_ms())

    def _used(self, bookmark_ids: Iterable[str]) -> None:
        """The one place where delivering a bookmark counts as using it: ``search``, ``recall`` and
        ``context`` (so the CLI, MCP tools, HTTP routes and hooks built on them) call it with the
        bookmarks they return, and ``last_relevant_at`` moves to now — a bookmark that keeps being
        used does not decay. Listing bookmarks by importance (``bookmarks``) is browsing, not use:
        it would keep the top ones from ever decaying.

        Best effort, never in the way of the read: a bookmark used again within
        ``TOUCH_EVERY_MS`` is not written again, and a store that cannot take the write right now
        (read-only media, another process's long write) keeps the ids for the next use; the
        failure is logged."""
        now = self.clock.now_ms()
        due = {
            bid
            for bid in (*bookmark_ids, *self._touch_pending)
            if now - self._touched.get(bid, -TOUCH_EVERY_MS) >= TOUCH_EVERY_MS
        }
        if not due:
            return
        try:
            self.store.touch_bookmarks(sorted(due), now)
        except (StoreError, sqlite3.Error) as exc:
            if not self._touch_pending:
                log.warning("bookmark use not recorded yet (%s); retried at the next use", exc)
            self._touch_pending = due
            return
        self._touch_pending = set()
        self._touched.update(dict.fromkeys(due, now))
        if len(self._touched) > 10_000:  # a long-lived server: forget the oldest uses
            self._touched = dict(sorted(self._touched.items(), key=lambda kv: kv[1])[-5_000:])

    # -- forget (memtoc.forgetting, store/sqlite/forget.py, store/postgres/forget.py) -------------
    def forget(
        self,
        *,
        event_ids: Iterable[str] | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        project: str | None = None,
        query: str | None = None,
        max_events: int | None = None,
        dry_run: bool = False,
        plan: ForgetReport | None = None,
    ) -> ForgetReport:
        """Forget events for good: tombstones, re-derived summaries, grips, vectors and bookmarks,
        the raw text purged from the store's files (``memtoc.forgetting``; on PostgreSQL by
        ``VACUUM FULL``: ``store/postgres/forget.py``). Filters combine with AND;
        ``query`` selects every event whose text or metadata contains each of its words.
        ``max_events``: refuse, changing nothing, when more events match. ``dry_run`` only
        reports what would be forgotten; ``plan`` (a dry run's report) executes exactly its event
        ids, recorded under its selector. Pending events are filed first (``process``)."""
        from memtoc import forgetting
        from memtoc.forgetting import ForgetSelector

        store = self.store
        project = self._id(project) if project is not None else None
        if plan is not None:
            if not plan.event_ids:
                return plan
            self.process(rollup=False)
            selector = ForgetSelector(event_ids=tuple(plan.event_ids), project=project)
            return forgetting.forget(self.processor, store, selector, described=dict(plan.selector))
        selector = ForgetSelector(
            event_ids=tuple(event_ids) if event_ids is not None else None,
            session_id=session_id,
            since_ms=since_ms,
            until_ms=until_ms,
            project=project,
            query=query,
        )
        selector.validate()
        if not dry_run:
            self.process(rollup=False)
        return forgetting.forget(
            self.processor, store, selector, dry_run=dry_run, max_events=max_events
        )

    def forget_audit(self, limit: int = 50) -> list[AuditEntry]:
        """The audit log of forgets, newest first: selectors, event ids and counts (no content)."""
        return self.store.list_audit(limit)

    def _scrub_pending(self) -> str | None:
        since = self.store.scrub_pending()
        return None if since is None else iso_ms(since)

    def _finish_forget(self, entry: OutboxEntry) -> None:
        from memtoc import forgetting

        forgetting.finish_entry(self.processor, self.store, entry)

    # -- housekeeping -----------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        return self.store.stats()

    def verify(self) -> VerifyReport:
        """Check the store and every derived structure against the events (``memtoc verify``):
        the store's invariants and SQL audit, then the TOC's structure (``derived.verify``).
        Vectors are checked against the configured embedder when it loads."""
        from memtoc.derived.verify import verify_structure
        from memtoc.pipeline.periods import Calendar

        embedder = self.semantic.embedder
        report = self.store.verify_store(embedder)
        if embedder is None and self.semantic.degraded:
            report.pending.append(f"vectors not checked against a model: {self.semantic.degraded}")
        report.add(verify_structure(self.store, self.store.derived(), Calendar(self.tz)))
        return report

    def backup(self, dest: str | Path) -> int:
        """A copy of a SQLite store taken while it is in use (``memtoc backup``)."""
        if not isinstance(self.store, FileBackups):
            raise StoreError(
                f"{self.store.location}: back up a PostgreSQL store with the server's tools, e.g. "
                "`pg_dump --format=custom --file=memtoc.dump <url>` (restore with pg_restore)"
            )
        return self.store.backup(Path(dest))

    def compact(self) -> dict[str, int]:
        """Give a SQLite file's free pages back (``memtoc compact``)."""
        if not isinstance(self.store, FileBackups):
            raise StoreError(
                f"{self.store.location}: PostgreSQL compacts itself (autovacuum); run "
                "`VACUUM (ANALYZE)` as the database owner to force it"
            )
        return self.store.compact()
