"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.json[l]``.

Gemini CLI's chat recorder has written two layouts of the same records:

- up to 0.38, one JSON document rewritten after every message: ``{"sessionId", "projectHash",
  "startTime", "lastUpdated", "messages": [...], "kind"?, "summary"?, "directories"?}``
  (read whole; re-read when it changes — every event keeps an id, so nothing is stored twice);
- from 0.39, an append-only JSONL log (read incrementally): a first line with the same header
  fields, then one line per message record, ``{"$set": {...}}`` lines that update the header
  (a ``messages`` list in one is a snapshot of the conversation) and ``{"$rewindTo": id}`` lines
  when the user rewinds. A message is appended again in full each time the recorder updates it
  (its tool calls finish, its tokens arrive), so the same ``id`` recurs.

Messages are ``{"id", "timestamp", "type", "content", ...}``; ``type`` is ``user``, ``gemini``,
``info``, ``warning`` or ``error``; ``content`` a string or a list of parts (``{"text"}``,
``inlineData``, ``fileData`` …). A ``gemini`` message may carry ``thoughts`` (``[{"subject",
"description", "timestamp"}]``), ``toolCalls`` (``[{"id", "name", "args", "result", "status",
"timestamp", "resultDisplay", …}]``, ``result`` a list of ``functionResponse`` parts),
``model`` and ``tokens``.

How records become events, each with an id of its own, so a message appended again only adds what
is new (an upsert by id, the first version kept):

