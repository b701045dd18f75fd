"""``memtoc bench startup``: how long the short commands an agent's hooks run take, end to end.

A hook pays a fresh Python process at every session start and stop, so what matters is the wall
time of the whole command — interpreter, imports, opening the store, loading the token counter,
the work and exit — not the work alone. Each command is run ``runs`` times as a subprocess;
``python -c pass`` is the floor. With ``baseline_src`` (another checkout's ``src``), every command
also runs against that code, interleaved run by run with this one, so both see the same machine
load and the ratio is fair even when the machine is busy.

Commands: ``memtoc context`` (``--project``), ``memtoc hook session-start`` (the hook's JSON
on stdin, the project through ``MEMTOC_PROJECT``) and ``memtoc hook ingest`` (a Stop hook whose
transcript has nothing new: what every turn pays; on a scratch store beside the cwd). Reported per command and
code: median and p90 wall, median CPU (user + system of the child), and the modules the command
imported (one extra run with ``-X importtime``).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from memtoc.model import JsonValue


@dataclass(frozen=True, slots=True)
class StartupCommand:
    """One command line to time (arguments after ``python -m memtoc``), with its stdin."""

    name: str
    args: tuple[str, ...]
    stdin: str = ""
    env: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Timing:
    """Runs of one command against one code tree."""

    command: str
    code: str
    """``this`` or ``baseline``."""
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    modules: int = 0
    failures: int = 0

    def to_dict(self) -> dict[str, JsonValue]:
        def q(values: list[float], p: float) -> float | None:
            if not values:
                return None
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 4)

        return {
            "command": self.command,
            "code": self.code,
            "runs": len(self.wall_s),
            "wall_median_s": round(statistics.median(self.wall_s), 4) if self.wall_s else None,
            "wall_p90_s": q(self.wall_s, 0.9),
            "cpu_median_s": round(statistics.median(self.cpu_s), 4) if self.cpu_s else None,
            "modules": self.modules,
            "failures": self.failures,
        }


@dataclass(slots=True)
class StartupReport:
    home: str
    project: str
    runs: int
    timings: list[Timing] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)
    """The machine's 1-minute load average before and after."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "home": self.home,
            "project": self.project,
            "runs": self.runs,
            "load_before": self.load[0],
            "load_after": self.load[1],
            "timings": [t.to_dict() for t in self.timings],
        }


def commands(home: Path, project: str) -> list[StartupCommand]:
    # the hook's cwd: a folder named like the project (older memtoc took the project from the
    # cwd's last component; this one maps it by the project rule, or takes MEMTOC_PROJECT)
    cwd = home / "bench-cwd" / project
    cwd.mkdir(parents=True, exist_ok=True)
    hook = json.dumps({"hook_event_name": "SessionStart", "session_id": "bench", "cwd": str(cwd)})
    # the Stop hook after a turn that added nothing (what every turn pays at least), on a store
    # of its own beside the cwd: the bench never writes into the store it measures
    transcript = cwd.parent / "bench-session.jsonl"
    lines = [{"type": t, "uuid": f"bench-{i}", "parentUuid": None, "sessionId": "bench",
              "timestamp": f"2024-01-18T10:00:0{i}Z", "cwd": str(cwd),
              "message": {"role": t, "content": f"bench {t} message"}}
             for i, t in enumerate(("user", "assistant"))]  # fmt: skip
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stop = json.dumps({"hook_event_name": "Stop", "session_id": "bench", "cwd": str(cwd),
                       "transcript_path": str(transcript)})  # fmt: skip
    return [
        StartupCommand("python -c pass", ()),
        StartupCommand("memtoc context", ("--home", str(home), "context", "--project", project)),
        StartupCommand(
            "memtoc hook session-start",
            ("--home", str(home), "hook", "session-start"),
            stdin=hook,
            env=(("MEMTOC_PROJECT", project),),
        ),
        StartupCommand(
            "memtoc hook ingest",
            ("--home", str(cwd.parent / "ingest-home"), "hook", "ingest"),
            stdin=stop,
        ),
    ]


def _argv(command: StartupCommand) -> list[str]:
    if not command.args:
        return [sys.executable, "-c", "pass"]
    return [sys.executable, "-m", "memtoc", *command.args]


def _env(src: Path | None, command: StartupCommand) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(dict(command.env))
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def _run_once(command: StartupCommand, src: Path | None) -> tuple[float, float, bool]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        _argv(command),
        input=command.stdin,
        env=_env(src, command),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode == 0


def _modules(command: StartupCommand, src: Path | None) -> int:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *_argv(command)[1:]],
        input=command.stdin,
        env=_env(src, command),
        capture_output=True,
        text=True,
        check=False,
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def run_startup_bench(
    home: Path, project: str, *, runs: int = 15, baseline_src: Path | None = None
) -> StartupReport:
    """Time each command ``runs`` times (interleaved with the baseline's when given)."""
    report = StartupReport(str(home), project, runs)
    codes: list[tuple[str, Path | None]] = [("this", None)]
    if baseline_src is not None:
        codes.append(("baseline", baseline_src))
    report.load = (os.getloadavg()[0], 0.0)
    for command in commands(home, project):
        timings = {code: Timing(command.name, code) for code, _ in codes}
        for code, src in codes:  # one untimed run each: the OS file cache, the vocabulary cache
            _run_once(command, src)
            timings[code].modules = _modules(command, src)
        for _ in range(runs):
            for code, src in codes:
                wall, cpu, ok = _run_once(command, src)
                timing = timings[code]
                timing.wall_s.append(wall)
                timing.cpu_s.append(cpu)
                timing.failures += 0 if ok else 1
        report.timings.extend(timings.values())
    report.load = (report.load[0], os.getloadavg()[0])
    return report
