"""memtoc's data model (DESIGN §2). The field names are part of the public contract.

Instants are carried as integer epoch milliseconds (UTC) in ``*_ms`` fields; ``to_dict()`` renders
them as ISO 8601 strings for JSON output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, get_args

JsonValue: TypeAlias = Any
"""A JSON value (str, int, float, bool, None, list or dict of JSON values)."""

EventType = Literal[
    "user_message",
    "assistant_message",
    "tool_call",
    "tool_result",
    "system",
    "session_start",
    "session_end",
]
Role = Literal["user", "assistant", "tool", "system"]
Level = Literal["year", "month", "week", "day", "segment"]
BookmarkType = Literal["conclusion", "resolution", "validated", "foundational"]
Tier = Literal["L0", "L1", "L2"]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)
ROLES: tuple[str, ...] = get_args(Role)
LEVELS: tuple[str, ...] = get_args(Level)
"""Levels from the root down."""
BOOKMARK_TYPES: tuple[str, ...] = get_args(BookmarkType)

DEFAULT_ROLE_FOR_TYPE: dict[str, str] = {
    "user_message": "user",
    "assistant_message": "assistant",
    "tool_call": "assistant",
    "tool_result": "tool",
    "system": "system",
    "session_start": "system",
    "session_end": "system",
}
DEFAULT_TYPE_FOR_ROLE: dict[str, str] = {
    "user": "user_message",
    "assistant": "assistant_message",
    "tool": "tool_result",
    "system": "system",
}


MIN_TS_MS = 0
"""The earliest instant an event may carry: 1970-01-01T00:00:00.000Z."""
MAX_TS_MS = 253_402_214_399_999
"""The latest instant an event may carry: 9999-12-30T23:59:59.999Z. The last day of year 9999 is
left out so that the instant's local date is still inside year 9999 in every time zone (offsets
are under a day), which every period computation (``datetime``, ISO weeks) can represent."""
MAX_ID_CHARS = 1024
"""Longest ``event_id``, ``session_id``, ``project`` or ``agent`` accepted."""
_DT_MIN_MS = -62_135_596_800_000
"""0001-01-01T00:00:00Z: the earliest instant ``datetime`` can show."""
_DT_MAX_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest."""


def ts_problem(ts_ms: object) -> str | None:
    """Why ``ts_ms`` cannot be an event's instant (not an int, or outside
    ``MIN_TS_MS..MAX_TS_MS``), or None when it can."""
    if type(ts_ms) is not int:
        return f"timestamp must be integer epoch milliseconds (got {type(ts_ms).__name__})"
    if not MIN_TS_MS <= ts_ms <= MAX_TS_MS:
        return (
            f"timestamp {ts_ms} ms is outside the supported range "
            "1970-01-01T00:00:00Z..9999-12-30T23:59:59.999Z"
        )
    return None


def iso_ms(ts_ms: int) -> str:
    """Epoch milliseconds as ``2024-01-18T10:00:00.000Z``.

    Any integer renders, also one no event may carry (a store written by an older memtoc can
    hold such instants): years past 9999 or before 1 are written with a sign (``+10889-…``).
    """
    if _DT_MIN_MS <= ts_ms <= _DT_MAX_MS:
        dt = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts_ms % 1000:03d}Z"
    days, ms = divmod(ts_ms, 86_400_000)
    year, month, day = _civil_from_days(days)
    secs, milli = divmod(ms, 1000)
    clock = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{milli:03d}Z"
    return f"{year:+05d}-{month:02d}-{day:02d}T{clock}"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian date ``days`` after 1970-01-01, for any year (H. Hinnant's
    ``civil_from_days``)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


BOOKKEEPING = "bookkeeping"
"""The metadata key naming an event's bookkeeping class (summaries, bookmarks, context skip it)."""

BOOKKEEPING_TITLES = ("Local command ", "Conversation compacted", "Interrupted by the user",
                      "Agent bookkeeping: ")  # fmt: skip
"""How a node of an agent's bookkeeping alone is titled (it has no keywords): a segment by
``pipeline.summarize.extractive.bookkeeping_summary``, whatever the summariser, and a period
over such segments alone by the extractive roll-up."""


@dataclass(frozen=True, slots=True)
class Event:
    """One conversation event. Immutable once stored."""

    event_id: str
    session_id: str
    project: str
    agent: str
    ts_ms: int
    event_type: str
    role: str
    text: str
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)
    source: str | None = None
    """Where an importer read it (a file path), or None for events recorded through the API."""
    source_pos: str | None = None
    """Position inside ``source`` (``line:N@byte``)."""

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.ts_ms / 1000, tz=UTC)

    @property
    def bookkeeping(self) -> str | None:
        """The bookkeeping class an importer marked this event with (``memtoc.ingest.sources.
        bookkeeping``: an agent's own notice, not something said or done), or None."""
        value = self.metadata.get(BOOKKEEPING)
        return value if isinstance(value, str) and value else None

    def to_dict(self, *, text: bool = True) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "event_id": self.event_id,
            "session_id": self.session_id,
            "project": self.project,
            "agent": self.agent,
            "timestamp": iso_ms(self.ts_ms),
            "event_type": self.event_type,
            "role": self.role,
        }
        if text:
            out["text"] = self.text
        out["metadata"] = dict(self.metadata)
        if self.source is not None:
            out["source"] = self.source
            out["source_pos"] = self.source_pos
        return out

    def citation(self) -> dict[str, JsonValue]:
        """The event as a citation in search and recall output (DESIGN §6)."""
        return {
            "event_id": self.event_id,
            "timestamp": iso_ms(self.ts_ms),
            "session_id": self.session_id,
            "role": self.role,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class Bullet:
    """One summary bullet, anchored to its evidence by grips."""

    text: str
    grip_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, JsonValue]:
        return {"text": self.text, "grip_ids": list(self.grip_ids)}


