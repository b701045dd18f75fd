"""Agent hooks: settings installers, and the hook commands run the way agents run them
(a subprocess with the hook JSON on stdin), including a locked, missing or corrupt store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.surfaces.cli import app
from memtoc.text.tokens import default_counter

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPT = (
    ROOT / "tests/fixtures/claude-code/-home-dev-webapp/3f2a1c9e-8b7d-4e6f-a5c4-1d2e3f4a5b6c.jsonl"
)
SESSION = "3f2a1c9e-8b7d-4e6f-a5c4-1d2e3f4a5b6c"

EXISTING: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}
        ],
    },
}


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    return result


# -- installing ------------------------------------------------------------------------------------
def test_install_claude_code_keeps_settings_and_is_idempotent(user_home: Path) -> None:
    path = user_home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(EXISTING, indent=2))
    assert _cli("hooks", "install", "claude-code").exit_code == 0
    first = path.read_text()
    result = _cli("hooks", "install", "claude-code")
    assert result.exit_code == 0 and "already up to date" in result.output
    assert path.read_text() == first  # run twice, same file

    data = json.loads(first)
    assert data["model"] == "opus" and data["permissions"] == EXISTING["permissions"]
    assert data["hooks"]["PreToolUse"] == EXISTING["hooks"]["PreToolUse"]
    start = data["hooks"]["SessionStart"]
    assert start[0] == EXISTING["hooks"]["SessionStart"][0]  # the user's own hook, untouched
    ours = start[1]["hooks"][0]
    assert ours["type"] == "command" and ours["command"].endswith("hook session-start")
    assert ours["timeout"] == 5
    for event in ("Stop", "SubagentStop", "PreCompact", "SessionEnd"):
        (group,) = data["hooks"][event]
        assert " hook ingest" in group["hooks"][0]["command"]
    assert data["hooks"]["SessionEnd"][0]["hooks"][0]["command"].endswith("--process")

    assert _cli("hooks", "uninstall", "claude-code").exit_code == 0
    assert json.loads(path.read_text()) == EXISTING
    result = _cli("hooks", "uninstall", "claude-code")
    assert result.exit_code == 0 and "no memtoc hooks" in result.output


def test_install_project_scope_codex_and_gemini(tmp_path: Path, user_home: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    for agent in ("claude-code", "codex", "gemini"):
        args = ("hooks", "install", agent, "--scope", "project", "--project-dir", str(project))
        assert _cli(*args).exit_code == 0
    claude = json.loads((project / ".claude" / "settings.json").read_text())
    codex = json.loads((project / ".codex" / "hooks.json").read_text())
    gemini = json.loads((project / ".gemini" / "settings.json").read_text())
    assert set(claude["hooks"]) == {
        "SessionStart",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "SessionEnd",
    }
    assert set(codex["hooks"]) == {"SessionStart", "Stop", "PreCompact"}
    assert set(gemini["hooks"]) == {"SessionStart", "AfterAgent", "PreCompress", "SessionEnd"}
    assert gemini["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 5000  # milliseconds
    assert not (user_home / ".claude").exists()
    # --home chosen at install time is baked into the command
    result = _cli(
        "--home",
        str(tmp_path / "h"),
        "hooks",
        "install",
        "codex",
        "--scope",
        "project",
        "--project-dir",
        str(project),
    )
    assert result.exit_code == 0
    command = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]["Stop"][0][
        "hooks"
    ][0]["command"]
    assert f"--home {tmp_path / 'h'} hook ingest" in command


def test_install_refuses_a_corrupt_settings_file(user_home: Path) -> None:
    path = user_home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{not json")
    result = _cli("hooks", "install", "claude-code")
    assert result.exit_code == 1 and "not valid JSON" in result.output
    assert path.read_text() == "{not json"


# -- running the hooks the way the agent does --------------------------------------------------------
def _hook(home: Path, *args: str, stdin: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "hook", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return proc, time.monotonic() - started


def _startup_s(home: Path) -> float:
    """What starting the hook command costs on this machine now (interpreter, imports, CLI):
    the baseline that the hook's own deadlines are added to (a loaded machine starts slowly)."""
    proc, elapsed = _hook(home, "--help", stdin="")
    assert proc.returncode == 0, proc.stderr
    return elapsed


def _payload(event: str, transcript: Path | None = None) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript) if transcript else None,
            "cwd": "/home/dev/webapp",
            "hook_event_name": event,
            "source": "startup",
        }
    )


