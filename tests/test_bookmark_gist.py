"""A bookmark carries the content of its moment (the kinds of empty bookmark seen in real
session-start contexts): a content-free cue takes what follows it or is no bookmark, a dismissal
is no decision, an agreement is labelled with what was agreed to, near-restatements merge in the
store and the session-start context shows distinct moments — through the detector, the real
pipeline on SQLite and PostgreSQL, the SessionStart hook and an MCP session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from mcp import Client

from memtoc.clock import ManualClock
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.model import Bookmark
from memtoc.retrieval.bookmark_gist import gist, substantive
from memtoc.retrieval.bookmark_terms import distinct
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.hooks.runner import HookInput, session_start
from memtoc.surfaces.mcp_server import build_server
from memtoc.text.tokens import HeuristicCounter
from test_bookmarks import detect, of_type

T0 = 1_710_000_000_000
MIN = 60_000
DAY = 86_400_000


# -- the detector -----------------------------------------------------------------------------------
def test_a_content_free_cue_takes_the_sentences_that_follow_it() -> None:
    marks = detect(
        [
            ("user", "Why does the nightly vacuum hang?"),
            ("assistant", "Now I understand the issue! The export query holds the table lock while it streams rows, so the vacuum waits on it. Let me fix that."),
            ("tool", "==== 9 passed in 0.20s ===="),
            ("assistant", "Fixed: the export now streams from a snapshot, so it holds no table lock. All 9 tests pass."),
        ]
    )  # fmt: skip
    (b,) = of_type(marks, "resolution")
    assert b.content.startswith("The export query holds the table lock while it streams rows")
    assert "snapshot" in b.content  # what the fix was, not "All 9 tests pass"
    assert "understand" not in b.content and "9 tests" not in b.content


def test_a_content_free_cue_with_nothing_after_it_is_no_bookmark() -> None:
    for said in (
        "Now I understand the full picture. Let me look at the template next.",
        "I see the issue now.",
        "Found it at line 1911. Let me look at the context around that line.",
        "Found it in pkg/cmd/reindex.go. Let me read it.",
        "I will investigate the hook configuration and identify the root cause of the failure.",
        "I'm doing one final pass and then I'll summarize the root cause and the patch.",
    ):
        assert detect([("user", "Why is the archive empty?"), ("assistant", said)]) == [], said


def test_a_question_without_its_mark_or_a_lead_in_is_no_moment() -> None:
    for turns in (
        [("assistant", "Done. Wrote the file."), ("user", "was there supposed to be a file write here")],
        [("user", "Why is it slow?"), ("assistant", "Found the bug. The current order at lines 533-581 is:")],
    ):  # fmt: skip
        assert detect(turns) == [], turns


def test_a_dismissal_or_thanks_is_no_decision_or_agreement() -> None:
    assert detect(
        [
            ("assistant", "A Web Worker would keep the page responsive, but it needs a fourth file."),
            ("user", "Never mind! But I'd like you to add a details element with usage notes."),
            ("assistant", "I'll add the details element."),
        ]
    ) == []  # fmt: skip
    assert detect(
        [
            ("assistant", "The export is fixed. Would you like me to also add a retry with backoff?"),
            ("user", "ok thanks"),
        ]
    ) == []  # fmt: skip


def test_an_agreement_is_labelled_with_what_was_agreed() -> None:
    offer = (
        "Here are a few options:\n\n1. **Vite** (modern, fast dev server)\n"
        "2. **http-server** (zero config)\n3. **Python http.server** (no install)\n\nWhich one?"
    )
    (b,) = detect([("assistant", offer), ("user", "ok, fine, let's do vite")])
    assert b.type == "conclusion" and b.content.startswith("Vite (modern, fast dev server)")
    (b,) = detect([("assistant", offer), ("user", "2")])
    assert b.content == "Http-server (zero config)"  # the option picked, no "— 2" echo
    (b,) = detect(
        [
            ("assistant", "The path issue is fixed. Should I refine the glob logic now, or are you satisfied with the manual fix?"),
            ("user", "yes, refine and clean up the logic"),
        ]
    )  # fmt: skip
    assert b.content == "Refine the glob logic now"
    (b,) = detect(
        [
            ("assistant", "The dev server runs. ScriptProcessor is deprecated. Would you like to tackle these API updates next?"),
            ("user", "yes please, and let's make it cross-browser"),
        ]
    )  # fmt: skip
    assert b.content == "Tackle these API updates next — let's make it cross-browser"
    # a proposal that only points ("make that change") is labelled with what it points at
    (b,) = detect(
        [
            ("assistant", "Recommended fix: delete logging.go and call slog directly everywhere. Want me to make that change?"),
            ("user", "yup"),
        ]
    )  # fmt: skip
    assert b.content == "Delete logging.go and call slog directly everywhere"
    assert detect([("assistant", "Builds clean. Want to test it out?"), ("user", "yes")]) == []


def test_permission_for_a_version_control_step_is_no_agreement() -> None:
    assert detect(
        [
            ("assistant", "Deleted the stale branch; main is 1 commit behind. Would you like me to run a git pull to fast-forward main now?"),
            ("user", "yes"),
        ]
    ) == []  # fmt: skip


def test_a_concession_keeps_the_right_version_not_fillers_or_self_talk() -> None:
    marks = detect(
        [
            ("user", "Why is ExpandTilde exported? I thought our plan was NOT to export it?"),
            ("assistant", "You're right, and it's the right call. I should have checked the plan first. ExpandTilde is only called by resolvePath() in the same package."),
        ]
    )  # fmt: skip
    (b,) = of_type(marks, "resolution")
    assert b.content == "ExpandTilde is only called by resolvePath() in the same package."


def test_a_concession_keeps_the_corrected_plan_when_it_names_what() -> None:
    marks = detect(
        [
            ("user", "We need a cleaner way to reinstall without hunting for cached files. Does this doc page help?"),
            ("assistant", "You're absolutely right! The docs show a much cleaner approach. Let me use `uv tool upgrade --reinstall` which forces a rebuild from source:"),
        ]
    )  # fmt: skip
    (b,) = of_type(marks, "resolution")
    assert "Use uv tool upgrade --reinstall which forces a rebuild from source" in b.content
    # "Let me add tests for X" is a next step, not the right version
    assert detect([("user", "suspect some tests would be good, no?"), ("assistant", "You're right. Let me add tests for the new AskUser parsing functions.")]) == []  # fmt: skip


def test_the_fix_line_is_the_one_about_the_cause() -> None:
    marks = detect(
        [
            ("user", "I don't think we need to loop through all items, the group names should match the filters?"),
            ("assistant", "You're absolutely right! I can check the filter state of each group instead of looping through items."),
            ("assistant", "Done! Both fixes are complete:\n\n1. **Timeline filtering** now hides the whole group when its filter is off.\n2. **Fixed colour mismatch**: the sidechain header is orange like its items."),
        ]
    )  # fmt: skip
    (b,) = of_type(marks, "resolution")
    assert "hides the whole group when its filter is off" in b.content
    assert "colour" not in b.content


def test_gist_reads_past_announcements_lead_ins_and_status() -> None:
    said = [
        "I see the issue.",
        "Here's what's happening:",
        "All 1216 tests pass.",
        "The tab indicator width is only recalculated when the active tab changes.",
    ]
    assert gist(said, 0) == [said[3]]
    assert gist(["Yes, but with a specific meaning."], 0) == []
    assert not substantive("Now I understand the full picture.")
    assert substantive("Let's go with Vite.") is False  # a decision, not an agent statement
    assert substantive("The cache key ignores the tenant id.")


# -- the store and the session-start context ---------------------------------------------------------
SESSION = [
    ("user", "The staging export keeps timing out after the upgrade."),
    ("assistant", "Now I understand the full picture. Let me check the export query."),
    ("tool", "FAILED tests/test_export.py::test_nightly - TimeoutError\n1 failed"),
    ("assistant", "Found the bug. The export query holds the table lock while it streams rows, so the vacuum waits on it."),
    ("tool", "==== 12 passed in 0.40s ===="),
    ("assistant", "Fixed: the export now streams from a snapshot instead of holding the table lock. All 12 tests pass."),
    ("user", "Never mind the dashboard then! We don't want the export to run during business hours, only at night."),
    ("assistant", "Understood: the export runs only at night."),
    ("session_end", "Session ended"),
]  # fmt: skip


def build(store: Any, clock: ManualClock) -> Memory:
    memory = Memory(store, clock=clock, tz=ZoneInfo("UTC"), counter=HeuristicCounter())
    records = [
        {
            "session_id": "s1",
            "timestamp": T0 + n * MIN,
            "role": {"session_end": "system"}.get(role, role),
            "event_type": {"session_end": "session_end", "tool": "tool_result"}.get(
                role, f"{role}_message"
            ),
            "text": text,
        }
        for n, (role, text) in enumerate(SESSION)
    ]
    memory.ingest_records(records, project="p")
    memory.process()
    return memory


def check_the_context(memory: Memory) -> None:
    marks = memory.store.list_bookmarks("p")
    contents = [b.content for b in marks]
    assert all("full picture" not in c and "Never mind" not in c for c in contents), contents
    assert any(c.startswith("The export query holds the table lock") for c in contents), contents
    assert any("only at night" in c for c in contents), contents
    shown = bookmark_lines(memory.context("p", budget=2000).text)
    assert any("The export query holds the table lock" in line for line in shown), shown
    assert any("only at night" in line for line in shown), shown
    assert not any("full picture" in line or "Never mind" in line for line in shown), shown


def bookmark_lines(text: str) -> list[str]:
    """The lines of the context's bookmarks section."""
    _, _, rest = text.partition("## Bookmarks\n")
    return [line for line in rest.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_pipeline_keeps_content_bearing_bookmarks(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = ManualClock(T0 + DAY)
    if backend == "postgres":
        from memtoc.store.postgres import PostgresStore

        store: Any = PostgresStore(request.getfixturevalue("pg_url"), clock=clock, pool_size=2)
    else:
        store = SqliteStore(tmp_path / "m.db", clock=clock)
    memory = build(store, clock)
    try:
        check_the_context(memory)
        # a restatement that says nothing the stored cause does not merges into it
        (cause,) = [b for b in memory.store.list_bookmarks("p") if b.type == "resolution"]
        again = Bookmark("bm:again", "p", "The export query holds the table lock.", ("x",),
                         0.8, "resolution", cause.created_ms + MIN, cause.created_ms + MIN)  # fmt: skip
        with memory.store.transaction():
            memory.bookmark_step.merge("p", [again])
        kinds = [b.bookmark_id for b in memory.store.list_bookmarks("p") if b.type == "resolution"]
        assert kinds == ["bm:again"]  # the newer wins, the older is gone
    finally:
        memory.close()


def mark(n: int, content: str, importance: float, events: tuple[str, ...]) -> Bookmark:
    return Bookmark(f"bm{n}", "p", content, events, importance, "resolution", T0, T0)


def test_the_context_shows_distinct_moments(tmp_path: Path) -> None:
    clock = ManualClock(T0 + DAY)
    memory = Memory(SqliteStore(tmp_path / "d.db", clock=clock), clock=clock,
                    tz=ZoneInfo("UTC"), counter=HeuristicCounter())  # fmt: skip
    marks = [
        mark(0, "The tab indicator width is only recalculated when the active tab changes.", 0.9, ("e0", "e1")),
        mark(1, "The tab indicator width is calculated once, when the active tab changes.", 0.85, ("e2",)),
        mark(2, "Retry 8 times with jitter.", 0.8, ("e3",)),
        mark(3, "Retry 5 times with jitter.", 0.75, ("e4",)),
        mark(4, "The cache key ignores the tenant id.", 0.7, ("e1", "e5", "e6")),
    ]  # fmt: skip
    for b in marks:
        memory.store.put_bookmark(b)
    shown = [i.ref for i in memory.context("p", budget=3000).items if i.section == "bookmark"]
    # bm1 restates bm0; bm3 is another decision (its number differs); bm4 shares one of bm0's
    # two events, not more than half: another moment
    assert shown == ["bm0", "bm2", "bm3", "bm4"]
    assert [b.bookmark_id for b in distinct(marks, 2)] == ["bm0", "bm2"]
    memory.close()


def test_the_session_start_hook_and_mcp_show_what_was_decided(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    clock = ManualClock(T0 + DAY)
    build(SqliteStore(home / "memtoc.db", clock=clock), clock).close()
    settings = load_settings({"home": str(home), "project": "p"}, environ={})
    out = session_start(settings, HookInput(event="SessionStart", cwd=str(tmp_path)))
    shown = bookmark_lines(json.loads(out)["hookSpecificOutput"]["additionalContext"])
    assert any("[resolution] The export query holds the table lock" in x for x in shown), shown
    assert any("only at night" in line for line in shown), shown
    assert not any("full picture" in line or "Never mind" in line for line in shown), shown

    memory = Memory(SqliteStore(home / "memtoc.db", clock=clock), clock=clock,
                    tz=ZoneInfo("UTC"), counter=HeuristicCounter())  # fmt: skip

    async def call() -> str:
        async with Client(build_server(memory)) as client:
            result = await client.call_tool("memory_context", {"project": "p", "budget": 2000})
            assert not result.is_error, result
            return "\n".join(getattr(c, "text", "") for c in result.content)

    shown = bookmark_lines(anyio.run(call))
    memory.close()
    assert any("[resolution] The export query holds the table lock" in x for x in shown), shown
    assert not any("full picture" in line or "Never mind" in line for line in shown), shown
