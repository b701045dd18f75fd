"""Claude Code transcripts: ``~/.claude/projects/<encoded-cwd>/<session-uuid>.jsonl``.

Each line is one record. Conversational records look like::

    {"type": "assistant", "uuid": "...", "parentUuid": "...", "sessionId": "...",
     "timestamp": "2025-06-03T10:15:02.412Z", "cwd": "/home/dev/webapp", "version": "1.0.17",
     "gitBranch": "main", "isSidechain": false, "userType": "external",
     "message": {"role": "assistant", "model": "claude-sonnet-4-20250514",
                 "content": [{"type": "text", "text": "..."}]}}

How records become events:

- ``user``/``assistant`` lines: one event per content block (a string content is one text block).
  ``text`` → user_message / assistant_message; ``tool_use`` (and ``server_tool_use``) → tool_call
  whose text is the tool name and its input as compact JSON; ``tool_result`` (and the server tools'
  ``*_tool_result``) → tool_result, role tool, text flattened from a string or a list of blocks,
  and after it the reason the user typed when refusing the call, a user_message of its own
  (``kind: rejection_reason``: Claude Code stores it inside the result); ``image``/``document`` → a ``[image]``/``[document]`` placeholder. ``thinking`` blocks are
  skipped (counted) unless ``include_thinking``, when they become assistant_message events with
  ``kind: thinking``; ``redacted_thinking`` is always skipped. Empty text blocks are skipped.
- ``system`` lines with content → system events (``kind`` = their subtype), marked as
  bookkeeping (``sources.bookkeeping``: hook progress, compaction and error notices, recorded
  slash commands) except the "while you were away" recap (``away_summary``).
- Bookkeeping in user and assistant lines becomes ``system`` events marked with their class,
  their text kept (wrappers removed): a sub-agent's "Warmup" prompt and its reply, or that reply
  saved alone, a finished reply to nothing at the root of a sub-agent's transcript (``warmup``),
  the local-command caveat (``caveat``), a slash command typed without arguments (``command``;
  with arguments it stays the user's message, ``/plan fix the grid``, with ``command`` in the
  metadata), command output (``command_output``), "[Request interrupted by user]"
  (``interrupt``), a message that is only a ``<system-reminder>`` (``context``), the summary a
  compaction writes (``compact_summary``), and the synthetic replies Claude Code writes for API
  errors and login notices ("Not logged in · Please run /login": ``notice``). ANSI colour codes
  are stripped from every text.
- A sub-agent's lines (``isSidechain`` with an ``agentId``: ``agent-<id>.jsonl``, in the project
  folder or ``<session>/subagents/``) form a session of their own, ``<parent session>/agent-<id>``,
  with ``parent_session_id`` and, from the ``agent-<id>.meta.json`` sidecar, ``agent_type``,
  ``agent_description`` and ``worktree_path`` in their metadata.
- ``summary`` lines (``{"type": "summary", "summary", "leafUuid"}``) → a system event with
  ``kind: summary``. They carry no time, session or directory, so they take the file's first
  timestamp, session and cwd: the same values whichever offset the read starts from. A file
  with no timed line yet (Claude Code writes a resumed session's summaries first, and 1.0 wrote
  files of summaries alone) places a summary where the conversation it titles ends: its
  ``leafUuid``'s line in a sibling transcript (time, session, cwd). When neither says, the
  summary waits (``RawRecord.complete`` False: the read stops before it and the next one reads
  it again) — never the file's mtime, which put old summaries on the day the file was copied or
  touched, as that day's work and the project's latest session. A file unchanged for
  ``SUMMARY_WAIT_S`` waits no more: its conversation is gone (Claude Code deletes transcripts
  after ``cleanupPeriodDays``) and no line will come to date it, so the summary — a title of
  nothing memtoc holds — is skipped; it waited forever before, "waiting" at every import.
- Any other record type (``file-history-snapshot``, ``queue-operation``, …) is bookkeeping:
  skipped, not an error.

``event_id`` is the line's ``uuid`` for its first event and ``uuid#N`` for the N-th further event of
the same line. The project is the one of the directory the session started in (its first ``cwd``,
passed as ``EventDraft.cwd``; ``memtoc.projects`` holds the rule), so a session whose agent changes
directory stays one project; each line's own ``cwd`` is in the metadata, with
``uuid``, ``parent_uuid``, ``git_branch``, ``version``, ``sidechain`` (subagent messages are kept),
``model`` (assistant), ``tool_name``/``tool_use_id``/``is_error`` (tools).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtoc.ingest.sources._lines import (
    compact_json,
    decode_line,
    first_line_cut,
    first_object,
    iter_lines,
    parse_timestamp,
    session_hint_from,
)
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.ingest.sources.bookkeeping import (
    classify_user_text,
    is_login_notice,
    marked,
    strip_ansi,
)
from memtoc.model import JsonValue

_MESSAGE_TYPES = frozenset({"user", "assistant"})
_CC_ONLY_TYPES = frozenset({"file-history-snapshot", "queue-operation", "summary"})
"""Record types no other format uses (for sniffing)."""
_CONTEXT_SCAN_LINES = 2000
"""How far into a file to look for the session's first timestamp and cwd (for summary lines)."""
SUMMARY_WAIT_S = 3600.0
"""How long a summary with no time known waits for its file to grow (a resumed session writes
its summaries before its first timed line) before it is skipped as a title of nothing."""
_LEAF_SCAN_BYTES = 64 << 20
"""How much of a folder's other transcripts a file of summaries alone reads to find the
conversations they title (newest files first)."""

