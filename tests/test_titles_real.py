"""Titles as an agent and a user read them, on real sessions: a request addressed to the agent
is titled by what it asked ("Hey Claude, can you please add …" → "Added …"), and a title cut to
fit never ends on a dangling word or inside a code span (texts seen on the shared Codex, Gemini
CLI and Claude Code transcripts, MIT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hook_support import run_hook
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.pipeline.summarize.extractive_titles import MAX_TITLE, headline

ROOT = Path(__file__).resolve().parent.parent
SESSION = (
    ROOT / "tests/fixtures/claude-code-real/-Users-dain-workspace-claude-code-log-sample"
    / "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
)  # fmt: skip
"""'Hey Claude, can you please add a Github Action to run tests and linting? You can test it with
`act`.', the workflow written, the final answer."""


def hook(home: Path, *args: str, event: str) -> str:
    return run_hook(home, SESSION, *args, event=event)


def test_a_request_addressed_to_the_agent_is_titled_by_what_it_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook(home, "ingest", event="Stop")
    hook(home, "ingest", "--process", "--wait", event="SessionEnd")
    with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
        titles = {n.level: n.title for n in mem.store.list_nodes("claude-code-log")}
    assert titles["segment"] == "Added a Github Action to run tests and linting", titles
    assert titles["day"].startswith("Added a Github Action to run tests and linting"), titles
    out = hook(home, "session-start", event="SessionStart")
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    day = next(line for line in context.splitlines() if line.startswith("- 2025-06-14 — "))
    assert day.startswith("- 2025-06-14 — Added a Github Action to run tests and linting"), day


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        (  # a Codex command: the cut closes its code span
            'Output of `rg -n "dashboard|web UI|webui|serve|localhost|dev server|run" '
            "packages/agent-eval/src` (881 lines)",
            60,
            'Output of `rg -n "dashboard|web…`',
        ),
        (  # a Gemini CLI request cut at a word: marked, no dangling "and"/"with"
            "How can I make this possible to install as a library with uv and pip from git?",
            60,
            "How can I make this possible to install as a library…",
        ),
        (  # a commit subject as a period topic
            "docs(graders): add composite AND/OR examples for docs and code graders in the site",
            60,
            "docs(graders): add composite AND/OR examples for docs…",
        ),
        (  # "A.I.M." is no sentence end
            "[CONTEXT PULSE: 2026-03-17_2155] Mental Model: A.I.M. Platform Launch The A.I.M. "
            "(Actual Intelligent Memory) platform is now fully born",
            MAX_TITLE,
            "[CONTEXT PULSE: 2026-03-17_2155] Mental Model",
        ),
        (  # a question to the agent stays a question
            "Claude, what does _get_enhanced_session_navigation do?",
            MAX_TITLE,
            "What does _get_enhanced_session_navigation do?",
        ),
    ],
)
def test_a_cut_title_reads_as_cut(text: str, limit: int, expected: str) -> None:
    title = headline(text, limit)
    assert title == expected
    assert len(title) <= limit and title.count("`") % 2 == 0
