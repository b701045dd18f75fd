"""Summarising in worker processes: the segments of a build round, the periods of a rollup level.

Summarising is most of the pipeline's CPU and, once a segment's events (or a period's children)
are read, a pure function of them (``toc.summarize_segment``, ``toc.summarize_period``): nothing
it computes depends on another segment of the round or on what the store holds. So the worker and
the rollups read each job in this process, hand it to a pool of worker processes, and write the
results *in the order the jobs were read*, in the same batches: the store ends exactly as with
one process (same nodes, versions, grips, search documents, in the same order), only sooner.
Meanwhile this process does what does not depend on them (reading the next jobs, the bookmark
pass of the events just filed).

**When.** Only the extractive summariser, whose worker copy is rebuilt from its settings and a
token counter of the same kind (an LLM summariser spends its time waiting on the network, and its
clients do not cross processes); only for rounds of at least ``MIN_JOBS`` jobs (a hook's
``process`` of a few events never starts a process); with ``workers`` processes (the
``pipeline_workers`` setting: ``auto`` = the CPU cores this process may use, 0 or 1 = none). The
pool starts on the first large round and is shut down by ``close`` at the end of each ``process``
/ ``rollup``. Its processes fork from a ``forkserver`` (a clean process started once, which has
imported the summariser: no database connection or thread is inherited, and a pool starts in
milliseconds; ``spawn`` where there is none), so they are not this process's children: the CPU
they spend is what their jobs report (``cpu_s``).

**Only when it helps.** Worker processes cost CPU of their own (each job is sent and its result
returned; caches are split between processes; docs/benchmarks.md). They pay only when the
machine has a core to spare. After each round (``settle``) the pool checks how many cores this
process and its workers ran on together; when fewer than ``MIN_CORES`` (other work holds the
cores, or the scheduler gives this process group one core's share — Linux's autogroup gives each
session an equal share, however many processes it runs), the next rounds are summarised here and
the pool is tried again after ``REST_ROUNDS``.

**Failures.** A job that raises raises the same exception here (its segment or period is
quarantined as in one process). A pool that breaks (a worker killed, out of memory) is logged
at WARNING, the jobs it held run in this process, and the rest of the run goes without it.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.text.tokens import HeuristicCounter, TiktokenCounter, TokenCounter

log = logging.getLogger(__name__)

MIN_JOBS = 24
"""Jobs in a round below which it is summarised in this process (a pool costs a process start,
≈ 0.5 s of CPU each, and pickling every job)."""

OWNER_POLL_S = 1.0
"""How often a worker checks that the process owning its pool is still there (``_watch``)."""
MIN_CORES = 1.25
"""Cores this process and its workers must have run on together over a round for the pool to
be kept for the next one (``settle``): below that, the workers only took turns with it."""
REST_ROUNDS = 4
"""Rounds run in this process after a round that did not get ``MIN_CORES``, before trying again;
doubled after each further such round in a row, ``MAX_DOUBLINGS`` times at most."""
MAX_DOUBLINGS = 2
MIN_ROUND_S = 0.5
"""Rounds shorter than this (wall seconds) are not judged."""

J = TypeVar("J")
R = TypeVar("R")

_SUMMARIZER: Summarizer | None = None
"""The worker process's summariser (set by ``_init``)."""


