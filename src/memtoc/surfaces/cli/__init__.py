"""The ``memtoc`` command-line interface (typer + rich).

Commands register on ``app`` when their module is imported; ``app`` imports a command's module
when it runs (``app.COMMANDS``); ``memtoc.surfaces.cli.commands`` imports them all. The
``memtoc`` command starts in ``memtoc.surfaces.quick.main``, which runs the hook commands and
``memtoc context`` without typer and hands everything else to this app.
"""

from memtoc.surfaces.cli.app import app, main

__all__ = ["app", "main"]
