"""Clocks: injected everywhere time matters, so tests never sleep.

``SystemClock`` is the real one; ``ManualClock`` is a fake shipped for users' tests and ours.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of the current instant, in epoch milliseconds (UTC)."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (for tests and simulations)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, ms: int) -> None:
        self._now = ms