def default_workers() -> int:
    """Worker processes for ``auto``: the CPU cores this process may run on (1: none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def parse_workers(value: str | int) -> int:
    """The ``pipeline_workers`` setting as a count: ``auto`` (``default_workers``) or an int ≥ 0
    (0 and 1: summarise in this process); raises ValueError naming the value otherwise."""
    if isinstance(value, int):
        count = value
    elif value.strip().lower() == "auto":
        return default_workers()
    else:
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"expected 'auto' or a number of processes, got {value!r}") from None
    if count < 0:
        raise ValueError(f"expected 'auto' or a number of processes >= 0, got {value!r}")
    return count


def worker_spec(summarizer: Summarizer) -> tuple[str, dict[str, Any]] | None:
    """What a worker needs to build a summariser that gives the same output as ``summarizer``:
    its token counter's kind and its settings; None when it cannot be copied (another
    summariser, or a counter this module does not know how to rebuild)."""
    if type(summarizer) is not ExtractiveSummarizer:
        return None
    counter = summarizer.counter
    if type(counter) not in (TiktokenCounter, HeuristicCounter):
        return None
    settings = {k: v for k, v in vars(summarizer).items() if k != "counter"}
    return counter.name, settings


def _counter(kind: str) -> TokenCounter:
    if kind == HeuristicCounter.name:
        return HeuristicCounter()
    return TiktokenCounter()


def _init(spec: tuple[str, dict[str, Any]] | None, owner: int) -> None:
    """Worker start: build its summariser once, and watch the process that owns the pool."""
    global _SUMMARIZER
    assert spec is not None, "summary pool started without a summariser to copy"
    threading.Thread(target=_watch, args=(owner,), name="owner-watch", daemon=True).start()
    kind, settings = spec
    summarizer = ExtractiveSummarizer.__new__(ExtractiveSummarizer)
    vars(summarizer).update(settings)
    summarizer.counter = _counter(kind)
    _SUMMARIZER = summarizer


def _watch(owner: int) -> None:
    """End this worker once the process that owns the pool is gone. A worker waits for jobs on a
    queue it holds both ends of, so an owner that ended without shutting the pool down (killed,
    or a multiprocessing child leaving through ``os._exit``) would leave it waiting forever."""
    while True:
        time.sleep(OWNER_POLL_S)
        if not _alive(owner):
            os._exit(0)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` is running (an ended one not yet reaped by its parent is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but not ours to signal
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:  # no /proc (not Linux): the signal check is all there is
        return True


def _call(fn: Callable[[Summarizer, Any], Any], job: Any) -> tuple[Any, int, float]:
    """Run one job with the worker's summariser; with the worker's pid and CPU seconds so far
    (what ``SummaryPool.cpu_s`` adds up)."""
    assert _SUMMARIZER is not None, "summary pool worker not initialised"
    return fn(_SUMMARIZER, job), os.getpid(), time.process_time()


def _context() -> multiprocessing.context.BaseContext:
    """``forkserver`` where there is one (a worker forks from a clean server process that has
    imported the summariser once: no database connection, thread or main module inherited, and
    a pool starts in milliseconds), else ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


class _Done(Generic[R]):
    """A job run in this process, when its result is asked for (the same interface as a
    ``Future``'s ``result``)."""

    __slots__ = ("_fn", "_job", "_summarizer")

    def __init__(self, fn: Callable[[Summarizer, Any], R], summarizer: Summarizer, job: Any):
        self._fn, self._summarizer, self._job = fn, summarizer, job

    def result(self) -> R:
        return self._fn(self._summarizer, self._job)


class Pending(Generic[R]):
    """One submitted job: ``result()`` returns its result or raises what it raised; when the
    pool broke under it, it is run here instead."""

    __slots__ = ("_fallback", "_future", "_pool")

    def __init__(
        self,
        fallback: _Done[R],
        future: Future[tuple[R, int, float]] | None = None,
        pool: SummaryPool | None = None,
    ) -> None:
        self._fallback, self._future, self._pool = fallback, future, pool

    def result(self) -> R:
        if self._future is None or self._pool is None:
            return self._fallback.result()
        try:
            made, pid, cpu = self._future.result()
        except BrokenProcessPool as exc:
            self._pool.broke(exc)
            return self._fallback.result()
        self._pool.note_cpu(pid, cpu)
        return made


