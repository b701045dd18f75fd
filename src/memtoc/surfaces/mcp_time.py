"""Time arguments of the MCP tools: what an agent may write for ``since``/``until``.

Accepted: an ISO 8601 date or instant (``2024-01-18``, ``2024-01-18T10:00Z``; no zone = UTC),
epoch milliseconds, an age (``30m``, ``12h``, ``7d``, ``2w``), or a phrase such as ``yesterday``,
``last week``, ``in March`` (``memtoc.retrieval.timeparse``; ``since`` takes the start of the
period, ``until`` its end). Anything else is a ``QueryError`` naming the argument.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

from memtoc.errors import QueryError
from memtoc.retrieval.timeparse import parse_time

# ASCII digits only ("²".isdigit() is true but int() refuses it), and few enough that the instant
# stays inside SQLite's 64-bit integers.
_AGE = re.compile(r"[0-9]{1,9}")
_EPOCH_MS = re.compile(r"[0-9]{1,15}")
_DIGITS = re.compile(r"[0-9]+")
_UNITS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_when(
    value: str, *, now_ms: int, tz: tzinfo, edge: Literal["start", "end"], name: str
) -> int:
    """``value`` as epoch ms; a period (a date, a phrase) gives its ``start`` or its ``end``."""
    text = value.strip()
    if text and text[-1] in _UNITS and _AGE.fullmatch(text[:-1]):
        return now_ms - int(text[:-1]) * _UNITS[text[-1]]
    if _EPOCH_MS.fullmatch(text):
        return int(text)
    if _DIGITS.fullmatch(text):
        raise QueryError(f"{name}={value!r}: epoch ms out of range (at most 15 digits)")
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        dt = None
    if dt is not None:
        is_date = len(text) == 10
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms = int((dt - _EPOCH) / timedelta(milliseconds=1))
        return ms + 86_400_000 if is_date and edge == "end" else ms
    expr = parse_time(text, now_ms, tz)
    if expr is None or expr.range is None:
        raise QueryError(
            f"{name}={value!r}: expected an ISO 8601 date or time (2024-01-18, "
            "2024-01-18T10:00Z), epoch ms, an age (12h, 7d) or a phrase (yesterday, last week)"
        )
    return expr.range[0] if edge == "start" else expr.range[1]