def test_ingest_hook_on_a_growing_transcript(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    live = tmp_path / "session.jsonl"
    live.write_bytes(b"")
    cuts = [5, 11, 11, 20, len(lines)]
    written = 0
    for n, cut in enumerate(cuts):
        chunk = b"".join(lines[written:cut])
        if n == 2:  # a line still being written: half of the next one, no newline yet
            chunk = lines[cut][: len(lines[cut]) // 2]
        elif n == 3:  # the rest of that line, then more
            chunk = lines[cuts[2]][len(lines[cuts[2]]) // 2 :] + b"".join(lines[cuts[2] + 1 : cut])
        with live.open("ab") as fh:
            fh.write(chunk)
        if n != 2:
            written = cut
        proc, _ = _hook(home, "ingest", stdin=_payload("Stop", live))
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    proc, _ = _hook(home, "ingest", "--process", stdin=_payload("SessionEnd", live))
    assert proc.returncode == 0  # returns once imported: the filing goes on detached
    _wait_filed(home)

    reference = tmp_path / "reference"
    with Memory.open(load_settings({"home": str(reference)})) as ref:
        ref.ingest([TRANSCRIPT])
        expected = [(e.event_id, e.text) for e in ref.events()]
    with Memory.open(load_settings({"home": str(home)})) as mem:
        got = [(e.event_id, e.text) for e in mem.events()]
        assert mem.store.outbox_counts().get("pending", 0) == 0  # --process filed them
        assert mem.toc("webapp")
    assert got == expected and len(expected) > 20  # every event exactly once, whole
    log = home / "hooks.log"
    assert not log.exists(), log.read_text()  # a half-written line is not a problem to report


def _wait_filed(home: Path, timeout_s: float = 90.0) -> None:
    """Wait for the detached ``hook process`` that ``hook ingest --process`` starts (agents
    cancel a session-end hook still running when they exit, so the filing outlives the hook)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
            pending = mem.store.outbox_counts().get("pending", 0)
            years = [n for p in mem.store.projects() for n in mem.store.list_nodes(p, level="year")]
        if pending == 0 and years:  # filed, then rolled up
            return
        assert time.monotonic() < deadline, f"not filed after {timeout_s}s ({pending} pending)"
        time.sleep(0.5)


@pytest.fixture
def built_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with Memory.open(load_settings({"home": str(home)})) as mem:
        mem.ingest([TRANSCRIPT.parent])
        mem.process()
        mem.rollup(force=True)
    return home


def test_session_start_prints_context_within_budget(built_home: Path) -> None:
    proc, elapsed = _hook(
        built_home, "session-start", "--budget", "250", stdin=_payload("SessionStart")
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    text = out["additionalContext"]
    assert "project webapp" in text and "Where we left off" in text
    assert 0 < default_counter().count(text) <= 250
    assert elapsed < 10


def test_session_start_fails_open_on_a_locked_store(built_home: Path) -> None:
    holder = sqlite3.connect(built_home / "memtoc.db", isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('lock-test', '1')")
    try:
        for deadline in ("2", "0.3"):  # busy timeout (1.2 s) first, then the deadline itself
            startup = _startup_s(built_home)
            proc, elapsed = _hook(
                built_home, "session-start", "--deadline", deadline, stdin=_payload("SessionStart")
            )
            assert proc.returncode == 0 and proc.stdout == "", (proc.stdout, proc.stderr)
            # start-up (measured just before, doubled for noise) + the deadline + slack; the
            # store's own busy timeout (30 s) would blow this if the deadline were not kept
            assert elapsed < 2 * startup + float(deadline) + 1.0, (elapsed, startup)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    log = (built_home / "hooks.log").read_text()
    assert "locked" in log and "gave up after 0.3s" in log


def test_session_start_fails_open_on_missing_or_corrupt_store(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    proc, _ = _hook(missing, "session-start", stdin=_payload("SessionStart"))
    assert (proc.returncode, proc.stdout) == (0, "")
    assert not (missing / "hooks.log").exists()  # a first session logs no problem
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "memtoc.db").write_bytes(os.urandom(8192))
    for stdin in (_payload("SessionStart"), "not json at all"):
        startup = _startup_s(corrupt)
        proc, elapsed = _hook(corrupt, "session-start", stdin=stdin)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
        assert elapsed < 2 * startup + 2.0, (elapsed, startup)
    assert "StoreError" in (corrupt / "hooks.log").read_text()
    proc, _ = _hook(corrupt, "ingest", stdin=_payload("Stop", TRANSCRIPT))
    assert (proc.returncode, proc.stdout) == (0, "")


def test_watch_ingests_new_bytes_and_stops_on_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = tmp_path / "projects" / "-home-dev-webapp"
    folder.mkdir(parents=True)
    live = folder / f"{SESSION}.jsonl"
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    live.write_bytes(b"".join(lines[:8]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memtoc",
            "--home",
            str(home),
            "watch",
            str(folder.parent),
            "--interval",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:

        def stored() -> int:
            if not (home / "memtoc.db").exists():
                return 0
            try:
                with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
                    return len(mem.events())
            except StoreError:  # the watcher has created the file but not its tables yet
                return 0

        deadline = time.monotonic() + 30
        while stored() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        first = stored()
        with live.open("ab") as fh:
            fh.write(b"".join(lines[8:]))
        while stored() == first and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(15)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:  # never leave a watcher running into the next test
            proc.kill()
            proc.wait(timeout=20)
    assert 0 < first < stored()
    assert proc.returncode == 0, err
    assert "stopped" in out
    with Memory.open(load_settings({"home": str(tmp_path / "ref")})) as ref:
        ref.ingest([TRANSCRIPT])
        assert stored() == len(ref.events())


IDE_SESSION = ROOT / "tests/fixtures/claude-code-ide/-Users-dain-workspace-danieldemmel-me-next"


def test_the_ide_notice_is_not_what_the_session_asked(tmp_path: Path) -> None:
    """A real session started from VS Code: the extension's "The user opened the file … in the
    IDE" block comes before the request. Through the agent's hooks (Stop, SessionEnd, then the
    next SessionStart), the context quotes the request, not the notice; the notice is kept."""
    home = tmp_path / "home"
    transcript = next(IDE_SESSION.glob("*.jsonl"))
    payload = {"session_id": transcript.stem, "transcript_path": str(transcript),
               "cwd": "/Users/dain/workspace/danieldemmel.me-next"}  # fmt: skip
    for event, args in (("Stop", ()), ("SessionEnd", ("--process", "--wait"))):
        stdin = json.dumps({**payload, "hook_event_name": event})
        proc, _ = _hook(home, "ingest", *args, stdin=stdin)
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    start = json.dumps({**payload, "hook_event_name": "SessionStart", "source": "startup"})
    proc, _ = _hook(home, "session-start", stdin=start)
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    asked = next(line for line in text.splitlines() if line.startswith("- Asked:"))
    assert "mysterious build errors" in asked, text
    assert "ide_opened_file" not in text and "in the IDE" not in text, text
    with Memory.open(load_settings({"home": str(home)})) as mem:
        kept = [e for e in mem.events() if "ide_opened_file" in e.text]
    assert [(e.event_type, e.bookkeeping) for e in kept] == [("system", "context")]


CODEX_ROLLOUT = ROOT / "tests/fixtures/codex-real"


def test_codex_hooks_as_installed_file_the_session_into_the_toc(
    tmp_path: Path, user_home: Path
) -> None:
    """Codex has no session-end event: the hooks `memtoc hooks install codex` writes, run as
    Codex runs them (the command through a shell, the payload on stdin) on a real rollout
    written turn by turn, leave the next session a summarised latest session and its day — not
    "not yet summarised" with no table of contents, as when only Claude Code's SessionEnd
    processed."""
    home = tmp_path / "home"
    assert _cli("--home", str(home), "hooks", "install", "codex").exit_code == 0
    hooks = json.loads((user_home / ".codex" / "hooks.json").read_text())["hooks"]
    command = {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}
    rollout = next(CODEX_ROLLOUT.glob("rollout-*.jsonl"))
    lines = rollout.read_bytes().splitlines(keepends=True)
    meta = json.loads(lines[0])["payload"]
    live = user_home / ".codex" / "sessions" / rollout.name
    live.parent.mkdir(parents=True)
    payload = {"session_id": meta["id"], "transcript_path": str(live), "cwd": meta["cwd"]}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", MEMTOC_EMBEDDER="none")

    def run(event: str, **extra: object) -> str:
        stdin = json.dumps({**payload, "hook_event_name": event, **extra})
        proc = subprocess.run(command[event], shell=True, input=stdin, capture_output=True,
                              text=True, env=env, timeout=90)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    turns = [i for i, line in enumerate(lines) if b'"type":"user_message"' in line][1:3]
    written = 0
    for cut in [*turns, len(lines)]:  # two turns, then the rest
        with live.open("ab") as fh:
            fh.write(b"".join(lines[written:cut]))
        written = cut
        assert run("Stop", stop_hook_active=False) == ""
    _wait_filed(tmp_path / "home")  # Codex's Stop files the turn detached: it waits for Stop
    out = run("SessionStart", source="startup")
    text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "project agentv" in text, text
    assert "not yet summarised" not in text, text
    assert "[toc:segment:" in text and "[toc:day:" in text, text
