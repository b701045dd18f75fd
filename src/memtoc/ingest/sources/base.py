"""The importer protocol: a source format turns a file into event drafts, line by line.

A ``Source`` never touches the store. It reads a file from a byte offset and yields one
``RawRecord`` per input record (a JSONL line, or a message of a JSON document); each record holds
zero or more ``EventDraft`` objects (a Claude Code line can carry text, tool calls and tool
results), or an error saying why it could not be read. The ingest orchestrator
(``memtoc.ingest.importer``) does the rest: redaction, size caps, ids, batching, watermarks and the
report.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memtoc.model import JsonValue


@dataclass(slots=True)
class EventDraft:
    """An event as a source read it, before redaction, capping and id assignment."""

    session_id: str
    ts_ms: int
    event_type: str
    role: str
    text: str
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    project: str | None = None
    """A project the record itself names (id or name); None: ``--project``, else the project of
    ``cwd``, else the default (``memtoc.projects``)."""
    agent: str | None = None
    """None: the source's default agent name."""
    event_id: str | None = None
    """An id the input carries (kept verbatim); None: derived from the position key."""
    part: int = 0
    """Index of this event among those read from the same record (content blocks)."""
    cwd: str | None = None
    """The directory the event's *session started in* (not the line's own, which may change
    mid-session): the importer maps it to the session's project with the one rule
    (``memtoc.projects``). Sources keep each line's own directory in ``metadata["cwd"]``."""


@dataclass(slots=True)
class RawRecord:
    """One input record: where it was, what it gave, or why it failed."""

    line: int
    """1-based line number (JSONL) or 1-based message index (JSON documents)."""
    offset: int
    """Byte offset where the record starts."""
    end_offset: int
    """Byte offset just past the record (and its newline)."""
    drafts: list[EventDraft] = field(default_factory=list)
    error: str | None = None
    skipped: int = 0
    """Parts deliberately not imported (thinking blocks, empty texts, bookkeeping records)."""
    complete: bool = True
    """False for a last line with no newline that failed to parse: it may still be growing, so the
    watermark stays before it and the next incremental import retries it. False without an
    ``error``: a record that cannot be placed yet (its time is not known): the read stops before
    it, and the next import reads it again (``IngestReport.waiting``)."""
    anchor: tuple[str, int] | None = None
    """For a format whose records carry no time: ``(session_id, instant)`` the source placed that
    session's records from. The importer keeps it with the file's position and hands it back
    (``SourceOptions.anchors``), so a re-read places them at the same instants (same ids)."""


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Options that change what a source imports."""

    include_thinking: bool = False
    default_agent: str | None = None
    anchors: Mapping[str, int] = field(default_factory=dict)
    """Instants earlier reads of this file placed time-less sessions from (``RawRecord.anchor``)."""


class Source(Protocol):
    """A transcript format."""

    name: str
    """Format name as given to ``--format`` (``jsonl``, ``claude-code``, ``codex``, ``openai-chat``)."""
    agent: str
    """Agent name stamped on events that do not name one."""
    incremental: bool
    """True when the format is append-only lines that can be resumed from a byte offset. A
    format with two layouts may also define ``resumable(path) -> bool`` to decide per file (the
    importer asks it when present)."""

    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether the file (whose first bytes are ``head``) looks like this format."""
        ...

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """Records from byte offset ``start`` (0, or a previous watermark at a line start)."""
        ...

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """Defaults derived from the path (e.g. the session id from a transcript's file name)."""
        ...
