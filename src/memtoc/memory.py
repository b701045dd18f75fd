"""The ``Memory`` facade: the one service layer every surface (CLI, MCP, HTTP, hooks) calls.

Build it from settings at an entry point (``Memory.open(settings)``) or from parts in tests and
embedding code (``Memory(store, ...)``). Every collaborator is injected: store, clock, id factory,
redactor, token counter, summariser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.clock import Clock, SystemClock
from memtoc.config import Settings
from memtoc.errors import IngestError, StoreError
from memtoc.ids import UlidFactory
from memtoc.ingest.importer import CommitInfo, Importer, IngestOptions, ProgressFn
from memtoc.ingest.sources.base import EventDraft
from memtoc.ingest.sources.jsonl import parse_event
from memtoc.model import DEFAULT_TYPE_FOR_ROLE, Event, IngestReport, JsonValue, Rejection
from memtoc.store import maintenance
from memtoc.store.maintenance import VerifyReport
from memtoc.store.sqlite import SqliteStore

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
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock or SystemClock()
        self.ids = ids or UlidFactory(self.clock)
        self.redactor = redactor

    @classmethod
    def open(cls, settings: Settings, *, read_only: bool = False) -> Memory:
        """A Memory over the store the settings name (created on first use unless read-only)."""
        db = settings.db
        if "://" in db and not db.startswith("file:"):
            raise StoreError(f"unsupported store URL {db!r} (this build stores in SQLite files)")
        store = SqliteStore(Path(db), durability=settings.durability, read_only=read_only)
        from memtoc.ingest.redact import Redactor

        redactor = Redactor(disabled=settings.redact_disable) if settings.redact else None
        return cls(store, settings=settings, redactor=redactor)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingest -----------------------------------------------------------------------------------
    def _ingest_options(
        self, fmt: str, project: str | None, rescan: bool = False
    ) -> IngestOptions:
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

    # -- housekeeping -----------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]:
        return self.store.stats()

    def verify(self) -> VerifyReport:
        return maintenance.verify(self.store)

    def backup(self, dest: str | Path) -> int:
        return maintenance.backup(self.store, Path(dest))

    def compact(self) -> dict[str, int]:
        return maintenance.compact(self.store)
