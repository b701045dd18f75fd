"""Summarising in worker processes (``memtoc.pipeline.summary_pool``) leaves the store exactly as
one process does; a pool that breaks is reported and its jobs are run in this process.

Real SQLite, the real extractive summariser, token counter and bookmark detector, real worker
processes; the history is the synthetic coding-agent history of ``memtoc bench process``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtoc.clock import ManualClock
from memtoc.config import load_settings
from memtoc.errors import ConfigError
from memtoc.eval.bench_ingest import _draft
from memtoc.eval.synth import SynthConfig, generate
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.memory import Memory
from memtoc.pipeline import summary_pool, worker
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.summary_pool import REST_ROUNDS, SummaryPool, parse_workers, worker_spec
from memtoc.pipeline.worker import PipelineConfig
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import default_counter

EVENTS = 3_000
NOW = 1_900_000_000_000

TABLES = {
    "nodes": "SELECT project, node_id, version, level, start_ms, end_ms, parent_id, data, "
    "created_ms FROM toc_node_versions ORDER BY project, node_id, version",
    "grips": "SELECT * FROM grips ORDER BY grip_id",
    "bookmarks": "SELECT * FROM bookmarks ORDER BY bookmark_id",
    "segments": "SELECT * FROM segments ORDER BY project, node_id",
    "docs": "SELECT doc_seq, kind, doc_id, project, ts_ms, text FROM docs ORDER BY doc_seq",
    "dirty": "SELECT COUNT(*) FROM rollup_dirty",
}


def build(path: Path, workers: int) -> tuple[dict[str, str], Memory]:
    """The synthetic history ingested and processed with ``workers`` summary processes; a digest
    of every node version, grip, bookmark, segment and search document (in write order)."""
    clock = ManualClock(NOW)  # node and bookmark times are the clock's: the same in both stores
    store = SqliteStore(path, durability="off", clock=clock)
    memory = Memory(store, clock=clock, pipeline=PipelineConfig(workers=workers))
    importer = Importer(store, redactor=None, options=IngestOptions(format="jsonl"))
    drafts = [_draft(e) for e in generate(SynthConfig(seed=11, events=EVENTS))]
    for i in range(0, len(drafts), 1_000):  # several outbox entries, so several build rounds
        importer.ingest_drafts(drafts[i : i + 1_000], source="test")
    report = memory.process()
    assert report.failures == 0
    memory.rollup(force=True)
    digest = {}
    for name, sql in TABLES.items():
        rows = store.connection.execute(sql).fetchall()
        digest[name] = f"{len(rows)}:{hashlib.sha256(repr(rows).encode()).hexdigest()}"
    return digest, memory


def test_worker_processes_leave_the_store_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "INDEX_MIN_TEXTS", 100)  # full-text forms made there too
    alone, one = build(tmp_path / "one.db", workers=0)
    pooled, many = build(tmp_path / "many.db", workers=2)
    try:
        assert one.processor.pool.started == 0
        assert many.processor.pool.started >= 1  # the segments did go to worker processes
        assert many.processor.pool.cpu_s > 0
        assert int(alone["nodes"].split(":")[0]) > 60
        assert pooled == alone
    finally:
        one.close()
        many.close()


def _exit_in_worker(parent: int, job: int) -> int:
    """Kills the worker process it runs in (a crash, an out-of-memory kill); here, doubles."""
    if os.getpid() != parent:
        os._exit(1)
    return job * 2


def _double(summarizer: object, job: tuple[int, int]) -> int:
    return _exit_in_worker(*job)


def test_a_broken_pool_is_logged_and_its_jobs_run_here(caplog: pytest.LogCaptureFixture) -> None:
    pool = SummaryPool(ExtractiveSummarizer(default_counter()), 2, min_jobs=2)
    try:
        submit = pool.round(4)
        with caplog.at_level(logging.WARNING, logger="memtoc.pipeline.summary_pool"):
            results = [submit(_double, (os.getpid(), n)).result() for n in range(4)]
        assert results == [0, 2, 4, 6]
        assert pool.broken is not None and "BrokenProcessPool" in pool.broken
        assert any("summary pool of 2 processes stopped" in r.message for r in caplog.records)
        assert pool.round(4) == pool._here  # the rest of the run goes without it
    finally:
        pool.close()
    assert pool.broken is None  # the next run tries a pool again


def test_a_job_that_raises_raises_here() -> None:
    pool = SummaryPool(ExtractiveSummarizer(default_counter()), 2, min_jobs=1)
    try:
        pending = pool.round(1)(_fail, "segment x")
        with pytest.raises(ValueError, match="cannot summarise segment x"):
            pending.result()
        assert pool.broken is None
    finally:
        pool.close()


def _fail(summarizer: object, job: str) -> None:
    raise ValueError(f"cannot summarise {job}")


def test_small_rounds_and_other_summarisers_stay_in_this_process() -> None:
    summarizer = ExtractiveSummarizer(default_counter())
    pool = SummaryPool(summarizer, 2, min_jobs=24)
    assert pool.round(23) == pool._here and pool.round(24) == pool._there
    assert not SummaryPool(summarizer, 1).parallel
    assert worker_spec(summarizer) is not None

    class Wrapped(ExtractiveSummarizer):  # e.g. an LLM summariser: its clients stay here
        pass

    assert worker_spec(Wrapped(default_counter())) is None
    assert not SummaryPool(Wrapped(default_counter()), 4).parallel


def test_the_pipeline_workers_setting(tmp_path: Path) -> None:
    assert parse_workers("auto") >= 1
    assert parse_workers("0") == 0 and parse_workers("3") == 3
    for bad in ("-1", "two", ""):
        with pytest.raises(ValueError):
            parse_workers(bad)
    home = tmp_path / "home"
    home.mkdir()
    assert load_settings(environ={"MEMTOC_HOME": str(home)}).pipeline_workers == "auto"
    settings = load_settings(environ={"MEMTOC_HOME": str(home), "MEMTOC_PIPELINE_WORKERS": "0"})
    assert PipelineConfig.from_settings(settings).workers == 0
    (home / "config.toml").write_text("pipeline_workers = 3\n", encoding="utf-8")
    assert (
        PipelineConfig.from_settings(load_settings(environ={"MEMTOC_HOME": str(home)})).workers == 3
    )
    with pytest.raises(ConfigError, match="MEMTOC_PIPELINE_WORKERS"):
        load_settings(environ={"MEMTOC_HOME": str(home), "MEMTOC_PIPELINE_WORKERS": "many"})


def test_a_pool_that_gets_no_second_core_rests(caplog: pytest.LogCaptureFixture) -> None:
    pool = SummaryPool(ExtractiveSummarizer(default_counter()), 2, min_jobs=1)
    try:
        assert pool.round(1) == pool._there
        # a round of 10 s of wall in which this process and its workers got no CPU at all
        pool._mark = (time.perf_counter() - 10.0, time.process_time(), pool.cpu_s)
        with caplog.at_level(logging.INFO, logger="memtoc.pipeline.summary_pool"):
            pool.settle()
        assert (pool.rounds, pool.rested) == (1, 1)
        assert "cores used over the last round" in caplog.text
        for _ in range(REST_ROUNDS):
            assert pool.round(1) == pool._here
            pool.settle()
        assert pool.round(1) == pool._there  # tried again
        pool.settle()  # a round of no time is not judged
        assert (pool.rounds, pool.rested) == (1, 1)
        # still no second core: rests twice as long, then four times (a busy machine is probed
        # less and less often)
        for rest in (2 * REST_ROUNDS, 4 * REST_ROUNDS, 4 * REST_ROUNDS):
            assert pool.round(1) == pool._there
            pool._mark = (time.perf_counter() - 10.0, time.process_time(), pool.cpu_s)
            pool.settle()
            for _ in range(rest):
                assert pool.round(1) == pool._here
                pool.settle()
        assert pool.rested == 4
    finally:
        pool.close()


OWNER = """
import os, sys
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.summary_pool import SummaryPool
from memtoc.pipeline.worker import search_texts
from memtoc.text.tokens import default_counter

pool = SummaryPool(ExtractiveSummarizer(default_counter()), 2, min_jobs=1)
submit = pool.round(2)
assert [submit(search_texts, ["a b", "c"]).result() for _ in range(2)]
print(" ".join(str(pid) for pid in sorted(pool._executor._processes)), flush=True)
os._exit(0)  # no shutdown: killed, or a multiprocessing child leaving
"""


def test_workers_end_when_the_process_owning_the_pool_is_gone() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True
    ) as owner:
        assert owner.stdout is not None
        workers = [int(pid) for pid in owner.stdout.readline().split()]
        assert workers
        assert owner.wait(timeout=60) == 0
        deadline = time.monotonic() + 15
        alive = list(workers)
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [pid for pid in alive if _exists(pid)]
        assert alive == []


def _exists(pid: int) -> bool:
    return summary_pool._alive(pid)
