"""Tool calls in plain words: "Ran `pytest -x`", "Edited `Dockerfile`", "Searched for `push_image`".

Agents record tool calls in several shapes, and summaries must not show any of them raw:

- Claude Code (``ingest.sources.claude_code``): ``Bash {"command": "pytest -x", ...}`` with the
  tool in ``metadata["tool_name"]``;
- the synthetic history and generic JSONL: ``Bash: pytest -x`` with ``tool_name`` and, often,
  the parsed ``input`` in the metadata;
- bare JSON arguments (``{"command": ...}``, ``{"file_path": ...}``) or ``{"name", "input"}``;
- SpecStory Markdown: the tool's name, then its arguments in backticks (``Bash`` / a description /
  ```go build```; ``Grep`` / ``path `./` pattern `X` ``; ``apply_patch`` / ``**Update: `path`**``).

``render_tool_call`` reads the arguments from whichever is there and names the action by the
tool's role (shell, edit, write, read, search, fetch, delegate, a to-do item), not by the tool's
own name, so tool names never reach titles, bullets or keywords. Absolute paths under the
session's ``cwd`` are shown relative to it (``cd <cwd> &&`` and ``git -C <cwd>`` dropped), and
so are a command's trailing ``2>&1`` and ``| tail -20``. What the call was for is said beside it
(``tool_work``): an edit by the names it touched, a command by its stated purpose (its opening
only, then), a task by its subject — "Ran `bun run test` (run all tests)".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from memtoc.pipeline.summarize.tool_work import (
    EDIT_NAMES,
    edit_names,
    purpose,
    shown_with,
    task_subject,
)

TOOL_NAMES: frozenset[str] = frozenset(
    """
    bash shell exec run edit multiedit write read grep glob ls notebookedit notebookread webfetch
    websearch task agent todowrite todoread exitplanmode killshell bashoutput apply_patch
    str_replace_editor str_replace view create local_shell update_plan shell_command tool
    taskcreate taskupdate tasklist
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
_TICKED = re.compile(r"`([^`\n]+)`")
_PLAN_LABEL = re.compile(r"^(?:plan|implementation plan)\s*[:—-]\s*", re.IGNORECASE)
_LABELLED = re.compile(r"\b(path|pattern|Pattern|in path)\b:? `([^`\n]+)`")
_TASK_TOOLS = frozenset({"taskcreate", "taskupdate", "todowrite"})
_PATCH = re.compile(r"\*\*(?:Add|Update|Delete|Move):? `([^`\n]+)`")


@dataclass(frozen=True, slots=True)
class ToolAction:
    """A tool call in words: ``kind`` is ``command``, ``edit``, ``read`` or ``call``."""

    kind: str
    text: str
    """The fact as shown, e.g. "Ran `pytest -x`"."""
    subject: str
    """What the call acted on (the command, path or pattern): a substring of the event's text
    whenever the text carries the arguments, so grips can find it."""
    note: str = ""
    """What the agent said the call was for (a shell command's ``description``), if it did."""
    detail: str = ""
    """A commit's message body (what changed and why, in the author's words), if it has one."""
    extras: tuple[str, ...] = ()
    """What the subject is shown with (``tool_work``): the names an edit touched, a command's
    stated purpose."""


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


SHORT_COMMAND_WORDS = 6
SHORT_COMMAND_CHARS = 64
_CHAIN = re.compile(r" (?:&&|\|\||\||;) |; ")
_TRAILING = re.compile(
    r"(?:\s+2>&1|\s+2>\s*/dev/null|\s*\|\s*(?:head|tail)(?:\s+-n)?\s+-?\d+)+\s*$"
)
"""What a shown command ends with that says nothing of it: ``2>&1``, ``| tail -20``."""


def _short_command(shown: str) -> str:
    """A command's opening (the first command of a chain past any ``cd``, at most
    ``SHORT_COMMAND_WORDS`` words and ``SHORT_COMMAND_CHARS`` characters) — the program and its
    first arguments — when its purpose is shown beside it."""
    parts = _CHAIN.split(shown.rstrip("…"))
    # the first command of a chain that does something (`cd x && make` is `make`)
    first = next((p for p in parts if p.strip() and not p.startswith("cd ")), parts[0])
    words = first.split(" ")
    short = " ".join(words[:SHORT_COMMAND_WORDS])
    if len(short) > SHORT_COMMAND_CHARS:
        short = short[:SHORT_COMMAND_CHARS].rsplit(" ", 1)[0] if " " in short[
            :SHORT_COMMAND_CHARS] else short[:SHORT_COMMAND_CHARS]  # fmt: skip
    return short + "…" if short != shown.rstrip("…") or shown.endswith("…") else short


