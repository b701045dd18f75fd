"""Parsing of ``--since``/``--until`` values on the command line."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import typer

# ASCII digits only ("²".isdigit() is true but int() refuses it), and few enough that the instant
# stays inside SQLite's 64-bit integers.
_AGE = re.compile(r"[0-9]{1,9}")
_EPOCH_MS = re.compile(r"[0-9]{1,15}")
_UNITS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_instant(value: str | None, *, now_ms: int, option: str) -> int | None:
    """``2024-01-18``, an ISO 8601 instant, epoch ms, or a relative age like ``7d`` / ``12h``."""
    if value is None:
        return None
    text = value.strip()
    if text and text[-1] in _UNITS and _AGE.fullmatch(text[:-1]):
        return now_ms - int(text[:-1]) * _UNITS[text[-1]]
    if _EPOCH_MS.fullmatch(text):
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r}: expected ISO 8601 (2024-01-18 or 2024-01-18T10:00Z), epoch ms, or an "
            "age like 7d / 12h",
            param_hint=option,
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int((dt - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))
