"""An agent's bookkeeping is kept but never becomes a title, a bullet, a bookmark or the
session-start context: checked on the built TOC, bookmarks and context of real Claude Code
transcripts (tests/fixtures/claude-code-real, MIT) — Warmup prompts, local-command caveats,
command wrappers, ANSI codes, hook notices and a login notice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memtoc.config import load_settings
from memtoc.ingest.sources.bookkeeping import classify_user_text, strip_ansi
from memtoc.memory import Memory
from memtoc.model import Event, TocNode
from memtoc.surfaces.hooks import runner

REAL = Path(__file__).resolve().parent / "fixtures" / "claude-code-real"
BLOG = REAL / "-Users-dain-workspace-danieldemmel-me-next"
SESSION = "4379d1bf-ccb1-414e-a856-9791b73f3af2"
REFUSAL = (
    Path(__file__).resolve().parent
    / "fixtures"
    / "claude-code-refusal"
    / "-Users-dain-workspace-JSSoundRecorder"
)
SUBAGENTS = REAL / "-experiments-worktrees" / "ef958aa1-0e93-49f0-bb71-150f63befcd1" / "subagents"
NOISE = (
    "Warmup",
    "Caveat",
    "command-name",
    "local-command",
    "\x1b",
    "[22m",
    "[1m",
    "mPostToolUse",
    "Running PostToolUse",
    "Please run /login",
    "Not logged in",
    "Request interrupted",
    "ready to help you search",
)
LOGIN = {
    "type": "assistant",
    "uuid": "5b0c1d2e-3f40-4a51-8b62-7c83d94ea0b1",
    "parentUuid": "a9f1c5f4-6d0e-4c8e-9f6b-2b8a7d1e0c11",
    "isSidechain": False,
    "userType": "external",
    "cwd": "/Users/dain/workspace/danieldemmel.me-next",
    "sessionId": SESSION,
    "version": "2.1.3",
    "gitBranch": "main",
    "timestamp": "2025-09-29T19:40:00.000Z",
    "isApiErrorMessage": True,
    "message": {
        "id": "a1b2c3d4-0000-4000-8000-000000000001",
        "model": "<synthetic>",
        "role": "assistant",
        "type": "message",
        "content": [{"type": "text", "text": "Not logged in · Please run /login"}],
    },
}
"""What Claude Code writes when an API call fails for want of a login (its documented shape; no
real transcript in the fixtures has one)."""
EXIT = {
    "parentUuid": "5b0c1d2e-3f40-4a51-8b62-7c83d94ea0b1",
    "isSidechain": False,
    "userType": "external",
    "cwd": "/Users/dain/workspace/danieldemmel.me-next",
    "sessionId": SESSION,
    "version": "2.1.3",
    "gitBranch": "main",
    "type": "user",
    "message": {
        "role": "user",
        "content": "<command-name>/exit</command-name>\n            <command-message>exit"
        "</command-message>\n            <command-args></command-args>",
    },
    "uuid": "8b5a6508-dc77-49c6-a13d-239d5a7c69b2",
    "timestamp": "2025-09-29T21:10:00.000Z",
}
"""The ``/exit`` a session typically ends with, an hour later (a segment of its own): the shape of
a real one (``-experiments-worktrees`` in the shared transcripts), placed in this session."""


def _noisy(text: str) -> list[str]:
    return [n for n in NOISE if n in text]


@pytest.fixture
def built(tmp_path: Path) -> Memory:
    folder = tmp_path / "projects" / BLOG.name
    shutil.copytree(BLOG, folder)
    with (folder / f"{SESSION}.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(LOGIN) + "\n")
        fh.write(json.dumps(EXIT) + "\n")
    shutil.copytree(REAL / "-Users-dain-workspace-claude-code-log-sample",
                    tmp_path / "projects" / "-Users-dain-workspace-claude-code-log-sample")  # fmt: skip
    mem = Memory.open(load_settings({"home": str(tmp_path / "home")}))
    report = mem.ingest([tmp_path / "projects"])
    assert report.rejected == 0 and report.unusable == []
    mem.process()
    mem.rollup(force=True)
    mem.refresh_bookmarks()
    return mem


def _nodes(mem: Memory, project: str) -> list[TocNode]:
    """Every node of the project's TOC: segments, days, weeks, months, years."""
    return mem.store.list_nodes(project)


