"""The ``memtoc`` command-line interface (typer + rich)."""

from memtoc.surfaces.cli.app import app, main
from memtoc.surfaces.cli import commands as _commands  # noqa: F401  (registers the commands)

__all__ = ["app", "main"]