class SummaryPool:
    """Runs summarising jobs in worker processes when a round is large enough, else here; results
    are taken in submission order. One per ``Processor``; not thread-safe."""

    def __init__(self, summarizer: Summarizer, workers: int, *, min_jobs: int = MIN_JOBS) -> None:
        self.summarizer = summarizer
        self.workers = workers
        self.min_jobs = min_jobs
        self.spec = worker_spec(summarizer) if workers > 1 else None
        self._executor: ProcessPoolExecutor | None = None
        self.broken: str | None = None
        """Why the pool stopped being used in this run (logged), None while it works."""
        self.started = 0
        """Pools started (a pool serves every large round of one ``process`` or ``rollup``)."""
        self._cpu: dict[int, float] = {}
        self._cpu_closed = 0.0
        self._mark: tuple[float, float, float] | None = None
        self._used = False
        self._rest = 0
        self._strikes = 0
        self.rounds = 0
        """Rounds the pool was used in (and measured: ``settle``)."""
        self.rested = 0
        """Of those, the ones after which it rested (fewer than ``MIN_CORES`` cores used)."""

    @property
    def parallel(self) -> bool:
        """Whether large rounds go to worker processes."""
        return self.spec is not None and self.broken is None

    def round(
        self, jobs: int, *, min_jobs: int | None = None
    ) -> Callable[[Callable[[Summarizer, J], R], J], Pending[R]]:
        """A ``submit(fn, job)`` for a round of ``jobs`` jobs: to the pool when the round is
        large enough (``min_jobs``, default the pool's), else run here when its result is asked
        for."""
        if jobs < (self.min_jobs if min_jobs is None else min_jobs) or not self.parallel:
            return self._here
        if self._rest > 0:
            return self._here
        self._used = True
        return self._there

    def settle(self) -> None:
        """The end of one pipeline round (a drain-and-build pass, a rollup level). When the
        pool was used in it and this process and its workers together ran on fewer than
        ``MIN_CORES`` cores meanwhile, the machine has no core to spare for them (every core busy
        with other work, or a CPU quota on this process group): the pool only adds its own
        cost (jobs sent, caches split), so the next ``REST_ROUNDS`` rounds run here (twice as
        many after each further such round in a row, up to 16); then it is tried again."""
        now = (time.perf_counter(), time.process_time(), self.cpu_s)
        mark, self._mark = self._mark, now
        if not self._used:
            self._rest = max(0, self._rest - 1)
            return
        self._used = False
        if mark is None or now[0] - mark[0] < MIN_ROUND_S:
            return
        cores = (now[1] - mark[1] + now[2] - mark[2]) / (now[0] - mark[0])
        self.rounds += 1
        if cores < MIN_CORES:
            # a machine that stays busy is probed less and less often: 4, 8, then 16 rounds
            self._rest = REST_ROUNDS << min(self._strikes, MAX_DOUBLINGS)
            self._strikes += 1
            self.rested += 1
            log.info(
                "summary pool: %.2f cores used over the last round (< %.2f): the next %d rounds "
                "are summarised in this process",
                cores,
                MIN_CORES,
                self._rest,
            )
        else:
            self._strikes = 0

    def _here(self, fn: Callable[[Summarizer, J], R], job: J) -> Pending[R]:
        return Pending(_Done(fn, self.summarizer, job))

    def _there(self, fn: Callable[[Summarizer, J], R], job: J) -> Pending[R]:
        fallback = _Done(fn, self.summarizer, job)
        executor = self._start()
        if executor is None:
            return Pending(fallback)
        try:
            future = executor.submit(_call, fn, job)
        except (BrokenProcessPool, RuntimeError) as exc:  # broke or shut down under us
            self.broke(exc)
            return Pending(fallback)
        return Pending(fallback, future, self)

    def note_cpu(self, pid: int, cpu_s: float) -> None:
        """A worker's CPU seconds so far, as its latest job reported them."""
        if cpu_s > self._cpu.get(pid, 0.0):
            self._cpu[pid] = cpu_s

    @property
    def cpu_s(self) -> float:
        """CPU seconds the worker processes spent, every pool since this one was made, as their
        jobs reported them (a worker's time after its last job is not counted: it only waits).
        A ``forkserver``'s workers are not this process's children, so ``RUSAGE_CHILDREN``
        would not hold them."""
        return self._cpu_closed + sum(self._cpu.values())

    def _start(self) -> ProcessPoolExecutor | None:
        if self._executor is None and self.parallel:
            try:
                self._executor = ProcessPoolExecutor(
                    max_workers=self.workers,
                    mp_context=_context(),
                    initializer=functools.partial(_init, self.spec, os.getpid()),
                )
                self.started += 1
            except (OSError, ValueError) as exc:
                self.broke(exc)
        return self._executor

    def broke(self, exc: BaseException) -> None:
        """Stop using the pool for this run (its remaining jobs run here); logged once."""
        if self.broken is None:
            self.broken = f"{type(exc).__name__}: {exc}"
            log.warning(
                "summary pool of %d processes stopped (%s): summarising in this process",
                self.workers,
                self.broken,
            )

    def close(self) -> None:
        """Shut the worker processes down (waiting for them); the next large round starts a new
        pool, and a broken pool is tried again."""
        executor, self._executor = self._executor, None
        self.broken = None
        self._mark, self._used, self._rest, self._strikes = None, False, 0, 0
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self._cpu_closed += sum(self._cpu.values())
        self._cpu.clear()
