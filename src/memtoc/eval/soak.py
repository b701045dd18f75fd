"""Crash-loop soak (``memtoc bench soak``): SIGKILL every kind of write at random points.

One store, one live transcript that keeps growing. The driver repeatedly picks a step — ingest
(after appending new lines to the transcript), process, forced rollup, FTS rebuild, ``rebuild
--all`` or backup — runs it in a child process (``memtoc.eval.soak_child``), and SIGKILLs the
child after a random
delay drawn from 0 to 1.3 x that step's estimated duration, so kills land anywhere in the work (a
kill only counts when the child was still running; a kill grows the estimate by 25 %, a completion
moves it halfway to the measured time). After **every** child, killed or not:

- ``verify`` passes (SQLite integrity and memtoc's invariants: outbox ranges tile the log, every
  filed event in exactly one segment, grips and nodes consistent);
- every acknowledged event (the ids an ingest printed after a durable commit) is stored;
- no event is stored twice (``COUNT(*) = COUNT(DISTINCT event_id)``) and every stored event
  comes from the transcript;
- a backup that finished is itself a store that passes ``verify``.

At the end the remaining work is finished without kills and the TOC (every latest node's content
and the grips its bullets cite, without versions or timestamps) must equal that of a reference
store built from the final transcript in one go, without crashes; then a ``rebuild --all`` run to
its end must leave it equal (and ``verify`` passing).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import memtoc
from memtoc.errors import MemtocError
from memtoc.model import JsonValue
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.maintenance import verify

STEPS = ("ingest", "process", "rollup", "rebuild", "rebuild-all", "backup")
_START_MS = 1_704_096_000_000  # 2024-01-01T08:00:00Z
_WORDS = [
    "auth",
    "token",
    "refresh",
    "expiry",
    "pytest",
    "fixture",
    "deploy",
    "staging",
    "docker",
    "image",
    "cache",
    "invalidation",
    "migration",
    "schema",
    "index",
    "query",
    "latency",
    "retry",
    "backoff",
    "webhook",
    "payload",
    "parser",
    "config",
    "env",
    "kubernetes",
    "rollout",
    "canary",
    "flaky",
    "timeout",
    "lockfile",
    "dependency",
    "upgrade",
    "regression",
    "bisect",
]
_PROJECTS = ("webapp", "infra", "notes")


@dataclass(slots=True)
class SoakReport:
    """What one soak run did and found; ``ok`` when no invariant was ever broken."""

    kills: int = 0
    kills_by_step: dict[str, int] = field(default_factory=dict)
    runs_by_step: dict[str, int] = field(default_factory=dict)
    completed_by_step: dict[str, int] = field(default_factory=dict)
    verifies: int = 0
    events: int = 0
    acknowledged: int = 0
    backups_verified: int = 0
    toc_nodes: int = 0
    toc_equal: bool = False
    rebuilt_equal: bool = False
    """After the comparison, a ``rebuild --all`` run to its end leaves the TOC equal too."""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.toc_equal and self.rebuilt_equal

    def to_dict(self) -> dict[str, JsonValue]:
        d: dict[str, JsonValue] = asdict(self)
        d["ok"] = self.ok
        return d


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """How long to soak: ``kills`` landed SIGKILLs; ``lines_per_append`` new transcript lines
    before each ingest step."""

    kills: int = 200
    lines_per_append: int = 1_200
    seed: int = 7
    max_runs: int = 0
    """Give up after this many child runs (0: ``6 x kills + 50``)."""


def _child_env() -> dict[str, str]:
    src = str(Path(memtoc.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    # A fixed hash seed: the crashed store and the reference must summarise identically.
    return {
        **os.environ,
        "PYTHONPATH": src + (os.pathsep + path if path else ""),
        "PYTHONHASHSEED": "0",
    }


@dataclass(slots=True)
class _Run:
    killed: bool
    finished: bool
    acked: list[str]
    seconds: float
    stderr: str


def _run_child(args: list[str], delay: float | None) -> _Run:
    """Start a soak step, wait for ``ready``, and SIGKILL it after ``delay`` s (None: never)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errfile:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memtoc.eval.soak_child", *args],
            stdout=subprocess.PIPE,
            stderr=errfile,
            env=_child_env(),
            text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        started = time.monotonic()
        killed = False
        if first == "ready" and delay is not None:
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed = True
        # Read through the same buffered stream readline used (it may hold later lines already).
        lines = proc.stdout.read().splitlines()
        proc.stdout.close()
        proc.wait(timeout=900)
        errfile.seek(0)
        err = errfile.read()
    acked: list[str] = []
    for row in lines:
        if row.startswith("ack ") and row.endswith("]"):  # a line cut by the kill was not an ack
            with contextlib.suppress(json.JSONDecodeError):
                acked.extend(json.loads(row[4:]))
    finished = "done" in lines and proc.returncode == 0
    if not killed and not finished:
        raise MemtocError(
            f"soak step {args[0]} failed (exit {proc.returncode}, first line {first!r}): "
            f"{err[-2000:]}"
        )
    return _Run(killed, finished, acked, time.monotonic() - started, err)


def write_lines(path: Path, start: int, count: int, rng: random.Random) -> None:
    """Append ``count`` synthetic JSONL events (numbered from ``start``) to the transcript."""
    with path.open("a", encoding="utf-8") as fh:
        for i in range(start, start + count):
            session = i // 40
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 40)))
            record = {
                "session_id": f"s{session}",
                "project": _PROJECTS[session % len(_PROJECTS)],
                # ~40 events per session, one session every ~5 h: days, weeks and months fill.
                "timestamp": _START_MS + session * 5 * 3_600_000 + (i % 40) * 45_000,
                "role": "user" if i % 2 else "assistant",
                "text": f"step {i}: {words}",
            }
            fh.write(json.dumps(record) + "\n")


