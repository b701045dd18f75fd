"""Where each transcript file was read up to, kept so that no file ever resumes at another's.

A file's resume position (its watermark) is a checkpoint ``ingest:<first>:<path>``: ``<first>``
hashes the file's first line (:func:`first_line_hash`, also the key its event ids derive from)
and ``<path>`` is the file's resolved path, so two files that share a first line — two Claude
Code transcripts opening with the same ``summary`` record, any JSONL files with one header —
each keep their own. With the offset the checkpoint keeps two fingerprints of the bytes already
read: of the file's first ``HEAD_BYTES`` (or fewer, up to the offset) and of the ``TAIL_BYTES``
just before the offset. A file resumes only where both still match; otherwise it is read again
from the start, which is always safe (what is stored already comes back as duplicates).

A file with no checkpoint under its path that matches one kept under another path with the same
first line (head and tail fingerprints) was moved, renamed or copied: it resumes there too.

A whole-document file (``openai-chat``, a Gemini CLI JSON document: read whole, rewritten as it
grows) is identified by its path instead (:func:`document_hash`): its first line changes with every
rewrite. Its time-less sessions keep the instants the first read gave them (``anchors``), so a
rewritten document's earlier messages keep their ids; moved, it is a new file.

Checkpoints written before fingerprints (``0010_file_positions`` marks them ``legacy``) are trusted
only under their own path and at a line start; any doubt means a re-read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtoc.ingest.sources.specstory import identity_prefix, is_specstory
from memtoc.model import JsonValue

CHECKPOINT_PREFIX = "ingest:"
HEAD_BYTES = 65_536
TAIL_BYTES = 4_096
_DIGEST = 16
MAX_CANDIDATES = 256
"""Checkpoints of other paths (same first line) tried for a moved file, at most."""


def first_line_hash(path: Path) -> str | None:
    """The hash of a transcript's first line (None while the file is empty or blank).

    A SpecStory export's first line is the same in every file, so its hash covers the header up
    to the session comment (which names the session)."""
    with path.open("rb") as fh:
        head = fh.read(HEAD_BYTES)
    if not head.strip():
        return None
    first = identity_prefix(head) if is_specstory(head) else head.split(b"\n", 1)[0]
    return hashlib.blake2b(first, digest_size=12).hexdigest()


def document_hash(path: Path) -> str:
    """The identity of a whole-document file (read whole, rewritten as it grows: its first line
    changes with it, or is a bare ``{`` shared by every document): a hash of its path."""
    key = f"document:{path}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(key, digest_size=12).hexdigest()


def job_for(first: str, path: Path) -> str:
    return f"{CHECKPOINT_PREFIX}{first}:{path}"


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_DIGEST).hexdigest()


class Fingerprints:
    """Fingerprints of one open file's prefixes (the head's is computed once it is full)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self._full_head: str | None = None

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Fingerprints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, start: int, end: int) -> bytes:
        return os.pread(self.fd, end - start, start)

    def head(self, offset: int) -> tuple[int, str]:
        length = min(offset, HEAD_BYTES)
        if length == HEAD_BYTES:
            if self._full_head is None:
                self._full_head = _digest(self._read(0, HEAD_BYTES))
            return length, self._full_head
        return length, _digest(self._read(0, length))

    def tail(self, offset: int) -> str:
        return _digest(self._read(max(0, offset - TAIL_BYTES), offset))

    def mark(
        self, offset: int, path: Path, fmt: str, anchors: Mapping[str, int] | None = None
    ) -> dict[str, JsonValue]:
        """The checkpoint value for ``offset`` (with the time-less sessions' ``anchors``)."""
        length, head = self.head(offset)
        value: dict[str, JsonValue] = {
            "offset": offset,
            "path": str(path),
            "format": fmt,
            "head": [length, head],
            "tail": self.tail(offset),
        }
        if anchors:
            value["anchors"] = dict(anchors)
        return value

    def matches(self, mark: Mapping[str, Any], size: int) -> bool:
        """Whether the file still holds, before the mark's offset, the bytes the mark saw."""
        offset, head = mark.get("offset"), mark.get("head")
        if type(offset) is not int or not 0 <= offset <= size:
            return False
        if not isinstance(head, list) or len(head) != 2 or head[0] != min(offset, HEAD_BYTES):
            return False
        if self.head(offset)[1] != head[1]:
            return False
        return offset <= HEAD_BYTES or self.tail(offset) == mark.get("tail")

    def at_line_start(self, offset: int, size: int) -> bool:
        return 0 <= offset <= size and (offset == 0 or self._read(offset - 1, offset) == b"\n")


@dataclass(frozen=True, slots=True)
class Resume:
    """Where to start reading a file, and why."""

    job: str
    """The file's checkpoint key."""
    start: int
    restarted: bool = False
    """The file's own checkpoint no longer matched it: read again from the start."""
    moved_from: str | None = None
    """The path whose checkpoint this file continues (a moved, renamed or copied file)."""
    anchors: dict[str, int] = field(default_factory=dict)
    """Where earlier reads placed the file's time-less sessions (``RawRecord.anchor``)."""


def resume(
    checkpoints: Mapping[str, JsonValue],
    own: JsonValue | None,
    *,
    first: str,
    path: Path,
    size: int,
    fingerprints: Fingerprints,
) -> Resume:
    """Where to resume ``path`` (resolved), given its own checkpoint ``own`` and, when it has
    none, the other ``checkpoints`` kept under its first line's hash."""
    job = job_for(first, path)
    if isinstance(own, dict):
        anchors = _anchors(own)
        if own.get("legacy"):
            offset = own.get("offset")
            if type(offset) is int and fingerprints.at_line_start(offset, size):
                return Resume(job, offset, anchors=anchors)
            return Resume(job, 0, restarted=True, anchors=anchors)
        if fingerprints.matches(own, size):
            return Resume(job, int(own["offset"]), anchors=anchors)
        return Resume(job, 0, restarted=True, anchors=anchors)
    best: tuple[int, str, dict[str, int]] | None = None
    for key, mark in list(checkpoints.items())[:MAX_CANDIDATES]:
        if key == job or not isinstance(mark, dict):
            continue
        if mark.get("legacy"):
            recorded = mark.get("path")
            if isinstance(recorded, str) and Path(recorded).resolve() == path:
                found = resume(
                    {}, mark, first=first, path=path, size=size, fingerprints=fingerprints
                )
                if not found.restarted:
                    return Resume(job, found.start, moved_from=recorded, anchors=found.anchors)
            continue
        if fingerprints.matches(mark, size) and (best is None or mark["offset"] > best[0]):
            best = (int(mark["offset"]), str(mark.get("path")), _anchors(mark))
    if best is not None:
        return Resume(job, best[0], moved_from=best[1], anchors=best[2])
    return Resume(job, 0)


def _anchors(mark: Mapping[str, Any]) -> dict[str, int]:
    found = mark.get("anchors")
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and type(v) is int}
