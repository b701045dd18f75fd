"""Start-up fit for hooks: `memtoc context` and the hook commands import only what they use, and
the fast path answers exactly as the typer commands do. (Speed itself is measured by `memtoc bench
startup`, not here.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.memory import Memory

HEAVY = ("typer", "rich", "pydantic", "fastapi", "starlette", "numpy", "mcp", "model2vec")


def _modules(*argv: str, stdin: str = "", env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memtoc", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.fixture
def home(hermetic_env: Path) -> Path:
    with Memory.open(load_settings({"home": str(hermetic_env), "embedder": "none"})) as mem:
        mem.remember("We decided to keep the cache TTL at 5 minutes.", project="webapp")
        mem.process()
    return hermetic_env


def test_context_and_hooks_import_only_what_they_use(home: Path) -> None:
    import os

    env = {**os.environ, "MEMTOC_PROJECT": "webapp"}
    hook = json.dumps({"hook_event_name": "SessionStart", "cwd": str(home)})
    transcript = next((Path(__file__).parent / "fixtures" / "claude-code").rglob("*.jsonl"))
    stop = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    for argv, stdin in (
        (("--home", str(home), "context", "-p", "webapp"), ""),
        (("--home", str(home), "context", "--project=webapp", "--json", "--budget", "300"), ""),
        (("--home", str(home), "hook", "session-start"), hook),
        (("--home", str(home), "hook", "ingest"), json.dumps({"transcript_path": "/nope"})),
        # a real Stop: the store opened for writing, a transcript read (and, run again, nothing
        # new): the forget log's reconciliation must not build the pipeline to find it agrees
        (("--home", str(home), "hook", "ingest"), stop),
        (("--home", str(home), "hook", "ingest"), stop),
    ):
        loaded = _modules(*argv, stdin=stdin, env=env)
        assert "memtoc.retrieval.context" in loaded or "hook" in argv
        heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
        assert not heavy, (argv, heavy)
        assert not any(m.startswith("memtoc.ingest.redact") for m in loaded if "context" in argv)
        # nor the bookmark detector's cue patterns, the navigation views or the pipeline
        unused = ("memtoc.retrieval.bookmark_cues", "memtoc.retrieval.navigate", "memtoc.pipeline",
                  "memtoc.forgetting")  # fmt: skip
        assert not [m for m in loaded if m.startswith(unused)], argv


def test_fast_context_answers_as_the_typer_command(home: Path) -> None:
    from memtoc.surfaces.cli import app

    fast = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "context", "-p", "webapp", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    typer = CliRunner().invoke(app, ["--home", str(home), "context", "-p", "webapp", "--json"])
    assert typer.exit_code == 0
    assert json.loads(fast.stdout) == json.loads(typer.stdout)
    assert "cache TTL" in json.loads(fast.stdout)["text"]
    human = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "context", "-p", "webapp"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "cache TTL" in human.stdout and human.stdout.rstrip().endswith("of 800 tokens")
    unknown = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "context", "-p", "nope"],
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 1
    assert "unknown project 'nope' (known projects: webapp)" in unknown.stderr
    # an option the fast path does not know goes to typer, which explains it
    bad = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "context", "--bogus"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--bogus" in bad.stderr


def test_every_command_is_in_the_lazy_map() -> None:
    from memtoc.surfaces.cli import commands  # noqa: F401  (imports every command module)
    from memtoc.surfaces.cli.app import COMMANDS, app

    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}  # type: ignore[union-attr]
    names |= {g.name for g in app.registered_groups if g.name}
    assert names == set(COMMANDS)
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        module = command.callback.__module__.rsplit(".", 1)[1]
        assert module in COMMANDS[name], (name, module)
    for group in app.registered_groups:  # a group's sub-commands load with its modules
        assert group.name and group.typer_instance is not None
        for sub in group.typer_instance.registered_commands:
            assert sub.callback is not None
            module = sub.callback.__module__.rsplit(".", 1)[1]
            assert module in COMMANDS[group.name], (group.name, sub.name, module)
