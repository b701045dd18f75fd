"""Running one benchmark size in a fresh spawned process, so its peak RSS is its own.

The child reports through a queue: ``("progress", label, n)`` messages while it works, then one
``("result", figures, 0)`` or ``("error", message, 0)``.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
from collections.abc import Callable
from typing import Any

from memtoc.errors import MemtocError
from memtoc.model import JsonValue


def run_in_child(
    name: str,
    events: int,
    target: Callable[..., None],
    args: tuple[Any, ...],
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, JsonValue]:
    """Run ``target(*args, queue)`` in a spawned child and return the figures it reports."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    try:
        while True:
            try:
                kind, payload, n = out.get(timeout=1.0)
            except queue_module.Empty:
                if proc.exitcode is not None:  # died without a word (killed, out of memory)
                    raise MemtocError(
                        f"bench {name} child ({events:,} events) exited with {proc.exitcode}"
                    ) from None
                continue
            if kind == "progress":
                if progress:
                    progress(str(payload), int(n))
            elif kind == "error" or not isinstance(payload, dict):
                raise MemtocError(f"bench {name} ({events:,} events) failed: {payload}")
            else:
                return payload
    finally:
        proc.join()
