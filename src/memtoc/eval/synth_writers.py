"""Write an event stream to disk: generic JSONL (DESIGN §6) or Claude Code-shaped transcripts.

Both writers stream: they hold one line at a time (and, for Claude Code, a few open files), so a
1M-event history can be written without materialising it.

The Claude Code layout mirrors ``~/.claude/projects``: one directory per working directory (the
path with ``/`` replaced by ``-``, e.g. ``-home-dev-webapp``) holding one ``<session-uuid>.jsonl``
per session. Each message is a line ``{type, uuid, parentUuid, sessionId, timestamp, cwd, version,
gitBranch, isSidechain, userType, message}``: user and assistant texts become ``text`` blocks, a
tool call an assistant line with a ``tool_use`` block, a tool result a user line with a
``tool_result`` block; a ``system`` event becomes a ``system`` line with ``subtype``, ``content``
and ``level`` instead of ``message``. ``session_start`` and ``session_end`` events have no
Claude Code counterpart and are not written (the working directory and branch of a session are
taken from its ``session_start`` metadata when present).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memtoc.model import Event, JsonValue, iso_ms

CLAUDE_CODE_VERSION = "1.0.80"
CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
_MAX_OPEN = 32


def write_jsonl(events: Iterable[Event], path: Path) -> int:
    """Write one generic JSONL event per line; returns the number of events written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    dumps = json.dumps
    with path.open("w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(
                dumps(
                    {
                        "event_id": ev.event_id,
                        "session_id": ev.session_id,
                        "timestamp": iso_ms(ev.ts_ms),
                        "role": ev.role,
                        "event_type": ev.event_type,
                        "text": ev.text,
                        "project": ev.project,
                        "agent": ev.agent,
                        "metadata": dict(ev.metadata),
                    },
                    ensure_ascii=False,
                )
            )
            fh.write("\n")
            count += 1
    return count


@dataclass(slots=True)
class _Transcript:
    path: Path
    cwd: str
    branch: str
    parent: str | None = None
    fh: IO[str] | None = None


def _line_uuid(event_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memtoc-synth:line:{event_id}"))


def _message(ev: Event) -> tuple[str, dict[str, JsonValue]] | None:
    """The transcript line type and ``message`` for an event, or None when it is not written."""
    meta = ev.metadata
    if ev.event_type == "user_message":
        return "user", {"role": "user", "content": [{"type": "text", "text": ev.text}]}
    if ev.event_type == "assistant_message":
        block: dict[str, JsonValue] = {"type": "text", "text": ev.text}
    elif ev.event_type == "tool_call":
        block = {
            "type": "tool_use",
            "id": meta.get("tool_use_id", f"toolu_{ev.event_id}"),
            "name": meta.get("tool_name", "Bash"),
            "input": meta.get("input", {}),
        }
    elif ev.event_type == "tool_result":
        return "user", {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": meta.get("tool_use_id", f"toolu_{ev.event_id}"),
                    "content": ev.text,
                    "is_error": bool(meta.get("is_error", False)),
                }
            ],
        }
    elif ev.event_type == "system":
        return "system", {}
    else:
        return None
    return "assistant", {
        "id": f"msg_{ev.event_id}",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE_MODEL,
        "content": [block],
    }


def write_claude_code(events: Iterable[Event], root: Path) -> list[Path]:
    """Write Claude Code transcripts under ``root``; returns the files written, sorted."""
    root = Path(root)
    open_: dict[str, _Transcript] = {}
    seen: dict[str, _Transcript] = {}
    try:
        for ev in events:
            tr = seen.get(ev.session_id)
            if tr is None:
                cwd = str(ev.metadata.get("cwd", f"/home/dev/{ev.project}"))
                directory = root / cwd.replace("/", "-")
                directory.mkdir(parents=True, exist_ok=True)
                tr = _Transcript(directory / f"{ev.session_id}.jsonl", cwd, "main")
                seen[ev.session_id] = tr
            if ev.event_type == "session_start":
                tr.branch = str(ev.metadata.get("git_branch", tr.branch))
            msg = _message(ev)
            if msg is not None:
                if tr.fh is None:
                    if len(open_) >= _MAX_OPEN:  # close the least recently opened
                        old = open_.pop(next(iter(open_)))
                        if old.fh is not None:
                            old.fh.close()
                            old.fh = None
                    tr.fh = tr.path.open(
                        "a" if tr.path.exists() and tr.parent else "w", encoding="utf-8"
                    )
                    open_[ev.session_id] = tr
                line_id = _line_uuid(ev.event_id)
                record: dict[str, JsonValue] = {
                    "type": msg[0],
                    "uuid": line_id,
                    "parentUuid": tr.parent,
                    "sessionId": ev.session_id,
                    "timestamp": iso_ms(ev.ts_ms),
                    "cwd": tr.cwd,
                    "version": CLAUDE_CODE_VERSION,
                    "gitBranch": tr.branch,
                    "isSidechain": False,
                    "userType": "external",
                }
                if msg[0] == "system":
                    record.update(subtype="informational", content=ev.text, level="info")
                else:
                    record["message"] = msg[1]
                tr.fh.write(json.dumps(record, ensure_ascii=False))
                tr.fh.write("\n")
                tr.parent = line_id
            if ev.event_type == "session_end" and tr.fh is not None:
                tr.fh.close()
                tr.fh = None
                open_.pop(ev.session_id, None)
    finally:
        for tr in open_.values():
            if tr.fh is not None:
                tr.fh.close()
    return sorted(tr.path for tr in seen.values() if tr.parent is not None)