_Part = tuple[str, str, str, dict[str, JsonValue]]
"""(event_type, role, text, extra metadata) for one content block."""


@dataclass(frozen=True, slots=True)
class _FileContext:
    """What a file says about its session as a whole: its first session id, cwd and instant."""

    session_id: str
    cwd: str | None
    ts_ms: int | None
    """None when no line read so far has a timestamp."""


class ClaudeCodeSource:
    """Claude Code's per-session JSONL transcripts."""

    name = "claude-code"
    agent = "claude-code"
    incremental = True

    def sniff(self, path: Path, head: bytes) -> bool:
        """Claude Code's keys (``sessionId``, ``parentUuid``, ``leafUuid``) or record types, or a
        sub-agent's ``agent-<id>.meta.json`` sidecar."""
        obj = first_object(head)
        if is_sidecar(path):
            return isinstance(obj, dict) or _whole_object(head) is not None
        if obj is None:
            return first_line_cut(head) and b'"sessionId"' in head and b'"parentUuid"' in head
        if "sessionId" in obj or "parentUuid" in obj or "leafUuid" in obj:
            return True
        kind = obj.get("type")
        if not isinstance(kind, str):
            return False
        return kind in _CC_ONLY_TYPES or (kind in ("user", "assistant", "system") and "uuid" in obj)

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        """One record per non-blank line from byte ``start`` (a sidecar: one skipped record)."""
        if is_sidecar(path):
            size = path.stat().st_size
            if start < size:
                yield RawRecord(1, start, size, skipped=1)
            return
        stem = path.stem
        context: _FileContext | None = None
        state = _ReadState(agent_meta=_sidecar_metadata(path), path=path)
        leaves: _Leaves | None = None
        for line_no, offset, raw in iter_lines(path, start):
            end = offset + len(raw)
            if raw.isspace():
                continue
            obj, error = decode_line(raw, offset)
            if error is not None:
                yield RawRecord(line_no, offset, end, error=error, complete=raw[-1:] == b"\n")
                continue
            record = RawRecord(line_no, offset, end)
            state.line_end = end
            if not isinstance(obj, dict):
                record.error = "line is not a JSON object"
            else:
                if context is None:  # the session's start: its first cwd decides the project
                    context = _file_context(path)
                if obj.get("type") == "summary":
                    if context.ts_ms is None and leaves is None:
                        leaves = _Leaves(path)
                    _summary(obj, context, options, record, leaves)
                    if not record.complete:  # no time known yet: nor for what follows it
                        yield record
                        return
                else:
                    _line(obj, stem, options, record, state, context.cwd)
            yield record

    def session_hint(self, path: Path) -> Mapping[str, str]:
        """``session_id``, ``cwd`` and ``project`` from the first lines that name them."""
        context = _file_context(path)
        return session_hint_from(context.session_id, context.cwd)


