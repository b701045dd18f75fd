"""Codex CLI sessions: ``~/.codex/sessions/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl``.

Current files wrap every line in an envelope ``{"timestamp", "type", "payload"}``:

- ``session_meta`` (the first line): ``id``, ``timestamp``, ``cwd``, ``originator``,
  ``cli_version``, ``base_instructions``, ``git``, and for a sub-agent ``parent_thread_id`` —
  read once per file, so a read from a later offset still knows the session id and cwd. It
  becomes one ``system`` event (bookkeeping ``instructions``) holding, in its metadata, the
  session's injected instructions by hash (``sources.codex_injected``): Codex's system prompt,
  developer messages and ``AGENTS.md`` are kept once per session there, never as text.
- ``response_item`` payloads are the conversation: ``message`` (role user / assistant / developer /
  system, ``content`` blocks ``input_text`` / ``output_text`` / ``input_image``) → one event per
  block; ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` →
  tool_call (text: tool name and compact arguments; an app's or MCP server's tool, which Codex
  records as ``namespace`` + ``name`` — ``mcp__codex_apps__github`` + ``_fetch_pr`` — is named
  ``<namespace>.<name>``, the namespace also in ``tool_namespace``); ``function_call_output`` and
  ``custom_tool_call_output`` → tool_result; ``reasoning`` is skipped unless ``include_thinking``.
  Developer messages and injected user blocks (``AGENTS.md``, ``<user_instructions>``,
  ``<skill>``) of the session's opening are skipped (their hashes are on the session event); a
  later new one becomes a short ``instructions`` event; ``<environment_context>`` a ``context``
  event (text kept, fields in metadata); ``<turn_aborted>`` an ``interrupt``.
- ``event_msg`` payloads mirror the response items for the UI (user_message, agent_message,
  agent_reasoning, token_count, exec_command_*, and the ``item_completed`` items of paginated
  threads): skipped, except ``turn_aborted`` and ``error``, which nothing else records (system
  events, bookkeeping ``interrupt`` and ``notice``).
- ``compacted`` (the summary that replaces history after compaction) → a system event
  (bookkeeping ``compact_summary``: it restates what came before).
- ``turn_context`` is bookkeeping: skipped.

Older files (early 2025) start with the bare session object ``{"id", "timestamp", "instructions"}``,
then bare response items and ``{"record_type": "state"}`` markers, with no per-line timestamps:
their events are placed at the session start plus one millisecond per line number (so they keep
file order and get the same instant whatever offset a read starts from).

``session_id`` is the session's ``id`` (else the uuid in the file name, else the file stem); a
sub-agent's rollout carries its parent's as ``parent_session_id``;
its project the one of its ``cwd`` (``EventDraft.cwd``; ``memtoc.projects``). Metadata carries ``cwd``, ``git_branch``, and for tools
``tool_name``, ``tool_use_id`` (Codex's ``call_id``), ``is_error``/``exit_code`` when known. A
command's output loses the lines Codex wraps it in (``Chunk ID``, ``Wall time``, ``Process exited
with code``, ``Original token count``, ``Output:``): they go to the metadata (``exit_code``,
``is_error``, ``wall_time_s``, ``original_tokens``, ``chunk_id``, ``running_session``).
"""

from __future__ import annotations

import contextlib
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
    loads_bounded,
    mtime_ms,
    parse_timestamp,
    session_hint_from,
)
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.ingest.sources.bookkeeping import marked
from memtoc.ingest.sources.codex_injected import Block, block_of, classify, environment
from memtoc.model import JsonValue

_ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_UUID_AT_END = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$"
)
_TEXT_BLOCKS = frozenset({"input_text", "output_text", "text"})
_OPENING_LINES = 400
"""How far into a rollout to look for the opening's injected instructions."""
_MESSAGE_ROLES = {
    "user": ("user_message", "user"),
    "assistant": ("assistant_message", "assistant"),
    "developer": ("system", "system"),
    "system": ("system", "system"),
}

_Part = tuple[str, str, str, dict[str, JsonValue]]
"""(event_type, role, text, extra metadata) for one event of a record."""


