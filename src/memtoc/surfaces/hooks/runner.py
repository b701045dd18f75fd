"""Running memtoc inside an agent's hooks: bounded in time, and fail-open.

An agent (Claude Code, Codex, Gemini CLI) runs a hook command with a JSON object on stdin —
``{"session_id", "transcript_path", "cwd", "hook_event_name", "source"?, …}`` — and waits for it.
memtoc's hooks must never block or break the agent, so:

- every run has an internal deadline (``SESSION_START_DEADLINE_S``, ``INGEST_DEADLINE_S``): the
  work runs in a worker thread and, when the deadline passes, the hook gives up, prints nothing
  and exits 0 (the caller then ends the process with ``os._exit`` so a thread stuck on a lock
  cannot hold it); the store waits for another process's lock only briefly (busy timeout);
- every problem — a missing, locked or corrupt store, unreadable input, a bug — is written to
  ``<home>/hooks.log`` and swallowed: the hook prints nothing (or an empty context) and exits 0.

``session_start`` returns the JSON the agent injects: ``{"hookSpecificOutput": {"hookEventName":
"SessionStart", "additionalContext": "<context>"}}`` — the context of the project of ``cwd`` (the
repository holding it, whatever subfolder or worktree: ``memtoc.projects``, the rule the
transcript importers use), within the budget; nothing for a folder with no memory yet.
``ingest`` imports the transcript named by ``transcript_path`` incrementally: the importer resumes
from the file's watermark (the byte offset already stored), so repeated hooks read only new bytes
and never store an event twice; with ``process`` it also files new events into the TOC.

Filing takes seconds, and agents do not wait for it at a session's end: Claude Code cancels
SessionEnd hooks still running when it exits (anthropics/claude-code#41577, #32712) and Gemini
CLI's SessionEnd is best effort; Codex waits for its Stop hooks, each turn. So ``memtoc hook
ingest --process`` imports in the hook and hands the filing to a detached ``memtoc hook
process`` (``spawn_processing``: its own session, so the agent's exit does not take it along)
and returns; ``--wait`` files in the hook itself. The pipeline is safe to run beside another
worker and to kill at any point (``pipeline.worker``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from memtoc.config import Settings
from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.retrieval.context import DEFAULT_BUDGET

SESSION_START_DEADLINE_S = 2.0
INGEST_DEADLINE_S = 20.0
SESSION_START_BUSY_MS = 1_200
"""How long the session-start hook waits for another process's lock before giving up."""
INGEST_BUSY_MS = 10_000
PROCESS_DEADLINE_S = 600.0
"""How long a detached ``hook process`` may file before it gives up (the next one goes on)."""
LOG_NAME = "hooks.log"
LOG_MAX_BYTES = 1_000_000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HookInput:
    """The fields memtoc uses from a hook's stdin JSON (all optional: input is never trusted)."""

    event: str = ""
    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    source: str | None = None
    agent_transcript_path: str | None = None
    """SubagentStop: the sub-agent's own transcript (``transcript_path`` is its parent's)."""

    @classmethod
    def parse(cls, text: str) -> HookInput:
        """Parse the hook's stdin; anything that is not a JSON object gives an empty input."""
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}

        def text_of(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value else None

        return cls(
            event=text_of("hook_event_name") or "",
            session_id=text_of("session_id"),
            transcript_path=text_of("transcript_path"),
            cwd=text_of("cwd"),
            source=text_of("source") or text_of("trigger"),
            agent_transcript_path=text_of("agent_transcript_path"),
        )


def log_problem(home: Path, what: str, message: str) -> None:
    """Append one line to ``<home>/hooks.log`` (rotated at 1 MB); never raises."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        path = home / LOG_NAME
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            path.replace(home / f"{LOG_NAME}.1")
        line = f"{iso_ms(int(time.time() * 1000))} {what}: {' '.join(message.split())}\n"
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
    except OSError:
        pass


class DeadlineExceeded(Exception):
    """The hook's work did not finish within its deadline (it is abandoned, not awaited)."""


def run_with_deadline(work: Callable[[], T], seconds: float) -> T:
    """``work()`` in a daemon thread; its result, its exception, or ``DeadlineExceeded``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the caller's thread as is
            box["error"] = exc

    thread = threading.Thread(target=target, name="memtoc-hook", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise DeadlineExceeded(f"gave up after {seconds:g}s")
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def session_start(
    settings: Settings,
    hook: HookInput,
    *,
    budget: int = DEFAULT_BUDGET,
    deadline_s: float = SESSION_START_DEADLINE_S,
) -> str:
    """The JSON to print for a SessionStart hook, or ``""`` (nothing to add, or a problem)."""

    if "://" not in settings.db and not Path(settings.db).expanduser().exists():
        return ""  # a first session: no memory yet is nothing to say, and no problem to log

    def work() -> str:
        with Memory.open(settings, read_only=True, busy_timeout_ms=SESSION_START_BUSY_MS) as mem:
            # the one project rule (memtoc.projects): the `project` setting, else the
            # repository (or folder) of the session's cwd — never another project's memory
            scope = mem.scope(working_dir=hook.cwd) if hook.cwd else mem.scope()
            if scope.project is None:
                return ""
            return mem.context(scope.project, budget=budget).text

    try:
        text = run_with_deadline(work, deadline_s)
    except Exception as exc:  # fail-open: the agent must start whatever happens here
        log_problem(settings.home, "session-start", f"{type(exc).__name__}: {exc}")
        return ""
    if not text:
        return ""
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return json.dumps(output, ensure_ascii=False)


def _ends_with_newline(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) == b"\n"
    except OSError:
        return True


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    ingested: int
    duplicates: int
    rejected: int
    processed: int


def ingest(
    settings: Settings,
    hook: HookInput,
    *,
    process: bool = False,
    deadline_s: float = INGEST_DEADLINE_S,
) -> IngestOutcome | None:
    """Import the hook's transcript from its watermark (and process); None on any problem.

    A SubagentStop hook names the sub-agent's transcript too (``agent_transcript_path``): both
    are imported, the sub-agent's first (it finished before its parent's turn goes on)."""
    given = [p for p in (hook.agent_transcript_path, hook.transcript_path) if p is not None]
    paths = [Path(p).expanduser() for p in given if Path(p).expanduser().is_file()]
    missing = [p for p in given if not Path(p).expanduser().is_file()]
    if missing or not paths:
        log_problem(
            settings.home, f"ingest {hook.event}", f"no transcript file: {missing or None!r}"
        )
    if not paths:
        return None

    def work() -> IngestOutcome:
        with Memory.open(settings, busy_timeout_ms=INGEST_BUSY_MS) as mem:
            # a transcript that names no working directory (older Gemini CLI sessions) is filed
            # under the agent's, by the rule the session-start context uses (memtoc.projects)
            report = mem.ingest(paths, default_cwd=hook.cwd)
            filed = mem.process().events if process else 0
        growing = {str(p) for p in paths if not _ends_with_newline(p)}
        rejections = report.rejections
        if growing:  # a last line still being written: retried later, not a problem
            last = {r.source: r for r in rejections}
            rejections = [
                r for r in rejections if r.source not in growing or last[r.source] is not r
            ]
        for rejection in rejections[:5]:
            log_problem(settings.home, f"ingest {hook.event}", str(rejection))
        return IngestOutcome(report.ingested, report.duplicates, report.rejected, filed)

    try:
        return run_with_deadline(work, deadline_s)
    except Exception as exc:  # fail-open: never break the agent's turn
        log_problem(settings.home, f"ingest {hook.event}", f"{type(exc).__name__}: {exc}")
        return None


def spawn_processing(settings: Settings) -> bool:
    """Start ``memtoc hook process`` detached (its own session, no stdio): it outlives the
    hook and the agent. False (logged) when it could not be started."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "memtoc", "--db", settings.db, "--home", str(settings.home),
               "hook", "process"]  # fmt: skip
    try:
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)  # fmt: skip
    except OSError as exc:
        log_problem(settings.home, "process", f"could not start the filing process: {exc}")
        return False
    return True


def process_pending(settings: Settings, *, deadline_s: float = PROCESS_DEADLINE_S) -> int | None:
    """File what the outbox holds into the TOC (``Memory.process``): the events filed, or None
    on a problem (logged to ``hooks.log``)."""

    def work() -> int:
        with Memory.open(settings, busy_timeout_ms=INGEST_BUSY_MS) as mem:
            return mem.process().events

    try:
        return run_with_deadline(work, deadline_s)
    except Exception as exc:  # nobody waits for it: the log says what went wrong
        log_problem(settings.home, "process", f"{type(exc).__name__}: {exc}")
        return None