def is_sidecar(path: Path) -> bool:
    """Whether ``path`` is the ``agent-<id>.meta.json`` Claude Code writes beside a sub-agent's
    transcript (``agentType``, ``description``, ``worktreePath``): read with the transcript, never
    an input of its own."""
    name = path.name
    return name.startswith("agent-") and name.endswith(".meta.json")


@dataclass(slots=True)
class _ReadState:
    """What one read remembers across lines."""

    agent_meta: dict[str, JsonValue]
    """What the sub-agent's ``.meta.json`` sidecar says (empty for other transcripts)."""
    warmups: set[str] = field(default_factory=set)
    """Uuids of sub-agent warm-up prompts seen: their replies are bookkeeping too."""
    path: Path | None = None
    line_end: int = 0
    """Where the line being read ends (what follows it in the file is the rest of the read)."""

    def last_line(self) -> bool:
        """Whether nothing but blank space follows the line being read."""
        if self.path is None:
            return False
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.line_end)
                return not fh.read(4096).strip()
        except OSError:
            return False


_SIDECAR_FIELDS = (
    ("agentType", "agent_type"),
    ("description", "agent_description"),
    ("worktreePath", "worktree_path"),
)


def _sidecar_metadata(path: Path) -> dict[str, JsonValue]:
    """The fields of ``agent-<id>.meta.json`` beside a sub-agent transcript, if there is one."""
    if not path.name.startswith("agent-"):
        return {}
    sidecar = path.with_name(f"{path.stem}.meta.json")
    try:
        obj = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(obj, dict):
        return {}
    return {key: obj[src] for src, key in _SIDECAR_FIELDS if isinstance(obj.get(src), str)}


def _whole_object(head: bytes) -> dict[str, Any] | None:
    """``head`` parsed as one JSON object (a pretty-printed sidecar), or None."""
    try:
        obj = json.loads(head)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _line(
    obj: dict[str, Any],
    stem: str,
    options: SourceOptions,
    record: RawRecord,
    state: _ReadState,
    start_cwd: str | None = None,
) -> None:
    """Fill ``record`` from a user, assistant, system or bookkeeping line; ``start_cwd`` is the
    directory the session started in (its project's, whatever this line's own ``cwd`` says)."""
    kind = obj.get("type")
    if kind is None:
        record.error = "missing field 'type'"
        return
    if not isinstance(kind, str):
        record.error = f"field 'type' must be a string (got {type(kind).__name__})"
        return
    if kind not in _MESSAGE_TYPES and kind != "system":
        record.skipped = 1
        return
    if "timestamp" not in obj:
        record.error = "missing field 'timestamp'"
        return
    try:
        ts_ms = parse_timestamp(obj["timestamp"])
    except ValueError as exc:
        record.error = str(exc)
        return
    base = _base_metadata(obj)
    if kind == "system":
        content = obj.get("content")
        if not isinstance(content, str) or not content.strip():
            record.skipped = 1
            return
        parts: list[_Part] = [_system_part(obj, strip_ansi(content))]
    else:
        message = obj.get("message")
        if not isinstance(message, dict):
            record.error = (
                "missing field 'message'"
                if message is None
                else "field 'message' must be an object"
            )
            return
        if kind == "assistant":
            for key, meta_key in (("model", "model"), ("id", "message_id")):
                if isinstance(message.get(key), str):
                    base[meta_key] = message[key]
        parts_or_error = _content_parts(message.get("content"), kind, options)
        if isinstance(parts_or_error, str):
            record.error = parts_or_error
            return
        parts, record.skipped = parts_or_error
        parts = _bookkeeping(obj, message, kind, parts, state)
    session_id = obj.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        session_id = stem
    agent_id = obj.get("agentId")
    if obj.get("isSidechain") is True and isinstance(agent_id, str) and agent_id:
        # a sub-agent's transcript is a session of its own, linked to the one that started it
        base["parent_session_id"] = session_id
        base.update(state.agent_meta)
        session_id = f"{session_id}/agent-{agent_id}"
    line_cwd = obj.get("cwd")
    cwd = start_cwd or (line_cwd if isinstance(line_cwd, str) and line_cwd else None)
    uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
    for index, (event_type, role, text, extra) in enumerate(parts):
        event_id = None if uuid is None else (uuid if index == 0 else f"{uuid}#{index}")
        record.drafts.append(
            EventDraft(
                session_id=session_id,
                ts_ms=ts_ms,
                event_type=event_type,
                role=role,
                text=text,
                metadata={**base, **extra},
                cwd=cwd,
                agent=options.default_agent,
                event_id=event_id,
                part=index,
            )
        )


