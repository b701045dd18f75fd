"""``memtoc eval redaction``: is a secret stored anywhere, wherever it comes in?

Every planted secret of the corpus (:mod:`memtoc.eval.redaction_corpus`) goes in, in its line, in
six **placements**: the event's text, a metadata value, a metadata key, the session id, the
project, and the path of the transcript file. So does every clean look-alike. Everything goes
through memtoc's real ingest — JSONL files read by the importer into a fresh SQLite store, with the
default redaction settings — and is judged on what is **stored**:

- a planted secret is *detected* when its bytes (as written, and as JSON escapes them) are nowhere
  in the database file or its WAL afterwards — not in the event, not in the project registry, not
  in the files' checkpoints; a case the importer refused (an identifier over its length limit) is
  *not applicable*, never counted as detected;
- a clean line is a *false positive* when the field it went into holds a ``[REDACTED:…]`` marker.

Each placement has a store of its own (a secret is the same in all six, so a hit is this
placement's). A file path holds the line as written — its ``/`` make folders, a newline is a blank,
the file is the line's last part plus ``.jsonl``; a line that cannot be a path (``//`` in a URL, a
part over 255 bytes) is not applicable there. The clean look-alikes of paths are file and folder
names (``clean_paths``: hashes, ids, ``.env.example``, ``secrets.yaml`` …), not code lines.

The report gives both rates per placement and overall, and names every miss and false positive.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtoc.config import load_settings
from memtoc.eval.redaction_corpus import KINDS, Sample, clean, clean_paths, planted
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.store.sqlite import SqliteStore

PLACEMENTS = ("text", "metadata_value", "metadata_key", "session_id", "project", "path")
_MARK = "[REDACTED:"
_BASE_MS = 1_716_000_000_000
_MAX_ID = 1024
_MAX_NAME = 255


@dataclass(slots=True)
class PlacementScore:
    planted: int = 0
    detected: int = 0
    not_applicable: int = 0
    clean: int = 0
    flagged: int = 0
    misses: list[str] = field(default_factory=list)
    """``kind: line`` of each secret found stored."""
    false_positives: list[str] = field(default_factory=list)

    @property
    def detection(self) -> float:
        judged = self.planted - self.not_applicable
        return self.detected / judged if judged else 1.0

    @property
    def false_positive_rate(self) -> float:
        return self.flagged / self.clean if self.clean else 0.0

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "planted": self.planted,
            "detected": self.detected,
            "not_applicable": self.not_applicable,
            "detection": round(self.detection, 4),
            "clean": self.clean,
            "flagged": self.flagged,
            "false_positive_rate": round(self.false_positive_rate, 4),
            "misses": list(self.misses),
            "false_positives": list(self.false_positives),
        }


@dataclass(slots=True)
class RedactionReport:
    kinds: int
    samples: int
    clean_lines: int
    placements: dict[str, PlacementScore]
    seconds: float = 0.0

    @property
    def total(self) -> PlacementScore:
        out = PlacementScore()
        for score in self.placements.values():
            out.planted += score.planted
            out.detected += score.detected
            out.not_applicable += score.not_applicable
            out.clean += score.clean
            out.flagged += score.flagged
            out.misses += score.misses
            out.false_positives += score.false_positives
        return out

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "kinds": self.kinds,
            "samples": self.samples,
            "clean_lines": self.clean_lines,
            "placements": {name: s.to_dict() for name, s in self.placements.items()},
            "total": self.total.to_dict(),
            "seconds": round(self.seconds, 2),
        }


@dataclass(frozen=True, slots=True)
class _Case:
    event_id: str
    placement: str
    value: str
    sample: Sample | None
    """None: a clean line."""


def _record(case: _Case, n: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event_id": case.event_id,
        "session_id": f"eval-{n // 50}",
        "timestamp": _BASE_MS + n,
        "role": "user",
        "text": "a note",
        "project": "redaction-eval",
    }
    if case.placement == "text":
        record["text"] = case.value
    elif case.placement == "metadata_value":
        record["metadata"] = {"note": case.value}
    elif case.placement == "metadata_key":
        record["metadata"] = {case.value: True}
    elif case.placement == "session_id":
        record["session_id"] = case.value
    elif case.placement == "project":
        record["project"] = case.value
    return record


def _path_for(root: Path, n: int, value: str) -> Path | None:
    """A file whose path holds ``value`` (its ``/`` make folders; a newline is a blank), or None
    when it cannot be a path as written: ``//`` (a path has none), a component ``.`` or ``..``,
    a name over 255 bytes."""
    parts = value.replace("\n", " ").split("/")
    if "//" in value or any(p in (".", "..") or len(p.encode()) > _MAX_NAME for p in parts):
        return None
    parts = [p for p in parts if p]
    if not parts:
        return None
    return root.joinpath(f"case{n}", *parts[:-1], parts[-1] + ".jsonl")


def _field(row: tuple[Any, ...], placement: str) -> str:
    text, metadata, session_id, project, source = row
    return str(
        {
            "text": text,
            "metadata_value": metadata,
            "metadata_key": metadata,
            "session_id": session_id,
            "project": project,
            "path": source or "",
        }[placement]
    )


def run(seed: int = 20241124, workdir: Path | None = None) -> RedactionReport:
    """Ingest the corpus in every placement into a fresh store and score what was stored."""
    started = time.perf_counter()
    samples = planted(seed)
    lines = clean(seed)
    paths = clean_paths(seed)
    scores: dict[str, PlacementScore] = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for placement in PLACEMENTS:
            cases = [
                _Case(f"p{i}", placement, sample.line, sample) for i, sample in enumerate(samples)
            ]
            looks = paths if placement == "path" else lines
            cases += [_Case(f"c{i}", placement, line, None) for i, line in enumerate(looks)]
            scores[placement] = _score(cases, *_ingest(Path(tmp) / placement, cases))
    return RedactionReport(
        kinds=len(KINDS),
        samples=len(samples),
        clean_lines=len(lines),
        placements=scores,
        seconds=time.perf_counter() - started,
    )


def _ingest(root: Path, cases: list[_Case]) -> tuple[set[str], dict[str, Any], bytes]:
    """One placement's cases into a store of their own (so a secret found stored is this
    placement's): the ids written, the stored rows by id, the store's bytes."""
    settings = load_settings({"home": str(root / "home"), "embedder": "none"}, environ={})
    files: list[Path] = []
    root.mkdir(parents=True)
    inline = root / "cases.jsonl"
    written: set[str] = set()
    with inline.open("w", encoding="utf-8") as fh:
        for n, case in enumerate(cases):
            if case.placement == "path":
                path = _path_for(root / "paths", n, case.value)
                if path is None:
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(_record(case, n)) + "\n", encoding="utf-8")
                files.append(path)
            elif case.placement in ("session_id", "project") and len(case.value) > _MAX_ID:
                continue
            else:
                fh.write(json.dumps(_record(case, n)) + "\n")
            written.add(case.event_id)
    with Memory.open(settings) as memory:
        memory.ingest([inline, *files], fmt="jsonl")
        store = memory.store
        assert isinstance(store, SqliteStore)
        rows = {
            r[0]: tuple(r[1:])
            for r in store.connection.execute(
                "SELECT event_id, text, metadata, session_id, project, source FROM events"
            )
        }
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db = Path(store.location)
    raw = b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())
    return written, rows, raw


def _score(
    cases: list[_Case], written: set[str], rows: dict[str, Any], raw: bytes
) -> PlacementScore:
    score = PlacementScore()
    for case in cases:
        row = rows.get(case.event_id)
        if case.sample is not None:
            score.planted += 1
            if case.event_id not in written or row is None:
                score.not_applicable += 1
                continue
            secret = case.sample.secret
            forms = {secret.encode(), json.dumps(secret)[1:-1].encode()}
            if any(f in raw for f in forms):
                score.misses.append(f"{case.placement} {case.sample.kind}: {case.value[:120]!r}")
            else:
                score.detected += 1
        elif row is not None:  # a refused clean line: nothing stored, nothing flagged
            score.clean += 1
            if _MARK in _field(row, case.placement):
                score.flagged += 1
                score.false_positives.append(f"{case.placement}: {case.value[:120]}")
    return score