def toc_snapshot(store: SqliteStore) -> dict[str, Any]:
    """Every latest node's content (no version or creation time) and the grips it cites."""
    snap: dict[str, Any] = {}
    for project in store.projects():
        for node in store.list_nodes(project):
            grips = []
            for bullet in node.bullets:
                for gid in bullet.grip_ids:
                    g = store.get_grip(gid)
                    grips.append((g.grip_id, g.event_id_start, g.event_id_end, g.excerpt))
            content = replace(node, version=0, created_ms=0).content_key()
            snap[f"{project}|{node.node_id}"] = (content, tuple(grips))
    return snap


def _check_store(db: Path, acknowledged: set[str], written: int, report: SoakReport) -> None:
    with SqliteStore(db) as store:
        result = verify(store)
        report.verifies += 1
        report.problems.extend(f"after run {report.verifies}: {p}" for p in result.problems)
        conn = store.connection
        total, distinct = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT event_id) FROM events"
        ).fetchone()
        if total != distinct:
            report.problems.append(f"{total - distinct} duplicated events")
        if total > written:
            report.problems.append(f"{total} events stored but only {written} written")
        missing = acknowledged - {e.event_id for e in store.get_events(acknowledged)}
        if missing:
            report.problems.append(f"{len(missing)} acknowledged events lost")
        report.events = total


def _check_backup(dest: Path, report: SoakReport) -> None:
    with SqliteStore(dest) as backup:
        result = verify(backup)
    report.backups_verified += 1
    report.problems.extend(f"backup {dest.name}: {p}" for p in result.problems)


def _finish(db: Path, transcript: Path) -> None:
    for step in ("ingest", "process", "rollup"):
        _run_child([step, str(db), str(transcript)] if step == "ingest" else [step, str(db)], None)


def run_soak(
    workdir: Path,
    config: SoakConfig = SoakConfig(),
    progress: Callable[[SoakReport], None] | None = None,
) -> SoakReport:
    """Run the crash loop in ``workdir`` (a fresh folder) and return what it found."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, transcript = workdir / "soak.db", workdir / "transcript.jsonl"
    if db.exists() or transcript.exists():
        raise MemtocError(f"soak workdir {workdir} is not empty")
    rng = random.Random(config.seed)
    text_rng = random.Random(config.seed + 1)
    report = SoakReport()
    kills: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    done: Counter[str] = Counter()
    typical = dict.fromkeys(STEPS, 0.5)
    acknowledged: set[str] = set()
    written = 0
    ingest_pending = False
    max_runs = config.max_runs or 6 * config.kills + 50
    started = time.monotonic()
    while report.kills < config.kills and sum(runs.values()) < max_runs:
        step = "ingest" if written == 0 else rng.choice(STEPS)
        if step == "ingest" and not ingest_pending:
            write_lines(transcript, written, config.lines_per_append, text_rng)
            written += config.lines_per_append
        args = [step, str(db)]
        dest = workdir / f"backup-{sum(runs.values())}.db"
        if step == "ingest":
            args.append(str(transcript))
        elif step == "backup":
            args.append(str(dest))
        run = _run_child(args, rng.uniform(0.0, 1.3 * typical[step]))
        runs[step] += 1
        acknowledged.update(run.acked)
        if run.killed:
            kills[step] += 1
            report.kills += 1
            # Killed before finishing: the step takes longer than thought, so later kills of it
            # spread further into the work (a step that never finished would otherwise only ever
            # be killed in its first moments).
            typical[step] = min(typical[step] * 1.25, 60.0)
        if run.finished:
            done[step] += 1
            typical[step] = 0.5 * typical[step] + 0.5 * run.seconds
            if step == "backup":
                _check_backup(dest, report)
        if step == "ingest":
            ingest_pending = not run.finished
        if step == "backup":
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{dest}{suffix}").unlink(missing_ok=True)
        _check_store(db, acknowledged, written, report)
        report.kills_by_step, report.runs_by_step = dict(kills), dict(runs)
        report.completed_by_step, report.acknowledged = dict(done), len(acknowledged)
        report.seconds = round(time.monotonic() - started, 1)
        if progress:
            progress(report)
        if report.problems:
            return report
    _finish(db, transcript)
    _check_store(db, acknowledged, written, report)
    reference = workdir / "reference.db"
    _finish(reference, transcript)
    with SqliteStore(db) as crashed, SqliteStore(reference) as clean:
        got, want = toc_snapshot(crashed), toc_snapshot(clean)
        if clean.count_events() != written or crashed.count_events() != written:
            report.problems.append(
                f"events: crashed {crashed.count_events()}, reference {clean.count_events()}, "
                f"written {written}"
            )
    report.toc_nodes = len(want)
    report.toc_equal = got == want
    if not report.toc_equal:
        differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        report.problems.append(
            f"TOC differs from the crash-free build in {len(differ)} nodes: {differ[:5]}"
        )
    # a rebuild that runs to its end (the loop's are mostly killed) derives the same TOC again
    _run_child(["rebuild-all", str(db)], None)
    _check_store(db, acknowledged, written, report)
    with SqliteStore(db) as rebuilt:
        again = toc_snapshot(rebuilt)
    report.rebuilt_equal = again == want
    if not report.rebuilt_equal:
        differ = sorted(k for k in set(again) | set(want) if again.get(k) != want.get(k))
        report.problems.append(
            f"after rebuild --all the TOC differs in {len(differ)} nodes: {differ[:5]}"
        )
    report.seconds = round(time.monotonic() - started, 1)
    return report
