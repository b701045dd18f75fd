"""How to run this memtoc again from another folder or process: the command memtoc prints for a
user to copy (``memtoc serve``, the MCP config of ``memtoc demo``) and writes into agents' hooks.

After ``make demo`` in a fresh clone, ``memtoc`` is ``.venv/bin/memtoc``, not on PATH: a printed
``memtoc --home .memtoc-demo mcp`` was "command not found" in a shell and, given to an agent
(which starts it from its own folder), an empty store. So the command is ``memtoc`` only when that
name on PATH is this very program, else this program's absolute path (or this Python with
``-m memtoc``); the store paths beside it are absolute (``memtoc.config`` makes them so).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def _this_script() -> Path | None:
    """The ``memtoc`` script this process runs as (None under ``python -m memtoc``)."""
    arg0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if arg0 is None or arg0.name != "memtoc" or not arg0.is_file():
        return None
    return arg0.absolute()


def memtoc_argv(*, absolute: bool = False) -> list[str]:
    """The argv prefix that runs this memtoc: ``["memtoc"]`` when PATH finds this program under
    that name (unless ``absolute``: hooks run under the agent's PATH, not the user's shell's),
    else the script's absolute path, else this Python with ``-m memtoc``."""
    script = _this_script()
    on_path = shutil.which("memtoc")
    if script is not None:
        same = on_path is not None and Path(on_path).resolve() == script.resolve()
        return ["memtoc"] if same and not absolute else [str(script)]
    if on_path is not None and Path(on_path).resolve().parent == Path(sys.executable).parent:
        return ["memtoc"] if not absolute else [str(Path(on_path).absolute())]
    return [sys.executable, "-m", "memtoc"]


def shell_command(*args: str, absolute: bool = False) -> str:
    """``memtoc_argv()`` and ``args`` as one line a POSIX shell runs as given (quoted)."""
    return shlex.join([*memtoc_argv(absolute=absolute), *args])
