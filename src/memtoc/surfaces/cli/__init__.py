"""The ``memtoc`` command-line interface (typer + rich)."""

from memtoc.surfaces.cli import commands as _commands  # noqa: F401  (registers the commands)
from memtoc.surfaces.cli.app import app, main

__all__ = ["app", "main"]
