"""Who processes a store while a server runs: this process's worker, another process, or nobody.

Both servers that agents and people keep running process the store in the background:
``memtoc serve`` (role ``serve``) and ``memtoc mcp`` (role ``mcp``) — an agent configured with only
``memtoc mcp`` still expects what it remembers, and what the hooks ingest, to be filed into the
table of contents. Each runs the same ``BackgroundWorker`` (outbox drain + rollup scheduler, on a
thread with a ``Memory`` of its own, i.e. its own store connection) whenever it can take the
store's daemon lock (``serve_lock``), written with its role:

- lock taken: this process processes (``by: "this-server"``);
- lock held by another process (``memtoc serve``, or the MCP server of another agent session):
  processing is left to it (``by: "other-process"`` with its pid and role), and the lock is tried
  again every ``takeover_s`` seconds, so processing resumes here when that process ends;
- ``--no-worker`` (or no settings to open a store with): nobody here processes; if no other
  process holds the lock either, ``by: "nobody"`` and ``degraded`` says new events stay queued.

``memtoc serve`` refuses to start beside another ``serve`` (two daemons on one store), but starts
beside an MCP server's worker and takes processing over when that server ends.

``info()`` is what ``memory_status`` and ``/v1/status`` report under ``processing``. ``stop()``
asks the worker to finish the unit in hand (one outbox batch or one rollup run, committed), then
releases the lock.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from memtoc.config import Settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.surfaces.serve_lock import ServeLock, lock_owner, lock_path
from memtoc.surfaces.serve_worker import BackgroundWorker

log = logging.getLogger("memtoc.processing")

QUEUED = (
    "nothing processes new events ({why}): they wait in the outbox until `memtoc serve` runs, "
    "`memtoc process` is run, or a `memtoc mcp` with its worker starts"
)


class Processing:
    """A server's share of processing: a worker under the daemon lock, or a report why not."""

    def __init__(
        self,
        settings: Settings | None,
        *,
        role: str = "mcp",
        worker: bool = True,
        poll_s: float = 2.0,
        rollup_interval_s: float = 300.0,
        takeover_s: float = 30.0,
        memory_factory: Callable[[], Memory] | None = None,
    ) -> None:
        self.settings = settings
        self.enabled = worker and settings is not None
        self.poll_s = poll_s
        self.rollup_interval_s = rollup_interval_s
        self.takeover_s = takeover_s
        self.role = role
        self.lock = ServeLock(lock_path(settings), role=role) if settings is not None else None
        self._factory = memory_factory or (
            (lambda: Memory.open(settings)) if settings is not None else None
        )
        self._why_not = (
            "--no-worker" if not worker else None if settings is not None else "no store settings"
        )
        self._worker: BackgroundWorker | None = None
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        self._mutex = threading.RLock()  # stop() may run in a signal handler

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> Processing:
        """Take the lock and start the worker, or (lock held elsewhere) watch for a takeover."""
        if self.enabled and not self._try_take():
            self._watcher = threading.Thread(
                target=self._watch, name=f"memtoc-{self.role}-takeover", daemon=True
            )
            self._watcher.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Finish the unit of work in hand, stop the worker and release the lock (idempotent)."""
        self._stopping.set()
        with self._mutex:  # no takeover half-way through
            worker = self._worker
        if worker is not None:
            worker.stop(timeout_s)
        if self.lock is not None:
            self.lock.release()

    def _try_take(self) -> bool:
        assert self.lock is not None and self._factory is not None
        with self._mutex:
            if self._stopping.is_set():
                return False
            try:
                self.lock.acquire()
            except StoreError as exc:
                if lock_owner(self.lock.path) is None:  # not held: the lock file itself failed
                    self._why_not = f"cannot take the processing lock: {exc}"
                return False
            self._why_not = None
            self._worker = BackgroundWorker(
                self._factory, poll_s=self.poll_s, rollup_interval_s=self.rollup_interval_s
            ).start()
        log.info("processing this store (lock %s)", self.lock.path)
        return True

    def _watch(self) -> None:
        while not self._stopping.wait(self.takeover_s):
            if lock_owner(self.lock.path) is None and self._try_take():  # type: ignore[union-attr]
                return

    # -- report -----------------------------------------------------------------------------------
    def info(self) -> dict[str, JsonValue]:
        """Who processes new events: ``by`` this-server / other-process / nobody, and details."""
        lock = str(self.lock.path) if self.lock is not None else None
        worker = self._worker
        if worker is not None and self.lock is not None and self.lock.held:
            state = worker.info()
            failed = state.get("state") == "failed"
            return {
                "by": "this-server",
                "pid": os.getpid(),
                "role": self.role,
                "lock": lock,
                "worker": state,
                "degraded": f"this {self.role} worker failed: {state.get('last_error')}"
                if failed
                else None,
            }
        owner = lock_owner(self.lock.path) if self.lock is not None else None
        if owner is not None:
            role = owner.role or "process"
            note = f"memtoc {role} (pid {owner.pid}) processes this store"
            if self.enabled and not self._stopping.is_set():
                note += (
                    f"; this server takes over if it stops (checked every {self.takeover_s:g} s)"
                )
            return {
                "by": "other-process",
                "pid": owner.pid,
                "role": owner.role,
                "lock": lock,
                "worker": None,
                "degraded": None,
                "note": note,
            }
        why = self._why_not
        if why is None:
            why = (
                "this server has stopped processing"
                if self._stopping.is_set()
                else (f"the lock is free; this server takes it within {self.takeover_s:g} s")
            )
        return {
            "by": "nobody",
            "pid": None,
            "role": None,
            "lock": lock,
            "worker": None,
            "degraded": QUEUED.format(why=why),
        }
