"""The ``memtoc`` entry point (``main``), and the commands an agent's hooks run without the CLI
framework: ``memtoc context``, ``memtoc hook session-start`` and ``memtoc hook ingest``.

A hook starts a fresh process at every session start and stop. typer (which coerces every option
through pydantic) and rich cost more than the work itself, so ``main`` first offers the command
line to ``run_fast``: when it is one of these commands with options it knows
(``--db``, ``--home``; ``--project``, ``--budget``, ``--json``; ``--deadline``, ``--process``),
the command runs here — same settings, same output, same exit codes — and anything else
(``--help``, another command, an option it does not know) goes to the typer app unchanged. The
work itself is shared with the typer commands (``context_view``, ``hooks.runner``). This module
is outside ``surfaces.cli`` so that importing it does not import the typer app.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.config import Settings, load_settings
from memtoc.errors import MemtocError
from memtoc.retrieval.context import DEFAULT_BUDGET, ContextView

if TYPE_CHECKING:
    from memtoc.surfaces.hooks.runner import HookInput

_GLOBAL = {"--db": "db", "--home": "home"}


def context_view(
    settings: Settings, project: str | None, budget: int
) -> tuple[ContextView, str | None]:
    """``memtoc context``'s work: the view of ``--project`` (else the current directory's
    project, by the one rule) and the note to print (no memory yet for this folder)."""
    from memtoc.memory import Memory

    with Memory.open(settings, read_only=True) as memory:
        scope = memory.scope(project, working_dir=os.getcwd())
        if scope.project is None:
            return ContextView(scope.name, budget, (), "", 0), scope.note
        return memory.context(scope.project, budget=budget), scope.note


def _options(args: Sequence[str], known: dict[str, str], flags: set[str]) -> dict[str, str] | None:
    """``--name value`` / ``--name=value`` options and ``flags``; None when anything else."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in flags and not eq:
            out[flags_key(name)] = "1"
            i += 1
            continue
        if name not in known:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        out[known[name]] = value
        i += 1
    return out


def flags_key(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def run_fast(argv: Sequence[str]) -> int | None:
    """Run ``argv`` here when it is a hook command or ``context`` (module docstring); the exit
    code, or None to leave it to the typer app."""
    args = list(argv)
    overrides: dict[str, str | None] = {"db": None, "home": None}
    while args and args[0].partition("=")[0] in _GLOBAL:
        name, eq, value = args[0].partition("=")
        if not eq:
            if len(args) < 2:
                return None
            value = args[1]
            args = args[1:]
        overrides[_GLOBAL[name]] = value
        args = args[1:]
    if args[:1] == ["context"]:
        opts = _options(
            args[1:],
            {"--project": "project", "-p": "project", "--budget": "budget"},
            {"--json"},
        )
        return None if opts is None else _context(overrides, opts)
    if args[:2] in (["hook", "session-start"], ["hook", "ingest"], ["hook", "process"]):
        flags = {"--process", "--wait"} if args[1] == "ingest" else set()
        known = {"--deadline": "deadline"}
        if args[1] == "session-start":
            known["--budget"] = "budget"
        opts = _options(args[2:], known, flags)
        return None if opts is None else _hook(args[1], overrides, opts)
    return None


def _int(value: str | None, default: int) -> int | None:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number >= 0 else None


def _context(overrides: dict[str, str | None], opts: dict[str, str]) -> int | None:
    budget = _int(opts.get("budget"), DEFAULT_BUDGET)
    if budget is None:
        return None  # let typer word the error
    try:
        view, note = context_view(load_settings(overrides), opts.get("project"), budget)
    except MemtocError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if note:
        sys.stderr.write(f"note: {note}\n")
    if opts.get("json"):
        sys.stdout.write(json.dumps(view.to_dict(), ensure_ascii=False, indent=2) + "\n")
    elif not view.text:
        sys.stdout.write("Nothing to show yet: ingest and process some sessions first.\n")
    else:
        sys.stdout.write(f"{view.text}\n{view.tokens} of {budget} tokens\n")
    return 0


def _hook(kind: str, overrides: dict[str, str | None], opts: dict[str, str]) -> int:
    from memtoc.surfaces.hooks import runner

    hook = read_hook_input()
    settings = hook_settings(overrides)
    output = ""
    try:
        deadline = float(opts["deadline"]) if "deadline" in opts else None
    except ValueError:
        deadline = None
    if settings is not None:
        if kind == "session-start":
            budget = _int(opts.get("budget"), DEFAULT_BUDGET) or DEFAULT_BUDGET
            output = runner.session_start(
                settings,
                hook,
                budget=budget,
                deadline_s=deadline or runner.SESSION_START_DEADLINE_S,
            )
        elif kind == "process":  # detached by ``ingest --process``: nothing waits for it
            runner.process_pending(settings)
        else:
            process, wait = bool(opts.get("process")), bool(opts.get("wait"))
            outcome = runner.ingest(
                settings,
                hook,
                process=process and wait,
                deadline_s=deadline or runner.INGEST_DEADLINE_S,
            )
            if process and not wait and outcome is not None:
                runner.spawn_processing(settings)
    finish_hook(output)
    return 0


def read_hook_input() -> HookInput:
    """The hook's JSON on stdin (``runner.HookInput``; empty when there is none)."""
    from memtoc.surfaces.hooks.runner import HookInput

    if sys.stdin is None or sys.stdin.isatty():
        return HookInput()
    try:
        return HookInput.parse(sys.stdin.read())
    except (OSError, UnicodeDecodeError):
        return HookInput()


def hook_settings(overrides: dict[str, str | None]) -> Settings | None:
    """The settings, or None after logging why they cannot be read (a broken config must not
    break the agent)."""
    try:
        return load_settings(overrides)
    except MemtocError as exc:
        from memtoc.config import default_home
        from memtoc.surfaces.hooks.runner import log_problem

        home = overrides.get("home") or os.environ.get("MEMTOC_HOME") or str(default_home())
        log_problem(Path(home), "hook", str(exc))
        return None


def finish_hook(output: str) -> None:
    """Print ``output``; exit 0 at once if an abandoned worker thread is still running."""
    if output:
        sys.stdout.write(output + "\n")
    sys.stdout.flush()
    if any(t.name == "memtoc-hook" and t.is_alive() for t in threading.enumerate()):
        os._exit(0)  # do not wait for a thread stuck on a lock


def main() -> None:
    """Entry point (``memtoc``, ``python -m memtoc``): the fast path, else the typer app."""
    code = run_fast(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from memtoc.surfaces.cli.app import main as typer_main

    typer_main()