def _without_cwd(command: str, cwd: object) -> str:
    """A command without the session's working directory it restates: ``cd <cwd> && x`` is
    ``x``, ``git -C <cwd> status`` is ``git status``, ``<cwd>/src/a.py`` is ``src/a.py``."""
    if not isinstance(cwd, str) or len(cwd.rstrip("/")) < 2 or cwd.rstrip("/") not in command:
        return command
    root = cwd.rstrip("/")
    command = re.sub(rf"^cd {re.escape(root)}/? *&& *", "", command.lstrip())
    command = re.sub(rf"(\bgit) -C {re.escape(root)}/?(?=\s)", r"\1", command)
    return command.replace(root + "/", "")


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
    if not args and body and not body.startswith("{"):
        args = _markdown_arguments(name.lower(), body)
    return name, args, body


def call_content(text: str, metadata: Mapping[str, object]) -> str:
    """The content a write or edit call carries (``content``, ``new_string``), else ''."""
    _name, args, _body = _arguments(text, metadata)
    return _str(args, "content", "new_string", "file_text")


def _markdown_arguments(lname: str, body: str) -> dict[str, object]:
    """Arguments written as SpecStory Markdown (backticked values after the tool's name)."""
    args: dict[str, object] = {}
    patch = _PATCH.search(body)
    if patch:
        return {"file_path": patch.group(1), "old_string": ""}
    for label, value in _LABELLED.findall(body):
        args["pattern" if label.lower() == "pattern" else "path"] = value
    if "pattern" in args:
        return args
    ticks = _TICKED.findall(body)
    if not ticks:
        return {}
    first_line = body.strip().splitlines()[0].strip()
    if lname in _SHELL_TOOLS or lname == "exec_command":
        args = {"command": ticks[-1]}
        if not first_line.startswith("`"):
            args["description"] = first_line
        return args
    if "fetch" in lname:
        return {"url": ticks[0]}
    if "search" in lname:
        return {"query": ticks[0]}
    if lname in ("read", "view", "ls") or "read" in lname:
        return {"file_path": ticks[0]}
    return {}


_COMMIT_MSG = re.compile(
    r"\bgit\b[^\n|;&]*\bcommit\b[^\n]*?(?:-m\s*|--message[= ])(?:\"\$\(cat <<-?'?\"?EOF'?\"?\s*\n\s*"
    r"|\"|')([^\n\"']{3,})"
)


def commit_message(command: str) -> str:
    """The subject line of a ``git commit -m`` (plain or heredoc) in ``command``, else ''."""
    m = _COMMIT_MSG.search(command)
    return _one_line(m.group(1).strip(), 16) if m else ""


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?)\n\s*\2\b", re.DOTALL)
_MESSAGE_FLAG = re.compile(r"(?:-m|--message[= ])\s*(?:\"((?:[^\"\\]|\\.)*)\"|'([^']*)')")
_TRAILER = re.compile(r"^\s*(?:[\w-]+-by:|Co-Authored-By:|Change-Id:|🤖|Generated with\b)", re.I)
_COMMAND_END = re.compile(r"&&|\|\||[;|\n]")
BODY_CHARS = 1_200
"""How much of a commit message's body is read."""


