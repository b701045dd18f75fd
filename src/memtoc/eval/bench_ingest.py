"""``memtoc bench ingest``: ingest throughput against a raw-SQLite baseline in the same run.

Both sides get the same synthetic rows in the same batch size, with the same durability setting:

- **baseline**: what a user would write to "insert the JSON lines into SQLite": one table with the
  same columns and ``event_id`` as its primary key, plain ``INSERT``s; no outbox, no secondary
  indexes, no redaction, no validation, rows built before the clock starts;
- **memtoc**: the real ingest path (``Importer``: validation, redaction, size caps) into the real
  store (unique ids, the time index, session spans, outbox entry and checkpoint in the same
  transaction), with the default settings (``redact_helper=auto``: the redaction prefilter of
  large batches runs in the helper process of :mod:`memtoc.ingest.redact_worker` when a second
  core is available; the result says how many chunks it answered).

The two run interleaved batch by batch, so machine noise hits both alike.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memtoc.eval.synth import SynthConfig, generate
from memtoc.ingest import redact_worker
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.ingest.redact import Redactor
from memtoc.ingest.sources.base import EventDraft
from memtoc.model import Event, JsonValue
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.base import _SYNCHRONOUS

_BASELINE_SCHEMA = (
    "CREATE TABLE events (event_id TEXT PRIMARY KEY, ts_ms INTEGER, project TEXT, "
    "session_id TEXT, agent TEXT, event_type TEXT, role TEXT, text TEXT, metadata TEXT, "
    "source TEXT, source_pos TEXT)"
)
_BASELINE_INSERT = "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?)"


@dataclass(slots=True)
class IngestBench:
    events: int
    batch_size: int
    durability: str
    redact: bool
    bytes: int
    baseline_s: float
    memtoc_s: float
    peak_rss_mb: float
    memtoc_db_bytes: int
    baseline_db_bytes: int
    load: tuple[float, float] = (0.0, 0.0)
    """The machine's 1-minute load average when the run started and when it ended."""
    helper_chunks: tuple[int, int] = (0, 0)
    """Chunks sent to the redaction helper process, and those it answered in time."""

    @property
    def ratio(self) -> float:
        """memtoc's rate as a fraction of the baseline's."""
        return self.baseline_s / self.memtoc_s if self.memtoc_s else 0.0

    def to_dict(self) -> dict[str, JsonValue]:
        mb = self.bytes / 1e6
        return {
            "events": self.events,
            "batch_size": self.batch_size,
            "durability": self.durability,
            "redact": self.redact,
            "mb": round(mb, 1),
            "baseline": {
                "seconds": round(self.baseline_s, 3),
                "events_per_s": round(self.events / self.baseline_s),
                "mb_per_s": round(mb / self.baseline_s, 1),
                "db_bytes": self.baseline_db_bytes,
            },
            "memtoc": {
                "seconds": round(self.memtoc_s, 3),
                "events_per_s": round(self.events / self.memtoc_s),
                "mb_per_s": round(mb / self.memtoc_s, 1),
                "db_bytes": self.memtoc_db_bytes,
            },
            "ratio_vs_baseline": round(self.ratio, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "load_avg": [round(x, 2) for x in self.load],
            "redact_helper": {"chunks": self.helper_chunks[0], "answered": self.helper_chunks[1]},
        }


def _row(e: Event) -> tuple[object, ...]:
    meta = json.dumps(dict(e.metadata), separators=(",", ":"), sort_keys=True)
    return (e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type, e.role, e.text,
            meta, e.source, e.source_pos)  # fmt: skip


def _draft(e: Event) -> tuple[EventDraft, str]:
    draft = EventDraft(
        session_id=e.session_id,
        ts_ms=e.ts_ms,
        event_type=e.event_type,
        role=e.role,
        text=e.text,
        metadata=dict(e.metadata),
        project=e.project,
        agent=e.agent,
    )
    return draft, e.event_id


def run_ingest_bench(
    events: int,
    *,
    batch_size: int = 2_000,
    durability: str = "full",
    seed: int = 7,
    workdir: Path | None = None,
    progress: Callable[[int], None] | None = None,
    redact: bool = True,
    redact_helper: str = "auto",
) -> IngestBench:
    """Ingest ``events`` synthetic events both ways and time only the storage calls."""
    load_start = _load()
    sent0, answered0 = redact_worker.chunk_counts()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        base_path = Path(tmp) / "baseline.db"
        raw = sqlite3.connect(base_path, isolation_level=None)
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
        raw.execute("PRAGMA cache_size = -65536")
        raw.execute(_BASELINE_SCHEMA)
        store = SqliteStore(Path(tmp) / "memtoc.db", durability=durability)
        importer = Importer(
            store,
            redactor=Redactor() if redact else None,
            options=IngestOptions(
                format="jsonl",
                batch_size=batch_size,
                redact_helper=redact and redact_worker.helper_wanted(redact_helper),
            ),
        )
        baseline_s = memtoc_s = 0.0
        total_bytes = 0
        chunk: list[Event] = []

        def flush() -> None:
            nonlocal baseline_s, memtoc_s, total_bytes
            rows = [_row(e) for e in chunk]
            drafts = [_draft(e) for e in chunk]
            total_bytes += sum(len(str(r[7])) + len(str(r[8])) for r in rows)
            t0 = time.perf_counter()
            raw.execute("BEGIN")
            raw.executemany(_BASELINE_INSERT, rows)
            raw.execute("COMMIT")
            t1 = time.perf_counter()
            report = importer.ingest_drafts(drafts, source="bench")
            t2 = time.perf_counter()
            if report.rejections:
                raise RuntimeError(f"bench events rejected: {report.rejections[:3]}")
            baseline_s += t1 - t0
            memtoc_s += t2 - t1
            if progress:
                progress(len(chunk))
            chunk.clear()

        for event in generate(SynthConfig(seed=seed, events=events)):
            chunk.append(event)
            if len(chunk) >= batch_size:
                flush()
        if chunk:
            flush()
        raw.close()
        store.close()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        sent, answered = redact_worker.chunk_counts()
        return IngestBench(
            events=events,
            batch_size=batch_size,
            durability=durability,
            redact=redact,
            bytes=total_bytes,
            baseline_s=baseline_s,
            memtoc_s=memtoc_s,
            peak_rss_mb=peak,
            memtoc_db_bytes=_size(Path(tmp) / "memtoc.db"),
            baseline_db_bytes=_size(base_path),
            load=(load_start, _load()),
            helper_chunks=(sent - sent0, answered - answered0),
        )


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return 0.0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
