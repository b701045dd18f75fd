"""Bounds: big inputs and extreme arguments stay within memory and time limits.

Each scenario runs in a fresh child process that reports its own peak RSS (``VmHWM``) and
wall time, so the figures are the scenario's alone; the baseline is a child that only imports
memtoc and opens a store. Sizes are scaled down in the normal suite; ``MEMTOC_BOUNDS_FULL=1`` runs
the issue's sizes (a 100 MB transcript, a 50 MB tool result, a 100k-event session) — the figures
in docs/reliability.md come from that run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memtoc

FULL = os.environ.get("MEMTOC_BOUNDS_FULL") == "1"
TRANSCRIPT_MB = 100 if FULL else 8
TOOL_RESULT_MB = 50 if FULL else 8
SESSION_EVENTS = 100_000 if FULL else 5_000
T0 = 1_705_572_000_000

CHILD = r"""
import json, resource, sys, time
from datetime import UTC
from memtoc.clock import ManualClock
from memtoc.errors import MemtocError
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore

scenario, db, arg = sys.argv[1], sys.argv[2], sys.argv[3]
clock = ManualClock(1_893_456_000_000)
store = SqliteStore(db, clock=clock)
memory = Memory(store, clock=clock, tz=UTC, semantic=SemanticIndex(store, kind="none"))
out = {}
started = time.perf_counter()
if scenario == "ingest":
    report = memory.ingest([arg])
    out.update(ingested=report.ingested, truncated=report.truncated,
               rejected=len(report.rejections))
elif scenario == "ingest+process":
    out["ingested"] = memory.ingest([arg]).ingested
    t = time.perf_counter()
    memory.process()
    memory.rollup(force=True)
    out["process_s"] = round(time.perf_counter() - t, 1)
    out["segments"] = store.connection.execute("SELECT COUNT(*) FROM segments").fetchone()[0]
elif scenario == "queries":
    words = json.loads(arg)
    for budget in (0, 10**9):
        ctx = memory.context(budget=budget)
        out[f"context_{budget}_tokens"] = memory.counter.count(ctx.text)
        try:
            rec = memory.recall("deploy token", budget=budget)
        except MemtocError as exc:  # a budget beyond the documented maximum: a clear refusal
            out[f"recall_{budget}_error"] = str(exc)
        else:
            out[f"recall_{budget}_tokens"] = rec.tokens
            out[f"recall_{budget}_items"] = len(rec.items)
    for limit in (0, 10**9):
        out[f"search_limit_{limit}_items"] = len(memory.search("deploy", limit=limit).items)
    t = time.perf_counter()
    out["long_query_items"] = len(memory.search(words, limit=10).items)
    out["long_query_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    out["long_recall_tokens"] = memory.recall(words, budget=2_000).tokens
    out["long_recall_s"] = round(time.perf_counter() - t, 2)
elif scenario != "baseline":
    raise SystemExit(f"unknown scenario {scenario}")
out["seconds"] = round(time.perf_counter() - started, 1)
# VmHWM is this process image's own high-water mark; ru_maxrss would also count the forked
# parent's pages (Linux carries the pre-exec peak over into ru_maxrss).
try:
    with open("/proc/self/status") as fh:
        hwm_kb = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    hwm_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out["peak_rss_mb"] = round(hwm_kb / 1024, 1)
print(json.dumps(out))
"""


def run_scenario(scenario: str, db: Path, arg: str = "-") -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(memtoc.__file__).resolve().parent.parent),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, scenario, str(db), arg],
        capture_output=True,
        text=True,
        env=env,
        timeout=3_600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(scenario, result)  # shown with -s: the figures for docs/reliability.md
    return result


def _line(i: int, text: str, session: str = "s") -> str:
    return json.dumps({"session_id": session, "timestamp": T0 + i * 1_000,
                       "role": "user" if i % 2 else "assistant", "text": text})  # fmt: skip


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> float:
    db = tmp_path_factory.mktemp("base") / "b.db"
    return float(run_scenario("baseline", db)["peak_rss_mb"])


def test_big_transcript_ingests_in_bounded_memory(tmp_path: Path, baseline: float) -> None:
    path = tmp_path / "big.jsonl"
    size = 0
    with path.open("w", encoding="utf-8") as fh:
        i = 0
        while size < TRANSCRIPT_MB * 1_000_000:
            row = _line(i, f"{i} " + "deploy token refresh cache pytest " * 12, f"s{i // 400}")
            fh.write(row + "\n")
            size += len(row) + 1
            i += 1
    result = run_scenario("ingest", tmp_path / "m.db", str(path))
    assert result["ingested"] == i and result["rejected"] == 0
    # Streaming: memory does not grow with the file (8 MB and 100 MB measure alike).
    assert result["peak_rss_mb"] - baseline < 120, result


def test_huge_tool_result_is_capped_and_bounded(tmp_path: Path, baseline: float) -> None:
    path = tmp_path / "tool.jsonl"
    blob = "x" * (TOOL_RESULT_MB * 1_000_000)
    with path.open("w", encoding="utf-8") as fh:
        fh.write(_line(0, "run the build") + "\n")
        record = {"session_id": "s", "timestamp": T0 + 1_000, "role": "tool",
                  "event_type": "tool_result", "text": blob}  # fmt: skip
        fh.write(json.dumps(record) + "\n")
        fh.write(_line(2, "done") + "\n")
    result = run_scenario("ingest", tmp_path / "m.db", str(path))
    assert result["ingested"] == 3 and result["truncated"] == 1
    # One line is held whole while parsed (bytes, str, JSON): a few copies of it, no more.
    assert result["peak_rss_mb"] - baseline < 6 * TOOL_RESULT_MB + 60, result


def test_long_session_processes_in_bounded_memory(tmp_path: Path, baseline: float) -> None:
    path = tmp_path / "session.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(SESSION_EVENTS):
            fh.write(_line(i, f"step {i}: deploy token refresh cache word{i % 977}") + "\n")
    result = run_scenario("ingest+process", tmp_path / "m.db", str(path))
    assert result["ingested"] == SESSION_EVENTS and result["segments"] >= 1
    assert result["peak_rss_mb"] - baseline < (400 if FULL else 150), result


def test_extreme_budgets_limits_and_a_10k_word_query(tmp_path: Path, baseline: float) -> None:
    path = tmp_path / "t.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(2_000):
            fh.write(_line(i * 30, f"{i}: deploy token refresh cache", f"s{i // 100}") + "\n")
    db = tmp_path / "m.db"
    run_scenario("ingest+process", db, str(path))
    words = " ".join(f"word{i % 3000} deploy" if i % 2 else f"token{i}" for i in range(10_000))
    result = run_scenario("queries", db, json.dumps(words))
    assert result["context_0_tokens"] == 0 and result["recall_0_tokens"] == 0
    assert result["recall_0_items"] == 0
    assert result["context_1000000000_tokens"] > 0
    assert "budget" in result["recall_1000000000_error"]
    assert result["search_limit_0_items"] == 0 and result["search_limit_1000000000_items"] > 10
    assert result["long_query_s"] < 5 and result["long_recall_s"] < 5, result
    assert result["peak_rss_mb"] - baseline < 200, result
