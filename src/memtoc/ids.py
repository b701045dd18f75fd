"""Identifiers: monotonic ULIDs and content-derived ULIDs.

A ULID is 48 bits of epoch milliseconds followed by 80 bits of entropy, written as 26 Crockford
base-32 characters, so ids sort in time order. ``UlidFactory`` is injected (with its clock and random
source) wherever ids are minted, which keeps tests deterministic.

``derived_ulid`` makes the id of an imported event from its timestamp and a stable key (source
identity + position), so re-importing the same record yields the same id and is a no-op.
"""

from __future__ import annotations

import hashlib
import random
import threading

from memtoc.clock import Clock, SystemClock

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_MAX_TS = (1 << 48) - 1
_MAX_RAND = (1 << 80) - 1


def encode_ulid(ts_ms: int, entropy: int) -> str:
    """Encode a 48-bit timestamp and 80-bit entropy as a 26-character ULID."""
    if not 0 <= ts_ms <= _MAX_TS:
        raise ValueError(f"ULID timestamp out of range: {ts_ms}")
    value = (ts_ms << 80) | (entropy & _MAX_RAND)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid_timestamp(ulid: str) -> int:
    """The millisecond timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10].upper():
        value = (value << 5) | _CROCKFORD.index(ch)
    return value


def is_ulid(text: str) -> bool:
    return len(text) == 26 and all(c in _CROCKFORD for c in text.upper()) and text[0] in "01234567"


def derived_ulid(ts_ms: int, key: str) -> str:
    """A ULID whose entropy is a hash of ``key``: the same key and time give the same id."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=10).digest()
    return encode_ulid(max(0, min(ts_ms, _MAX_TS)), int.from_bytes(digest, "big"))


class UlidFactory:
    """Mints monotonic ULIDs: within one millisecond the entropy increments, so ids never go back."""

    def __init__(self, clock: Clock | None = None, rng: random.Random | None = None) -> None:
        self._clock = clock or SystemClock()
        self._rng = rng or random.SystemRandom()
        self._last_ts = -1
        self._last_rand = 0
        self._lock = threading.Lock()

    def new(self, ts_ms: int | None = None) -> str:
        """A new ULID for ``ts_ms`` (default: now).

        Ids minted for "now" are strictly increasing, even within one millisecond or when the clock
        steps back; an explicit past ``ts_ms`` gets a fresh id at that instant.
        """
        with self._lock:
            ts = self._clock.now_ms() if ts_ms is None else ts_ms
            if ts_ms is not None and ts < self._last_ts:
                # An explicit instant in the past (an imported event): time order wins over
                # monotonicity, which only holds for ids minted "now".
                return encode_ulid(ts, self._rng.getrandbits(80))
            if ts <= self._last_ts:
                ts = self._last_ts
                rand = self._last_rand + 1
                if rand > _MAX_RAND:
                    ts += 1
                    rand = self._rng.getrandbits(79)
            else:
                rand = self._rng.getrandbits(79)  # headroom so increments rarely overflow
            self._last_ts, self._last_rand = ts, rand
            return encode_ulid(ts, rand)
