"""Shared reading primitives for line-oriented (JSONL) transcript formats.

Every JSONL source reads the file as bytes from a byte offset, splits it on ``b"\\n"`` and decodes
each line on its own, so one line of invalid UTF-8 or broken JSON costs that line only. Offsets are
exact byte positions; line numbers are exact too, even when reading resumes mid-file (the newlines
before the start offset are counted, which is a memory-speed scan).

Also here: timestamp parsing shared by the formats (ISO 8601 or epoch numbers, always to UTC
milliseconds) and small helpers for project names and compact JSON.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memtoc.errors import IngestError
from memtoc.model import MAX_TS_MS, MIN_TS_MS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_SECONDS_BELOW = 100_000_000_000
"""Epoch numbers below this are seconds (1e11 s is year 5138; 1e11 ms is March 1973)."""
_TOO_BIG = 10**18
"""Epoch numbers this large are out of range whatever their unit (checked before arithmetic)."""
_MAX_DIGITS = 20
"""Longest digit string read as an epoch number (more is out of range anyway)."""
TS_RANGE = "supported: 1970-01-01T00:00:00Z to 9999-12-30T23:59:59.999Z"
MAX_NESTING = 100
"""Deepest nesting of arrays and objects read from a record; deeper lines are rejected (the
decoder and everything that walks a value after it recurse)."""
_COUNT_CHUNK = 1 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every line: ``json.loads`` with keyword arguments would build one per call."""
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""The C scanner itself: a value from index 0, without ``decode``'s whitespace regexes."""


