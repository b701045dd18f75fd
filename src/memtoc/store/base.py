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
from typing import Protocol

from memtoc.model import AppendResult, Bookmark, Event, Grip, JsonValue, OutboxEntry, TocNode


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
        self, event: Event, *, before: int, after: int, window_ms: int | None = None
    ) -> tuple[list[Event], list[Event]]:
        """Up to ``before`` events preceding and ``after`` following ``event`` in its session."""
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

    def node_versions(self, project: str, node_id: str) -> list[int]: ...

    def put_grips(self, grips: Sequence[Grip]) -> int:
        """Store grips (ids are deterministic; an existing id is kept); return how many are new."""
        ...

    def get_grip(self, grip_id: str) -> Grip: ...

    def grips_for_node(self, project: str, node_id: str) -> list[Grip]: ...

    # -- bookmarks ----------------------------------------------------------------------------------
    def put_bookmark(self, bookmark: Bookmark) -> None: ...

    def list_bookmarks(self, project: str | None = None, limit: int | None = None) -> list[Bookmark]:
        ...

    # -- housekeeping -------------------------------------------------------------------------------
    def stats(self) -> dict[str, JsonValue]: ...
