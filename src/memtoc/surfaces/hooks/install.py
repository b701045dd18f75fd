"""Install memtoc's hooks into an agent's settings file, idempotently, keeping everything else.

Claude Code, Codex CLI and Gemini CLI share one hook configuration shape (the event name maps to
a list of *groups*, each with an optional ``matcher`` and a list of ``{"type": "command",
"command", "timeout"}`` handlers), in different files and with different events:

============  ==========================================  ==============================  =========
agent         settings file (user / project scope)        events memtoc hooks             timeout
============  ==========================================  ==============================  =========
claude-code   ``~/.claude/settings.json`` /               SessionStart → context;         seconds
              ``<project>/.claude/settings.json``         Stop, SubagentStop, PreCompact,
                                                          SessionEnd → ingest
codex         ``~/.codex/hooks.json`` /                   SessionStart → context;         seconds
              ``<project>/.codex/hooks.json``             Stop → ingest and process;
                                                          PreCompact → ingest
gemini        ``~/.gemini/settings.json`` /               SessionStart → context;         ms
              ``<project>/.gemini/settings.json``         AfterAgent, PreCompress,
                                                          SessionEnd → ingest
============  ==========================================  ==============================  =========

The session's end files what it added into the table of contents (``ingest --process``): Claude
Code's and Gemini CLI's SessionEnd, and — Codex having no such event — Codex's Stop, each turn.

memtoc's handlers are recognised by their command (``… hook session-start`` / ``… hook ingest``
run through a memtoc executable); installing first removes them and then appends one group per
event, so running it twice gives the same file, and other hooks in the same event arrays — and
every other setting — are kept as they were. Uninstalling removes only memtoc's handlers (and the
groups and event keys they leave empty). The file is written atomically; a settings file that is
not valid JSON is left alone and reported.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memtoc.errors import ConfigError

Scope = Literal["user", "project"]
AGENTS = ("claude-code", "codex", "gemini")
SESSION_START_TIMEOUT_S = 5
"""The settings entry's timeout; the hook itself gives up after ``hook_deadline`` (2 s)."""
INGEST_TIMEOUT_S = 30


@dataclass(frozen=True, slots=True)
class HookSpec:
    event: str
    subcommand: str
    """``session-start`` or ``ingest`` (plus options)."""
    timeout_s: int
    matcher: str | None = None


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str
    folder: str
    """``.claude``, ``.codex`` or ``.gemini`` (under the home or the project directory)."""
    filename: str
    timeout_unit_ms: bool
    hooks: tuple[HookSpec, ...]
    note: str = ""

    def settings_path(self, scope: Scope, project_dir: Path, user_home: Path) -> Path:
        base = user_home if scope == "user" else project_dir
        return base / self.folder / self.filename


