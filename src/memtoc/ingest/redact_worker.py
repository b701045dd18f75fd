"""A helper process for the redaction prefilter, so that its C passes run beside the insert.

The batch prefilter (:func:`~memtoc.ingest.redact_gate.blob_suspects`) is a pure function of one
UTF-8 blob and the offsets where its texts end, and it is most of redaction's cost. A large ingest
batch is cut into chunks and the first few are sent here (``importer._IN_FLIGHT``); the importer inserts chunk by chunk, so gating
chunk *k + 1* here overlaps inserting chunk *k* there (SQLite and the gates each keep one core
busy; with threads they would take turns on the GIL).

Nothing here touches the store: the process gets bytes and returns indices, and every write,
transaction and acknowledgement stays in the importer's process. It is started on first use
(``python -m memtoc.ingest.redact_worker``: no ``fork`` of a process that may hold threads),
answers once it has imported the gates, and ends when its input closes (its parent exited or was
killed) or at the parent's exit. Until it is ready, while another thread of the same process is
using it, after any error, or while it rests (it could not keep up), the importer gates
in-process: the result is the same. Secrets travel over a pipe to a child of the same user and
are never written anywhere.

**When** (setting ``redact_helper``, env ``MEMTOC_REDACT_HELPER``): ``auto`` (the default) uses it
when this process may run on a second CPU core (:func:`helper_wanted`), ``on`` / ``off`` force it.
What it gains is measured by ``bench ingest`` (docs/benchmarks.md, "Ingest"); on a machine whose
cores are all busy it cannot help, and it steps aside by itself: a batch where fewer than half of the chunks were answered in time
makes it rest for the next batches (:meth:`GateWorker.note_batch`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import struct
import subprocess
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from memtoc.ingest.redact_gate import blob_suspects

_REQUEST = struct.Struct("<QQQ")
"""ticket, number of ends, number of data bytes; then the ends (int64) and the data."""
_REPLY = struct.Struct("<QQ")
"""ticket, number of indices; then the indices (int64)."""
_READY = b"R"
_REST_BATCHES = 8
_PIPE_BYTES = 1 << 20
"""Asked of the kernel for both pipes, so that sending a chunk does not wait for the worker to
finish the one before (Linux; elsewhere the default size, and only less overlap)."""


def _read(fd: int, size: int) -> bytes | None:
    """Exactly ``size`` bytes from ``fd``; None at end of input."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, _PIPE_BYTES))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class GateWorker:
    """The helper process, seen from the importer: :meth:`submit` a blob, then :meth:`result`
    (tickets are answered in order). Used by one batch at a time (:meth:`acquire`)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self._out = proc.stdin.fileno()
        self._in = proc.stdout.fileno()
        for fd in (self._out, self._in):
            with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self._ready = False
        self.broken = False
        self._ticket = 0
        self._wanted = 0
        self._rest = 0
        self.chunks_sent = 0
        self.chunks_answered = 0
        """Chunks sent by batches, and those answered in time (used instead of gated here)."""
        self._answers: deque[tuple[int, bytes]] = deque()
        """Answers read ahead (by :meth:`answered`), oldest first."""
        self._lock = threading.Lock()
        self.pid = os.getpid()
        """The process that started it (a forked child must not share its pipes)."""

    def ready(self) -> bool:
        """Whether the process has started (never waits)."""
        if self._ready:
            return True
        if self.broken or self._proc.poll() is not None:
            self.broken = True
            return False
        try:
            readable, _, _ = select.select([self._in], [], [], 0)
            if readable:
                self._ready = os.read(self._in, 1) == _READY
                self.broken = not self._ready
        except (OSError, ValueError):
            self.broken = True
        return self._ready

    def answered(self, ticket: int, wait_s: float = 0.0) -> bool:
        """Whether the answer for ``ticket`` has arrived (waiting at most ``wait_s``); earlier
        answers nobody asked for are read and dropped on the way."""
        deadline = time.monotonic() + wait_s
        while True:
            if self._head(ticket) is not None:
                return self._answers[0][0] == ticket
            try:
                left = max(0.0, deadline - time.monotonic())
                if not select.select([self._in], [], [], left)[0]:
                    return False
            except (OSError, ValueError):
                return False
            if not self._take():
                return False

    def acquire(self) -> bool:
        """Take the worker for one batch; False when another thread has it, or while it rests
        after batches it could not keep up with."""
        if self._rest:
            self._rest -= 1
            return False
        return self._lock.acquire(blocking=False)

    def note_batch(self, answered: int, sent: int) -> None:
        """Record how one batch went: when fewer than half of its chunks were answered in time
        (no idle core: the helper only competes with the importer), it rests for the next
        :data:`_REST_BATCHES` batches, then is tried again."""
        self.chunks_sent += sent
        self.chunks_answered += answered
        if sent and 2 * answered < sent:
            self._rest = _REST_BATCHES

    def release(self) -> None:
        self._lock.release()

    def submit(self, data: bytes, ends: Sequence[int]) -> int:
        """Send one blob; returns its ticket. Raises ``OSError`` when the worker is gone."""
        self._ticket += 1
        offsets = array("q", ends)
        _write(self._out, _REQUEST.pack(self._ticket, len(offsets), len(data)))
        _write(self._out, offsets.tobytes())
        _write(self._out, data)
        return self._ticket

    def _head(self, ticket: int) -> int | None:
        """Want ``ticket``: drop the answers read ahead for earlier tickets; the oldest one left
        (``None``: none read yet)."""
        self._wanted = ticket
        while self._answers and self._answers[0][0] < ticket:
            self._answers.popleft()
        return self._answers[0][0] if self._answers else None

    def _take(self) -> bool:
        """Read one answer into the queue (dropping it when older than the oldest wanted);
        False when the worker is gone."""
        head = _read(self._in, _REPLY.size)
        if head is None:
            self.broken = True
            return False
        got, count = _REPLY.unpack(head)
        body = _read(self._in, 8 * count) if count else b""
        if body is None:
            self.broken = True
            return False
        if got >= self._wanted:
            self._answers.append((got, body))
        return True

    def result(self, ticket: int) -> set[int]:
        """The suspects of ``ticket`` (earlier answers not asked for are skipped). Raises
        ``OSError`` when the worker is gone."""
        while True:
            head = self._head(ticket)
            if head == ticket:
                found = array("q")
                found.frombytes(self._answers.popleft()[1])
                return set(found)
            if not self._take():
                raise OSError("redaction worker exited")

    def close(self) -> None:
        if self.pid != os.getpid():
            return
        self.broken = True
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


_WORKER: GateWorker | None = None
_START = threading.Lock()


def chunk_counts() -> tuple[int, int]:
    """Chunks this process's helper was sent by batches, and those it answered in time."""
    w = _WORKER
    return (w.chunks_sent, w.chunks_answered) if w is not None else (0, 0)


