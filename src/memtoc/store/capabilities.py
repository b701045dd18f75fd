"""Store capabilities above the core ``Store`` contract (``store/base.py``), as narrow protocols.

Retrieval, the pipeline and the services are typed against these, never against a concrete
store, and every statement of SQL stays inside ``store/``. Both backends implement every protocol
here unless it says otherwise; what only one backend has is a separate protocol the caller checks
for (``isinstance`` on the protocol, never on a concrete store class):

- ``TextRanking``: BM25 over the text indexes (SQLite FTS5: ``store/sqlite/search.py``;
  PostgreSQL ``tsvector``: ``store/postgres/search.py``) and the same filters for keys found
  another way (vectors).
- ``SearchStore``: what recall, drill, search and the time search read (the pipeline's store plus
  ``TextRanking``).
- ``ForgetStore``: the store half of forgetting (``memtoc.forgetting``): select, unfile,
  tombstone, purge derived copies, audit, and erase what the backend keeps of deleted rows
  (``scrub``: SQLite rewrites pages and truncates the WAL; PostgreSQL runs ``VACUUM``).
- ``Verifiable``: the store's own invariants and SQL audit (``memtoc verify``, both backends).
- ``FileBackups``: online backup to a file and compaction (SQLite); a PostgreSQL server is backed
  up with ``pg_dump`` and compacts itself (autovacuum).
- ``ForgetLogged``: a store kept beside a file forget log (SQLite: a restored copy of the file is
  brought in step with it). A PostgreSQL server is backed up and restored by its operator
  (``pg_dump``), so it has none.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from memtoc.model import JsonValue
from memtoc.store.base import PipelineStore, ProjectStore, Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memtoc.store.derived import DerivedStore, VerifyReport

ScoredRow = tuple[str, str, str, int, float, float, bool]
"""A ranked row: ``kind, project, item_id, ts_ms, score (0..1), raw score, every_term``."""
Key = tuple[str, str, str]
"""An item's key: ``kind, project, item_id``."""
DOC_KINDS: tuple[str, ...] = ("node", "grip", "bookmark")
"""The kinds of item held in the ``docs`` table (events are the other index)."""
DEFAULT_SCAN_CAP = 5_000
"""Most rows one unfiltered FTS5 expression is ranked over (``store/sqlite/search.py``): keeps
BM25 in milliseconds however large the store; only queries made of very common terms are affected
(they rank their newest matches)."""
OR_ONLY_FACTOR = 0.5
"""Score factor of rows that match some, not all, of the query's terms (both backends)."""


@dataclass(frozen=True, slots=True)
class TextScope:
    """The filters text ranking applies (``None``: no restriction); the caller validated them."""

    projects: tuple[str, ...] | None = None
    levels: tuple[str, ...] | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    session_id: str | None = None
    role: str | None = None

    @property
    def event_fields(self) -> bool:
        """Whether a filter reads an ``events`` column (time, session, role)."""
        return any(
            v is not None for v in (self.since_ms, self.until_ms, self.session_id, self.role)
        )


@runtime_checkable
class TextRanking(Protocol):
    """BM25 ranking over nodes, grips, bookmarks (the ``docs``) and events."""

    def rank_text(
        self,
        query: str,
        *,
        kinds: Sequence[str],
        scope: TextScope,
        candidates: int = 30,
        scan_cap: int = DEFAULT_SCAN_CAP,
    ) -> list[ScoredRow]:
        """Up to ``candidates`` rows per index (docs, events) matching ``query`` under ``scope``,
        scores normalised to 0..1 per index, best first per index. ``scan_cap`` bounds how many
        matches one expression is ranked over (FTS5); the PostgreSQL store bounds its passes by
        its own ``SCAN_CAP`` (the same value) and the lexemes' document frequencies."""
        ...

    def keep_keys(self, keys: Sequence[Key], *, kinds: Sequence[str], scope: TextScope) -> set[Key]:
        """The keys among ``keys`` (found another way: vectors) that pass the same filters."""
        ...


class SearchStore(PipelineStore, TextRanking, Protocol):
    """What retrieval reads: the pipeline's store and text ranking."""