def _base_metadata(obj: dict[str, Any]) -> dict[str, JsonValue]:
    """The line-level metadata every event of the line carries (absent values left out)."""
    meta: dict[str, JsonValue] = {}
    for key, meta_key in (
        ("uuid", "uuid"),
        ("parentUuid", "parent_uuid"),
        ("cwd", "cwd"),
        ("gitBranch", "git_branch"),
        ("version", "version"),
        ("agentId", "agent_id"),
    ):
        value = obj.get(key)
        if value is not None:
            meta[meta_key] = value
    meta["sidechain"] = obj.get("isSidechain") is True
    if obj.get("isMeta") is True:
        meta["is_meta"] = True
    if obj.get("isCompactSummary") is True:
        meta["is_compact_summary"] = True
    return meta


_HOOK_NOTICE = re.compile(
    r"\s*(?:Running )?(?:PreToolUse|PostToolUse|Stop|SubagentStop|SessionStart|SessionEnd|"
    r"UserPromptSubmit|PreCompact|Notification)\b|.{0,80}\bhook\b",
    re.IGNORECASE,
)
"""Claude Code's notices about hooks it ran ("Running PostToolUse:Edit...", "Stop [ruff] …")."""
_NOTICE_SUBTYPES = frozenset({"away_summary"})
"""System lines that are not Claude Code's own bookkeeping (the "while you were away" recap)."""


def _system_part(obj: dict[str, Any], content: str) -> _Part:
    """A ``system`` line: Claude Code's own notice (hook progress, compaction, errors), a slash
    command it recorded, or the recap it wrote while the user was away."""
    subtype = obj.get("subtype")
    extra: dict[str, JsonValue] = {"kind": subtype if isinstance(subtype, str) else "system"}
    if isinstance(obj.get("level"), str):
        extra["level"] = obj["level"]
    if subtype in _NOTICE_SUBTYPES:
        return ("system", "system", content, extra)
    found = classify_user_text(content)
    if found.kind is None and found.extra:  # a command typed with arguments: a request
        return ("user_message", "user", found.text, {**extra, **found.extra})
    hook = subtype == "hook" or _HOOK_NOTICE.match(content) is not None
    kind = found.kind or ("hook" if hook else "notice")
    return ("system", "system", found.text, marked(kind, {**extra, **found.extra}))


def _reply_to_nothing(message: dict[str, Any], parts: list[_Part], state: _ReadState) -> bool:
    """A sub-agent transcript's first line, a reply nothing asked for: finished (``end_turn``),
    or — Claude Code 2.0.5x saved the warm-up reply with ``stop_reason`` null — its file's only
    line, with no tool call (a real sub-agent whose prompt is missing goes on after its first
    reply)."""
    stop = message.get("stop_reason")
    if stop == "end_turn":
        return True
    return stop is None and all(p[0] != "tool_call" for p in parts) and state.last_line()


