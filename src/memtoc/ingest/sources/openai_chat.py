"""OpenAI chat-messages JSON documents (read whole, not incrementally).

The document is one of::

    [{"role": "user", "content": "..."}, ...]                          a list of messages
    {"messages": [...], "session_id"?, "model"?, "created"?, "metadata"?}  one conversation
    [{"messages": [...], ...}, {"messages": [...], ...}]                 a list of conversations

Messages are ``{role: system|developer|user|assistant|tool, content: str | [{type: "text", text}]
| null, tool_calls?: [{id, type: "function", function: {name, arguments}}], tool_call_id?, name?}``
(the older ``function`` role and ``function_call`` field are read too).

Each message gives one event for its content (parts joined by newlines; images, audio and files
become ``[image]``/``[audio]``/``[file]``) plus one tool_call event per tool call (text: the
function name and its arguments as compact JSON); ``tool`` messages are tool_result events. A
message with neither content nor tool calls is skipped.

Time: the format has none. With ``created`` (epoch seconds or ISO), message *i* (1-based) is at
``created + (i - 1)`` ms; without it, the conversation is placed to end at the file's mtime
(message *i* of *n* at ``mtime - (n - i)`` ms) when it is first read, and kept there: the base is
reported as the record's ``anchor`` and handed back on later reads, so a rewritten document keeps
its messages' instants and ids. One millisecond apart keeps the order.

``session_id``: the conversation's, else the file stem (``stem-K`` for the K-th conversation of a
list). Records' ``line`` is the 1-based message index across the document, and their offsets are
the exact byte span of the message's JSON, found by walking the document's top levels with the
standard decoder. Errors read ``message 3: …`` (``conversation 2, message 3: …`` in lists).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from memtoc.errors import IngestError
from memtoc.ingest.sources._lines import (
    MAX_NESTING,
    compact_json,
    loads_bounded,
    mtime_ms,
    nesting,
    parse_timestamp,
    replace_surrogates,
)
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.model import JsonValue

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_ROLES = {
    "system": ("system", "system"),
    "developer": ("system", "system"),
    "user": ("user_message", "user"),
    "assistant": ("assistant_message", "assistant"),
    "tool": ("tool_result", "tool"),
    "function": ("tool_result", "tool"),
}
_PLACEHOLDERS = {
    "image_url": "[image]",
    "input_image": "[image]",
    "image": "[image]",
    "input_audio": "[audio]",
    "file": "[file]",
}

_Span = tuple[int, int, Any]
"""(start, end, value) of a JSON value in the document text."""


@dataclass(slots=True)
class _Conversation:
    fields: dict[str, Any]
    messages: list[_Span]
    error: str | None = None


class OpenAIChatSource:
    """Chat-completions message lists, one conversation or a list of them per JSON file."""

    name = "openai-chat"
    agent = "openai-chat"
    incremental = False

    def sniff(self, path: Path, head: bytes) -> bool:
        """A JSON document (array or object) mentioning ``messages`` or message ``role``s."""
        if b"\x00" in head:
            return False
        lead = head.lstrip()[:1]
        if lead == b"{":
            return b'"messages"' in head
        return lead == b"[" and (b'"messages"' in head or b'"role"' in head)

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """One record per message of the document; ``start`` must be 0."""
        if start != 0:
            raise IngestError(
                f"openai-chat documents are read whole; cannot resume at byte {start}",
                source=str(path),
            )
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise IngestError(f"cannot read: {exc.strerror}", source=str(path)) from exc
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
        deep = text.count("[") + text.count("{") > MAX_NESTING
        to_bytes = byte_offsets(text, data)
        line = 0
        for number, conv in enumerate(conversations, start=1):
            where = f"conversation {number}, " if listed else ""
            session_id = f"{path.stem}-{number}" if listed else path.stem
            given = conv.fields.get("session_id")
            if isinstance(given, str) and given:
                session_id = given
            elif given is not None:
                conv.error = conv.error or "field 'session_id' must be a non-empty string"
            if deep and nesting(conv.fields) > MAX_NESTING + 2:  # + the conversation, messages
                conv.error = conv.error or f"nested deeper than {MAX_NESTING} levels"
            base_ms = _conversation_start(conv, path, options.anchors.get(session_id))
            anchor = (
                (session_id, base_ms)
                if isinstance(base_ms, int) and conv.fields.get("created") is None
                else None
            )
            for index, (begin, end, message) in enumerate(conv.messages, start=1):
                line += 1
                record = RawRecord(line, to_bytes(begin), to_bytes(end), anchor=anchor)
                found = (
                    base_ms if isinstance(base_ms, str) else _message_parts(message, conv.fields)
                )
                if deep and nesting(message) > MAX_NESTING:
                    found = f"nested deeper than {MAX_NESTING} levels"
                if isinstance(found, str):
                    record.error = f"{where}message {index}: {found}"
                elif not found:
                    record.skipped = 1
                elif isinstance(base_ms, int):
                    record.drafts = [
                        EventDraft(
                            session_id=session_id,
                            ts_ms=base_ms + index,
                            event_type=event_type,
                            role=role,
                            text=body,
                            metadata=meta,
                            agent=options.default_agent,
                            part=part,
                        )
                        for part, (event_type, role, body, meta) in enumerate(found)
                    ]
                yield record

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """The file stem: the session id of a document that names none."""
        return {"session_id": path.stem}


def _conversation_start(conv: _Conversation, path: Path, anchor: int | None) -> int | str:
    """The instant of message 0 (message *i* is at this + *i* ms), or why the conversation's
    messages cannot be read. Without ``created``: where an earlier read placed it (``anchor``),
    else ending at the file's mtime — a document rewritten with more messages keeps its earlier
    messages' instants (and so their ids), the new ones follow them."""
    if conv.error is not None:
        return conv.error
    created = conv.fields.get("created")
    if created is None:
        return anchor if anchor is not None else mtime_ms(path) - len(conv.messages)
    try:
        return parse_timestamp(created) - 1
    except ValueError as exc:
        return f"field 'created': {exc}"


