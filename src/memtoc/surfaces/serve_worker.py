"""The daemon's background worker: drains the outbox and runs the rollup scheduler.

One thread, one ``Memory`` of its own (its own store connection), because the ``Processor`` is not
thread-safe and the rollups build on what the drain filed. The loop:

- at start, a rollup run: ``run_rollups`` back-fills parent periods that have children but no node
  and rolls up every dirty period that is due, so periods missed while no daemon ran are caught up;
- then rounds of ``Memory.process(until_idle=False, rollup=False)`` — one claimed outbox batch
  filed into segments, the segments that closed built and summarised, new vectors embedded and
  bookmarks detected (the hooks ``memtoc process`` runs) — back to back while there is work;
- when the queue goes idle after work, and every ``rollup_interval_s`` anyway, a rollup run;
- when idle, a wait of ``poll_s`` (cut short by ``stop``).

``stop()`` sets a flag the loop checks between rounds: the round in hand (one outbox batch, or one
rollup run) finishes and commits, then the thread closes its Memory and ends. A round that raises
is logged and recorded (``info()["last_error"]``) and retried after a back-off; the outbox is
at-least-once and idempotent, so nothing is lost or doubled.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memtoc.clock import Clock, SystemClock
from memtoc.memory import Memory
from memtoc.model import JsonValue

log = logging.getLogger("memtoc.serve")


class BackgroundWorker:
    """The outbox drain and rollup scheduler of ``memtoc serve``, on a thread."""

    def __init__(
        self,
        memory_factory: Callable[[], Memory],
        *,
        poll_s: float = 2.0,
        rollup_interval_s: float = 300.0,
        clock: Clock | None = None,
    ) -> None:
        self._factory = memory_factory
        self.poll_s = poll_s
        self.rollup_interval_s = rollup_interval_s
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._info: dict[str, JsonValue] = {
            "running": False,
            "state": "starting",
            "rounds": 0,
            "events_filed": 0,
            "segments_built": 0,
            "rollup_runs": 0,
            "nodes_rolled_up": 0,
            "last_round_ms": None,
            "last_rollup_ms": None,
            "last_error": None,
            "errors": 0,
        }

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> BackgroundWorker:
        self._thread = threading.Thread(target=self._main, name="memtoc-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 120.0) -> bool:
        """Ask the loop to end after the unit in hand; wait up to ``timeout_s``. True if it ended."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning(
                "worker still busy after %.0f s; leaving it (work is re-claimable)", timeout_s
            )
            return False
        return True

    def info(self) -> dict[str, JsonValue]:
        """A snapshot of the worker's state and counters (``/v1/status`` → ``daemon.worker``)."""
        with self._lock:
            return dict(self._info)

    def _note(self, **values: JsonValue) -> None:
        with self._lock:
            for key, value in values.items():
                current = self._info.get(key)
                if key in _COUNTERS and isinstance(current, int) and isinstance(value, int):
                    self._info[key] = current + value
                else:
                    self._info[key] = value

    # -- the loop ---------------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            memory = self._factory()
        except Exception as exc:
            log.exception("worker cannot open the store")
            self._note(state="failed", last_error=f"cannot open the store: {exc}", errors=1)
            return
        self._note(running=True, state="rollup")
        try:
            self._loop(memory)
        finally:
            memory.close()
            self._note(running=False, state="stopped")

    def _loop(self, memory: Memory) -> None:
        due_rollup = True  # back-fill missed periods at start
        busy = False
        next_rollup = time.monotonic() + self.rollup_interval_s
        while not self._stop.is_set():
            try:
                if due_rollup or time.monotonic() >= next_rollup:
                    self._note(state="rollup")
                    self._rollup(memory)
                    due_rollup, busy = False, False
                    next_rollup = time.monotonic() + self.rollup_interval_s
                    continue
                self._note(state="processing")
                worked = self._round(memory)
            except Exception as exc:  # keep the daemon alive; the outbox keeps the work
                log.exception("worker round failed; retrying")
                self._note(state="backoff", last_error=f"{type(exc).__name__}: {exc}", errors=1)
                self._stop.wait(max(self.poll_s, 1.0) * 5)
                continue
            if worked:
                busy = True
                continue
            if busy:  # the queue just drained: roll up what the new work made due
                due_rollup = True
                continue
            self._note(state="idle")
            self._stop.wait(self.poll_s)

    def _round(self, memory: Memory) -> bool:
        report = memory.process(until_idle=False, rollup=False)
        self._note(
            rounds=1,
            events_filed=report.events,
            segments_built=report.segments_built,
            last_round_ms=self._clock.now_ms(),
        )
        if report.failures:
            self._note(last_error="; ".join([*report.failed_entries, *report.failed_segments]))
        return bool(report.entries or report.events or report.segments_built)

    def _rollup(self, memory: Memory) -> None:
        report = memory.rollup()
        self._note(
            rollup_runs=1, nodes_rolled_up=report.written, last_rollup_ms=self._clock.now_ms()
        )
        if report.failures:
            self._note(last_error="; ".join(report.failures))


_COUNTERS = frozenset(
    {"rounds", "events_filed", "segments_built", "rollup_runs", "nodes_rolled_up", "errors"}
)
"""``_note`` adds to these; other keys are replaced."""