@dataclass(frozen=True, slots=True)
class _Session:
    """What the first line says about the whole file, and the instructions its opening holds."""

    session_id: str
    cwd: str | None
    ts_ms: int | None
    git_branch: str | None
    meta: dict[str, JsonValue] = field(default_factory=dict)
    """The session event's metadata (CLI, git, lineage, instruction blocks)."""
    opening: frozenset[str] = frozenset()
    """Hashes of the instruction blocks of the session's opening (kept on the session event)."""
    parent: str | None = None


class CodexSource:
    """Codex CLI rollout files, current (envelope) and early-2025 (bare items) layouts."""

    name = "codex"
    agent = "codex"
    incremental = True

    def sniff(self, path: Path, head: bytes) -> bool:
        """An envelope line with a ``payload``, or the legacy bare session object."""
        obj = first_object(head)
        if obj is None:
            start = head.lstrip()[:16]
            return first_line_cut(head) and (
                (start.startswith(b'{"timestamp"') and b'"type":"session_meta"' in head)
                or (start.startswith(b'{"id"') and b'"instructions"' in head)
            )
        kind = obj.get("type")
        if (
            isinstance(kind, str)
            and kind in _ENVELOPE_TYPES
            and isinstance(obj.get("payload"), dict)
        ):
            return True
        return _is_legacy_meta(obj) and ("instructions" in obj or path.name.startswith("rollout-"))

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """One record per non-blank line from byte ``start``."""
        session = _read_session(path)
        base: dict[str, JsonValue] = {}
        if session.cwd is not None:
            base["cwd"] = session.cwd
        if session.git_branch is not None:
            base["git_branch"] = session.git_branch
        if session.parent is not None:
            base["parent_session_id"] = session.parent
        legacy_start: int | None = session.ts_ms
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
                yield record
                continue
            if "payload" in obj:
                found = _envelope(obj, options, session)
            else:
                if legacy_start is None:
                    legacy_start = mtime_ms(path)
                found = _legacy(obj, legacy_start + line_no - 1, options, session)
            if isinstance(found, str):
                record.error = found
            else:
                ts_ms, parts, record.skipped = found
                for index, (event_type, role, text, extra) in enumerate(parts):
                    record.drafts.append(
                        EventDraft(
                            session_id=session.session_id,
                            ts_ms=ts_ms,
                            event_type=event_type,
                            role=role,
                            text=text,
                            metadata={**base, **extra},
                            cwd=session.cwd,
                            agent=options.default_agent,
                            part=index,
                        )
                    )
            yield record

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """``session_id``, ``cwd`` and ``project`` from the session's first line."""
        session = _read_session(path)
        return session_hint_from(session.session_id, session.cwd)


_Found = tuple[int, list[_Part], int] | str
"""(timestamp, events, skipped parts), or why the line is rejected."""


def _envelope(obj: dict[str, Any], options: SourceOptions, session: _Session) -> _Found:
    """The events of a current-format line."""
    kind = obj.get("type")
    if kind not in ("response_item", "event_msg", "compacted", "session_meta"):
        return 0, [], 1
    payload = obj["payload"]
    if not isinstance(payload, dict):
        return "field 'payload' must be an object"
    if "timestamp" not in obj:
        return "missing field 'timestamp'"
    try:
        ts_ms = parse_timestamp(obj["timestamp"])
    except ValueError as exc:
        return str(exc)
    found: tuple[list[_Part], int] | str
    if kind == "session_meta":
        found = _session_event(session)
    elif kind == "response_item":
        found = _item(payload, options, session)
    elif kind == "event_msg":
        found = _event_msg(payload)
    else:
        message = payload.get("message")
        found = ([], 1)
        if isinstance(message, str) and message.strip():
            summary = marked("compact_summary", {"kind": "compacted"})
            found = ([("system", "system", message, summary)], 0)
    return found if isinstance(found, str) else (ts_ms, *found)


def _legacy(
    obj: dict[str, Any], default_ts: int, options: SourceOptions, session: _Session
) -> _Found:
    """The events of an early-2025 line (a bare response item, or bookkeeping)."""
    if _is_legacy_meta(obj):
        return (
            session.ts_ms if session.ts_ms is not None else default_ts,
            *_session_event(session),
        )
    if "record_type" in obj:
        return 0, [], 1
    if "type" not in obj:
        return "missing field 'type'"
    ts_ms = default_ts
    if "timestamp" in obj:
        try:
            ts_ms = parse_timestamp(obj["timestamp"])
        except ValueError as exc:
            return str(exc)
    found = _item(obj, options, session)
    return found if isinstance(found, str) else (ts_ms, *found)


