"""``memtoc bench process``: the whole TOC pipeline's throughput, beside a plain scan of the events.

For each size N, in a fresh ``spawn`` child process (so peak RSS is that size's alone):

1. generate N synthetic events and ingest them (``Importer``) — *not* timed;
2. **baseline**: a plain ``store.scan_events()`` over all of them (reading + decoding the rows
   the pipeline has to read at least once);
3. **pipeline**: ``Memory.process()`` (segmentation, extractive summaries, grips, search
   documents, due rollups) then ``Memory.rollup(force=True)`` (every day, week, month, year),
   in wall seconds and in CPU seconds (``cpu_s``, the child's and its summary pool's: what to
   compare on a shared machine);
4. counts of segments, nodes (all levels), grips and bookmarks, and the child's ``ru_maxrss``.

The ratio pipeline/baseline shows what filing an event costs over just reading it.
"""

from __future__ import annotations

import multiprocessing
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from memtoc.errors import MemtocError
from memtoc.eval.bench_child import run_in_child
from memtoc.eval.bench_ingest import _draft
from memtoc.eval.synth import SynthConfig, generate
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.pipeline.worker import PipelineConfig
from memtoc.store.sqlite import SqliteStore

INGEST_BATCH = 5_000


@dataclass(slots=True)
class ProcessBench:
    events: int
    segments: int
    nodes: int
    """Latest nodes of every level (segments, days, weeks, months, years)."""
    grips: int
    bookmarks: int
    """Bookmarks the pipeline's detector kept (merged, restatements folded in)."""
    ingest_s: float
    """Untimed setup, reported for context."""
    scan_s: float
    process_s: float
    rollup_s: float
    peak_rss_mb: float
    cpu_s: float = 0.0
    """CPU seconds over process + rollup of the child (``time.process_time``) and of the
    summary pool's processes it started (``workers_cpu_s``): on a shared machine the figure to
    compare, since wall time shows the load of other jobs."""
    workers_cpu_s: float = 0.0
    """The part of ``cpu_s`` spent in the summary pool's processes (``pipeline.summary_pool``)."""
    workers: int = 0
    """Summary pool processes the pipeline may use (``pipeline_workers``; 0: none)."""
    pool_rounds: int = 0
    """Rounds summarised in the pool (``SummaryPool.settle``)."""
    pool_rested: int = 0
    """Of those, the ones after which it rested: too few cores for it on the machine."""

    @property
    def pipeline_s(self) -> float:
        return self.process_s + self.rollup_s

    def to_dict(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()
        }
        out["pipeline_s"] = round(self.pipeline_s, 3)
        out["events_per_s"] = round(self.events / self.pipeline_s) if self.pipeline_s else 0
        out["scan_events_per_s"] = round(self.events / self.scan_s) if self.scan_s else 0
        out["us_per_event"] = round(self.pipeline_s / self.events * 1e6, 1)
        out["cpu_us_per_event"] = round(self.cpu_s / self.events * 1e6, 1)
        out["ratio_vs_scan"] = round(self.pipeline_s / self.scan_s, 1) if self.scan_s else 0.0
        return out


def _count(store: SqliteStore, sql: str) -> int:
    return int(store.connection.execute(sql).fetchone()[0])


def measure_process(
    events: int,
    *,
    seed: int = 7,
    workdir: Path | None = None,
    progress: Callable[[str, int], None] | None = None,
    workers: int | None = None,
) -> ProcessBench:
    """Ingest ``events`` synthetic events, then time scan vs. process + forced rollup (in-process);
    ``workers``: the summary pool's processes (None: the default, ``auto``)."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        store = SqliteStore(Path(tmp) / "memtoc.db", durability="normal")
        memory = Memory(store, pipeline=PipelineConfig(workers=workers))
        try:
            importer = Importer(
                store, redactor=None, options=IngestOptions(format="jsonl", batch_size=INGEST_BATCH)
            )
            t0 = time.perf_counter()
            chunk = []
            for event in generate(SynthConfig(seed=seed, events=events)):
                chunk.append(_draft(event))
                if len(chunk) >= INGEST_BATCH:
                    importer.ingest_drafts(chunk, source="bench")
                    if progress:
                        progress("ingest", len(chunk))
                    chunk = []
            if chunk:
                importer.ingest_drafts(chunk, source="bench")
                if progress:
                    progress("ingest", len(chunk))
            ingest_s = time.perf_counter() - t0

            t0 = time.perf_counter()
            scanned = sum(1 for _ in store.scan_events())
            scan_s = time.perf_counter() - t0
            if scanned != events:
                raise MemtocError(f"bench store holds {scanned} events, expected {events}")

            seen = 0

            def on_progress(report: object) -> None:
                nonlocal seen
                done = int(getattr(report, "events", 0))
                if progress and done > seen:
                    progress("process", done - seen)
                    seen = done

            pool = memory.processor.pool
            cpu0, workers0 = time.process_time(), pool.cpu_s
            t0 = time.perf_counter()
            memory.process(progress=on_progress)
            process_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            memory.rollup(force=True)
            rollup_s = time.perf_counter() - t0
            workers_cpu_s = pool.cpu_s - workers0
            cpu_s = time.process_time() - cpu0 + workers_cpu_s
            return ProcessBench(
                events=events,
                segments=_count(store, "SELECT COUNT(*) FROM segments"),
                nodes=len([n for p in store.projects() for n in store.list_nodes(p)]),
                grips=_count(store, "SELECT COUNT(*) FROM grips"),
                bookmarks=_count(store, "SELECT COUNT(*) FROM bookmarks"),
                ingest_s=ingest_s,
                scan_s=scan_s,
                process_s=process_s,
                rollup_s=rollup_s,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                cpu_s=cpu_s,
                workers_cpu_s=workers_cpu_s,
                workers=pool.workers if pool.spec else 0,
                pool_rounds=pool.rounds,
                pool_rested=pool.rested,
            )
        finally:
            memory.close()


def _child(events: int, seed: int, workdir: str | None, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    def report(stage: str, n: int) -> None:
        queue.put(("progress", stage, n))

    try:
        result = measure_process(
            events, seed=seed, workdir=Path(workdir) if workdir else None, progress=report
        )
        queue.put(("done", result.to_dict(), 0))
    except Exception as exc:  # reported to the parent, which raises it
        queue.put(("error", f"{type(exc).__name__}: {exc}", 0))


def run_process_bench(
    events: int,
    *,
    seed: int = 7,
    workdir: Path | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, JsonValue]:
    """``measure_process`` in a fresh spawned child (its own peak RSS); returns its figures."""
    return run_in_child(
        "process", events, _child, (events, seed, str(workdir) if workdir else None), progress
    )
