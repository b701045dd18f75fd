"""The ``Memory`` facade: the one service layer every surface (CLI, MCP, HTTP, hooks) calls.

Build it from settings at an entry point (``Memory.open(settings)``) or from parts in tests and
embedding code (``Memory(store, ...)``). Every collaborator is injected: store, clock, id factory,
redactor, token counter, summariser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.clock import Clock, SystemClock
from memtoc.config import Settings
from memtoc.errors import IngestError, QueryError, StoreError
from memtoc.ids import UlidFactory
from memtoc.ingest.importer import CommitInfo, Importer, IngestOptions, ProgressFn
from memtoc.ingest.sources.base import EventDraft
from memtoc.ingest.sources.jsonl import parse_event
from memtoc.model import (
    DEFAULT_TYPE_FOR_ROLE,
    Event,
    IngestReport,
    JsonValue,
    Rejection,
    TocNode,
)
from memtoc.pipeline.rollup import RollupReport
from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, ProcessReport, Processor
from memtoc.retrieval import navigate
from memtoc.retrieval.navigate import ExpandView, NodeView
from memtoc.services import ROLLUP_LEVELS, build_summarizer, store_timezone
from memtoc.store import maintenance
from memtoc.store.maintenance import VerifyReport
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import TokenCounter, default_counter

if TYPE_CHECKING:
    from memtoc.ingest.redact import Redactor


class Memory:
    """Record, process and recall an agent's history."""

    def __init__(
        self,
        store: SqliteStore,
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        ids: UlidFactory | None = None,
        redactor: Redactor | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        tz: tzinfo | None = None,
        pipeline: PipelineConfig | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock or SystemClock()
        self.ids = ids or UlidFactory(self.clock)
        self.redactor = redactor
        self.counter = counter or default_counter()
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(self.counter)
        self.tz = tz or store_timezone(store, settings.timezone if settings else None)
        self.pipeline = pipeline or (
            PipelineConfig.from_settings(settings) if settings else PipelineConfig()
        )
        self._processor: Processor | None = None

    @classmethod
    def open(cls, settings: Settings, *, read_only: bool = False) -> Memory:
        """A Memory over the store the settings name (created on first use unless read-only)."""
        db = settings.db
        if "://" in db and not db.startswith("file:"):
            raise StoreError(f"unsupported store URL {db!r} (this build stores in SQLite files)")
        store = SqliteStore(Path(db), durability=settings.durability, read_only=read_only)
        from memtoc.ingest.redact import Redactor

        redactor = Redactor(disabled=settings.redact_disable) if settings.redact else None
        counter = default_counter()
        summarizer = build_summarizer(settings, counter)
        return cls(
            store, settings=settings, redactor=redactor, counter=counter, summarizer=summarizer
        )

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingest -----------------------------------------------------------------------------------
    def _ingest_options(self, fmt: str, project: str | None, rescan: bool = False) -> IngestOptions:
        s = self.settings
        if s is None:
            return IngestOptions(format=fmt, project=project, rescan=rescan)
        return IngestOptions(
            format=fmt,
            project=project,
            rescan=rescan,
            default_project=s.project or "default",
            include_thinking=s.include_thinking,
            follow_symlinks=s.follow_symlinks,
            max_event_bytes=s.max_event_bytes,
            batch_size=s.ingest_batch,
        )

    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        format: str = "auto",
        project: str | None = None,
        rescan: bool = False,
        progress: ProgressFn | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
    ) -> IngestReport:
        """Import transcript files or folders; re-importing stores nothing twice.

        Files are resumed from their watermark (the byte offset already imported) unless
        ``rescan``, which re-reads everything and reports what is already stored as duplicates.
        """
        importer = Importer(
            self.store,
            redactor=self.redactor,
            options=self._ingest_options(format, project, rescan),
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
        importer = Importer(
            self.store,
            redactor=self.redactor,
            options=self._ingest_options("jsonl", project),
            clock=self.clock,
            on_commit=on_commit,
        )
        rejected = IngestReport()

        def drafts() -> Iterable[tuple[EventDraft, str]]:
            for n, record in enumerate(records, start=1):
                if isinstance(record, Mapping) and "timestamp" not in record:
                    record = {**record, "timestamp": self.clock.now_ms()}
                draft = parse_event(record, agent)
                if isinstance(draft, str):
                    rejected.rejections.append(Rejection("records", n, draft))
                    continue
                yield draft, draft.event_id or self.ids.new(draft.ts_ms)

        report = importer.ingest_drafts(drafts(), source="records")
        report.merge(rejected)
        return report

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
                project=project,
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
            self._processor = Processor(
                self.store, self.summarizer, self.counter, self.pipeline, self.clock, self.tz
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
        """Drain the outbox: segments, summaries, grips, search indexes, then due rollups."""
        if retry_failed:
            self.processor.retry_failed()
        return self.processor.run(until_idle=until_idle, rollup=rollup, progress=progress)

    def rollup(self, *, force: bool = False, level: str | None = None) -> RollupReport:
        """Roll up dirty days, weeks, months and years (those old enough, or all with ``force``)."""
        if level is not None and level not in ROLLUP_LEVELS:
            raise QueryError(f"--level must be one of {', '.join(ROLLUP_LEVELS)} (got {level!r})")
        return self.processor.rollup(force=force, level=level)

    # -- navigation -------------------------------------------------------------------------------
    def _project(self, project: str | None) -> str:
        if project is not None:
            return project
        projects = self.store.projects()
        if len(projects) == 1:
            return projects[0]
        if not projects:
            raise QueryError("the store holds no events yet")
        raise QueryError(f"several projects ({', '.join(projects)}); name one with --project")

    def toc(self, project: str | None = None) -> list[TocNode]:
        """The roots of a project's table of contents: its years, oldest first."""
        return navigate.toc_roots(self.store, self._project(project))

    def node(self, node_id: str, *, project: str | None = None, tier: str = "L0") -> NodeView:
        """A node's summary and its children's titles and L0s, with its token count."""
        return navigate.node_view(self.store, self.counter, node_id, project, tier=tier)

    def expand(self, grip_id: str, *, before: int = 3, after: int = 3) -> ExpandView:
        """A grip's events plus ``before``/``after`` neighbours in the same session."""
        return navigate.expand(
            self.store,
            self.counter,
            grip_id,
            before=before,
            after=after,
            window_ms=self.pipeline.expand_window_minutes * 60_000,
        )

    def timeline(
        self, since_ms: int, until_ms: int, *, level: str = "day", project: str | None = None
    ) -> list[TocNode]:
        """Nodes of one level overlapping a time range, in time order."""
        return navigate.timeline(self.store, self._project(project), since_ms, until_ms, level)

    # -- housekeeping -----------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        return self.store.stats()

    def verify(self) -> VerifyReport:
        return maintenance.verify(self.store)

    def backup(self, dest: str | Path) -> int:
        return maintenance.backup(self.store, Path(dest))

    def compact(self) -> dict[str, int]:
        return maintenance.compact(self.store)