- ``user`` → user_message (id: the message id); the injected session context (the first user
  message of newer versions: "This is the Gemini CLI. We are setting up the context for our chat
  … I'm currently working in the directory: …", or a ``<session_context>`` block) → a system event
  marked as ``context`` bookkeeping;
- ``gemini`` → assistant_message for its content (id: the message id); its thoughts, joined, →
  an assistant_message with ``kind: thinking`` (id ``<id>#thoughts``) only with
  ``include_thinking``, else skipped and counted, as the other importers treat thinking; each tool
  call → tool_call (text: the tool name and its arguments as compact JSON; id ``<id>#call:<call
  id>``) and, once it has a result, tool_result (the function response's output or error, else the
  result shown to the user; ``is_error`` when the call's status is ``error``; at the call's own
  timestamp; id ``<id>#result:<call id>``);
- ``info``, ``warning``, ``error`` → system events marked as ``notice`` bookkeeping (the CLI's own
  notices: login, hooks that failed, API errors);
- a ``summary`` (header or ``$set``) → a system event with ``kind: summary`` at the session start;
- ``$rewindTo`` and header-only ``$set`` lines are bookkeeping: skipped, counted.

``session_id`` is the header's ``sessionId`` (a sub-agent's file in ``chats/<parent id>/`` gets
``<parent id>/<its id>``, with ``parent_session_id`` in its metadata). The header gives no working
directory in older versions: the working directory (``EventDraft.cwd``, which the importer maps
to a project with ``memtoc.projects``' rule) is the one the file gives — the header's first
``directories`` entry, else the directory named in the session context, else the
``.project_root`` file Gemini CLI keeps in ``tmp/<project>/`` — or, when none does, left to the
importer (``--project`` or the default). Metadata carries ``project_hash`` (Gemini's SHA-256 of
the working directory), ``session_kind`` (``main``/``subagent``), ``cwd`` when known, ``model``,
``tool_name``, ``tool_use_id``, ``status``.

``~/.gemini/tmp/<project>/logs.json`` (the prompt log) and ``checkpoint-*.json`` (``/chat save``
snapshots) repeat what the chat files hold, without ids: recognised and skipped, never rejected.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtoc.errors import IngestError
from memtoc.ingest.sources._lines import (
    compact_json,
    decode_line,
    first_line_cut,
    first_object,
    iter_lines,
    mtime_ms,
    parse_timestamp,
    session_hint_from,
)
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.ingest.sources.bookkeeping import marked, strip_ansi
from memtoc.ingest.sources.openai_chat import byte_offsets, parse_document
from memtoc.model import JsonValue

_HEADER_KEYS = ("sessionId", "projectHash")
_NOTICE_TYPES = frozenset({"info", "warning", "error"})
_CONTEXT_OPENING = "This is the Gemini CLI. We are setting up the context for our chat."
_CWD_LINE = re.compile(r"I'm currently working in the directory: ?([^\n]+)")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SIDE_FILES = re.compile(r"^(?:logs|checkpoint-.*)\.json$")
_PLACEHOLDERS = {"inlineData": "[image]", "fileData": "[file]"}
_HEADER_SCAN_LINES = 200
"""How far into a JSONL log to look for the header fields and the session context."""

_Part = tuple[str, str, str, dict[str, JsonValue], str, int]
"""(event_type, role, text, extra metadata, event id, timestamp) of one event."""


@dataclass(slots=True)
class _Session:
    """What a file says about its session as a whole."""

    session_id: str
    start_ms: int
    base: dict[str, JsonValue] = field(default_factory=dict)
    """Metadata every event of the file carries."""
    cwd: str | None = None
    """The session's working directory (its project: ``memtoc.projects``)."""


class GeminiSource:
    """Gemini CLI chat recordings: JSON documents (≤ 0.38) and JSONL logs (≥ 0.39)."""

    name = "gemini"
    agent = "gemini"
    incremental = True

    def resumable(self, path: Path) -> bool:
        """Whether a read may resume at a byte offset: the JSONL log yes, the document no."""
        return not _is_document(path)

    def sniff(self, path: Path, head: bytes) -> bool:
        """A header with ``sessionId`` and ``projectHash`` (first line, or the document's start),
        or one of the files Gemini CLI keeps beside its chats."""
        if _SIDE_FILES.match(path.name) and path.parent.name != "chats":
            return _side_file(path, head)
        obj = first_object(head)
        if obj is not None:
            return all(k in obj for k in _HEADER_KEYS) and "type" not in obj
        lead = head.lstrip()
        if not lead.startswith(b"{"):
            return False
        window = lead[:2048]
        if first_line_cut(head):  # one long line: a JSONL header or a minified document
            return b'"sessionId"' in window and b'"projectHash"' in window
        return b'"sessionId"' in window and b'"projectHash"' in window and b'"messages"' in head

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """One record per message (document) or per line (JSONL log)."""
        if _SIDE_FILES.match(path.name) and path.parent.name != "chats":
            size = path.stat().st_size
            if start < size:
                yield RawRecord(1, start, size, skipped=1)
            return
        if _is_document(path):
            if start != 0:
                raise IngestError(
                    f"a Gemini CLI JSON session is read whole; cannot resume at byte {start}",
                    source=str(path),
                )
            yield from _read_document(path, options)
        else:
            yield from _read_log(path, start, options)

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """``session_id`` and, when the file gives one, ``cwd`` and ``project``."""
        session = _document_session(path) if _is_document(path) else _log_session(path)
        cwd = session.base.get("cwd")
        return session_hint_from(session.session_id, cwd if isinstance(cwd, str) else None)


def _is_document(path: Path) -> bool:
    """A whole JSON document: the first line is not a complete JSON object (pretty-printed), or
    is one that holds the messages (minified); a log's header line holds none."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 20)
    except OSError as exc:
        raise IngestError(f"cannot open: {exc.strerror}", source=str(path)) from exc
    if first.startswith(codecs.BOM_UTF8):
        first = first[3:]
    value, error = decode_line(first, 0) if first.strip() else (None, "blank")
    if error is not None or not isinstance(value, dict):
        return True
    return bool(value.get("messages")) and isinstance(value["messages"], list)


def _side_file(path: Path, head: bytes) -> bool:
    """``logs.json`` (a list of prompt records) or ``checkpoint-*.json`` (saved history)."""
    lead = head.lstrip()[:1]
    if path.name == "logs.json":
        return lead == b"[" and (b'"sessionId"' in head or not head.strip(b"[] \n\r\t"))
    return lead in (b"[", b"{") and (b'"parts"' in head or b'"history"' in head)


# --- the session: header fields, working directory, sub-agent parent ----------------------------


def _session_from(header: Mapping[str, Any], path: Path, context: str | None) -> _Session:
    """The session a header describes (with ``context``: the session-context text, if any)."""
    session_id = header.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        session_id = path.stem
    base: dict[str, JsonValue] = {}
    if isinstance(header.get("projectHash"), str):
        base["project_hash"] = header["projectHash"]
    kind = header.get("kind")
    if isinstance(kind, str):
        base["session_kind"] = kind
    parent = path.parent.name
    if _UUID.match(parent) and path.parent.parent.name == "chats" and parent != session_id:
        base["parent_session_id"] = parent
        session_id = f"{parent}/{session_id}"
    cwd = _working_directory(header, path, context)
    if cwd is not None:
        base["cwd"] = cwd
    start_ms: int | None = None
    if header.get("startTime") is not None:
        try:
            start_ms = parse_timestamp(header["startTime"])
        except ValueError:
            start_ms = None
    return _Session(
        session_id=session_id,
        start_ms=start_ms if start_ms is not None else mtime_ms(path),
        base=base,
        cwd=cwd,
    )


def _working_directory(header: Mapping[str, Any], path: Path, context: str | None) -> str | None:
    """The directory the session ran in, from what the files give (see the module docstring)."""
    directories = header.get("directories")
    if isinstance(directories, list) and directories and isinstance(directories[0], str):
        return str(directories[0])
    if context is not None:
        match = _CWD_LINE.search(context)
        if match:
            return match.group(1).strip()
    for folder in (path.parent.parent, path.parent.parent.parent):
        marker = folder / ".project_root"
        try:
            if marker.is_file() and folder.name != "chats":
                text = marker.read_text(encoding="utf-8").strip()
                if text:
                    return text
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _is_session_context(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.startswith(("<session_context>", _CONTEXT_OPENING))


def _first_context(messages: list[Any]) -> str | None:
    """The session-context text among the first user messages, if any."""
    for message in messages[:5]:
        if isinstance(message, dict) and message.get("type") == "user":
            text = _content_text(message.get("content"))
            if _is_session_context(text):
                return text
    return None


def _document_session(path: Path) -> _Session:
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except RecursionError:
        data = {}  # the read reports it
    except (OSError, ValueError) as exc:
        raise IngestError(f"cannot read the session header: {exc}", source=str(path)) from exc
    header = data if isinstance(data, dict) else {}
    messages = header.get("messages")
    return _session_from(
        header, path, _first_context(messages if isinstance(messages, list) else [])
    )


def _log_session(path: Path) -> _Session:
    """The header of a JSONL log: its first line, updated by the ``$set`` lines near the top."""
    header: dict[str, Any] = {}
    early: list[Any] = []
    for line_no, offset, raw in iter_lines(path, 0):
        if line_no > _HEADER_SCAN_LINES:
            break
        obj, error = decode_line(raw, offset)
        if error is not None or not isinstance(obj, dict):
            continue
        if line_no == 1 and "type" not in obj and "$set" not in obj:
            header.update(obj)
        elif isinstance(obj.get("$set"), dict):
            patch = obj["$set"]
            header.update({k: v for k, v in patch.items() if k != "messages"})
            if isinstance(patch.get("messages"), list):
                early.extend(patch["messages"])
        elif "id" in obj:
            early.append(obj)
    return _session_from(header, path, _first_context(early))


# --- the two layouts -------------------------------------------------------------------------------


def _read_document(path: Path, options: SourceOptions) -> Iterator[RawRecord]:
    """One record per message of a whole JSON session document."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bom = 3 if data.startswith(codecs.BOM_UTF8) else 0
        yield RawRecord(1, 0, len(data), error=f"invalid UTF-8 at byte {bom + exc.start}")
        return
    try:
        conversations, listed = parse_document(text)
    except ValueError as exc:
        yield RawRecord(1, 0, len(data), error=f"invalid JSON: {exc}")
        return
    except RecursionError:
        yield RawRecord(1, 0, len(data), error="invalid JSON: nested too deeply")
        return
    if listed or len(conversations) != 1:
        yield RawRecord(1, 0, len(data), error="not a Gemini CLI session (a list of documents)")
        return
    conv = conversations[0]
    messages = [value for _, _, value in conv.messages]
    session = _session_from(conv.fields, path, _first_context(messages))
    to_bytes = byte_offsets(text, data)
    summary = conv.fields.get("summary")
    if not conv.messages:
        record = RawRecord(1, 0, len(data))
        _summary(summary, session, options, record)
        if not record.drafts:
            record.skipped = 1
        yield record
        return
    last = len(conv.messages)
    for index, (begin, end, message) in enumerate(conv.messages, start=1):
        # the last record reaches the end of the file: the watermark is then the file's size
        record = RawRecord(index, to_bytes(begin), len(data) if index == last else to_bytes(end))
        _message(message, session, options, record)
        if index == 1:
            _summary(summary, session, options, record)
        yield record


def _read_log(path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
    """One record per line of a JSONL log from byte ``start``."""
    session = _log_session(path)
    for line_no, offset, raw in iter_lines(path, start):
        end = offset + len(raw)
        if raw.isspace():
            continue
        obj, error = decode_line(raw, offset)
        if error is not None:
            yield RawRecord(line_no, offset, end, error=error, complete=raw[-1:] == b"\n")
            continue
        record = RawRecord(line_no, offset, end)
        if not isinstance(obj, dict):
            record.error = "line is not a JSON object"
        elif "$rewindTo" in obj:
            record.skipped = 1
        elif "$set" in obj:
            yield from _snapshot(obj["$set"], session, options, record)
            continue
        elif line_no == 1 and "type" not in obj:
            _summary(obj.get("summary"), session, options, record)
            if not record.drafts:
                record.skipped = 1
        else:
            _message(obj, session, options, record)
        yield record


def _snapshot(
    patch: Any, session: _Session, options: SourceOptions, record: RawRecord
) -> Iterator[RawRecord]:
    """A ``$set`` line: its summary, then one record per message of a ``messages`` snapshot
    (all at the line's position), so one bad message does not cost the others."""
    if not isinstance(patch, dict):
        record.error = "field '$set' must be an object"
        yield record
        return
    messages = patch.get("messages")
    if messages is not None and not isinstance(messages, list):
        record.error = "field '$set.messages' must be a list"
        yield record
        return
    _summary(patch.get("summary"), session, options, record)
    if not messages:
        record.skipped = 0 if record.drafts else 1
        yield record
        return
    if record.drafts:
        yield record
    for number, message in enumerate(messages, start=1):
        one = RawRecord(record.line, record.offset, record.end_offset)
        _message(message, session, options, one)
        if one.error is not None:
            one.error = f"$set message {number}: {one.error}"
        yield one


# --- messages --------------------------------------------------------------------------------------


def _message(message: Any, session: _Session, options: SourceOptions, record: RawRecord) -> None:
    """Add one message's events to ``record`` (or set its error)."""
    found = _message_parts(message, options)
    if isinstance(found, str):
        record.error = found
        return
    parts, skipped = found
    record.skipped += skipped
    for part, (event_type, role, text, extra, event_id, ts_ms) in enumerate(parts):
        record.drafts.append(
            EventDraft(
                session_id=session.session_id,
                ts_ms=ts_ms,
                event_type=event_type,
                role=role,
                text=text,
                metadata={**session.base, **extra},
                cwd=session.cwd,
                agent=options.default_agent,
                event_id=event_id,
                part=len(record.drafts) + part,
            )
        )


def _message_parts(message: Any, options: SourceOptions) -> tuple[list[_Part], int] | str:
    """The events of one message and the parts skipped, or why it cannot be read."""
    if not isinstance(message, dict):
        return "message is not a JSON object"
    mid = message.get("id")
    if not isinstance(mid, str) or not mid:
        return "missing field 'id'"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "missing field 'type'" if kind is None else "field 'type' must be a string"
    if "timestamp" not in message:
        return "missing field 'timestamp'"
    try:
        ts_ms = parse_timestamp(message["timestamp"])
    except ValueError as exc:
        return str(exc)
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        return "field 'content' must be a string or a list of parts"
    text = strip_ansi(_content_text(content))
    if kind == "user":
        if not text.strip():
            return [], 1
        if _is_session_context(text):
            return [("system", "system", text, marked("context"), mid, ts_ms)], 0
        return [("user_message", "user", text, {}, mid, ts_ms)], 0
    if kind in _NOTICE_TYPES:
        if not text.strip():
            return [], 1
        return [("system", "system", text, marked("notice", {"kind": kind}), mid, ts_ms)], 0
    if kind != "gemini":
        return f"unknown message type {kind!r}"
    meta: dict[str, JsonValue] = {}
    if isinstance(message.get("model"), str):
        meta["model"] = message["model"]
    parts: list[_Part] = []
    skipped = 0
    thoughts = _thoughts(message.get("thoughts"))
    if thoughts is not None:
        if options.include_thinking:
            text_ms = thoughts[1] if thoughts[1] is not None else ts_ms
            parts.append(
                ("assistant_message", "assistant", thoughts[0], {**meta, "kind": "thinking"},
                 f"{mid}#thoughts", min(text_ms, ts_ms))
            )  # fmt: skip
        else:
            skipped += 1
    if text.strip():
        parts.append(("assistant_message", "assistant", text, meta, mid, ts_ms))
    calls = message.get("toolCalls")
    if calls is not None and not isinstance(calls, list):
        return "field 'toolCalls' must be a list"
    for number, call in enumerate(calls or [], start=1):
        found = _tool_call(call, mid, ts_ms, meta)
        if isinstance(found, str):
            return f"tool call {number}: {found}"
        parts.extend(found)
    if not parts:
        skipped += 1
    return parts, skipped


def _content_text(content: Any) -> str:
    """A message's content as text: the string, or its parts joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces: list[str] = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                if part.get("thought") is not True:
                    pieces.append(part["text"])
            else:
                placeholder = next((v for k, v in _PLACEHOLDERS.items() if k in part), None)
                pieces.append(placeholder or compact_json(part))
    return "\n".join(pieces)


def _thoughts(value: Any) -> tuple[str, int | None] | None:
    """A message's thoughts as one text (``subject: description`` each) and the first one's
    instant, or None when it has none."""
    if not isinstance(value, list):
        return None
    lines: list[str] = []
    first: int | None = None
    for thought in value:
        if not isinstance(thought, dict):
            continue
        subject, description = thought.get("subject"), thought.get("description")
        line = ": ".join(s for s in (subject, description) if isinstance(s, str) and s.strip())
        if line:
            lines.append(line)
            if first is None and thought.get("timestamp") is not None:
                try:
                    first = parse_timestamp(thought["timestamp"])
                except ValueError:
                    first = None
    return ("\n\n".join(lines), first) if lines else None


def _tool_call(call: Any, mid: str, ts_ms: int, meta: dict[str, JsonValue]) -> list[_Part] | str:
    """A tool call's events: the call and, when it has finished, its result."""
    if not isinstance(call, dict):
        return "not a JSON object"
    name = call.get("name")
    if not isinstance(name, str) or not name:
        return "missing field 'name'"
    call_id = call.get("id") if isinstance(call.get("id"), str) else None
    key = call_id or f"{name}@{compact_json(call.get('args'))}"
    extra: dict[str, JsonValue] = {**meta, "tool_name": name}
    if call_id is not None:
        extra["tool_use_id"] = call_id
    status = call.get("status")
    if isinstance(status, str):
        extra["status"] = status
    args = call.get("args")
    text = f"{name} {compact_json(args if args is not None else {})}"
    parts: list[_Part] = [("tool_call", "assistant", text, extra, f"{mid}#call:{key}", ts_ms)]
    result = _result_text(call)
    if result is not None:
        result_ms = ts_ms
        if call.get("timestamp") is not None:
            try:
                result_ms = max(ts_ms, parse_timestamp(call["timestamp"]))
            except ValueError:
                result_ms = ts_ms
        result_meta: dict[str, JsonValue] = {
            k: v for k, v in extra.items() if k in ("tool_name", "tool_use_id", "status")
        }
        result_meta["is_error"] = status == "error"
        parts.append(
            ("tool_result", "tool", strip_ansi(result), result_meta, f"{mid}#result:{key}",
             result_ms)
        )  # fmt: skip
    return parts


def _result_text(call: dict[str, Any]) -> str | None:
    """What a finished tool call returned, or None while it has no result."""
    result = call.get("result")
    pieces: list[str] = []
    if isinstance(result, list):
        for part in result:
            if not isinstance(part, dict):
                continue
            response = part.get("functionResponse")
            if isinstance(response, dict):
                body = response.get("response")
                if isinstance(body, dict):
                    for key in ("output", "error", "content", "llmContent"):
                        if isinstance(body.get(key), str):
                            pieces.append(body[key])
                            break
                    else:
                        pieces.append(compact_json(body))
                elif body is not None:
                    pieces.append(body if isinstance(body, str) else compact_json(body))
            elif isinstance(part.get("text"), str):
                pieces.append(part["text"])
            else:
                placeholder = next((v for k, v in _PLACEHOLDERS.items() if k in part), None)
                if placeholder:
                    pieces.append(placeholder)
    elif isinstance(result, str):
        pieces.append(result)
    if pieces:
        return "\n".join(pieces)
    display = call.get("resultDisplay")
    if isinstance(display, str) and display:
        return display
    if result is not None and result != []:
        return compact_json(result)
    return None


def _summary(value: Any, session: _Session, options: SourceOptions, record: RawRecord) -> None:
    """Gemini CLI's own one-line summary of the session, as a system event at its start."""
    if not isinstance(value, str) or not value.strip():
        return
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    record.drafts.append(
        EventDraft(
            session_id=session.session_id,
            ts_ms=session.start_ms,
            event_type="system",
            role="system",
            text=value,
            metadata={**session.base, "kind": "summary"},
            cwd=session.cwd,
            agent=options.default_agent,
            event_id=f"{session.session_id}#summary:{digest}",
            part=len(record.drafts),
        )
    )