def _session_event(session: _Session) -> tuple[list[_Part], int]:
    """The session's one event: where it ran, and its instructions by hash (not their text)."""
    cli = session.meta.get("originator") or "codex"
    version = session.meta.get("cli_version")
    where = f" in {session.cwd}" if session.cwd else ""
    text = f"Codex session {session.session_id}{where} ({cli}{f' {version}' if version else ''})"
    return [("system", "system", text, marked("instructions", {"kind": "session_meta",
                                                               **session.meta}))], 0  # fmt: skip


def _is_legacy_meta(obj: dict[str, Any]) -> bool:
    return "id" in obj and "timestamp" in obj and "type" not in obj and "role" not in obj


def _item(
    item: dict[str, Any], options: SourceOptions, session: _Session
) -> tuple[list[_Part], int] | str:
    """The events of one response item and the count of skipped parts, or an error."""
    kind = item.get("type")
    call_meta: dict[str, JsonValue] = {}
    if isinstance(item.get("call_id"), str):
        call_meta["tool_use_id"] = item["call_id"]
    if kind == "message":
        return _message(item, session)
    if kind == "reasoning":
        if not options.include_thinking:
            return [], 1
        texts = [
            block["text"]
            for key in ("summary", "content")
            for block in (item.get(key) or [])
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"]
        ]
        if not texts:
            return [], 1
        return [("assistant_message", "assistant", "\n\n".join(texts), {"kind": "thinking"})], 0
    if kind in ("function_call", "custom_tool_call"):
        name = item.get("name") if isinstance(item.get("name"), str) else "tool"
        namespace = item.get("namespace")
        if isinstance(namespace, str) and namespace:  # an app's or MCP server's tool
            name = f"{namespace}.{name}"
            call_meta["tool_namespace"] = namespace
        args = item.get("arguments") if kind == "function_call" else item.get("input")
        text = f"{name} {_compact_arguments(args)}"
        return [("tool_call", "assistant", text, {"tool_name": name, **call_meta})], 0
    if kind in ("local_shell_call", "web_search_call"):
        name = "local_shell" if kind == "local_shell_call" else "web_search"
        text = f"{name} {compact_json(item.get('action', {}))}"
        return [("tool_call", "assistant", text, {"tool_name": name, **call_meta})], 0
    if kind in ("function_call_output", "custom_tool_call_output"):
        text, extra = _call_output(item.get("output"))
        return [("tool_result", "tool", text, {**call_meta, **extra})], 0
    return [], 1


def _message(item: dict[str, Any], session: _Session) -> tuple[list[_Part], int] | str:
    """One event per content block of a ``message`` item (injected ones as bookkeeping)."""
    role = item.get("role")
    if not isinstance(role, str):
        return f"unknown message role {role!r}" if role is not None else "missing field 'role'"
    mapped = _MESSAGE_ROLES.get(role)
    if mapped is None:
        return f"unknown message role {role!r}"
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return "field 'content' must be a list of blocks"
    event_type, event_role = mapped
    base: dict[str, JsonValue] = {"kind": "developer"} if role == "developer" else {}
    parts: list[_Part] = []
    skipped = 0
    for block in content:
        btype = block.get("type") if isinstance(block, dict) else None
        text = block.get("text") if btype in _TEXT_BLOCKS else None
        if btype == "refusal":
            text = block.get("refusal")
        if isinstance(text, str) and text.strip():
            injected = classify(role, text)
            if injected is None:
                parts.append((event_type, event_role, text, base))
                continue
            kind, found = injected
            if found is None:
                extra = environment(text) if kind == "context" else {}
                parts.append(("system", "system", text, marked(kind, extra)))
            elif found.sha256 in session.opening:
                skipped += 1  # kept once, on the session event
            else:
                info: dict[str, JsonValue] = {"instructions": found.describe()}
                parts.append(("system", "system", found.stub(role), marked(kind, info)))
        elif btype == "input_image":
            parts.append((event_type, event_role, "[image]", {**base, "kind": "image"}))
        else:
            skipped += 1
    return parts, skipped