def commit_body(command: str) -> str:
    """The body of a ``git commit``'s message in ``command`` — the paragraphs after its subject
    line (heredoc, or a second ``-m``), wrapped lines joined, trailers (``Co-Authored-By:``)
    and tool banners dropped — else ''. An agent writes there what it changed and why."""
    at = re.search(r"\bgit\b[^\n|;&]*\bcommit\b", command)
    if at is None:
        return ""
    rest = command[at.start() :]
    heredoc = _HEREDOC.search(rest)
    if heredoc is not None:
        message = heredoc.group(3)
    else:  # one -m per paragraph, up to the end of this command ("&& git tag -m" is not it)
        parts: list[str] = []
        end = 0
        for m in _MESSAGE_FLAG.finditer(rest):
            if parts and _COMMAND_END.search(rest, end, m.start()):
                break
            parts.append((m.group(1) or m.group(2) or "").replace('\\"', '"'))
            end = m.end()
        message = "\n\n".join(parts)
    lines = message.strip().splitlines()
    body = [ln.strip() for ln in lines[1:] if not _TRAILER.match(ln)]
    paragraphs: list[str] = []
    current: list[str] = []
    for line in body:
        if not line or line.startswith(("- ", "* ")):
            if current:
                paragraphs.append(" ".join(current))
            current = [line] if line else []
            continue
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return "\n".join(paragraphs)[:BODY_CHARS].strip()


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
        shown = _one_line(_TRAILING.sub("", _without_cwd(command, cwd).strip().split("\n", 1)[0]))
        note = _one_line(_str(args, "description"), 14)
        message = commit_message(command)
        if message:
            return ToolAction("commit", f"Committed: {message}", shown.rstrip("…"), note,
                              commit_body(command))  # fmt: skip
        what = purpose(args)
        if what:  # the purpose says what it was for: the command's opening says how
            shown = _short_command(shown)
        return ToolAction("command", f"Ran {shown_with(shown, what)}", shown.rstrip("…"), note,
                          extras=(what,) if what else ())  # fmt: skip
    path = _str(args, "file_path", "notebook_path", "path", "filename")
    pattern = _str(args, "pattern", "query", "regex")
    if path and not pattern:
        rel = _relative(path, cwd)
        written = any(t in lname for t in _WRITE_TOOLS)
        if written or any(t in lname for t in _EDIT_TOOLS) or "old_string" in args or (
                "edits" in args):  # fmt: skip
            names = tuple(edit_names(args)[:EDIT_NAMES])
            verb = "Wrote" if written else "Edited"
            shown = shown_with(rel, ", ".join(names))
            return ToolAction("edit", f"{verb} {shown}", rel, extras=names)
        return ToolAction("read", f"Read `{rel}`", rel)
    if pattern:
        verb = "Searched the web for" if "web" in lname else "Searched for"
        return ToolAction("read", f"{verb} `{_one_line(pattern, 8)}`", pattern)
    url = _str(args, "url")
    if url:
        return ToolAction("read", f"Fetched `{url}`", url)
    description = _str(args, "description", "prompt")
    if lname in _TASK_TOOLS:  # a to-do item the agent set itself; an update says nothing
        todos = args.get("todos")
        items = [task_subject(t) for t in todos if isinstance(t, Mapping)] if isinstance(
            todos, list) else [task_subject(args)]  # fmt: skip
        items = [i for i in items if i]
        if items:
            return ToolAction("task", f"Planned: {_one_line(items[0], 14)}", items[0],
                              extras=tuple(items[1:]))  # fmt: skip
        if "update" in lname:
            return None
    if lname in ("task", "agent") and description:
        return ToolAction("call", f"Delegated: {_one_line(description, 12)}", description)
    first = body.splitlines()[0].strip() if body.strip() and not body.startswith("{") else ""
    if first and (lname in _SHELL_TOOLS or _SHELL.match(first)):
        shown = _one_line(first.removeprefix("$ "))
        return ToolAction("command", f"Ran `{shown}`", shown.rstrip("…"))
    plan = _str(args, "plan")
    if plan:
        heading = next((ln.lstrip("# ").strip() for ln in plan.splitlines() if ln.strip()), "")
        heading = _PLAN_LABEL.sub("", heading)
        return ToolAction("plan", f"Proposed plan: {_one_line(heading, 14)}", heading)
    questions = args.get("questions")
    if isinstance(questions, list) and questions and isinstance(questions[0], Mapping):
        asked = str(questions[0].get("question") or "")
        if asked:
            return ToolAction("ask", f"Asked: {_one_line(asked, 24)}", asked)
    if lname in ("askuserquestion", "ask_user"):
        question = next((ln.strip("* ") for ln in body.splitlines() if ln.strip()), "")
        return (
            ToolAction("ask", f"Asked: {_one_line(question, 24)}", question) if question else None
        )
    if first and lname in ("write", "create") and first.startswith("```"):
        heading = next((ln.lstrip("# ").strip() for ln in body.splitlines()
                        if ln.startswith("#")), "")  # fmt: skip
        if heading:
            return ToolAction("edit", f"Wrote a document: {_one_line(heading, 14)}", heading)
    if first and lname and any(t in lname for t in (*_WRITE_TOOLS, *_EDIT_TOOLS, "read")):
        target = _one_line(first, 1).strip("`")
        verb = "Read" if "read" in lname else "Edited"
        return ToolAction("read" if verb == "Read" else "edit", f"{verb} `{target}`", target)
    if name:
        return ToolAction("call", f"Called `{name}`", name)
    return None
