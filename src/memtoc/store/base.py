"""The ``Store`` protocol (DESIGN §3): what every storage backend must do.

Two implementations pass one contract-test suite: ``SqliteStore`` (embedded default) and, for
teams, a PostgreSQL store. Semantics every backend keeps:

- events are immutable and keyed in time order; re-appending an ``event_id`` is a no-op counted
  as a duplicate;
- events and their outbox entry commit in one transaction (with any checkpoints passed along);
- TOC nodes are versioned: a new version and the latest pointer commit together, old versions stay,
  and a write whose content equals the latest version writes nothing;
- grips are indexed by node; checkpoints are stored per job; schema changes are named migrations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memtoc.model import (
    AppendResult,
    Bookmark,
    Event,
    Grip,
    JsonValue,
    OutboxEntry,
    Project,
    TocNode,
)

EventRow = tuple[str, int, str, str, str, str, str, str, str | None, str | None, str]
"""An event as a row: ``event_id, ts_ms, project, session_id, agent, event_type, role, text,
source, source_pos`` and its metadata as JSON text (compact, keys in their given order)."""


@runtime_checkable
class RowAppender(Protocol):
    """A store that also takes events as prepared rows (the ingest fast path: the importer has
    the metadata's JSON already, from redaction's prefilter, and builds no ``Event`` objects)."""

    def append_rows(
        self,
        rows: Iterable[EventRow],
        checkpoints: Mapping[str, JsonValue] | None = None,
        *,
        count: int | None = None,
    ) -> AppendResult:
        """``append_events`` for rows: the same atomicity, outbox entry and duplicate rules.
        ``rows`` may be an iterator consumed inside the transaction (``count``: its length).
        The caller has validated the rows (``event_checks.row_problem``); the store still
        refuses any whose instant is out of range."""
        ...


class Store(Protocol):
    location: str
    """Where the store lives (a file path or a URL without password)."""

    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested uses join the outer one."""
        ...

    # -- events ---------------------------------------------------------------------------------
    def append_events(
        self,
        events: Sequence[Event],
        checkpoints: Mapping[str, JsonValue] | None = None,
    ) -> AppendResult:
        """Store new events, their outbox entry and ``checkpoints`` atomically."""
        ...

    def get_event(self, event_id: str) -> Event: ...

    def get_events(self, event_ids: Iterable[str]) -> list[Event]:
        """The events that exist among ``event_ids``, in time order."""
        ...

    def scan_events(
        self,
        *,
        project: str | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> Iterator[Event]:
        """Events in time order (``since`` inclusive, ``until`` exclusive)."""
        ...

    def events_by_seq(self, first_seq: int, last_seq: int) -> list[tuple[int, Event]]:
        """Events with storage sequence numbers in ``[first_seq, last_seq]``."""
        ...

    def session_neighbors(
        self,
        event: Event,
        *,
        before: int,
        after: int,
        window_ms: int | None = None,
        event_types: tuple[str, ...] | None = None,
    ) -> tuple[list[Event], list[Event]]:
        """Up to ``before`` events preceding and ``after`` following ``event`` in its session
        (only events of ``event_types`` count, when given: the turns of a conversation around
        its tool steps)."""
        ...

    def count_events(self, project: str | None = None) -> int: ...

    def projects(self) -> list[str]: ...

    # -- outbox and checkpoints -------------------------------------------------------------------
    def add_outbox(self, kind: str, payload: Mapping[str, JsonValue]) -> int: ...

    def claim_outbox(self, worker_id: str, limit: int) -> list[OutboxEntry]: ...

    def complete_outbox(self, entry_ids: Sequence[int]) -> None: ...

    def fail_outbox(self, entry_id: int, error: str) -> None: ...

    def retry_failed_outbox(self) -> int: ...

    def outbox_counts(self) -> dict[str, int]: ...

    def failed_outbox(self, limit: int = 20) -> list[OutboxEntry]: ...

    def get_checkpoint(self, job: str) -> JsonValue | None: ...

    def set_checkpoint(self, job: str, value: JsonValue) -> None: ...

    def list_checkpoints(self, prefix: str = "") -> dict[str, JsonValue]:
        """Every checkpoint whose job starts with ``prefix``, by job."""
        ...

    # -- TOC nodes and grips ----------------------------------------------------------------------
    def put_node(self, node: TocNode) -> tuple[TocNode, bool]:
        """Store a node; return the latest version and whether a new version was written."""
        ...

    def get_node(self, project: str, node_id: str, version: int | None = None) -> TocNode: ...

    def find_node(self, node_id: str, project: str | None = None) -> TocNode:
        """The latest version of ``node_id`` in ``project`` (or in the only project that has it)."""
        ...

    def list_nodes(
        self,
        project: str,
        *,
        level: str | None = None,
        parent_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TocNode]:
        """Latest versions, ordered by start time; ``since``/``until`` select overlapping periods."""
        ...

    def list_node_versions(
        self,
        project: str,
        *,
        level: str | None = None,
        parent_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[tuple[str, int]]:
        """``(node_id, latest version)`` of what ``list_nodes`` returns, content not read."""
        ...

    def latest_nodes(self, project: str, level: str, limit: int) -> list[TocNode]:
        """The ``limit`` nodes of ``level`` that start last, newest first (an index walk)."""
        ...

    def node_versions(self, project: str, node_id: str) -> list[int]: ...

    def put_grips(self, grips: Sequence[Grip]) -> int:
        """Store grips (ids are deterministic; an existing id is kept); return how many are new."""
        ...

    def get_grip(self, grip_id: str) -> Grip: ...

    def grips_for_node(self, project: str, node_id: str) -> list[Grip]: ...

    # -- bookmarks ----------------------------------------------------------------------------------
    def put_bookmark(self, bookmark: Bookmark) -> None: ...

    def list_bookmarks(
        self, project: str | None = None, limit: int | None = None
    ) -> list[Bookmark]: ...

    # bookmarks: use, merge and lookup (memtoc.retrieval.bookmark_step)
    def touch_bookmarks(self, bookmark_ids: Sequence[str], now_ms: int) -> int:
        """Set ``last_relevant_ms`` to ``now_ms`` where it is older; return how many changed."""
        ...

    def delete_bookmarks(self, bookmark_ids: Sequence[str]) -> int:
        """Delete bookmarks (and their search documents); return how many existed."""
        ...

    def find_bookmarks(
        self,
        project: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        type: str | None = None,  # noqa: A002 - the model's field name
        content: str | None = None,
    ) -> list[Bookmark]:
        """Bookmarks created in ``[since, until]``, of ``type``, with exactly ``content``."""
        ...

    # -- housekeeping -------------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]: ...


# -- segments and rollups (pipeline) ----------------------------------------------------------------
class ProjectStore(Protocol):
    """The project registry (``memtoc.projects`` holds the rule, the stores the rows)."""

    def list_projects(self) -> list[Project]:
        """Every registered project with its root folders, by name."""
        ...

    def register_project(self, project: str, name: str, root: str | None = None) -> str:
        """Register ``project`` (and ``root``) unless present; the project now holding ``root``.
        Raises ``NameTaken`` (a ``StoreError``) when the name or id is another project's."""
        ...

    def add_project_root(self, project: str, root: str) -> str:
        """Map ``root`` to ``project`` unless mapped already; the project holding it."""
        ...

    def rename_project(self, project: str, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """The bookkeeping row of one segment: a session's contiguous events of one project.

    ``start_ms`` is the first event's instant, ``end_ms`` one past the last event's (exclusive);
    events are ordered by ``(ts_ms, event_id)``. ``built`` is False while the segment's node must be
    (re)built; ``error`` holds why the last build failed (the segment is quarantined until
    ``retry_failed_segments``).
    """

    project: str
    node_id: str
    session_id: str
    start_ms: int
    end_ms: int
    first_seq: int
    last_seq: int
    event_count: int
    token_count: int
    first_event_id: str
    last_event_id: str
    closed: bool = False
    built: bool = False
    error: str | None = None


@dataclass(frozen=True, slots=True)
class DirtyPeriod:
    """A period whose children changed since it was last rolled up."""

    project: str
    node_id: str
    level: str
    activity_ms: int
    """The latest data instant among the changes (end of the newest changed child)."""
    marked_ms: int
    """When (clock time) it was last marked dirty."""
    seq: int = 0
    """The mark's generation, assigned by the store from a counter that only grows (the value
    given to ``mark_dirty`` is ignored): every marking, also of a period already dirty, gets a
    greater one, so ``clear_dirty`` can tell a mark re-set since it was read even when the
    writers' clocks agree to the millisecond or disagree (clock skew between machines)."""


@dataclass(frozen=True, slots=True)
class DocRow:
    """A searchable document (node or grip) mirrored into ``docs`` + ``docs_fts``."""

    kind: str
    doc_id: str
    project: str
    ts_ms: int
    text: str


class PipelineStore(Store, Protocol):
    """The capability the TOC pipeline needs on top of ``Store``: segment bookkeeping, rollup marks,
    node deletion and search-document upkeep. Writes join the caller's ``transaction()``."""

    # segmentation
    def assigned_seqs(self, seqs: Sequence[int]) -> set[int]: ...

    def session_tail(self, project: str, session_id: str) -> SegmentRecord | None: ...

    def segment_before(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> SegmentRecord | None:
        """The last segment of the session starting at or before ``(ts_ms, event_id)``."""
        ...

    def segments_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[SegmentRecord]:
        """The session's segments starting at or after ``(ts_ms, event_id)``, in order."""
        ...

    def session_events_from(
        self, project: str, session_id: str, ts_ms: int, event_id: str
    ) -> list[tuple[int, Event]]:
        """The session's stored events at or after ``(ts_ms, event_id)`` with their seqs, in order."""
        ...

    def members_of(self, project: str, node_ids: Sequence[str]) -> set[int]: ...

    def write_segments(
        self,
        upserts: Sequence[SegmentRecord],
        deleted: Sequence[str],
        project: str,
        membership: Sequence[tuple[int, str]],
        index_events: Sequence[tuple[int, str]],
    ) -> None:
        """Upsert segment rows, drop ``deleted`` segments (and their nodes, grips and docs), set
        ``seq → node_id`` membership and add newly assigned events to ``events_fts``."""
        ...

    # building
    def unbuilt_segments(self, limit: int) -> list[SegmentRecord]: ...

    def get_segment(self, project: str, node_id: str) -> SegmentRecord: ...

    def segment_member_events(self, project: str, node_id: str) -> list[Event]: ...

    def previous_segment(self, segment: SegmentRecord) -> SegmentRecord | None: ...

    def mark_segment_built(self, project: str, node_id: str) -> None: ...

    def fail_segment(self, project: str, node_id: str, error: str) -> None: ...

    def failed_segments(self, limit: int = 20) -> list[SegmentRecord]: ...

    def retry_failed_segments(self) -> int: ...

    def close_idle_segments(self, before_ms: int) -> int: ...

    def replace_node_grips(self, project: str, node_id: str, grips: Sequence[Grip]) -> int:
        """Make ``grips`` the node's grips: insert new ones, delete (with their docs) the rest."""
        ...

    def delete_node(self, project: str, node_id: str) -> None:
        """Retire a node: drop its latest pointer, grips and docs (old versions stay)."""
        ...

    def lock_node(self, project: str, node_id: str) -> None:
        """Serialise writers of one node until the current transaction ends (call inside
        ``transaction()``): a rollup re-reads the children under it before writing the parent."""
        ...

    # rollups
    def mark_dirty(self, marks: Sequence[DirtyPeriod]) -> None: ...

    def dirty_periods(self, level: str) -> list[DirtyPeriod]: ...

    def clear_dirty(self, project: str, node_id: str, seq: int) -> None:
        """Clear the mark unless it was re-marked since it was read with generation ``seq``."""
        ...

    def orphan_parent_ids(self, level: str) -> list[tuple[str, str, int]]:
        """``(project, parent_id, max child end_ms)`` for nodes of ``level`` whose parent node is
        missing (a back-fill sweep)."""
        ...

    # search documents
    def put_docs(self, docs: Sequence[DocRow]) -> None: ...