def test_bookkeeping_never_reaches_titles_bullets_bookmarks_or_context(built: Memory) -> None:
    mem = built
    blog = next(p for p in mem.store.projects() if "danieldemmel" in p)
    for project in mem.store.projects():
        nodes = _nodes(mem, project)
        assert nodes
        assert {n.level for n in nodes} >= {"segment", "day", "year"}
        for node in nodes:
            shown = " ".join(
                [node.title, node.abstract, node.overview, *node.keywords]
                + [b.text for b in node.bullets]
            )
            assert not _noisy(shown), (node.node_id, shown)
        for mark in mem.bookmarks(project):
            assert not _noisy(mark.content), mark
        view = mem.context(project)
        assert view.text and not _noisy(view.text), view.text
        # nor a node that holds bookkeeping alone (a day of warm-ups, the /exit segment)
        assert not [n for n in ("Agent bookkeeping", "warm-up", "Local command") if n in view.text]
    # where we left off is the user's real request, not the /model wrapper, its ANSI output, the
    # warm-up prompt of a later sub-agent or the login notice that came last
    view = mem.context(blog)
    assert "margin-bottom to the details element" in view.text, view.text
    latest = next(line for line in view.text.splitlines() if line.startswith("- Latest session"))
    cited = latest.rsplit("[", 1)[1].rstrip("]")  # the work's segment, not the /exit after it
    assert "margin-bottom" in mem.node(cited, project=blog).node.title, latest
    mem.close()


def test_nothing_is_lost_each_class_is_kept_and_marked(built: Memory) -> None:
    events = built.events()
    kept = {(e.bookkeeping, e.text) for e in events if e.bookkeeping}
    assert ("caveat", "Caveat: The messages below were generated by the user while running "
            "local commands. DO NOT respond to these messages or otherwise consider them in "
            "your response unless the user explicitly asks you to.") in kept  # fmt: skip
    assert ("command", "/clear") in kept and ("command", "/model") in kept
    assert ("command", "/exit") in kept
    assert ("command_output", "Kept model as opusplan") in kept  # ANSI stripped, text kept
    assert ("warmup", "Warmup") in kept
    assert ("notice", "Not logged in · Please run /login") in kept
    assert any(k == "hook" and t.startswith("Running PostToolUse:") for k, t in kept)
    assert all(e.event_type == "system" for e in events if e.bookkeeping)
    assert not [e for e in events if "\x1b" in e.text]
    request = [e for e in events if e.event_type == "user_message" and e.session_id == SESSION]
    assert [e.text for e in request] == [
        "[image]",
        "[Image #1] Can you please add margin-bottom to the details element when it's not open?",
    ]
    built.close()


def test_a_command_typed_with_arguments_stays_a_request() -> None:
    found = classify_user_text(
        "<command-name>/plan</command-name>\n<command-message>plan</command-message>\n"
        "<command-args>Fix the grid columns of the diff viewer</command-args>"
    )
    assert (found.kind, found.text) == (None, "/plan Fix the grid columns of the diff viewer")
    assert strip_ansi("Running \x1b[1mPostToolUse:Edit\x1b[22m...") == "Running PostToolUse:Edit..."


def test_subagent_transcript_is_its_own_session_linked_to_its_parent(tmp_path: Path) -> None:
    with Memory.open(load_settings({"home": str(tmp_path / "home")})) as mem:
        report = mem.ingest([SUBAGENTS])
        assert report.rejected == 0 and report.files == 2  # the sidecar is read, not rejected
        events = mem.events()
    parent = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    assert {e.session_id for e in events} == {f"{parent}/agent-a36efb2a1231c41e2"}
    meta = events[0].metadata
    assert meta["parent_session_id"] == parent and meta["agent_id"] == "a36efb2a1231c41e2"
    assert (meta["agent_type"], meta["agent_description"]) == (
        "general-purpose",
        "Round 2: alice comparison",
    )


def test_subagent_stop_hook_captures_the_agent_transcript(tmp_path: Path) -> None:
    """Claude Code's SubagentStop names the sub-agent's own transcript (agent_transcript_path)
    beside its parent's: both are imported."""
    settings = load_settings({"home": str(tmp_path / "home")})
    parent = BLOG / f"{SESSION}.jsonl"
    agent = BLOG / "agent-c63fe96c.jsonl"
    hook = runner.HookInput.parse(
        json.dumps(
            {
                "session_id": SESSION,
                "transcript_path": str(parent),
                "cwd": "/Users/dain/x",
                "hook_event_name": "SubagentStop",
                "agent_id": "c63fe96c",
                "agent_transcript_path": str(agent),
                "stop_hook_active": False,
            }
        )
    )
    outcome = runner.ingest(settings, hook)
    assert outcome is not None and outcome.rejected == 0
    with Memory.open(settings) as mem:
        sessions = {e.session_id for e in mem.events()}
    assert sessions == {SESSION, "5ed31c36-bca8-40fd-8d24-f1a1f0af7901/agent-c63fe96c"}
    assert not (settings.home / "hooks.log").exists()