def iter_lines(path: Path, start: int) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, offset, raw)`` for each line from byte ``start``; ``raw`` keeps its newline.

    ``start`` must be 0 or just past a newline (a previous record's ``end_offset``). A last line
    with no newline is yielded too: the caller sees it because ``raw`` does not end in ``b"\\n"``.
    """
    try:
        f = path.open("rb")
    except OSError as exc:
        raise IngestError(f"cannot open: {exc.strerror}", source=str(path)) from exc
    with f:
        line_no = 1
        if start > 0:
            line_no += _count_newlines_before(f, start, path)
        offset = start
        for raw in f:
            yield line_no, offset, raw
            offset += len(raw)
            line_no += 1


def _count_newlines_before(f: Any, start: int, path: Path) -> int:
    """Newlines in ``[0, start)``, checking that ``start`` can be where a previous read stopped.

    That is just past a newline, at the end of the file, or just past a last line that had no
    newline then (so the file now continues with one: ``\n`` or ``\r\n``).
    """
    size = os.fstat(f.fileno()).st_size
    if start > size:
        raise IngestError(
            f"offset {start} is past the end of the file ({size} bytes)", source=str(path)
        )
    count = 0
    remaining = start
    last = b""
    while remaining:
        chunk = f.read(min(_COUNT_CHUNK, remaining))
        if not chunk:
            break
        count += chunk.count(b"\n")
        remaining -= len(chunk)
        last = chunk[-1:]
    if last != b"\n" and start < size:
        following = f.read(1)
        f.seek(start)
        if following not in (b"\n", b"\r"):
            raise IngestError(f"offset {start} is not at the start of a line", source=str(path))
    return count


def decode_line(raw: bytes, offset: int) -> tuple[Any, str | None]:
    """Decode one JSONL line: ``(value, None)``, or ``(None, reason)`` when it cannot be read.

    Invalid UTF-8 is reported with the absolute byte offset of the first bad byte. JSON escapes for
    unpaired UTF-16 surrogates (which JavaScript writers emit when they cut a string mid-pair) are
    replaced by U+FFFD, since such text cannot be stored as UTF-8; nothing else is altered.
    """
    if offset == 0 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[3:]
        offset = 3
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte {offset + exc.start}"
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        end = -1
    except RecursionError:
        return None, _TOO_DEEP
    if end != len(text) and not (end > 0 and text[end:].isspace()):
        # Leading whitespace, trailing data or a syntax error: the full decoder decides, on the
        # stripped line so that error positions read "line 1 column N".
        try:
            value = _DECODER.decode(text.strip())
        except ValueError as exc:
            return None, f"invalid JSON: {exc}"
        except RecursionError:
            return None, _TOO_DEEP
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and nesting(value) > MAX_NESTING:
        return None, _TOO_DEEP
    if b"\\ud" in raw or b"\\uD" in raw:
        value = replace_surrogates(value)
    return value, None


_TOO_DEEP = f"invalid JSON: nested deeper than {MAX_NESTING} levels"


def nesting(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (0 for a scalar); iterative, any depth."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return deepest


def loads_bounded(text: str) -> Any:
    """``json.loads`` for JSON found inside a record (tool arguments, outputs): ``ValueError``
    also for nesting deeper than ``MAX_NESTING`` and for numbers too long to convert."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    if text.count("[") + text.count("{") > MAX_NESTING and nesting(value) > MAX_NESTING:
        raise ValueError(_TOO_DEEP)
    return value


def replace_surrogates(value: Any) -> Any:
    """``value`` with every unpaired surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    return value


def first_object(head: bytes) -> dict[str, Any] | None:
    """The first non-blank line of ``head`` as a JSON object, or None if it is not one.

    None too when that line is not complete within ``head`` and does not parse: sniffers then fall
    back to looking for tell-tale keys in the raw bytes.
    """
    if not head or b"\x00" in head:
        return None
    for raw in head.split(b"\n"):
        if raw.strip():
            value, error = decode_line(raw, 0)
            return value if error is None and isinstance(value, dict) else None
    return None


def first_line_cut(head: bytes) -> bool:
    """Whether the first non-blank line runs past the end of ``head`` (a very long first line)."""
    return b"\n" not in head.lstrip()


def parse_timestamp(value: Any) -> int:
    """An instant as UTC epoch milliseconds.

    Accepts ISO 8601 strings (``Z`` or an offset; no zone means UTC) and epoch numbers (or strings
    of ASCII digits): milliseconds, or seconds when below 1e11. The instant must lie in
    ``model.MIN_TS_MS..MAX_TS_MS`` (1970 to the end of 9999). Raises ``ValueError`` with the reason.
    """
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            if value.isascii() and value.isdigit():
                if len(value) > _MAX_DIGITS:
                    raise ValueError(f"timestamp out of range {_show(value)}") from None
                return parse_timestamp(int(value))
            if any(c.isdigit() for c in value) and not value.isascii():
                raise ValueError(
                    f"unparseable timestamp {_show(value)} (only ASCII digits are read)"
                ) from None
            raise ValueError(f"unparseable timestamp {_show(value)}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms: int = (dt - _EPOCH) // _ONE_MS
    elif isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= _TOO_BIG:  # before any float conversion (a 400-digit int overflows)
            raise ValueError(f"timestamp out of range {_show(value)}")
        ms = value * 1000 if abs(value) < _SECONDS_BELOW else value
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"unparseable timestamp {value!r}")
        if abs(value) >= _TOO_BIG:
            raise ValueError(f"timestamp out of range {_show(value)}")
        ms = round(value * 1000 if abs(value) < _SECONDS_BELOW else value)
    else:
        raise ValueError(f"unparseable timestamp {_show(value)}")
    if not MIN_TS_MS <= ms <= MAX_TS_MS:
        raise ValueError(f"timestamp out of range {_show(value)} ({TS_RANGE})")
    return ms


def _show(value: Any) -> str:
    """A value for an error message, cut to a readable length."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def compact_json(value: Any) -> str:
    """``value`` as one-line JSON without spaces, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def basename(directory: object) -> str | None:
    """The last component of a POSIX or Windows path (a project name), or None."""
    if not isinstance(directory, str):
        return None
    name = directory.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return name or None


def mtime_ms(path: Path) -> int:
    """The file's modification time in epoch milliseconds (the fallback instant)."""
    try:
        return path.stat().st_mtime_ns // 1_000_000
    except OSError as exc:
        raise IngestError(f"cannot stat: {exc.strerror}", source=str(path)) from exc


def session_hint_from(session_id: str, cwd: str | None) -> dict[str, str]:
    """A source's ``session_hint``: the session id, and the working directory and its project."""
    hint = {"session_id": session_id}
    if cwd is not None:
        hint["cwd"] = cwd
        project = basename(cwd)
        if project is not None:
            hint["project"] = project
    return hint