@dataclass(frozen=True, slots=True)
class EventRef:
    """An event named by a forget selector: identity and place, never its text."""

    seq: int
    event_id: str
    project: str
    session_id: str
    ts_ms: int
    forgotten: bool
    """Already a tombstone (forgotten earlier)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One ``forget`` recorded in ``forget_audit``: what was selected and what it did."""

    audit_id: int
    forgotten_ms: int
    selector: dict[str, JsonValue]
    event_ids: tuple[str, ...]
    counts: dict[str, JsonValue]

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "audit_id": self.audit_id,
            "forgotten_ms": self.forgotten_ms,
            "selector": dict(self.selector),
            "event_ids": list(self.event_ids),
            "counts": dict(self.counts),
        }


@dataclass(slots=True)
class ScrubReport:
    """What erasing deleted rows' bytes did (``ForgetStore.scrub``)."""

    tables: int = 0
    """Tables rewritten (SQLite) or vacuumed (PostgreSQL)."""
    rows: int = 0
    """Rows rewritten (SQLite; PostgreSQL's VACUUM does not count them)."""
    wal_truncated: bool | None = None
    """False while a reader on a snapshot from before the forget keeps old copies (SQLite: in
    the WAL; PostgreSQL: row versions ``VACUUM FULL`` must keep) and the scrub stays pending."""
    seconds: float = 0.0


class ForgetStore(PipelineStore, Protocol):
    """The store half of ``memtoc.forgetting``; every write joins the caller's transaction."""

    def select_events(
        self,
        *,
        event_ids: Sequence[str] | None = None,
        project: str | None = None,
        session_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        contains: Sequence[str] | None = None,
    ) -> list[EventRef]:
        """Events matching every given filter (``since`` inclusive, ``until`` exclusive), in time
        order, tombstones flagged. ``event_ids`` None: any id. ``contains``: live events whose
        text or metadata holds each word (ASCII letters in any case; every match, no cap)."""
        ...

    def segments_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        """``seq → (project, segment node id)`` for the given events filed in a segment."""
        ...

    def bookmarks_citing(self, event_ids: Sequence[str]) -> list[str]:
        """Ids of bookmarks whose source events include any of ``event_ids``."""
        ...

    def forget_guard(self) -> AbstractContextManager[None]:
        """Around a whole forget: freed content overwritten where the engine can (SQLite's
        ``secure_delete``); a no-op where deleted rows are erased by ``scrub`` instead."""
        ...

    def unfile_events(self, seqs: Sequence[int]) -> int:
        """Take events out of their segments and the event text index; how many were filed."""
        ...

    def tombstone_events(self, seqs: Sequence[int], now_ms: int) -> int:
        """Purge live events' text and metadata, mark them forgotten; how many."""
        ...

    def purge_event_vectors(self, events: Sequence[EventRef]) -> int: ...

    def purge_tombstone_vectors(self) -> int:
        """Delete event vectors of any tombstone; how many."""
        ...

    def purge_stale_doc_vectors(self) -> tuple[int, set[str]]:
        """Delete vectors of docs gone or changed; how many and the embedders touched."""
        ...

    def vector_embedders(self) -> set[str]: ...

    def purge_node_versions(self, project: str, node_ids: Sequence[str]) -> int:
        """Delete every version of the nodes but the latest (all of a retired node's)."""
        ...

    def retired_nodes_overlapping(
        self, project: str, since_ms: int, until_ms: int
    ) -> list[str]: ...

    def write_audit(
        self,
        now_ms: int,
        selector: dict[str, JsonValue],
        event_ids: Sequence[str],
        counts: dict[str, JsonValue],
    ) -> int:
        """Record a forget (ids and counts, never content); its audit id."""
        ...

    def update_audit_counts(self, audit_id: int, counts: dict[str, JsonValue]) -> None: ...

    def list_audit(self, limit: int = 50) -> list[AuditEntry]: ...

    def scrub(self, now_ms: int) -> ScrubReport:
        """Erase what the engine keeps of deleted and updated rows (module docstring)."""
        ...

    def scrub_pending(self) -> int | None:
        """Since when (ms) a forget's scrub waits for a reader on an older snapshot, or None."""
        ...

    def finish_scrub(self, *, wait: bool = True) -> bool:
        """Finish a pending scrub now unless a reader holds it up; whether none is pending."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


@runtime_checkable
class ForgetLogged(Protocol):
    """A store file with a forget log beside it (``memtoc.forget_log``): a restored or copied
    file is brought in step with the log when opened."""

    path: Path
    read_only: bool

    def insert_tombstones(self, events: Sequence[tuple[str, int, str, str]], now_ms: int) -> int:
        """Record ``(event_id, ts_ms, project, session_id)`` never held as tombstones (events
        forgotten after the backup this file was restored from was taken)."""
        ...

    def logged_tombstones(self) -> list[tuple[str, int, str, str, int]]:
        """Every tombstone: ``(event_id, ts_ms, project, session_id, forgotten_ms)``."""
        ...


class LoggedForgetStore(ForgetStore, ForgetLogged, Protocol):
    """A forget store with a forget log beside it (SQLite): what ``memtoc.forget_log`` reads."""


@runtime_checkable
class Verifiable(Protocol):
    def verify_store(self, embedder: EmbedderIdentity | None = None) -> VerifyReport:
        """The store's invariants and SQL audit; vectors checked against ``embedder``."""
        ...


