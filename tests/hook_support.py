"""Run `memtoc hook …` as an agent does: a JSON payload on stdin, no MEMTOC_* leaking in,
offline, no embedder (the tests on real Claude Code transcripts of claude-code-log use it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLAUDE_CODE_LOG_CWD = "/Users/dain/workspace/claude-code-log"


def run_hook(
    home: Path, transcript: Path, *args: str, event: str, session_id: str | None = None
) -> str:
    """Stdout of `memtoc --home HOME hook ARGS` for ``event`` on ``transcript`` (exit 0 asserted)."""
    payload = {"session_id": session_id or transcript.stem, "transcript_path": str(transcript),
               "cwd": CLAUDE_CODE_LOG_CWD, "hook_event_name": event}  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", MEMTOC_EMBEDDER="none")
    proc = subprocess.run([sys.executable, "-m", "memtoc", "--home", str(home), "hook", *args],
                          input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=90)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