def helper_wanted(mode: str) -> bool:
    """The ``redact_helper`` setting as a decision: ``on``, ``off``, or ``auto`` — on when this
    process may run on at least two CPU cores (its affinity mask, else the machine's count)."""
    if mode in ("on", "off"):
        return mode == "on"
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return cores >= 2


def worker() -> GateWorker | None:
    """The process's worker when it is ready and free (the caller must ``release`` it), else
    None; the first call starts it (and returns None: the batch is gated in-process)."""
    global _WORKER
    with _START:
        if _WORKER is None:
            _WORKER = _start()
            if _WORKER is None:
                return None
    w = _WORKER
    if w.pid != os.getpid() or w.broken or not w.ready() or not w.acquire():
        return None
    if w.broken:  # it failed while another batch used it
        w.release()
        return None
    return w


def _start() -> GateWorker | None:
    root = str(Path(__file__).resolve().parents[2])  # the directory holding the memtoc package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memtoc.ingest.redact_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            bufsize=0,
        )
    except OSError:
        return None
    started = GateWorker(proc)
    atexit.register(started.close)
    return started


def _serve() -> None:
    """The worker's loop: read a request, answer its suspects, until the input closes."""
    inp, out = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    _write(out, _READY)
    while True:
        head = _read(inp, _REQUEST.size)
        if head is None:
            return
        ticket, count, size = _REQUEST.unpack(head)
        raw = _read(inp, 8 * count) if count else b""
        data = _read(inp, size) if size else b""
        if raw is None or data is None:
            return
        ends = array("q")
        ends.frombytes(raw)
        found = array("q", sorted(blob_suspects(data, ends.tolist())))
        _write(out, _REPLY.pack(ticket, len(found)) + found.tobytes())


if __name__ == "__main__":
    _serve()