@runtime_checkable
class FileBackups(Protocol):
    def backup(self, dest: Path) -> int:
        """A consistent copy of the store at ``dest`` while it is in use; bytes written."""
        ...

    def compact(self) -> dict[str, int]:
        """Give free pages back to the file system (``VACUUM``); sizes before and after."""
        ...


# -- vectors ------------------------------------------------------------------------------------------
class EmbedderIdentity(Protocol):
    """What the store records about an embedder (any ``memtoc.text.embed.Embedder`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def version(self) -> str: ...


class VectorKey(NamedTuple):
    """Where a vector belongs: the item's kind (``node``, ``grip``, ``event``, ``bookmark``), its
    project, and its id within that kind and project."""

    kind: str
    project: str
    item_id: str


@dataclass(frozen=True, slots=True)
class LoadedVectors:
    """Every vector of one embedder for a set of projects/kinds, in one matrix."""

    keys: list[VectorKey]
    ts_ms: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]


BEHIND_CAP = 100_000
"""``VectorProgress.behind`` counts up to this many events (a store with none embedded yet need
not be counted in full on every search)."""


@dataclass(frozen=True, slots=True)
class VectorProgress:
    """How far one embedder's vectors cover the store: what ``SemanticIndex.state`` reports."""

    recorded: tuple[int, str] | None
    """``(dim, version)`` of the model its stored vectors came from (None: none recorded)."""
    checkpoint: int
    """The last event seq it has embedded (0: none)."""
    filed_max: int
    """The last seq filed into a segment (searchable by BM25)."""
    behind: int
    """Filed events after the checkpoint (up to ``BEHIND_CAP``)."""
    others: tuple[str, ...]
    """Other embedders with recorded vectors."""


def progress_from(
    raw_meta: str | None,
    raw_checkpoint: str | None,
    filed_max: int,
    count_behind: Any,
    other_names: Any,
) -> VectorProgress:
    """A ``VectorProgress`` from the values both stores read (callables count and list lazily)."""
    recorded = None
    if raw_meta is not None:
        try:
            data = json.loads(raw_meta)
            recorded = (int(data["dim"]), str(data["version"]))
        except (ValueError, KeyError, TypeError):
            recorded = (-1, "unreadable")
    try:
        checkpoint = int(json.loads(raw_checkpoint)) if raw_checkpoint is not None else 0
    except (ValueError, TypeError):
        checkpoint = 0
    behind = count_behind(checkpoint) if checkpoint < filed_max else 0
    others = tuple(other_names()) if recorded is None else ()
    return VectorProgress(recorded, checkpoint, int(filed_max), int(behind), others)


def embed_job(embedder_name: str) -> str:
    """The checkpoint of the embed step: the last event seq ``embedder_name`` has embedded."""
    return f"embed:{embedder_name}"