def _message_parts(
    message: Any, conversation: dict[str, Any]
) -> list[tuple[str, str, str, dict[str, JsonValue]]] | str:
    """The events of one message, or why it is invalid."""
    if not isinstance(message, dict):
        return "not a JSON object"
    role = message.get("role")
    if role is None:
        return "missing field 'role'"
    mapped = _ROLES.get(role) if isinstance(role, str) else None
    if mapped is None:
        return f"field 'role' must be one of {', '.join(_ROLES)} (got {role!r})"
    content = message.get("content")
    if content is None:
        body = ""
    elif isinstance(content, str):
        body = content
    elif isinstance(content, list):
        body = "\n".join(_part_text(p) for p in content)
    else:
        return "field 'content' must be a string, a list of parts or null"
    meta: dict[str, JsonValue] = {}
    extra = conversation.get("metadata")
    if isinstance(extra, dict):
        meta.update(extra)
    if role == "assistant" and isinstance(conversation.get("model"), str):
        meta["model"] = conversation["model"]
    event_type, event_role = mapped
    if role == "developer":
        meta["kind"] = "developer"
    if isinstance(message.get("name"), str) and event_type != "tool_result":
        meta["name"] = message["name"]
    parts: list[tuple[str, str, str, dict[str, JsonValue]]] = []
    if event_type == "tool_result":
        if isinstance(message.get("tool_call_id"), str):
            meta["tool_use_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            meta["tool_name"] = message["name"]
        return [(event_type, event_role, body, meta)]
    if body.strip():
        parts.append((event_type, event_role, body, meta))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return "field 'tool_calls' must be a list"
    if isinstance(message.get("function_call"), dict):
        calls = [*calls, {"type": "function", "function": message["function_call"]}]
    for number, call in enumerate(calls, start=1):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return f"tool call {number}: missing field 'function.name'"
        name = function["name"]
        call_meta: dict[str, JsonValue] = {**meta, "tool_name": name}
        if isinstance(call.get("id"), str):
            call_meta["tool_use_id"] = call["id"]
        text = f"{name} {_compact_arguments(function.get('arguments'))}"
        parts.append(("tool_call", "assistant", text, call_meta))
    return parts


def _part_text(part: Any) -> str:
    """One content part as text."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return compact_json(part)
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    if isinstance(kind, str) and kind in _PLACEHOLDERS:
        return _PLACEHOLDERS[kind]
    return compact_json(part)


def _compact_arguments(args: Any) -> str:
    """Function arguments (a JSON string) re-rendered compactly; other strings verbatim."""
    if isinstance(args, str):
        try:
            return compact_json(loads_bounded(args))
        except ValueError:
            return args
    return compact_json(args if args is not None else {})


# --- walking the document for byte spans -------------------------------------------------------


def parse_document(text: str) -> tuple[list[_Conversation], bool]:
    """The conversations of a document (each message with its character span), and whether the
    document is a list of conversations."""
    i = _skip(text, 0)
    lead = text[i : i + 1]
    if lead == "[":
        elements, end = _array(text, i)
        _expect_end(text, end)
        listed = any(isinstance(v, _Conversation) for _, _, v in elements)
        if listed:
            conversations = [_as_conversation(span) for span in elements]
        else:
            conversations = [_Conversation({}, elements)]
    elif lead == "{":
        conv, end = _object(text, i)
        _expect_end(text, end)
        if not isinstance(conv, _Conversation):
            raise ValueError("the document is an object without a 'messages' list")
        conversations, listed = [conv], False
    else:
        raise ValueError("the document must be a JSON array or object")
    if "\\ud" in text or "\\uD" in text:
        for conv in conversations:
            conv.fields = replace_surrogates(conv.fields)
            conv.messages = [(s, e, replace_surrogates(v)) for s, e, v in conv.messages]
    return conversations, listed


def _as_conversation(span: _Span) -> _Conversation:
    """A list element where a conversation belongs (anything else is one invalid record)."""
    start, end, value = span
    if isinstance(value, _Conversation):
        return value
    return _Conversation(
        {}, [(start, end, value)], error="not a conversation object with 'messages'"
    )


def _plain(value: Any) -> Any:
    """A decoded element (a conversation object nested where a message belongs is invalid)."""
    return value.fields if isinstance(value, _Conversation) else value


def _array(text: str, i: int) -> tuple[list[_Span], int]:
    """The elements of the array at ``text[i] == '['``, objects walked member by member."""
    items: list[_Span] = []
    i = _skip(text, i + 1)
    if text[i : i + 1] == "]":
        return items, i + 1
    while True:
        start = i
        if text[i : i + 1] == "{":
            value, i = _object(text, i)
        else:
            value, i = _DECODER.raw_decode(text, i)
        items.append((start, i, value))
        i = _skip(text, i)
        sep = text[i : i + 1]
        if sep == "]":
            return items, i + 1
        if sep != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i = _skip(text, i + 1)


def _object(text: str, i: int) -> tuple[Any, int]:
    """The object at ``text[i] == '{'``: a plain dict, or a conversation if it has ``messages``."""
    fields: dict[str, Any] = {}
    messages: list[_Span] | None = None
    i = _skip(text, i + 1)
    if text[i : i + 1] == "}":
        return fields, i + 1
    while True:
        if text[i : i + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
        key, i = scanstring(text, i + 1)
        i = _skip(text, i)
        if text[i : i + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
        i = _skip(text, i + 1)
        if key == "messages" and text[i : i + 1] == "[":
            spans, i = _array(text, i)
            messages = [(s, e, _plain(v)) for s, e, v in spans]
            fields[key] = [v for _, _, v in messages]
        else:
            value, i = _DECODER.raw_decode(text, i)
            fields[key] = value
        i = _skip(text, i)
        sep = text[i : i + 1]
        if sep == "}":
            break
        if sep != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i = _skip(text, i + 1)
    if messages is None:
        return fields, i + 1
    return _Conversation(fields, messages), i + 1


def _skip(text: str, i: int) -> int:
    """The position of the first non-whitespace character at or after ``i``."""
    match = _WS.match(text, i)
    return match.end() if match else i


def _expect_end(text: str, end: int) -> None:
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)


def byte_offsets(text: str, data: bytes) -> Callable[[int], int]:
    """Maps character positions (visited in increasing order) to byte offsets in ``data``."""
    bom = 3 if data.startswith(codecs.BOM_UTF8) else 0
    if len(data) - bom == len(text):
        return lambda pos: pos + bom
    state = [0, bom]

    def convert(pos: int) -> int:
        last_char, last_byte = state
        if pos < last_char:
            last_char, last_byte = 0, bom
        last_byte += len(text[last_char:pos].encode("utf-8"))
        state[0], state[1] = pos, last_byte
        return last_byte

    return convert