def test_a_warm_up_reply_saved_without_its_prompt_is_bookkeeping(tmp_path: Path) -> None:
    """Claude Code 2.0 saves a sub-agent's warm-up reply alone ("I'm ready to help you explore
    the JSSoundRecorder codebase…", a finished reply that nothing asked for): a warm-up, never a
    day's summary. A real sub-agent whose prompt is missing too keeps its replies."""
    ide = Path(__file__).resolve().parent / "fixtures" / "claude-code-ide"
    with Memory.open(load_settings({"home": str(tmp_path / "home")})) as mem:
        report = mem.ingest(
            [ide / "-Users-dain-workspace-JSSoundRecorder", ide / "-src-deep-manifest"]
        )
        assert report.rejected == 0
        mem.process()
        by_session: dict[str, Event] = {}
        for e in mem.events():  # each sub-agent session's first event
            by_session.setdefault(e.session_id.rsplit("/", 1)[-1], e)
        warm, work = by_session["agent-650d3273"], by_session["agent-c8d9b115"]
        assert (warm.event_type, warm.bookkeeping) == ("system", "warmup")
        assert warm.text.startswith("Greetings! I'm Claude Code")  # kept, whole
        assert (work.event_type, work.bookkeeping) == ("assistant_message", None)
        recorder = next(p for p in mem.store.projects() if "JSSoundRecorder" in p)
        assert "ready to help" not in mem.context(recorder).text


def test_a_warm_up_reply_saved_unfinished_and_alone_is_bookkeeping(tmp_path: Path) -> None:
    """Claude Code 2.0.55 saved warm-up replies with stop_reason null, one line to a file: the
    coderabbit-review-helper project's day of 2025-11-27 was titled "I'm in read-only mode and
    will use my file search…" in the session-start context. Through the hooks as Claude Code
    runs them (SubagentStop for each, then SessionEnd)."""
    settings = load_settings({"home": str(tmp_path / "home"), "embedder": "none"})
    folder = Path(__file__).resolve().parent / "fixtures" / "claude-code-ide"
    folder /= "-Users-dain-workspace-coderabbit-review-helper"
    cwd = "/Users/dain/workspace/coderabbit-review-helper"
    for agent, parent in (("5e37fdd5", "4227a68e-2b1f-4923-b824-6e04a67f77c1"),
                          ("1674bc8c", "5b97e2d4-d624-4af2-9fb8-7fc02540282a")):  # fmt: skip
        payload = {"session_id": parent, "transcript_path": str(folder / f"{parent}.jsonl"),
                   "cwd": cwd, "agent_id": agent, "stop_hook_active": False,
                   "agent_transcript_path": str(folder / f"agent-{agent}.jsonl")}  # fmt: skip
        for event, process in (("SubagentStop", False), ("SessionEnd", True)):
            hook = runner.HookInput.parse(json.dumps({**payload, "hook_event_name": event}))
            outcome = runner.ingest(settings, hook, process=process)
            assert outcome is not None and outcome.rejected == 0
    with Memory.open(settings) as mem:
        kept = mem.events()
        assert len(kept) == 2 and {e.bookkeeping for e in kept} == {"warmup"}  # kept, marked
    start = runner.HookInput.parse(json.dumps({"hook_event_name": "SessionStart", "cwd": cwd}))
    context = runner.session_start(settings, start, deadline_s=60)
    assert "read-only mode" not in context and "ready to help" not in context, context


def test_a_refused_calls_reason_is_the_users_turn(tmp_path: Path) -> None:
    # Claude Code keeps the reason a user typed when refusing a tool call inside the call's
    # result ("… The user provided the following reason for the rejection:  use pnpm"): the
    # user's correction becomes a turn of theirs, after the result, which is kept whole
    with Memory.open(load_settings({"home": str(tmp_path / "home")})) as mem:
        report = mem.ingest([REFUSAL])
        assert report.rejected == 0
        events = mem.events()
        assert [(e.event_type, e.role) for e in events] == [
            ("tool_call", "assistant"),
            ("tool_result", "tool"),
            ("user_message", "user"),
        ]
        call, result, reason = events
        assert reason.text == "use pnpm" and reason.metadata["kind"] == "rejection_reason"
        assert reason.metadata["tool_use_id"] == call.metadata["tool_use_id"]
        assert result.text.endswith("reason for the rejection:  use pnpm")
        # read again: nothing stored twice
        assert mem.ingest([REFUSAL], rescan=True).ingested == 0
        # a refusal without a reason stays the tool's result alone
        from memtoc.ingest.sources.claude_code import rejection_reason

        assert rejection_reason(result.text) == "use pnpm"
        assert rejection_reason("The user doesn't want to proceed with this tool use.") is None
