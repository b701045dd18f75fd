"""The ``memtoc`` command: the typer app, global options and shared output helpers.

Global options (``--db``, ``--home``) and the environment are read here and only here; commands
receive a ``Settings`` and open a ``Memory`` from it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from memtoc.config import Settings, load_settings
from memtoc.errors import MemtocError
from memtoc.memory import Memory

console = Console()
err_console = Console(stderr=True)


class _Group(TyperGroup):
    """Turns memtoc errors raised by any command into a clear message and exit code 1."""

    def invoke(self, ctx: Any) -> Any:  # typer vendors click; its Context type is private
        try:
            return super().invoke(ctx)
        except MemtocError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None


app = typer.Typer(
    name="memtoc",
    cls=_Group,
    help="Long-term memory for AI agents: a table of contents over time.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


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
        str | None, typer.Option("--db", help="Store: a SQLite file path (env MEMTOC_DB).")
    ] = None,
    home: Annotated[
        str | None,
        typer.Option("--home", help="Data directory (env MEMTOC_HOME; default: user data dir)."),
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


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def main() -> None:
    """Entry point: run the app, turning memtoc errors into clear messages and exit code 1."""
    from memtoc.surfaces.cli import commands  # noqa: F401  (registers the commands)

    app()