def _event_msg(payload: dict[str, Any]) -> tuple[list[_Part], int]:
    """UI events: only those no response item duplicates become events."""
    kind = payload.get("type")
    if kind == "turn_aborted":
        reason = payload.get("reason")
        text = f"turn aborted: {reason}" if isinstance(reason, str) else "turn aborted"
        return [("system", "system", text, marked("interrupt", {"kind": "turn_aborted"}))], 0
    if kind == "error" and isinstance(payload.get("message"), str) and payload["message"]:
        return [("system", "system", payload["message"], marked("notice", {"kind": "error"}))], 0
    return [], 1


def _compact_arguments(args: Any) -> str:
    """Tool arguments: a JSON string re-rendered compactly, other strings verbatim."""
    if isinstance(args, str):
        if args[:1] in ("{", "["):
            try:
                return compact_json(loads_bounded(args))
            except ValueError:
                return args
        return args
    return compact_json(args if args is not None else {})


def _call_output(output: Any) -> tuple[str, dict[str, JsonValue]]:
    """A tool output's text, with ``exit_code``/``is_error`` when the output states them."""
    if isinstance(output, dict):
        content = output.get("content")
        text = content if isinstance(content, str) else compact_json(content)
        success = output.get("success")
        return text, ({"is_error": not success} if isinstance(success, bool) else {})
    if not isinstance(output, str):
        return ("" if output is None else compact_json(output)), {}
    exit_code: Any = None
    text = output
    header = _EXEC_HEADER.match(output)
    if header is not None:  # Codex's exec wrapper: its fields to metadata, the output as text
        fields = dict(_EXEC_FIELD.findall(header.group(0)))
        extra = _exec_metadata(fields)
        body = output[header.end() :]
        if not body.strip():  # said in words: an empty event tells nothing
            running = extra.get("running_session")
            body = (
                f"(no output yet: still running as session {running})" if running else "(no output)"
            )
        return body, extra
    if output.startswith("{") and '"output"' in output:
        try:
            parsed = loads_bounded(output)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            text = parsed["output"]
            meta = parsed.get("metadata")
            if isinstance(meta, dict):
                exit_code = meta.get("exit_code")
    elif output.startswith("Exit code: "):
        first = output[len("Exit code: ") :].split("\n", 1)[0].strip()
        digits = first.removeprefix("-")
        exit_code = (
            int(first) if digits.isascii() and digits.isdigit() and len(digits) < 19 else None
        )
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        return text, {"exit_code": exit_code, "is_error": exit_code != 0}
    return text, {}


_EXEC_FIELD = re.compile(
    r"^(Chunk ID|Wall time|Process exited with code|Process running with session ID|"
    r"Original token count|Exit code):? ?(.*)$",
    re.M,
)
_EXEC_HEADER = re.compile(
    r"(?:(?:Chunk ID: \w+|Wall time: [\d.]+ seconds|Process exited with code -?\d+|"
    r"Process running with session ID \d+|Original token count: \d+|Exit code: -?\d+)\n)+"
    r"Output:\n?"
)
"""The lines Codex (0.1xx) puts before a command's output ("Chunk ID: 5ede14 / Wall time:
0.0000 seconds / Process exited with code 0 / Original token count: 1089 / Output:"): read
as the output's own words they were every Codex segment's keywords ("seconds", "exited",
"count") and titles ("Tool output (415 lines): Chunk ID: 52e2dc")."""


def _exec_metadata(fields: Mapping[str, str]) -> dict[str, JsonValue]:
    """The exec header's fields as metadata: exit code (and is_error), wall time, the
    running session, the original token count, the chunk id."""
    out: dict[str, JsonValue] = {}
    code = fields.get("Process exited with code", fields.get("Exit code"))
    if code is not None and code.removeprefix("-").isdigit() and len(code) < 19:
        out["exit_code"] = int(code)
        out["is_error"] = int(code) != 0
    wall = fields.get("Wall time", "").removesuffix(" seconds")
    with contextlib.suppress(ValueError):
        out["wall_time_s"] = float(wall)
    running = fields.get("Process running with session ID")
    if running is not None and running.isdigit():
        out["running_session"] = int(running)
    tokens = fields.get("Original token count")
    if tokens is not None and tokens.isdigit():
        out["original_tokens"] = int(tokens)
    if fields.get("Chunk ID"):
        out["chunk_id"] = fields["Chunk ID"]
    return out


