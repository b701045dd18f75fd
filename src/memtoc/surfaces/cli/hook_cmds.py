"""Agent hooks: ``memtoc hooks install|uninstall AGENT``, the hook commands agents run
(``memtoc hook session-start`` / ``memtoc hook ingest``), and ``memtoc watch``."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from memtoc.config import Settings
from memtoc.model import IngestReport
from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.surfaces import quick as fast
from memtoc.surfaces.cli.app import app, console, open_memory, state
from memtoc.surfaces.hooks import install as installer
from memtoc.surfaces.hooks import runner
from memtoc.surfaces.hooks.watch import DEFAULT_INTERVAL_S, Watcher, default_paths
from memtoc.surfaces.invocation import memtoc_argv

hooks_app = typer.Typer(
    help="Install memtoc into an agent's hooks (claude-code, codex, gemini).",
    no_args_is_help=True,
)
hook_app = typer.Typer(
    help="What agents run from their hooks (JSON on stdin; always exit 0).",
    no_args_is_help=True,
)
app.add_typer(hooks_app, name="hooks")
app.add_typer(hook_app, name="hook")

AgentArg = Annotated[str, typer.Argument(help="claude-code, codex or gemini.")]
ScopeOpt = Annotated[
    str,
    typer.Option("--scope", help="user (~/.<agent>/…) or project (<project>/.<agent>/…)."),
]
ProjectDirOpt = Annotated[
    Path | None,
    typer.Option("--project-dir", help="Project folder for --scope project (default: cwd)."),
]


def memtoc_command(settings: Settings) -> str:
    """How an agent should run this memtoc: this program's absolute path (the agent's PATH may
    not hold it), else this Python with ``-m``; the store's paths are absolute (the agent runs
    the hook from its own folder)."""
    parts = memtoc_argv(absolute=True)
    if settings.sources.get("db") not in (None, "default"):
        parts += ["--db", settings.db]
    home = str(settings.home) if settings.sources.get("home") not in (None, "default") else None
    return installer.base_command(parts, home)


def _scope(value: str) -> installer.Scope:
    if value == "user":
        return "user"
    if value == "project":
        return "project"
    raise typer.BadParameter("expected user or project", param_hint="--scope")


@hooks_app.command("install")
def hooks_install(
    ctx: typer.Context,
    agent: AgentArg,
    scope: ScopeOpt = "user",
    project_dir: ProjectDirOpt = None,
) -> None:
    """Add memtoc's hooks to the agent's settings (idempotent; other settings are kept)."""
    settings = state(ctx).settings
    report = installer.install(
        agent,
        _scope(scope),
        command=memtoc_command(settings),
        project_dir=(project_dir or Path.cwd()).resolve(),
        user_home=Path.home(),
    )
    verb = "updated" if report.changed else "already up to date:"
    console.print(f"{verb} {report.path} (hooks: {', '.join(report.events)})", highlight=False)
    if report.note:
        console.print(f"[yellow]note:[/] {report.note}", highlight=False)


@hooks_app.command("uninstall")
def hooks_uninstall(
    agent: AgentArg, scope: ScopeOpt = "user", project_dir: ProjectDirOpt = None
) -> None:
    """Remove memtoc's hooks from the agent's settings (every other hook stays)."""
    report = installer.uninstall(
        agent,
        _scope(scope),
        project_dir=(project_dir or Path.cwd()).resolve(),
        user_home=Path.home(),
    )
    if report.changed:
        console.print(f"removed memtoc's hooks from {report.path}", highlight=False)
    else:
        console.print(f"no memtoc hooks in {report.path}", highlight=False)


def _hook_settings(ctx: typer.Context) -> Settings | None:
    root = ctx.find_root().obj
    overrides = dict(getattr(root, "overrides", {}) or {})
    return fast.hook_settings(overrides)


@hook_app.command("session-start")
def hook_session_start(
    ctx: typer.Context,
    budget: Annotated[int, typer.Option("--budget", min=0)] = DEFAULT_BUDGET,
    deadline: Annotated[float, typer.Option("--deadline", help="Seconds.")] = (
        runner.SESSION_START_DEADLINE_S
    ),
) -> None:
    """Print the session-start context as hook JSON (nothing on any problem; exit 0)."""
    hook = fast.read_hook_input()
    settings = _hook_settings(ctx)
    output = (
        runner.session_start(settings, hook, budget=budget, deadline_s=deadline) if settings else ""
    )
    fast.finish_hook(output)


@hook_app.command("ingest")
def hook_ingest(
    ctx: typer.Context,
    process: Annotated[
        bool,
        typer.Option(
            "--process",
            help="Also file new events into the TOC, in a detached process that outlives the "
            "hook (agents cancel session-end hooks when they exit).",
        ),
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="With --process: file in this process, and wait.")
    ] = False,
    deadline: Annotated[float, typer.Option("--deadline", help="Seconds.")] = (
        runner.INGEST_DEADLINE_S
    ),
) -> None:
    """Import the hook's transcript_path from its watermark (prints nothing; exit 0)."""
    hook = fast.read_hook_input()
    settings = _hook_settings(ctx)
    if settings is not None:
        outcome = runner.ingest(settings, hook, process=process and wait, deadline_s=deadline)
        if process and not wait and outcome is not None:
            runner.spawn_processing(settings)
    fast.finish_hook("")


@hook_app.command("process")
def hook_process(ctx: typer.Context) -> None:
    """File what waits in the queue into the TOC (what `hook ingest --process` starts, detached;
    problems go to hooks.log; exit 0)."""
    settings = _hook_settings(ctx)
    if settings is not None:
        runner.process_pending(settings)
    fast.finish_hook("")


@app.command()
def watch(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Folders or files (default: ~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp)."
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="Seconds between looks.")
    ] = DEFAULT_INTERVAL_S,
    process: Annotated[bool, typer.Option("--process", help="Also file new events.")] = False,
) -> None:
    """Tail transcript folders and ingest new bytes continuously (Ctrl-C or SIGTERM stops)."""
    targets = list(paths) if paths else default_paths(Path.home())
    if not targets:
        raise typer.BadParameter("no transcript folders found; name some", param_hint="PATHS")
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

    def show(report: IngestReport) -> None:
        if report.ingested or report.rejections:
            console.print(
                f"+{report.ingested} events ({report.duplicates} duplicates, "
                f"{report.rejected} rejected)",
                highlight=False,
            )

    try:
        with open_memory(ctx) as memory:
            console.print(f"watching {', '.join(map(str, targets))} every {interval:g}s")
            Watcher(memory, targets, interval, process, stop, show).run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    console.print("stopped")
