"""Generic JSONL: one event per line (DESIGN §6).

Each line is a JSON object::

    {"session_id": "s1", "timestamp": "2024-01-18T10:00:00Z", "role": "user", "text": "hi",
     "event_type": "user_message", "event_id": "...", "project": "...", "agent": "...",
     "metadata": {...}}

``timestamp`` is ISO 8601 (no zone means UTC) or epoch milliseconds (numbers below 1e11 are read as
epoch seconds). ``role`` may be omitted when ``event_type`` is given and vice versa; each defaults
from the other. ``event_id``, ``project``, ``agent`` and ``metadata`` are optional (null counts as
absent); other keys are ignored. Every problem becomes an error on that line naming the field, and
blank lines are skipped silently.

This reader is on the ingest hot path: one ``JSONDecoder.decode`` per line, type checks by
``type(x) is``, no regular expressions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memtoc.ingest.sources._lines import (
    decode_line,
    first_line_cut,
    first_object,
    iter_lines,
    parse_timestamp,
)
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.model import (
    DEFAULT_ROLE_FOR_TYPE,
    DEFAULT_TYPE_FOR_ROLE,
    EVENT_TYPES,
    MAX_TS_MS,
    MIN_TS_MS,
    ROLES,
)

_fromisoformat = datetime.fromisoformat
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_ROLES = frozenset(ROLES)
_TYPES = frozenset(EVENT_TYPES)
_ROLE_CHOICES = ", ".join(ROLES)
_TYPE_CHOICES = ", ".join(EVENT_TYPES)


class JsonlSource:
    """The generic one-event-per-line format."""

    name = "jsonl"
    agent = "jsonl"
    incremental = True

    def sniff(self, path: Path, head: bytes) -> bool:
        """A first line that is an object with ``role``/``event_type``, ``text`` and ``timestamp``."""
        obj = first_object(head)
        if obj is None:  # a first line longer than the head: its leading keys will do
            return first_line_cut(head) and head.lstrip().startswith(b'{"session_id"')
        return "text" in obj and "timestamp" in obj and ("role" in obj or "event_type" in obj)

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """One record per non-blank line from byte ``start``."""
        default_agent = options.default_agent
        for line_no, offset, raw in iter_lines(path, start):
            end = offset + len(raw)
            if raw.isspace():
                continue
            obj, error = decode_line(raw, offset)
            if error is not None:
                yield RawRecord(line_no, offset, end, error=error, complete=raw[-1:] == b"\n")
                continue
            draft = parse_event(obj, default_agent)
            if isinstance(draft, str):
                yield RawRecord(line_no, offset, end, error=draft)
            else:
                yield RawRecord(line_no, offset, end, [draft])

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """Nothing: every line names its own session."""
        return {}


def parse_event(obj: Any, default_agent: str | None = None) -> EventDraft | str:
    """A validated draft from one decoded line, or the reason it is not a valid event."""
    if type(obj) is not dict:
        return "line is not a JSON object"
    session_id = obj.get("session_id")
    if type(session_id) is not str or not session_id:
        return _bad(obj, "session_id", "a non-empty string")
    ts = obj.get("timestamp")
    if ts is None:
        return _bad(obj, "timestamp", "an ISO 8601 string or epoch milliseconds")
    try:
        ts_ms = _iso_ms(ts) if type(ts) is str else parse_timestamp(ts)
    except ValueError:
        try:
            ts_ms = parse_timestamp(ts)  # digit strings, and the error message
        except ValueError as exc:
            return str(exc)
    role = obj.get("role")
    event_type = obj.get("event_type")
    if event_type is None:
        if role is None:
            return "missing field 'role'"
        if type(role) is not str or role not in _ROLES:
            return _bad(obj, "role", f"one of {_ROLE_CHOICES}")
        event_type = DEFAULT_TYPE_FOR_ROLE[role]
    else:
        if type(event_type) is not str or event_type not in _TYPES:
            return _bad(obj, "event_type", f"one of {_TYPE_CHOICES}")
        if role is None:
            role = DEFAULT_ROLE_FOR_TYPE[event_type]
        elif type(role) is not str or role not in _ROLES:
            return _bad(obj, "role", f"one of {_ROLE_CHOICES}")
    text = obj.get("text")
    if type(text) is not str:
        return _bad(obj, "text", "a string")
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict:
        return _bad(obj, "metadata", "an object")
    event_id = obj.get("event_id")
    if event_id is not None and (type(event_id) is not str or not event_id):
        return _bad(obj, "event_id", "a non-empty string")
    project = obj.get("project")
    if project is not None and (type(project) is not str or not project):
        return _bad(obj, "project", "a non-empty string")
    agent = obj.get("agent")
    if agent is None:
        agent = default_agent
    elif type(agent) is not str or not agent:
        return _bad(obj, "agent", "a non-empty string")
    # Positional: the hot path (order: session_id, ts_ms, event_type, role, text, metadata,
    # project, agent, event_id).
    return EventDraft(session_id, ts_ms, event_type, role, text, metadata, project, agent, event_id)


def _iso_ms(value: str) -> int:
    """``parse_timestamp`` for ISO strings, inlined for the hot path (ValueError when it fails)."""
    dt = _fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    ms: int = (dt - _EPOCH) // _ONE_MS
    if ms < MIN_TS_MS or ms > MAX_TS_MS:
        raise ValueError(value)
    return ms


def _bad(obj: dict[str, Any], key: str, expected: str) -> str:
    """The error for a missing or mistyped field."""
    if key not in obj:
        return f"missing field '{key}'"
    value = obj[key]
    shown = repr(value) if isinstance(value, str) else type(value).__name__
    if value is None:
        shown = "null"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"field '{key}' must be {expected} (got {shown})"