def _bookkeeping(
    obj: dict[str, Any],
    message: dict[str, Any],
    kind: str,
    parts: list[_Part],
    state: _ReadState,
) -> list[_Part]:
    """The parts of a user or assistant line, with Claude Code's bookkeeping made ``system``
    events marked with their class (``sources.bookkeeping``) and ANSI codes stripped."""
    uuid = obj.get("uuid")
    sidechain_root = obj.get("isSidechain") is True and obj.get("parentUuid") is None
    texts = [p for p in parts if p[0] in ("user_message", "assistant_message")]
    if kind == "user" and sidechain_root and [p[2].strip() for p in texts] == ["Warmup"]:
        if isinstance(uuid, str):
            state.warmups.add(uuid)
        return [_marked(p, "warmup") for p in parts]
    if kind == "assistant" and obj.get("parentUuid") in state.warmups:
        return [_marked(p, "warmup") for p in parts]
    if kind == "assistant" and sidechain_root and _reply_to_nothing(message, parts, state):
        # a sub-agent's finished reply to nothing (Claude Code 2.0 saves the warm-up's reply
        # without its "Warmup" prompt: "I'm ready to help you explore the … codebase")
        return [_marked(p, "warmup") for p in parts]
    if kind == "assistant" and (
        message.get("model") == "<synthetic>" or obj.get("isApiErrorMessage") is True
    ):
        return [_marked(p, "notice") if p[0] == "assistant_message" else p for p in parts]
    out: list[_Part] = []
    for part in parts:
        event_type, role, text, extra = part
        if event_type == "tool_result":
            out.append((event_type, role, strip_ansi(text), extra))
            continue
        if event_type not in ("user_message", "assistant_message") or extra.get("kind"):
            out.append(part)
            continue
        text = strip_ansi(text)
        if kind == "assistant":
            notice = is_login_notice(text)
            out.append(_marked((event_type, role, text, extra), "notice") if notice else
                       (event_type, role, text, extra))  # fmt: skip
            continue
        if obj.get("isCompactSummary") is True:
            out.append(_marked((event_type, role, text, extra), "compact_summary"))
            continue
        found = classify_user_text(text)
        if found.kind is None:
            out.append((event_type, role, found.text, {**extra, **found.extra}))
        elif found.text.strip():
            out.append(("system", "system", found.text, marked(found.kind, found.extra)))
    return out


def _marked(part: _Part, kind: str) -> _Part:
    """``part`` as a ``system`` event of bookkeeping class ``kind`` (text kept, ANSI stripped)."""
    event_type, role, text, extra = part
    if event_type in ("tool_call", "tool_result"):
        return (event_type, role, strip_ansi(text), marked(kind, extra))
    return ("system", "system", strip_ansi(text), marked(kind, {**extra, "from": role}))


def _content_parts(
    content: Any, kind: str, options: SourceOptions
) -> tuple[list[_Part], int] | str:
    """The events of a message's content and how many blocks were skipped, or an error."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    elif content is None:
        return "missing field 'message.content'"
    elif not isinstance(content, list):
        return "field 'message.content' must be a string or a list of blocks"
    text_type, role = (
        ("user_message", "user") if kind == "user" else ("assistant_message", "assistant")
    )
    parts: list[_Part] = []
    skipped = 0
    for block in content:
        btype = block.get("type") if isinstance(block, dict) else None
        if btype == "text":
            text = block.get("text")
            if isinstance(text, str) and text.strip():
                parts.append((text_type, role, text, {}))
            else:
                skipped += 1
        elif btype in ("tool_use", "server_tool_use"):
            name = block.get("name") if isinstance(block.get("name"), str) else "tool"
            text = f"{name} {compact_json(block.get('input', {}))}"
            extra: dict[str, JsonValue] = {"tool_name": name}
            if isinstance(block.get("id"), str):
                extra["tool_use_id"] = block["id"]
            parts.append(("tool_call", "assistant", text, extra))
        elif isinstance(btype, str) and btype.endswith("tool_result"):
            extra = {"is_error": block.get("is_error") is True}
            if isinstance(block.get("tool_use_id"), str):
                extra["tool_use_id"] = block["tool_use_id"]
            if btype != "tool_result":
                extra["result_type"] = btype
            result = flatten_content(block.get("content"))
            parts.append(("tool_result", "tool", result, extra))
            reason = rejection_reason(result) if kind == "user" else None
            if reason is not None:  # the user's own words, typed when refusing the call
                said: dict[str, JsonValue] = {"kind": "rejection_reason"}
                if "tool_use_id" in extra:
                    said["tool_use_id"] = extra["tool_use_id"]
                parts.append(("user_message", "user", reason, said))
        elif btype in ("image", "document"):
            parts.append((text_type, role, f"[{btype}]", {"kind": btype}))
        elif btype == "thinking" and options.include_thinking:
            thinking = block.get("thinking")
            if isinstance(thinking, str) and thinking.strip():
                parts.append(("assistant_message", "assistant", thinking, {"kind": "thinking"}))
            else:
                skipped += 1
        else:
            skipped += 1
    return parts, skipped


_REJECTION = "The user provided the following reason for the rejection:"
"""What Claude Code writes into a refused tool call's result before the reason the user typed."""


