"""A bounded pool of ``Memory`` objects for the HTTP API's worker threads.

FastAPI runs the (synchronous) routes on a thread pool. A ``Memory`` holds one store connection
and lazily built, unsynchronised state (the processor, the embedder), so it must not serve two
requests at once. Each request therefore *leases* a ``Memory`` for its duration: an idle one if
there is one, a new one from the factory while fewer than ``size`` exist, else it waits for one
to come back. A connection is thus only ever used by one thread at a time, and at most ``size``
connections (and embedders) are open. ``close`` closes them when the app shuts down (and
``reopen`` lets a restarted lifespan lease again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memtoc.errors import StoreError
from memtoc.memory import Memory

MemoryFactory = Callable[[], Memory]
log = logging.getLogger("memtoc")


class MemoryPool:
    """At most ``size`` Memories, each leased to one request at a time."""

    def __init__(self, factory: MemoryFactory, *, size: int = 4, timeout_s: float = 60.0) -> None:
        if size < 1:
            raise ValueError("pool size must be at least 1")
        self._factory = factory
        self._size = size
        self._timeout_s = timeout_s
        self._idle: list[Memory] = []
        self._count = 0
        """Memories opened or being opened (the factory runs outside the lock)."""
        self._cond = threading.Condition()
        self._closed = False

    @property
    def opened(self) -> int:
        """How many Memories (store connections) the pool has opened."""
        with self._cond:
            return self._count

    def warm(self) -> None:
        """Load the models into a pooled Memory now (``Memory.warm``); problems are logged."""
        try:
            with self.lease() as memory:
                seconds = memory.warm()
            log.info("models loaded in %.2f s", seconds)
        except Exception as exc:  # a model that cannot load is reported by the queries needing it
            log.warning("could not load the models ahead of the first query: %s", exc)

    @contextmanager
    def lease(self) -> Iterator[Memory]:
        """A Memory for this thread alone until the block ends."""
        memory = self._acquire()
        try:
            yield memory
        finally:
            self._release(memory)

    def _acquire(self) -> Memory:
        with self._cond:
            while True:
                if self._closed:
                    raise StoreError("the HTTP API is shutting down")
                if self._idle:
                    return self._idle.pop()
                if self._count < self._size:
                    self._count += 1
                    break
                if not self._cond.wait(self._timeout_s):
                    raise StoreError(f"no store connection free after {self._timeout_s:.0f} s")
        try:
            return self._factory()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, memory: Memory) -> None:
        with self._cond:
            if self._closed:
                self._count -= 1
                memory.close()
                return
            self._idle.append(memory)
            self._cond.notify()

    def reopen(self) -> None:
        """Accept leases again after ``close`` (an app's lifespan may run more than once)."""
        with self._cond:
            self._closed = False

    def close(self) -> None:
        """Close every idle Memory now; leased ones close when their request ends."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for memory in idle:
            memory.close()