class VectorStore(Store, Protocol):
    """What the embed step (``memtoc.pipeline.embed_step``) and the semantic index read and
    write: one embedder's vectors, their provenance and what still needs embedding (SQLite:
    ``store/sqlite/vectors.py``; PostgreSQL: ``store/postgres/vectors.py``)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def stale_embedder(self, embedder: EmbedderIdentity) -> bool:
        """Vectors of ``embedder.name`` came from another model (or from an unrecorded one)."""
        ...

    def recorded_embedder(self, name: str) -> tuple[int, str] | None: ...

    def vector_progress(self, name: str) -> VectorProgress: ...

    def reset_vectors(self, name: str) -> None:
        """Drop ``name``'s vectors, what records their sources and its embed checkpoint."""
        ...

    def events_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """``(seq, event_id, project, text)`` of events after ``seq``, in seq order."""
        ...

    def docs_to_embed(self, name: str, limit: int) -> list[tuple[str, str, str, str, str]]:
        """``(kind, project, doc_id, text, source)`` of docs whose vector of ``name`` is missing
        or was computed from other text; ``source`` is what ``put_item_vectors`` records."""
        ...

    def put_item_vectors(
        self,
        embedder: EmbedderIdentity,
        keys: Sequence[VectorKey],
        vectors: npt.ArrayLike,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Insert or replace one vector per key (with each doc's ``source``), record the
        embedder; one transaction. How many were written."""
        ...

    def drop_orphan_doc_vectors(self, name: str) -> int:
        """Delete vectors of docs that no longer exist; how many."""
        ...

    def count_vectors(self) -> dict[str, int]:
        """Stored vectors per embedder name."""
        ...


@runtime_checkable
class LoadableVectors(Protocol):
    """Vectors read whole into memory and searched there (SQLite: ``retrieval/vectors.py``)."""

    def load_vectors(
        self,
        name: str,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
    ) -> LoadedVectors: ...


@runtime_checkable
class NearestVectors(Protocol):
    """Vectors searched by the server (PostgreSQL: pgvector), nothing loaded into memory."""

    def nearest(
        self,
        name: str,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[tuple[VectorKey, float]]: ...


@runtime_checkable
class AnnIndexed(Protocol):
    """A store that keeps an approximate vector index of its own once an embedder has enough
    vectors (PostgreSQL: IVFFlat, ``store/postgres/ann.py``)."""

    def ensure_vector_index(self, name: str, dim: int, *, min_rows: int | None = None) -> bool:
        """Build (or, outgrown, rebuild) ``name``'s index once it has ``min_rows`` vectors
        (None: the store's setting); whether one is in place."""
        ...


class MemoryStore(SearchStore, ForgetStore, VectorStore, ProjectStore, Verifiable, Protocol):
    """Everything the ``Memory`` facade uses of a store, on both backends; what one backend lacks
    (``FileBackups``, ``ForgetLogged``, ``ProjectMerging``) the facade checks for."""

    read_only: bool

    def derived(self) -> DerivedStore:
        """What ``verify`` and ``rebuild`` need (``store/derived.py``)."""
        ...


def generation_key(embedder_name: str) -> str:
    """The meta key bumped whenever vectors of ``embedder_name`` change (loaded indexes reload)."""
    return f"vectors_gen:{embedder_name}"


@dataclass(slots=True)
class MergeReport:
    """What a merge did (``to_dict`` is the CLI's ``--json``)."""

    source: str
    target: str
    events: int = 0
    """Events relabelled from the source to the target."""
    shared_sessions: int = 0
    """Sessions found in both projects (filed again as one)."""
    refiled: int = 0
    """Events queued for filing again (the source's and the shared sessions')."""
    segments_retired: int = 0
    nodes_retired: int = 0
    bookmarks_removed: int = 0
    roots_moved: int = 0
    outbox_entries: int = 0

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "source": self.source,
            "target": self.target,
            "events": self.events,
            "shared_sessions": self.shared_sessions,
            "refiled": self.refiled,
            "segments_retired": self.segments_retired,
            "nodes_retired": self.nodes_retired,
            "bookmarks_removed": self.bookmarks_removed,
            "roots_moved": self.roots_moved,
            "outbox_entries": self.outbox_entries,
        }


@runtime_checkable
class ProjectMerging(Protocol):
    """Merging one project into another (``memtoc.merging``; SQLite: ``sqlite/merge.py``)."""

    def merge_projects(self, source: str, target: str) -> MergeReport:
        """File project ``source``'s events under ``target``, retire what was derived from them
        and queue them for filing again (one transaction; ``memtoc.merging``)."""
        ...