def rejection_reason(result: str) -> str | None:
    """The reason a user typed when refusing a tool call ("use pnpm", "Let's keep the name of the
    py file …"), which Claude Code stores inside the call's result: their words, a correction
    of what the agent was about to do, so it becomes a user turn of its own."""
    _, found, reason = result.partition(_REJECTION)
    reason = reason.strip()
    return reason if found and reason else None


def flatten_content(content: Any) -> str:
    """A tool result's content as text: a string, or a list of blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return compact_json(content)
    pieces: list[str] = []
    for item in content:
        if isinstance(item, str):
            pieces.append(item)
        elif (
            isinstance(item, dict)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ):
            pieces.append(item["text"])
        elif isinstance(item, dict) and item.get("type") in ("image", "document"):
            pieces.append(f"[{item['type']}]")
        else:
            pieces.append(compact_json(item))
    return "\n".join(pieces)


def _summary(
    obj: dict[str, Any],
    context: _FileContext,
    options: SourceOptions,
    record: RawRecord,
    leaves: _Leaves | None,
) -> None:
    """Fill ``record`` from a ``summary`` line, placed at the session's first instant, else where
    the conversation it titles ends, else not yet (``record.complete`` False)."""
    text = obj.get("summary")
    if not isinstance(text, str):
        record.error = (
            "missing field 'summary'" if text is None else "field 'summary' must be a string"
        )
        return
    if not text.strip():
        record.skipped = 1
        return
    metadata: dict[str, JsonValue] = {"kind": "summary"}
    leaf = obj.get("leafUuid")
    if isinstance(leaf, str):
        metadata["leaf_uuid"] = leaf
    session_id, cwd, ts_ms = context.session_id, context.cwd, context.ts_ms
    if ts_ms is None:
        found = leaves.find(leaf) if leaves is not None and isinstance(leaf, str) else None
        if found is None:
            if leaves is not None and leaves.settled():
                record.skipped = 1  # its conversation is gone and nothing will date it
            else:
                record.complete = False
            return
        session_id, ts_ms = found.session_id or session_id, found.ts_ms
        cwd = found.cwd if found.cwd is not None else cwd
    if cwd is not None:
        metadata["cwd"] = cwd
    record.drafts.append(
        EventDraft(
            session_id=session_id,
            ts_ms=ts_ms,
            event_type="system",
            role="system",
            text=text,
            metadata=metadata,
            cwd=cwd,
            agent=options.default_agent,
        )
    )


class _Leaves:
    """Where the conversations a file's summaries title end: each ``leafUuid``'s line, looked up
    once for all of the file's summaries in the other transcripts of its folder (newest first,
    up to ``_LEAF_SCAN_BYTES``)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._found: dict[str, _Leaf] | None = None

    def settled(self) -> bool:
        """Whether the file has not changed for ``SUMMARY_WAIT_S`` (no timed line is coming)."""
        try:
            return time.time() - self._path.stat().st_mtime >= SUMMARY_WAIT_S
        except OSError:
            return False

    def find(self, leaf: str) -> _Leaf | None:
        if self._found is None:
            self._found = self._scan()
        return self._found.get(leaf)

    def _scan(self) -> dict[str, _Leaf]:
        wanted: set[str] = set()
        for _, offset, raw in iter_lines(self._path, 0):
            obj, error = decode_line(raw, offset)
            summary = error is None and isinstance(obj, dict) and obj.get("type") == "summary"
            if summary and isinstance(obj.get("leafUuid"), str):
                wanted.add(obj["leafUuid"])
        found: dict[str, _Leaf] = {}
        budget = _LEAF_SCAN_BYTES
        for sibling in _newest_first(
            p for p in self._path.parent.glob("*.jsonl") if p != self._path
        ):
            if not wanted - found.keys() or budget <= 0:
                break
            try:
                data = sibling.read_bytes()[:budget]
            except OSError:
                continue
            budget -= len(data)
            for leaf in wanted - found.keys():
                place = _leaf_line(data, leaf)
                if place is not None:
                    found[leaf] = place
        return found


