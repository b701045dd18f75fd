"""Tool calls in plain words: "Ran `pytest -x`", "Edited `Dockerfile`", "Searched for `push_image`".

Agents record tool calls in several shapes, and summaries must not show any of them raw:

- Claude Code (``ingest.sources.claude_code``): ``Bash {"command": "pytest -x", ...}`` with the
  tool in ``metadata["tool_name"]``;
- the synthetic history and generic JSONL: ``Bash: pytest -x`` with ``tool_name`` and, often,
  the parsed ``input`` in the metadata;
- bare JSON arguments (``{"command": ...}``, ``{"file_path": ...}``) or ``{"name", "input"}``.

``render_tool_call`` reads the arguments from whichever is there and names the action by the
tool's role (shell, edit, write, read, search, fetch, delegate), not by the tool's own name, so
tool names never reach titles, bullets or keywords. Absolute paths under the session's ``cwd``
are shown relative to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

TOOL_NAMES: frozenset[str] = frozenset(
    """
    bash shell exec run edit multiedit write read grep glob ls notebookedit notebookread webfetch
    websearch task agent todowrite todoread exitplanmode killshell bashoutput apply_patch
    str_replace_editor str_replace view create local_shell update_plan shell_command tool
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Lowercased names of common agent tools: never keywords or title words on their own."""

_SHELL_TOOLS = frozenset({"bash", "shell", "exec", "run", "local_shell", "shell_command"})
_WRITE_TOOLS = ("write", "create")
_EDIT_TOOLS = ("edit", "patch", "str_replace", "notebookedit")
_SHELL = re.compile(
    r"^(?:\$ )?(?:git|pytest|python3?|pip|uv|npm|npx|yarn|pnpm|cargo|go|make|docker|kubectl|ls|cd|"
    r"cat|grep|rg|sed|curl|ruff|mypy|node|bash|sh|cp|mv|rm|mkdir|psql|sqlite3|memtoc|terraform|"
    r"helm|locust)\b"
)
_NAME_PREFIX = re.compile(r"^([A-Za-z][\w.-]{0,40})(?::\s*|\s+(?=[{\[]))")


@dataclass(frozen=True, slots=True)
class ToolAction:
    """A tool call in words: ``kind`` is ``command``, ``edit``, ``read`` or ``call``."""

    kind: str
    text: str
    """The fact as shown, e.g. "Ran `pytest -x`"."""
    subject: str
    """What the call acted on (the command, path or pattern): a substring of the event's text
    whenever the text carries the arguments, so grips can find it."""


def tool_name(metadata: Mapping[str, object]) -> str:
    """The tool's name from the event metadata (``tool_name``, ``tool`` or ``name``)."""
    for key in ("tool_name", "tool", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _one_line(text: str, words: int = 16) -> str:
    first = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    parts = first.split(" ")
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _relative(path: str, cwd: object) -> str:
    if isinstance(cwd, str) and cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _arguments(text: str, metadata: Mapping[str, object]) -> tuple[str, dict[str, object], str]:
    """(tool name, parsed arguments, text after the name) from the event and its metadata."""
    name = tool_name(metadata)
    body = text.strip()
    if name and body.startswith(name):
        body = body[len(name) :].lstrip(" :")
    elif not name and not body.startswith("{"):
        m = _NAME_PREFIX.match(body)
        if m and m.group(1).replace("_", "").replace(".", "").replace("-", "").isalnum():
            name, body = m.group(1), body[m.end() :]
    meta_input = metadata.get("input")
    args: dict[str, object] = dict(meta_input) if isinstance(meta_input, Mapping) else {}
    if not args and body.startswith("{"):
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            inner = parsed.get("input")
            args = dict(inner) if isinstance(inner, dict) else parsed
            if not name:
                name = str(parsed.get("name") or parsed.get("tool") or "")
    return name, args, body


def _str(args: Mapping[str, object], *keys: str) -> str:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(str(v) for v in value)  # argv lists (Codex ``shell``)
    return ""


def render_tool_call(text: str, metadata: Mapping[str, object]) -> ToolAction | None:
    """The action a tool call performed, in words; None when nothing identifies it."""
    name, args, body = _arguments(text, metadata)
    lname = name.lower()
    cwd = metadata.get("cwd")
    command = _str(args, "command", "cmd")
    if command:
        shown = _one_line(command)
        return ToolAction("command", f"Ran `{shown}`", shown.rstrip("…"))
    path = _str(args, "file_path", "notebook_path", "path", "filename")
    pattern = _str(args, "pattern", "query", "regex")
    if path and not pattern:
        rel = _relative(path, cwd)
        if any(t in lname for t in _WRITE_TOOLS):
            return ToolAction("edit", f"Wrote `{rel}`", rel)
        if any(t in lname for t in _EDIT_TOOLS) or "old_string" in args or "edits" in args:
            return ToolAction("edit", f"Edited `{rel}`", rel)
        return ToolAction("read", f"Read `{rel}`", rel)
    if pattern:
        verb = "Searched the web for" if "web" in lname else "Searched for"
        return ToolAction("read", f"{verb} `{_one_line(pattern, 8)}`", pattern)
    url = _str(args, "url")
    if url:
        return ToolAction("read", f"Fetched `{url}`", url)
    description = _str(args, "description", "prompt")
    if lname in ("task", "agent") and description:
        return ToolAction("call", f"Delegated: {_one_line(description, 12)}", description)
    first = body.splitlines()[0].strip() if body.strip() and not body.startswith("{") else ""
    if first and (lname in _SHELL_TOOLS or _SHELL.match(first)):
        shown = _one_line(first.removeprefix("$ "))
        return ToolAction("command", f"Ran `{shown}`", shown.rstrip("…"))
    if first and lname and any(t in lname for t in (*_WRITE_TOOLS, *_EDIT_TOOLS, "read")):
        target = _one_line(first, 1)
        verb = "Read" if "read" in lname else "Edited"
        return ToolAction("read" if verb == "Read" else "edit", f"{verb} `{target}`", target)
    if name:
        return ToolAction("call", f"Called `{name}`", name)
    return None