SPECS: dict[str, AgentSpec] = {
    "claude-code": AgentSpec(
        "claude-code",
        ".claude",
        "settings.json",
        False,
        (
            HookSpec("SessionStart", "session-start", SESSION_START_TIMEOUT_S, ""),
            HookSpec("Stop", "ingest", INGEST_TIMEOUT_S),
            HookSpec("SubagentStop", "ingest", INGEST_TIMEOUT_S),
            HookSpec("PreCompact", "ingest", INGEST_TIMEOUT_S, ""),
            HookSpec("SessionEnd", "ingest --process", INGEST_TIMEOUT_S),
        ),
    ),
    "codex": AgentSpec(
        "codex",
        ".codex",
        "hooks.json",
        False,
        (
            HookSpec("SessionStart", "session-start", SESSION_START_TIMEOUT_S),
            # Codex has no session-end event: each turn's end files what it added
            HookSpec("Stop", "ingest --process", INGEST_TIMEOUT_S),
            HookSpec("PreCompact", "ingest", INGEST_TIMEOUT_S),
        ),
        note="Codex asks you to review and trust new hooks (/hooks) before they run.",
    ),
    "gemini": AgentSpec(
        "gemini",
        ".gemini",
        "settings.json",
        True,
        (
            HookSpec("SessionStart", "session-start", SESSION_START_TIMEOUT_S),
            HookSpec("AfterAgent", "ingest", INGEST_TIMEOUT_S),
            HookSpec("PreCompress", "ingest", INGEST_TIMEOUT_S),
            HookSpec("SessionEnd", "ingest --process", INGEST_TIMEOUT_S),
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class InstallReport:
    path: Path
    changed: bool
    events: tuple[str, ...]
    note: str = ""


def base_command(memtoc_cmd: Sequence[str], home: str | None) -> str:
    """The shell command that runs memtoc (with ``--home`` when one was chosen)."""
    parts = [*memtoc_cmd, *(["--home", home] if home else [])]
    return " ".join(shlex.quote(p) for p in parts)


def is_memtoc_handler(handler: object) -> bool:
    """Whether a hook handler is one memtoc installed (recognised by its command)."""
    if not isinstance(handler, dict):
        return False
    command = handler.get("command")
    if not isinstance(command, str) or "memtoc" not in command:
        return False
    return " hook session-start" in command or " hook ingest" in command


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); fix it or move it away first") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _strip(hooks: dict[str, Any]) -> None:
    """Remove memtoc's handlers, then the groups and events they leave empty."""
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups: list[Any] = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                had = len(group["hooks"])
                group["hooks"] = [h for h in group["hooks"] if not is_memtoc_handler(h)]
                if had and not group["hooks"]:
                    continue
            kept_groups.append(group)
        if groups and not kept_groups:
            del hooks[event]
        else:
            hooks[event] = kept_groups


def _hooks_of(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not a JSON object; not touching it")
    return hooks


def install(
    agent: str,
    scope: Scope,
    *,
    command: str,
    project_dir: Path,
    user_home: Path,
) -> InstallReport:
    """Add memtoc's hooks for ``agent`` (replacing earlier memtoc entries, keeping the rest)."""
    spec = _spec(agent)
    path = spec.settings_path(scope, project_dir, user_home)
    data = _load(path)
    before = json.dumps(data, sort_keys=False)
    hooks = _hooks_of(data, path)
    _strip(hooks)
    for hook in spec.hooks:
        timeout = hook.timeout_s * 1000 if spec.timeout_unit_ms else hook.timeout_s
        handler: dict[str, Any] = {
            "type": "command",
            "command": f"{command} hook {hook.subcommand}",
            "timeout": timeout,
        }
        group: dict[str, Any] = {} if hook.matcher is None else {"matcher": hook.matcher}
        group["hooks"] = [handler]
        groups = hooks.setdefault(hook.event, [])
        if not isinstance(groups, list):
            raise ConfigError(f"{path}: hooks.{hook.event} is not a list; not touching it")
        groups.append(group)
    changed = json.dumps(data, sort_keys=False) != before or not path.exists()
    if changed:
        _write(path, data)
    return InstallReport(path, changed, tuple(h.event for h in spec.hooks), spec.note)


def uninstall(agent: str, scope: Scope, *, project_dir: Path, user_home: Path) -> InstallReport:
    """Remove memtoc's hooks for ``agent``; every other hook and setting stays."""
    spec = _spec(agent)
    path = spec.settings_path(scope, project_dir, user_home)
    if not path.exists():
        return InstallReport(path, False, ())
    data = _load(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return InstallReport(path, False, ())
    before = json.dumps(data, sort_keys=False)
    _strip(hooks)
    if not hooks:
        del data["hooks"]
    changed = json.dumps(data, sort_keys=False) != before
    if changed:
        _write(path, data)
    return InstallReport(path, changed, tuple(h.event for h in spec.hooks))


def _spec(agent: str) -> AgentSpec:
    try:
        return SPECS[agent]
    except KeyError:
        raise ConfigError(f"unknown agent {agent!r} (one of {', '.join(AGENTS)})") from None