@dataclass(frozen=True, slots=True)
class Summary:
    """What a summariser produces for a segment or a period."""

    title: str
    bullets: tuple[str, ...]
    keywords: tuple[str, ...]
    abstract: str
    """L0: about 100 tokens."""
    overview: str
    """L1: at most about 2,000 tokens."""
    backend: str = "extractive"
    degraded: str | None = None
    """Why the preferred backend was not used (None when it was)."""
    thread: str | None = None
    """The thread of work a child summary belongs to (a segment's session id), so a period can
    group its children by it; None when unknown."""


@dataclass(frozen=True, slots=True)
class TocNode:
    """A node of the table of contents: a segment, or a day, ISO week, month or year."""

    node_id: str
    project: str
    level: str
    title: str
    start_ms: int
    end_ms: int
    bullets: tuple[Bullet, ...] = ()
    keywords: tuple[str, ...] = ()
    child_node_ids: tuple[str, ...] = ()
    abstract: str = ""
    overview: str = ""
    version: int = 0
    parent_id: str | None = None
    session_id: str | None = None
    """For segments: the session the segment belongs to."""
    event_count: int = 0
    token_count: int = 0
    summarizer: str = "extractive"
    degraded: str | None = None
    created_ms: int = 0
    parent_ids: tuple[str, ...] = ()
    """Every TOC parent: a week lies in one or two months (``parent_id`` is the first); empty on
    nodes written before weeks had two parents (then ``parents`` is ``(parent_id,)``)."""

    @property
    def bookkeeping_only(self) -> bool:
        """Whether the node holds an agent's bookkeeping alone (``BOOKKEEPING_TITLES``, no
        keywords): a month of sub-agent warm-ups says nothing about the work."""
        return not self.keywords and self.title.startswith(BOOKKEEPING_TITLES)

    @property
    def parents(self) -> tuple[str, ...]:
        """The node's parents (``parent_ids``, or ``parent_id`` alone for older nodes)."""
        if self.parent_ids:
            return self.parent_ids
        return (self.parent_id,) if self.parent_id else ()

    def content_key(self) -> tuple[object, ...]:
        """Everything that makes a new version (not the version number or creation time)."""
        return (
            self.title,
            self.start_ms,
            self.end_ms,
            self.bullets,
            self.keywords,
            self.child_node_ids,
            self.abstract,
            self.overview,
            self.parent_id,
            self.parents,
            self.session_id,
            self.event_count,
            self.token_count,
            self.summarizer,
            self.degraded,
        )

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "node_id": self.node_id,
            "project": self.project,
            "level": self.level,
            "title": self.title,
            "start_time": iso_ms(self.start_ms),
            "end_time": iso_ms(self.end_ms),
            "bullets": [b.to_dict() for b in self.bullets],
            "keywords": list(self.keywords),
            "child_node_ids": list(self.child_node_ids),
            "abstract": self.abstract,
            "overview": self.overview,
            "version": self.version,
            "parent_id": self.parent_id,
            "parent_ids": list(self.parents),
            "session_id": self.session_id,
            "event_count": self.event_count,
            "token_count": self.token_count,
            "summarizer": self.summarizer,
            "degraded": self.degraded,
        }


@dataclass(frozen=True, slots=True)
class Grip:
    """Ties a bullet to the contiguous range of events it came from."""

    grip_id: str
    project: str
    excerpt: str
    event_id_start: str
    event_id_end: str
    ts_ms: int
    source: str
    """What produced the grip: ``segment`` for bullets over events, ``child`` when inherited."""
    toc_node_id: str
    session_id: str

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "grip_id": self.grip_id,
            "project": self.project,
            "excerpt": self.excerpt,
            "event_id_start": self.event_id_start,
            "event_id_end": self.event_id_end,
            "timestamp": iso_ms(self.ts_ms),
            "source": self.source,
            "toc_node_id": self.toc_node_id,
            "session_id": self.session_id,
        }


@dataclass(frozen=True, slots=True)
class Bookmark:
    """A salient moment: a conclusion, a resolution, validated understanding or foundational context."""

    bookmark_id: str
    project: str
    content: str
    event_ids: tuple[str, ...]
    importance: float
    type: str
    created_ms: int
    last_relevant_ms: int

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "bookmark_id": self.bookmark_id,
            "project": self.project,
            "content": self.content,
            "event_ids": list(self.event_ids),
            "importance": self.importance,
            "type": self.type,
            "created_at": iso_ms(self.created_ms),
            "last_relevant_at": iso_ms(self.last_relevant_ms),
        }


