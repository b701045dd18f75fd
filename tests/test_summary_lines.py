"""What Claude Code writes beside the conversation, through the real hooks. Its ``summary`` lines
carry no time. A resumed session's file starts with them, and a
hook or ``memtoc watch`` can read the file before its first message is written: they were then
filed at the file's mtime — today — and the session-start context opened on a "Latest session"
of today made of week-old summaries. Through the real hooks on a real session (the summary
lines and the fixture cut from the shared claude-code-log-sample transcripts, MIT)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hook_support import run_hook
from memtoc.config import load_settings
from memtoc.ingest.sources.claude_code import SUMMARY_WAIT_S
from memtoc.memory import Memory
from memtoc.model import iso_ms

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "-Users-dain-workspace-claude-code-log-sample"
SESSION = (
    ROOT / "tests/fixtures/claude-code-real" / FOLDER / "89488521-e2e7-4d97-bc02-38197efdddc8.jsonl"
)
SUMMARIES = [  # the session file's first three lines, verbatim
    {"type": "summary", "summary": "Textual TUI Resize & Responsive Layout Fixes",
     "leafUuid": "4fd80e29-0390-4adb-8453-80ec3b20f5fa"},
    {"type": "summary", "summary": "TUI Improvements: Layout, Buttons, and Test Updates",
     "leafUuid": "3ddc463b-2085-411d-9191-715071f3d1f0"},
    {"type": "summary", "summary": "TUI Improvements: Cache Check, Messaging, and Layout Tweaks",
     "leafUuid": "95bd801c-a670-4de5-891a-587490ec3fd2"},
]  # fmt: skip
FIRST_MESSAGE = "2025-07-16T09:51:45.996Z"
ORPHAN = (  # a file of one summary line whose conversation is nowhere (its README)
    ROOT
    / "tests/fixtures/claude-code-summary-only"
    / FOLDER
    / "4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
)


def hook(home: Path, transcript: Path, *args: str, event: str) -> str:
    return run_hook(home, transcript, *args, event=event, session_id=SESSION.stem)


def test_summary_lines_read_before_any_message_wait_for_its_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    live = tmp_path / "projects" / FOLDER / SESSION.name
    live.parent.mkdir(parents=True)
    live.write_text("".join(json.dumps(s, separators=(",", ":")) + "\n" for s in SUMMARIES))
    hook(home, live, "ingest", event="PreCompact")  # the file holds the summaries alone
    with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
        assert mem.events() == []  # not filed at the file's mtime: they wait
    with live.open("a") as fh:  # the session goes on
        fh.write(SESSION.read_text())
    hook(home, live, "ingest", event="Stop")
    hook(home, live, "ingest", "--process", "--wait", event="SessionEnd")
    with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
        events = mem.events()
        summaries = [e for e in events if e.metadata.get("kind") == "summary"]
        assert sorted(e.text for e in summaries) == sorted(s["summary"] for s in SUMMARIES)
        assert {iso_ms(e.ts_ms) for e in summaries} == {FIRST_MESSAGE}
        assert {e.session_id for e in summaries} == {SESSION.stem}
        assert all(iso_ms(e.ts_ms).startswith("2025-07-16") for e in events)
    out = hook(home, live, "session-start", event="SessionStart")
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Latest session (2025-07-16" in context, context


def test_a_line_claude_code_copied_into_the_next_session_is_a_duplicate(tmp_path: Path) -> None:
    """Two real sessions started by /clear begin with the same caveat line (same uuid): the
    second session's Stop hook logged 'is stored already with another session_id' to hooks.log
    and `memtoc ingest` counted it rejected, for every such session."""
    home = tmp_path / "home"
    folder = ROOT / "tests/fixtures/claude-code-copies" / FOLDER
    for name in ("71c9afe9-d9cc-4583-86b3-e62ba682b83a", "b45ad5d8-81fb-4bcb-baba-19d9f503d731"):
        hook(home, folder / f"{name}.jsonl", "ingest", event="Stop")
    assert not (home / "hooks.log").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), MEMTOC_EMBEDDER="none")
    again = tmp_path / "again"
    proc = subprocess.run([sys.executable, "-m", "memtoc", "--home", str(again), "ingest",
                           "--json", str(folder)], capture_output=True, text=True, env=env,
                          timeout=90)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["rejected"], report["duplicates"]) == (0, 1), report


def test_a_summary_of_a_conversation_that_is_gone_waits_an_hour_then_is_skipped(
    tmp_path: Path,
) -> None:
    """The shared transcripts hold a file of one summary line whose conversation no transcript
    holds (Claude Code deletes transcripts after cleanupPeriodDays): every `memtoc ingest` said
    "waiting" about it, forever. It waits while its file may still grow, then is skipped once."""
    folder = tmp_path / "projects" / FOLDER
    shutil.copytree(ORPHAN.parent, folder, copy_function=shutil.copy)
    settings = load_settings({"home": str(tmp_path / "home"), "embedder": "none"}, environ={})
    with Memory.open(settings) as mem:
        fresh = mem.ingest([folder])
        assert (fresh.waiting, fresh.skipped, fresh.ingested) == (1, 0, 0)
        hour_ago = time.time() - SUMMARY_WAIT_S - 60
        os.utime(folder / ORPHAN.name, (hour_ago, hour_ago))
        settled = mem.ingest([folder])
        assert (settled.waiting, settled.skipped, settled.ingested) == (0, 1, 0)
        again = mem.ingest([folder])  # read once: nothing waits, nothing is read again
        assert (again.waiting, again.read, again.skipped) == (0, 0, 0)
        assert mem.events() == []