def _newest_first(paths: Iterable[Path]) -> list[Path]:
    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(paths, key=mtime, reverse=True)


@dataclass(frozen=True, slots=True)
class _Leaf:
    """Where a summarised conversation ends: its last line's session, cwd and instant."""

    session_id: str
    cwd: str | None
    ts_ms: int


def _leaf_line(data: bytes, leaf: str) -> _Leaf | None:
    """The session, cwd and time of the line whose ``uuid`` is ``leaf`` in ``data``, if any."""
    needle = leaf.encode()
    at = data.find(needle)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        obj, error = decode_line(data[start : len(data) if end < 0 else end], start)
        if error is None and isinstance(obj, dict) and obj.get("uuid") == leaf:
            session = obj.get("sessionId")
            cwd = obj.get("cwd")
            with contextlib.suppress(ValueError, KeyError):
                return _Leaf(
                    session_id=session if isinstance(session, str) and session else "",
                    cwd=cwd if isinstance(cwd, str) and cwd else None,
                    ts_ms=parse_timestamp(obj["timestamp"]),
                )
            return None
        at = data.find(needle, at + 1)
    return None


def _file_context(path: Path) -> _FileContext:
    """The session id, cwd and first timestamp found in the first lines of the file."""
    session_id: str | None = None
    cwd: str | None = None
    ts_ms: int | None = None
    for line_no, offset, raw in iter_lines(path, 0):
        if line_no > _CONTEXT_SCAN_LINES:
            break
        obj, error = decode_line(raw, offset)
        if error is not None or not isinstance(obj, dict):
            continue
        if session_id is None and isinstance(obj.get("sessionId"), str) and obj["sessionId"]:
            session_id = obj["sessionId"]
        if cwd is None and isinstance(obj.get("cwd"), str):
            cwd = obj["cwd"]
        if ts_ms is None and "timestamp" in obj:
            with contextlib.suppress(ValueError):
                ts_ms = parse_timestamp(obj["timestamp"])
        if session_id is not None and cwd is not None and ts_ms is not None:
            break
    return _FileContext(
        session_id=session_id or path.stem,
        cwd=cwd if cwd is not None else _folder_cwd(path),
        ts_ms=ts_ms,
    )


_PROJECT_FOLDER = re.compile(r"^(?:-|[A-Za-z]--)")
"""How Claude Code names a project's folder: its working directory with separators as ``-``."""
_SIBLINGS_READ = 8
_SIBLING_LINES = 50


def _folder_cwd(path: Path) -> str | None:
    """The working directory of the other sessions in ``path``'s project folder, for a file that
    names none (one holding ``summary`` lines alone): Claude Code keeps one folder per working
    directory (``~/.claude/projects/<encoded cwd>/``), so its sessions share the project. None
    outside such a folder, or when no sibling in the first few says."""
    if not _PROJECT_FOLDER.match(path.parent.name):
        return None
    siblings = sorted(p for p in path.parent.glob("*.jsonl") if p != path)[:_SIBLINGS_READ]
    for sibling in siblings:
        for line_no, offset, raw in iter_lines(sibling, 0):
            if line_no > _SIBLING_LINES:
                break
            obj, error = decode_line(raw, offset)
            if error is None and isinstance(obj, dict) and isinstance(obj.get("sessionId"), str):
                cwd = obj.get("cwd")
                if isinstance(cwd, str) and cwd:
                    return cwd
    return None
