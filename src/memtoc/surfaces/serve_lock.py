"""The daemon lock: one process processes a store (``memtoc serve``, or ``memtoc mcp``'s worker).

An exclusive ``flock`` on a file beside the store (``memtoc.db.serve.lock``; for a PostgreSQL
store, ``<home>/serve.lock``, which guards this machine only) held for the daemon's lifetime. The
holder writes its pid and role (``serve``, or ``mcp`` for the worker of ``memtoc mcp``) into the
file so a second daemon — and ``memtoc status`` — can name it. The kernel drops the lock when the
process dies, however it dies, so a stale file never blocks a new daemon; the file itself is left
in place (deleting lock files invites races).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import NamedTuple

from memtoc.config import Settings
from memtoc.errors import StoreError


def lock_path(settings: Settings) -> Path:
    """Where the daemon lock of the store ``settings`` names lives."""
    db = settings.db
    if db.startswith(("postgresql://", "postgres://")):
        return settings.home / "serve.lock"
    path = Path(db.removeprefix("file:")).expanduser()
    return path.with_name(path.name + ".serve.lock")


class LockOwner(NamedTuple):
    """Who holds a daemon lock: a pid (-1 while not written yet) and a role (None if unknown)."""

    pid: int
    role: str | None


def _read_owner(fd: int) -> tuple[int | None, str | None]:
    os.lseek(fd, 0, os.SEEK_SET)
    words = os.read(fd, 64).decode("ascii", "replace").split()
    pid = int(words[0]) if words and words[0].isdigit() else None
    return pid, (words[1] if pid is not None and len(words) > 1 else None)


def lock_owner(path: Path) -> LockOwner | None:
    """Who holds the lock at ``path`` (None when no daemon holds it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the daemon lock {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, role = _read_owner(fd)
            return LockOwner(pid or -1, role)  # held, but the pid may not be written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def lock_holder(path: Path) -> int | None:
    """The pid of the daemon holding the lock at ``path`` (None when no daemon holds it)."""
    owner = lock_owner(path)
    return owner.pid if owner is not None else None


class ServeLock:
    """Exclusive, non-blocking lock on ``path``; ``acquire`` fails naming the holder's pid.

    ``role`` is written beside the pid: ``serve`` (the daemon) or ``mcp`` (``memtoc mcp``'s worker).
    """

    def __init__(self, path: Path, *, role: str = "serve") -> None:
        self.path = path
        self.role = role
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise ``StoreError`` naming the daemon (pid) that has it."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, role = _read_owner(fd)
            os.close(fd)
            who = f"pid {pid}" if pid else "another process"
            hint = "stop it first"
            if role == "mcp":  # an agent's MCP server: it can leave processing to a daemon
                hint += " (or run that MCP server with `memtoc mcp --no-worker`)"
            raise StoreError(
                f"another memtoc {role or 'process'} ({who}) is already processing this store "
                f"(lock {self.path}); {hint}"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.role}\n".encode("ascii"))
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the pid is cleared first, so nobody reads a stale one)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> ServeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
