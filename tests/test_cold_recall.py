"""No silent cut: the first recall of a fresh process is not charged for loading.

A fresh process (the CLI, a hook, a just-started MCP server) loads the embedder, its vectors and
its vocabulary on the first query; that used to count against recall's time limit, and on a busy
machine the first recall came back cut to a single event without saying why. Here the demo store
is recalled from a subprocess while another process keeps a core busy, and must return exactly
what a warm process returns — not cut, nothing degraded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcp_support import STATIC_MODEL, server_env
from memtoc.config import load_settings
from memtoc.memory import Memory

QUERY = "why did the docker build fail in CI and how was it fixed?"


def _recall(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "memtoc", "--home", str(home), "recall", QUERY, "-A", *args]


def test_first_recall_of_a_fresh_process_equals_a_warm_one(demo_home: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        done = subprocess.run(
            _recall(demo_home, "--budget", "1000", "--json"),
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        busy.kill()
        busy.wait()
    assert done.returncode == 0, done.stderr
    cold = json.loads(done.stdout)
    assert cold["truncated"] is False and cold["degraded"] is None, cold["degraded"]
    assert cold["mode"] == "hybrid"
    settings = load_settings({"home": str(demo_home), "embed_model": str(STATIC_MODEL)}, environ={})
    with Memory.open(settings, read_only=True) as memory:
        memory.recall(QUERY, budget=1000)  # warm up
        warm = memory.recall(QUERY, budget=1000)
    assert not warm.truncated
    assert [i["id"] for i in cold["items"]] == [i.id for i in warm.items]
    assert cold["tokens"] == warm.tokens and len(cold["items"]) > 3


def test_a_recall_cut_by_its_time_limit_says_so(demo_home: Path) -> None:
    """Cut on purpose (a limit of 0 ms: one item, then stop): the JSON, the text an agent reads
    and the log all say so."""
    done = subprocess.run(
        _recall(demo_home, "--time-limit", "0", "--json"),
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    cut = json.loads(done.stdout)
    assert cut["truncated"] is True and "time limit 0 ms reached" in cut["degraded"]
    assert "cut by its time limit" in done.stderr  # the log line
    human = subprocess.run(
        _recall(demo_home, "--time-limit", "0"),
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "cut short:" in human.stdout and "time limit 0 ms reached" in human.stdout
