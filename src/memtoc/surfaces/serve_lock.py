"""The daemon lock: one ``memtoc serve`` per store.

An exclusive ``flock`` on a file beside the store (``memtoc.db.serve.lock``; for a PostgreSQL
store, ``<home>/serve.lock``, which guards this machine only) held for the daemon's lifetime. The
holder writes its pid into the file so a second daemon — and ``memtoc status`` — can name it. The
kernel drops the lock when the process dies, however it dies, so a stale file never blocks a new
daemon; the file itself is left in place (deleting lock files invites races).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memtoc.config import Settings
from memtoc.errors import StoreError


def lock_path(settings: Settings) -> Path:
    """Where the daemon lock of the store ``settings`` names lives."""
    db = settings.db
    if db.startswith(("postgresql://", "postgres://")):
        return settings.home / "serve.lock"
    path = Path(db.removeprefix("file:")).expanduser()
    return path.with_name(path.name + ".serve.lock")


def _read_pid(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 64).decode("ascii", "replace").strip()
    return int(raw) if raw.isdigit() else None


def lock_holder(path: Path) -> int | None:
    """The pid of the daemon holding the lock at ``path`` (None when no daemon holds it)."""
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
            return _read_pid(fd) or -1  # held, but the pid is not written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class ServeLock:
    """Exclusive, non-blocking lock on ``path``; ``acquire`` fails naming the holder's pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
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
            pid = _read_pid(fd)
            os.close(fd)
            who = f"pid {pid}" if pid else "another process"
            raise StoreError(
                f"another memtoc serve ({who}) is already processing this store "
                f"(lock {self.path}); stop it first"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
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