@dataclass(frozen=True, slots=True)
class Project:
    """A project: the stable id every row carries, a readable name, and the folders it covers.

    ``project`` never changes once given (renaming changes ``name``); ``roots`` are the canonical
    folders (a repository's main worktree top, or a plain folder) whose sessions file into it
    (``memtoc.projects`` holds the rule)."""

    project: str
    name: str
    created_ms: int
    roots: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "project": self.project,
            "name": self.name,
            "roots": list(self.roots),
            "created_at": iso_ms(self.created_ms),
        }


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A unit of pipeline work, written in the same transaction as the events it announces."""

    entry_id: int
    kind: str
    payload: Mapping[str, JsonValue]
    created_ms: int
    attempts: int = 0
    status: str = "pending"
    error: str | None = None


@dataclass(slots=True)
class AppendResult:
    """What one ``Store.append_events`` call did."""

    inserted: int = 0
    duplicates: int = 0
    """Rows whose ``event_id`` was stored already with the same content (or forgotten)."""
    outbox_entry_id: int | None = None
    conflicts: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    """Rows whose ``event_id`` is stored with other content, not stored: their index in the
    batch and the fields that differ (``timestamp``, ``session_id``, ``event_type``, ``role``,
    ``text``)."""
    refused: list[tuple[int, str]] = field(default_factory=list)
    """Rows the store refused (not valid events), not stored: their index and the reason."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One input record that could not be imported, with where it was."""

    source: str
    line: int | None
    reason: str

    @property
    def where(self) -> str:
        """``file:line`` (or just the file when the line is unknown)."""
        return f"{self.source}:{self.line}" if self.line is not None else self.source

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "source": self.source,
            "line": self.line,
            "reason": self.reason,
            "where": self.where,
        }


@dataclass(slots=True)
class IngestReport:
    """The outcome of an ingest: counts plus every rejection with its location."""

    files: int = 0
    read: int = 0
    ingested: int = 0
    duplicates: int = 0
    redacted: int = 0
    truncated: int = 0
    skipped: int = 0
    """Records deliberately not stored (thinking blocks, empty messages, unknown record types)."""
    rejections: list[Rejection] = field(default_factory=list)
    redactions_by_kind: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    restarted: int = 0
    """Files read again from the start: the bytes before their saved position had changed."""
    waiting: int = 0
    """Records held back until their file says when they happened (a Claude Code summary line
    read before any timed line, whose conversation is not found either): read again next time."""
    waiting_at: list[str] = field(default_factory=list)
    """Where each waiting record is (``file:line``): a report saying "1 waiting" named none."""
    unusable: list[str] = field(default_factory=list)
    """Files that yielded nothing usable: unreadable, of no known format, or every record they
    gave this time rejected (``memtoc ingest`` then exits non-zero, after printing the report)."""
    links_skipped: list[str] = field(default_factory=list)
    """Symbolic links not followed: they lead outside the folder given (setting
    ``follow_symlinks``). A folder of links to transcripts elsewhere imported nothing, silently."""
    not_transcripts: list[str] = field(default_factory=list)
    """Files found in a folder given whose content is no known transcript format (an agent's
    ``settings.json``, ``auth.json``, prompt ``history.jsonl``): left alone, not rejections —
    ``memtoc ingest ~/.codex`` exited 1 over them although every session went in. A file named
    on its own is still rejected."""

    @property
    def rejected(self) -> int:
        return len(self.rejections)

    def merge(self, other: IngestReport) -> None:
        self.files += other.files
        self.read += other.read
        self.ingested += other.ingested
        self.duplicates += other.duplicates
        self.redacted += other.redacted
        self.truncated += other.truncated
        self.skipped += other.skipped
        self.bytes_read += other.bytes_read
        self.restarted += other.restarted
        self.waiting += other.waiting
        self.waiting_at.extend(other.waiting_at)
        self.rejections.extend(other.rejections)
        self.unusable.extend(other.unusable)
        self.links_skipped.extend(other.links_skipped)
        self.not_transcripts.extend(other.not_transcripts)
        for k, v in other.redactions_by_kind.items():
            self.redactions_by_kind[k] = self.redactions_by_kind.get(k, 0) + v

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "files": self.files,
            "read": self.read,
            "ingested": self.ingested,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "redacted": self.redacted,
            "redactions_by_kind": dict(sorted(self.redactions_by_kind.items())),
            "truncated": self.truncated,
            "skipped": self.skipped,
            "bytes_read": self.bytes_read,
            "restarted": self.restarted,
            "waiting": self.waiting,
            "waiting_at": list(self.waiting_at),
            "rejections": [r.to_dict() for r in self.rejections],
            "unusable_files": list(self.unusable),
            "links_skipped": list(self.links_skipped),
            "not_transcripts": list(self.not_transcripts),
        }
