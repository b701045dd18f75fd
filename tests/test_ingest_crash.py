"""Crash test: an ingest SIGKILLed at random points loses nothing it acknowledged and duplicates
nothing; re-running completes the file."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.maintenance import verify

ROOT = Path(__file__).resolve().parent.parent
N_EVENTS = 60_000
KILLS = 24

CHILD = """
import json, sys
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore
from memtoc.ingest.redact import Redactor
store = SqliteStore(sys.argv[1])
# a background WAL checkpoint after every batch (50,000 events by default), so kills land
# during checkpoints too
store.checkpointer.min_events = 2_000
memory = Memory(store, redactor=Redactor())
def ack(info):
    sys.stdout.write(json.dumps(info.event_ids) + "\\n")
    sys.stdout.flush()
memory.ingest([sys.argv[2]], on_commit=ack)
print("DONE", flush=True)
"""


def make_transcript(path: Path) -> None:
    rng = random.Random(3)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_EVENTS):
            text = " ".join(rng.choice(["auth", "token", "refresh", "pytest", "deploy", "cache"])
                            for _ in range(rng.randint(5, 60)))  # fmt: skip
            fh.write(json.dumps({
                "session_id": f"s{i // 500}",
                "timestamp": 1_705_572_000_000 + i * 1_000,
                "role": "user" if i % 2 else "assistant",
                "text": f"{i}: {text}",
            }) + "\n")  # fmt: skip


def run_child(db: Path, transcript: Path, kill: tuple[int, float] | None) -> tuple[list[str], bool]:
    """Run one ingest; ``kill`` = (commits, delay): SIGKILL it ``delay`` seconds after it has
    acknowledged that many more commits. Kills follow the child's progress, not the clock, so a
    loaded machine (a slow start-up) cannot make every kill land before the first commit and the
    round never finish; the delay puts the kill anywhere in the next batch or its checkpoint."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(transcript)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    rows: list[str] = []
    if kill is not None:
        assert proc.stdout is not None
        commits, delay = kill
        while commits > 0 and (row := proc.stdout.readline()):
            rows.append(row.rstrip("\n"))
            commits -= row.startswith("[")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    acked: list[str] = []
    finished = False
    for row in [*rows, *out.splitlines()]:
        if row == "DONE":
            finished = True
        elif row.startswith("["):
            # A line cut by the kill was not acknowledged.
            with contextlib.suppress(json.JSONDecodeError):
                acked.extend(json.loads(row))
    return acked, finished


def check_store(db: Path, acknowledged: set[str]) -> None:
    with SqliteStore(db) as store:
        report = verify(store)
        assert report.ok, report.problems
        present = {e.event_id for e in store.get_events(acknowledged)}
        assert present == acknowledged, f"lost {len(acknowledged - present)} acknowledged events"


def test_sigkill_during_ingest_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    transcript = tmp_path / "big.jsonl"
    make_transcript(transcript)
    rng = random.Random(11)
    kills = rounds = 0
    while kills < KILLS:
        # A round: one store, killed again and again until an ingest finishes on its own.
        rounds += 1
        db = tmp_path / f"round{rounds}" / "memtoc.db"
        acknowledged: set[str] = set()
        while True:
            acked, finished = run_child(db, transcript, (rng.randint(1, 2), rng.uniform(0, 0.4)))
            acknowledged.update(acked)
            if finished:
                break
            kills += 1
            check_store(db, acknowledged)
        check_store(db, acknowledged)
        with SqliteStore(db) as store:
            assert store.count_events() == N_EVENTS
            distinct = store.connection.execute("SELECT COUNT(DISTINCT event_id) FROM events")
            assert distinct.fetchone()[0] == N_EVENTS
            rescan = Memory(store).ingest([transcript], rescan=True)
            assert (rescan.ingested, rescan.duplicates) == (0, N_EVENTS)
    assert kills >= 20