def _read_session(path: Path) -> _Session:
    """The session described by the file's first line (current or legacy), with fallbacks, and
    the instruction blocks of its opening (up to the first prompt the user typed)."""
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError as exc:
        raise IngestError(f"cannot open: {exc.strerror}", source=str(path)) from exc
    obj, _ = decode_line(first, 0) if first.strip() else (None, None)
    meta: dict[str, Any] = {}
    if isinstance(obj, dict):
        if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
            meta = {"timestamp": obj.get("timestamp"), **obj["payload"]}
        elif _is_legacy_meta(obj):
            meta = obj
    session_id = meta.get("id")
    if not isinstance(session_id, str) or not session_id:
        match = _UUID_AT_END.search(path.stem)
        session_id = match.group(1) if match else path.stem
    ts_ms: int | None = None
    try:
        ts_ms = parse_timestamp(meta["timestamp"]) if meta.get("timestamp") is not None else None
    except ValueError:
        ts_ms = None
    git = meta.get("git")
    branch = git.get("branch") if isinstance(git, dict) else None
    cwd = meta.get("cwd")
    blocks = [b for b in (_base_block(meta), *_opening_blocks(path)) if b is not None]
    parent = meta.get("parent_thread_id") or _spawn_parent(meta.get("source"))
    return _Session(
        session_id=session_id,
        cwd=cwd if isinstance(cwd, str) else None,
        ts_ms=ts_ms,
        git_branch=branch if isinstance(branch, str) else None,
        meta=_session_meta(meta, blocks),
        opening=frozenset(b.sha256 for b in blocks),
        parent=parent if isinstance(parent, str) and parent else None,
    )


_META_FIELDS = (
    "cli_version", "originator", "model_provider", "thread_source", "agent_role",
    "parent_thread_id", "forked_from_thread_id",
)  # fmt: skip


def _session_meta(meta: dict[str, Any], blocks: list[Block]) -> dict[str, JsonValue]:
    """The session event's metadata: the session's own fields, git state, instructions by hash."""
    out: dict[str, JsonValue] = {k: meta[k] for k in _META_FIELDS if isinstance(meta.get(k), str)}
    source = meta.get("source")
    if isinstance(source, str | dict):
        out["source"] = source
    git = meta.get("git")
    if isinstance(git, dict):
        out["git"] = {k: v for k, v in git.items() if isinstance(v, str)}
    if blocks:
        out["instructions"] = [b.describe() for b in blocks]
    return out


def _base_block(meta: dict[str, Any]) -> Block | None:
    """Codex's own system prompt (``base_instructions``; the legacy layout's ``instructions``)."""
    value = meta.get("base_instructions", meta.get("instructions"))
    if isinstance(value, dict):
        value = value.get("text")
    if not isinstance(value, str) or not value.strip():
        return None
    return block_of(value, "base_instructions" if "base_instructions" in meta else "instructions")


def _spawn_parent(source: Any) -> Any:
    """The parent thread a sub-agent's ``source`` names (``{"subagent": {"thread_spawn":
    {"parent_thread_id": …}}}`` and similar shapes), else None."""
    if not isinstance(source, dict):
        return None
    stack: list[Any] = [source]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("parent_thread_id"), str):
                return value["parent_thread_id"]
            stack.extend(value.values())
    return None


def _opening_blocks(path: Path) -> list[Block]:
    """The instruction blocks injected before the first prompt the user typed."""
    blocks: list[Block] = []
    for line_no, offset, raw in iter_lines(path, 0):
        if line_no > _OPENING_LINES:
            break
        obj, error = decode_line(raw, offset) if raw.strip() else (None, "blank")
        if error is not None or not isinstance(obj, dict):
            continue
        item = obj.get("payload") if "payload" in obj else obj
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        role, content = item.get("role"), item.get("content")
        if not isinstance(role, str) or not isinstance(content, list):
            continue
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if not isinstance(text, str) or not text.strip():
                continue
            injected = classify(role, text)
            if injected is None:
                if role == "user":
                    return blocks  # the first prompt: the opening is over
                continue
            if injected[1] is not None:
                blocks.append(injected[1])
    return blocks
