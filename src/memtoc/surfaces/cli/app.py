"""The ``memtoc`` command: the typer app, global options and shared output helpers.

Global options (``--db``, ``--home``) and the environment are read here and only here; commands
receive a ``Settings`` and open a ``Memory`` from it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from memtoc.config import Settings, load_settings, setting
from memtoc.errors import MemtocError
from memtoc.memory import Memory
from memtoc.projects import Scope

console = Console()
err_console = Console(stderr=True)


COMMANDS: dict[str, tuple[str, ...]] = {
    "bench": ("bench_cmds",),
    "bookmarks": ("bookmark_cmds",),
    "context": ("context_cmds",),
    "demo": ("demo",),
    "eval": ("eval_cmds", "quality_cmds", "bookmark_eval_cmds", "redaction_eval_cmds"),
    "forget": ("forget_cmds",),
    "forget-log": ("forget_cmds",),
    "hooks": ("hook_cmds",),
    "hook": ("hook_cmds",),
    "watch": ("hook_cmds",),
    "mcp": ("mcp_cmds",),
    "migrate-store": ("migrate_cmds",),
    "projects": ("projects_cmds",),
    "recall": ("recall_cmds",),
    "search": ("search_cmds",),
    "rebuild": ("search_cmds",),
    "serve": ("serve_cmds",),
    "token": ("serve_cmds",),
    "status": ("status_cmds",),
    **dict.fromkeys(
        ("init", "ingest", "events", "stats", "verify", "backup", "restore", "compact"),
        ("store_cmds",),
    ),
    **dict.fromkeys(("process", "rollup", "toc", "expand", "timeline"), ("toc_cmds",)),
}
"""Each command → the modules (under ``memtoc.surfaces.cli``) that define it. A command's
modules are imported when it runs (or ``--help`` lists it), not before: ``memtoc context`` and
the hook commands load only what they use (a test checks the map against every module)."""


class SortedGroup(TyperGroup):
    """A command group listing its commands by name: for a group whose commands several modules
    register (``eval``), registration order is import order, which depends on what ran first
    (``memtoc eval --help`` and docs/cli.md changed with it)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(super().list_commands(ctx))


class _Group(TyperGroup):
    """Loads a command's module on first use; turns memtoc errors raised by any command into a
    clear message and exit code 1."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in COMMANDS:
            found = _load_command(cmd_name)
            if found is not None:
                self.add_command(found, cmd_name)
        return found

    def invoke(self, ctx: Any) -> Any:  # typer vendors click; its Context type is private
        try:
            return super().invoke(ctx)
        except MemtocError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None


def _load_command(name: str) -> Any:
    """Import the modules defining ``name`` and build its click command from what they
    registered on ``app`` (typer's own converters)."""
    import importlib

    from typer.main import get_command_from_info, get_group_from_info

    for module in COMMANDS[name]:
        importlib.import_module(f"memtoc.surfaces.cli.{module}")
    for info in app.registered_groups:
        if info.name == name:
            return get_group_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    for command in app.registered_commands:
        assert command.callback is not None
        if (command.name or command.callback.__name__.replace("_", "-")) == name:
            return get_command_from_info(
                command,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    return None


app = typer.Typer(
    name="memtoc",
    cls=_Group,
    help="Long-term memory for AI agents: a table of contents over time.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        help="Project name or id (default: the project of the current directory — the "
        "repository holding it, whatever subfolder or worktree).",
    ),
]
ProjectsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--project",
        "-p",
        help="Project name or id, repeatable (default: the current directory's project).",
    ),
]
AllProjectsOpt = Annotated[
    bool, typer.Option("--all-projects", "-A", help="Every project instead of one.")
]


@dataclass
class State:
    overrides: dict[str, Any]
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.overrides)
        return self._settings


def _print_version(value: bool) -> None:
    if value:
        from memtoc import __version__

        typer.echo(f"memtoc {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    db: Annotated[
        str | None, typer.Option("--db", help=f"{setting('db').help} (env MEMTOC_DB)")
    ] = None,
    home: Annotated[
        str | None, typer.Option("--home", help=f"{setting('home').help} (env MEMTOC_HOME)")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print memtoc's version."
        ),
    ] = False,
) -> None:
    ctx.obj = State({"db": db, "home": home})


def state(ctx: typer.Context) -> State:
    obj = ctx.find_root().obj
    assert isinstance(obj, State)
    return obj


@contextmanager
def open_memory(ctx: typer.Context, *, read_only: bool = False) -> Iterator[Memory]:
    with Memory.open(state(ctx).settings, read_only=read_only) as memory:
        yield memory


def project_scope(
    memory: Memory,
    project: str | list[str] | None = None,
    all_projects: bool = False,
    *,
    all_option: bool = True,
) -> Scope:
    """The projects a read command is about, by memtoc's one rule (``memtoc.projects``):
    ``--project`` (repeatable), ``--all-projects``, else the current directory's project. A
    directory with no memory yet gives an empty scope; its note (naming the known projects) goes
    to stderr."""
    names = [project] if isinstance(project, str) else list(project or [])
    if len(names) > 1:  # named projects win over --all-projects, as one does
        ids = tuple(dict.fromkeys(memory.scope(n).project or n for n in names))
        return Scope(ids, "explicit")
    scope = memory.scope(
        names[0] if names else None, all_projects=all_projects, working_dir=os.getcwd()
    )
    if scope.note:
        # the options this command has, not "ask for all projects" (toc has no --all-projects)
        ask = " — name one with --project NAME" + (" or use --all-projects" if all_option else "")
        note = scope.note.replace(" — name one, or ask for all projects", ask)
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    return scope


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def main() -> None:
    """Entry point: run the app, turning memtoc errors into clear messages and exit code 1
    (each command's module is imported when the command runs: ``COMMANDS``)."""
    app()
