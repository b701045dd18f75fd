"""Summaries worth reading on coding sessions: tool results read by what they showed, titles that
say what was done, no ``(empty)`` node, keywords people search for, L0 near 100 tokens, and
periods that synthesise their children's threads instead of repeating them. Unit tests on
events shaped like the importers' (Claude Code, SpecStory), then the whole pipeline on the real
Claude Code fixtures (claude-code-log, MIT) and the SpecStory fixtures (getspecstory, Apache-2.0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.model import Event, Summary
from memtoc.pipeline.grips import segment_grips
from memtoc.pipeline.summarize.extractive import (
    BOOKKEEPING_TITLES,
    EMPTY_TITLE,
    ExtractiveSummarizer,
    bookkeeping_summary,
)
from memtoc.pipeline.summarize.extractive_titles import past_tense
from memtoc.pipeline.summarize.tool_calls import commit_body, commit_message, render_tool_call
from memtoc.pipeline.summarize.tool_results import describe_result, output_fact
from memtoc.pipeline.summarize.tool_work import edit_names
from memtoc.text.tokens import TiktokenCounter

COUNTER = TiktokenCounter()
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def ev(i: int, etype: str, role: str, text: str, **meta: object) -> Event:
    return Event(f"01HX{i:022d}", "s1", "p", "claude-code", 1_770_000_000_000 + i * 1000, etype,
                 role, text, meta)  # fmt: skip


def kinds(result: Event, call: Event | None = None) -> list[tuple[str, str]]:
    action = render_tool_call(call.text, call.metadata) if call is not None else None
    return [(f.kind, f.text) for f in describe_result(result, action)]


def test_test_tallies_in_every_runners_words() -> None:
    bash = ev(0, "tool_call", "assistant", 'Bash {"command":"bun test"}', tool_name="Bash")
    bun = ev(1, "tool_result", "tool", "src/a.test.ts:\n✓ works\n\n 1216 pass\n 0 fail\n"
             "Ran 1216 tests across 57 files. [3.2s]", is_error=False)  # fmt: skip
    assert kinds(bun, bash) == [("tests", "Tests: 1216 passed, 0 failed")]
    jest = ev(1, "tool_result", "tool", "Tests:       3 failed, 10 passed, 13 total")
    assert kinds(jest, bash)[0] == ("tests", "Tests: 3 failed, 10 passed, 13 total")
    go = ev(1, "tool_result", "tool", "--- FAIL: TestSync (0.01s)\nFAIL\tgithub.com/x/sync\t0.3s\n"
            "ok  \tgithub.com/x/cloud\t0.2s\n")  # fmt: skip
    assert kinds(go, bash)[0] == ("tests", "Go tests: 1 packages ok, 1 failed (TestSync)")
    pytest_out = ev(1, "tool_result", "tool", "FAILED tests/test_a.py::test_x - KeyError: 'k'\n"
                    "1 failed, 11 passed in 0.4s")  # fmt: skip
    assert kinds(pytest_out, bash) == [
        ("tests", "Tests: 1 failed, 11 passed (test_x)"),
        ("error", "Error: KeyError: 'k' in `test_x`"),
    ]
    cargo = ev(1, "tool_result", "tool", "test result: ok. 5 passed; 0 failed; 0 ignored")
    assert kinds(cargo, bash) == [("tests", "Tests: 5 passed, 0 failed")]
    # a wrapper's own "ok ✓" is no Go package passing (it once read as "Go tests: 2 packages ok")
    wrapped = ev(1, "tool_result", "tool", "ok ✓ 1 file changed, 55 insertions(+)\nok ✓")
    assert [k for k, _ in kinds(wrapped, bash)] == ["changed"]


def test_commits_and_files_changed() -> None:
    command = "git add -A && git commit -m \"$(cat <<'EOF'\nFix diff viewer layout with CSS Grid\n\nMore\nEOF\n)\""  # fmt: skip
    assert commit_message(command) == "Fix diff viewer layout with CSS Grid"
    call = ev(0, "tool_call", "assistant", json.dumps({"command": command}), tool_name="Bash")
    action = render_tool_call(call.text, call.metadata)
    assert action is not None and action.text == "Committed: Fix diff viewer layout with CSS Grid"
    out = ev(1, "tool_result", "tool", "[main b567018] Fix diff viewer layout with CSS Grid\n"
             " 2 files changed, 12 insertions(+), 4 deletions(-)\n", is_error=False)  # fmt: skip
    assert kinds(out, call) == [("commit", "Committed b567018: Fix diff viewer layout with CSS "
                                 "Grid (2 files changed, 12 insertions(+), 4 deletions(-))")]  # fmt: skip


def test_linters_and_type_checkers_in_words() -> None:
    lint = ev(0, "tool_call", "assistant", 'Bash {"command":"bun run lint:fix"}', tool_name="Bash")
    biome = ev(1, "tool_result", "tool", "$ biome check --write\nChecked 272 files in 211ms. "
               "Fixed 2 files.", is_error=False)  # fmt: skip
    assert kinds(biome, lint) == [("checks", "Lint (biome): 272 files checked, 2 files fixed")]
    failing = ev(1, "tool_result", "tool", "Checked 272 files in 131ms. No fixes applied.\n"
                 "Found 2 errors.\nerror: script \"lint\" exited with code 1", is_error=True)  # fmt: skip
    assert kinds(failing, lint)[0] == ("checks", "Lint: 272 files checked, 2 errors")
    ruff = ev(0, "tool_call", "assistant", 'Bash {"command":"ruff check src"}', tool_name="Bash")
    clean = ev(1, "tool_result", "tool", "All checks passed!\n", is_error=False)
    assert kinds(clean, ruff) == [("checks", "Lint (ruff): all checks passed")]
    mypy = ev(1, "tool_result", "tool", "Success: no issues found in 224 source files\n")
    assert kinds(mypy, ruff) == [("checks", "Type check (mypy): no issues in 224 files")]
    eslint = ev(1, "tool_result", "tool", "\n✖ 3 problems (1 error, 2 warnings)\n")
    assert kinds(eslint, lint)[0] == ("checks", "Lint: 3 problems (1 error, 2 warnings)")
    # the last run of a segment is its outcome: a fix then a clean run says "no issues"
    again = ev(3, "tool_result", "tool", "$ biome check\nChecked 272 files in 99ms. No fixes "
               "applied.", is_error=False)  # fmt: skip
    ask = ev(4, "user_message", "user", "Please fix the lint errors in the remediation tab.")
    s = ExtractiveSummarizer(COUNTER).summarize_events([ask, lint, failing, lint, again])
    said = " ".join([s.abstract, *s.bullets, s.overview])
    assert "Lint (biome): 272 files checked, no issues" in said and "2 errors" not in said


def test_a_commit_body_says_what_changed_and_why() -> None:
    command = ("git add a.tsx && git commit -m \"$(cat <<'EOF'\nFix dead-end state when remediation "
               "fails\n\nWhen a remediation failed, users were stuck: the config phase had no\n"
               "delete button. Failed remediations are now detected on mount.\n\n"
               "Co-Authored-By: Claude <noreply@anthropic.com>\nEOF\n)\"")  # fmt: skip
    assert commit_body(command) == (
        "When a remediation failed, users were stuck: the config phase had no delete button. "
        "Failed remediations are now detected on mount."
    )
    assert commit_body('git commit -m "Subject" -m "Why it changed."') == "Why it changed."
    assert commit_body('git commit -m "Subject only"') == ""
    assert commit_body('git commit -m "Subject" && git tag -m "v1" v1') == ""  # not its message
    call = ev(0, "tool_call", "assistant", json.dumps({"command": command}), tool_name="Bash")
    asked = ev(1, "user_message", "user", "Commit the fix for the stuck remediation please.")
    s = ExtractiveSummarizer(COUNTER).summarize_events([asked, call])
    said = " ".join([s.abstract, *s.bullets])
    assert "users were stuck" in said and "Co-Authored" not in s.overview
    # the L0 does not say the title again ("Committed: <the title>")
    assert s.abstract.count("Fix dead-end state") <= 1


def test_reads_and_succeeded_commands_show_no_error() -> None:
    read = ev(0, "tool_call", "assistant", '{"file_path":"/w/src/engine.ts"}', tool_name="Read",
              cwd="/w")  # fmt: skip
    code = "\n".join(f"  {n}→ throw new Error(`failed: ${{x}}`)" for n in range(1, 40))
    result = ev(1, "tool_result", "tool", "     1→export function runRemediation() {\n" + code)
    assert kinds(result, read) == []  # code that mentions an error is not an error
    assert output_fact(result, render_tool_call(read.text, read.metadata)).text == (
        "Read `src/engine.ts` (40 lines): defines runRemediation"
    )
    bash = ev(
        2, "tool_call", "assistant", '{"command":"bun test src/db.test.ts"}', tool_name="Bash"
    )
    logged = ev(3, "tool_result", "tool", "error: Database connection failed (expected)\n 3 pass\n",
                is_error=False)  # fmt: skip
    assert kinds(logged, bash) == [("tests", "Tests: 3 passed, 0 failed")]
    failed = ev(3, "tool_result", "tool", "error: Database connection failed\n", is_error=True)
    assert kinds(failed, bash) == [("error", "Error: Database connection failed")]  # said once
    edit = ev(4, "tool_call", "assistant", '{"file_path":"a.ts","old_string":"x","new_string":"y"}',
              tool_name="Edit")  # fmt: skip
    refused = ev(5, "tool_result", "tool", "<tool_use_error>String to replace not found in file."
                 "</tool_use_error>", is_error=True)  # fmt: skip
    assert kinds(refused, edit) == [
        ("tool_error", "Edit of `a.ts` failed: String to replace not found in file.")
    ]


def test_specstory_tool_calls_in_words() -> None:
    shell = render_tool_call("Bash\nBuild specstory binary\n\n`go build -o specstory`",
                             {"tool_name": "Bash", "tool_type": "shell"})  # fmt: skip
    assert shell is not None and (shell.text, shell.note) == (
        "Ran `go build -o specstory` (build specstory binary)",  # what it was for, beside it
        "Build specstory binary",
    )
    grep = render_tool_call("Grep\npath `./` pattern `providers/gemini`", {"tool_name": "Grep"})
    assert grep is not None and grep.text == "Searched for `providers/gemini`"
    patch = render_tool_call("apply_patch\n**Update: `docs/x.md`**\n", {"tool_name": "apply_patch"})
    assert patch is not None and patch.text == "Edited `docs/x.md`"
    plan = render_tool_call('ExitPlanMode {"plan":"# Plan: Fix the loader\\n\\nSteps"}',
                            {"tool_name": "ExitPlanMode"})  # fmt: skip
    assert plan is not None and plan.text == "Proposed plan: Fix the loader"


@pytest.mark.parametrize(
    ("phrase", "past"),
    [("Fix the layout", "Fixed the layout"), ("Add a button", "Added a button"),
     ("Make it faster", "Made it faster"), ("Stop the loop", "Stopped the loop"),
     ("Commit the work", "Committed the work"), ("Update docs", "Updated docs"),
     ("Apply the patch", "Applied the patch"), ("The loader crashes", "The loader crashes")],
)  # fmt: skip
def test_past_tense(phrase: str, past: str) -> None:
    assert past_tense(phrase) == past


def session() -> list[Event]:
    plan = ("Implement the following plan:\n\n# Plan: Fix impact evaluation re-cloning the "
            "repository\n\n## Context\nThe engine clones a fresh repo even when a patched local "
            "directory exists.")  # fmt: skip
    rows = [
        ("user_message", "user", plan, {}),
        ("assistant_message", "assistant", "Let me read the engine first.", {}),
        ("tool_call", "assistant", '{"file_path":"/w/src/engine.ts"}',
         {"tool_name": "Read", "tool_use_id": "t1", "cwd": "/w"}),
        ("tool_result", "tool", "     1→export function runImpact() {}", {"tool_use_id": "t1"}),
        ("assistant_message", "assistant", "Root cause: the engine prefers `repositoryUrl` over "
         "`localPath`, so it re-clones. Swapped the priority so the patched directory is used.", {}),
        ("tool_call", "assistant", '{"file_path":"/w/src/engine.ts","old_string":"a",'
         '"new_string":"b"}', {"tool_name": "Edit", "tool_use_id": "t2", "cwd": "/w"}),
        ("tool_result", "tool", "The file /w/src/engine.ts has been updated successfully.",
         {"tool_use_id": "t2", "is_error": False}),
        ("tool_call", "assistant", '{"command":"bun test --tail"}',
         {"tool_name": "Bash", "tool_use_id": "t3"}),
        ("tool_result", "tool", " 1219 pass\n 0 fail\n", {"tool_use_id": "t3", "is_error": False}),
    ]  # fmt: skip
    return [ev(i, t, r, x, **m) for i, (t, r, x, m) in enumerate(rows)]


def test_a_coding_segment_says_what_was_done() -> None:
    s = ExtractiveSummarizer(COUNTER).summarize_events(session())
    assert s.title == "Fixed impact evaluation re-cloning the repository"
    joined = " ".join(s.bullets)
    assert "Root cause" in joined and "Swapped the priority" in joined  # the cause and the fix
    # what the tool work did and showed, in one line
    assert s.bullets[-1] == "Edited `src/engine.ts`; tests: 1219 passed, 0 failed"
    assert not any(b.startswith("Let me") for b in s.bullets)  # intentions are not bullets
    assert "src/engine.ts" in s.keywords
    assert not {"--tail", "bun", "tail"} & {k.lower() for k in s.keywords}
    assert 60 <= COUNTER.count(s.abstract) <= 140 and s.abstract.startswith(s.title)


def test_tool_output_alone_is_described_not_empty() -> None:
    events = session()
    call, result = events[2], events[3]
    s = ExtractiveSummarizer(COUNTER).summarize_events([result], [events[1], call])
    assert s.title == "Read `src/engine.ts` (1 lines): defines runImpact"
    assert s.title != EMPTY_TITLE and s.bullets
    unknown = ev(9, "tool_result", "tool", "total 16\ndrwxr-xr-x 4 dev staff 128 Jan 29 docs\n"
                 "-rw-r--r-- 1 dev staff 2048 Jan 29 README.md")  # fmt: skip
    alone = ExtractiveSummarizer(COUNTER).summarize_events([unknown])
    assert alone.title.startswith("Tool output (3 lines)")


def test_tool_steps_alone_say_what_they_read_and_wrote() -> None:
    content = "export interface Plan {}\nexport function buildPlanPrompt() {}\n" * 3
    write = ev(0, "tool_call", "assistant", json.dumps({"file_path": "/w/src/plan.ts",
               "content": content}), tool_name="Write", cwd="/w")  # fmt: skip
    s = ExtractiveSummarizer(COUNTER).summarize_events([write])
    assert s.title == "Wrote `src/plan.ts` (buildPlanPrompt, Plan)"  # named by what it defines
    read_call, read_result = session()[2:4]
    both = ExtractiveSummarizer(COUNTER).summarize_events([read_call, read_result])
    assert "defines runImpact" in both.abstract  # the call alone would only name the file


def test_bookkeeping_only_segment_gets_a_title_without_quoting() -> None:
    events = [
        ev(0, "system", "system", "/exit", bookkeeping="command"),
        ev(1, "system", "system", "Goodbye!", bookkeeping="command_output"),
        ev(2, "system", "system", "Caveat: the messages below…", bookkeeping="caveat"),
    ]
    s = bookkeeping_summary(events, "extractive/2")
    assert s.title == "Local command /exit" and s.keywords == ()
    assert "Caveat" not in " ".join((s.abstract, *s.bullets))
    interrupted = bookkeeping_summary([ev(0, "system", "system", "[Request interrupted by user]",
                                          bookkeeping="interrupt")], "x")  # fmt: skip
    assert interrupted.title == "Interrupted by the user"
    # in a period, bookkeeping gives way to real work
    work = ExtractiveSummarizer(COUNTER).summarize_events(session())
    day = ExtractiveSummarizer(COUNTER).summarize_children([s, work])
    assert "/exit" not in " ".join((day.title, day.abstract, *day.bullets))
    alone = ExtractiveSummarizer(COUNTER).summarize_children([s])
    assert alone.title != EMPTY_TITLE


def _seg(title: str, bullets: list[str], keywords: list[str], thread: str) -> Summary:
    return Summary(title, tuple(bullets), tuple(keywords), title, title, thread=thread)


def test_a_day_is_its_sessions_threads() -> None:
    children = [
        _seg("Fixed impact evaluation re-cloning the repository", ["Root cause: the engine "
             "preferred repositoryUrl over localPath."], ["engine", "localPath"], "s1"),
        _seg("Read `src/engine.ts`", ["Read `src/engine.ts` (400 lines)"], ["engine"], "s1"),
        _seg("Edited `src/engine.ts`", ["Tests: 1219 passed, 0 failed",
             "Committed 1a2b3c4: Use the patched directory for impact evaluation"],
             ["engine"], "s1"),
        _seg("Add a Cursor provider", ["Decided to pass --trust to the Cursor agent CLI."],
             ["Cursor provider", "trust"], "s2"),
        _seg("Read `src/cursor.ts`", ["Read `src/cursor.ts` (80 lines)"], ["cursor"], "s2"),
    ]  # fmt: skip
    day = ExtractiveSummarizer(COUNTER).summarize_children(children)
    # the session's commit names its work; the other session by its request
    assert day.title == ("Used the patched directory for impact evaluation; Add a Cursor "
                         "provider")  # fmt: skip
    assert len(day.bullets) >= 2
    assert day.bullets[0].startswith("Used the patched directory for impact evaluation: ")
    assert any(b.startswith("Add a Cursor provider: Decided to pass --trust") for b in day.bullets)
    assert not any("Read `" in b for b in day.bullets)  # tool steps give way
    assert not set(day.bullets) & {b for c in children for b in c.bullets}
    # a week regroups the days' lines by topic and condenses them
    other = Summary("Fixed the loader", ("Loader fix: the loader now retries three times before "
                    "giving up on a slow disk and logs each retry.",), ("loader",), "x", "x")  # fmt: skip
    week = ExtractiveSummarizer(COUNTER).summarize_children([day, other])
    assert week.title != day.title and not set(week.bullets) & {*day.bullets, *other.bullets}
    assert any(b.startswith("Add a Cursor provider") for b in week.bullets)
    assert all(len(b.split(": ", 1)[-1].split()) <= 17 for b in week.bullets)


def _built(tmp_path: Path, source: Path) -> Memory:
    shutil.copytree(source, tmp_path / "data")
    mem = Memory.open(load_settings({"home": str(tmp_path / "home"), "embedder": "none"}))
    assert mem.ingest([tmp_path / "data"]).rejected == 0
    mem.process()
    mem.rollup(force=True)
    return mem


@pytest.mark.parametrize(
    "source",
    [FIXTURES / "claude-code-real", FIXTURES / "specstory" / "getspecstory" / ".specstory"],
    ids=["claude-code", "specstory"],
)
def test_real_sessions_have_no_empty_node_and_sized_abstracts(
    tmp_path: Path, source: Path, hermetic_env: Path
) -> None:
    mem = _built(tmp_path, source)
    try:
        nodes = [n for p in mem.store.projects() for n in mem.store.list_nodes(p)]
        assert nodes and not [n.node_id for n in nodes if n.title == EMPTY_TITLE]
        periods = [
            n for n in nodes if n.level != "segment" and not n.title.startswith(BOOKKEEPING_TITLES)
        ]  # an agent's bookkeeping alone has little to say
        assert all(COUNTER.count(n.abstract) <= 140 for n in nodes)
        assert all(COUNTER.count(n.abstract) >= 60 for n in periods if n.bullets), [
            (n.node_id, n.abstract) for n in periods if COUNTER.count(n.abstract) < 60
        ]
        by_id = {n.node_id: n for n in nodes}
        for n in periods:  # a parent never repeats a child's line verbatim
            kids = [by_id[c] for c in n.child_node_ids if c in by_id]
            assert not {b.text for b in n.bullets} & {b.text for k in kids for b in k.bullets}
        for n in nodes:
            assert not [k for k in n.keywords if k.startswith(("-", "/", "http")) or
                        "REDACTED" in k], (n.node_id, n.keywords)  # fmt: skip
    finally:
        mem.close()


def _fix_session() -> list[Event]:
    old = "def run_impact(repo):\n    return clone(repo)\n"
    new = ("def run_impact(repo, local=None):\n    if local:\n        return _use_local(local)\n"
           "    return self._clone_repo(repo)\n")  # fmt: skip
    rows = [
        ("user_message", "user", "The impact evaluation re-clones the repository every time. "
         "Make it use the local checkout when there is one.", {}),
        ("assistant_message", "assistant", "Root cause: run_impact always clones, even when a "
         "local checkout exists.", {}),
        ("tool_call", "assistant", json.dumps({"file_path": "/w/src/x/evaluator.py",
         "old_string": old, "new_string": new}), {"tool_name": "Edit", "tool_use_id": "t1"}),
        ("tool_result", "tool", "The file /w/src/x/evaluator.py has been updated successfully.",
         {"tool_use_id": "t1", "is_error": False}),
        ("tool_call", "assistant", json.dumps({"command": "cd /w && pytest tests/test_evaluator.py"
         " -q 2>&1 | tail -20", "description": "Run the evaluator tests"}),
         {"tool_name": "Bash", "tool_use_id": "t2"}),
        ("tool_result", "tool", "FAILED tests/test_evaluator.py::test_reclone - AssertionError: "
         "cloned twice\n1 failed, 14 passed in 0.5s", {"tool_use_id": "t2", "is_error": True}),
        ("tool_call", "assistant", json.dumps({"command": "git -C /w status", "description":
         "Show working tree status"}), {"tool_name": "Bash", "tool_use_id": "t3"}),
        ("tool_call", "assistant", json.dumps({"subject": "Use the local checkout in run_impact",
         "description": "Prefer localPath", "activeForm": "Using"}),
         {"tool_name": "TaskCreate", "tool_use_id": "t4"}),
        ("tool_call", "assistant", json.dumps({"taskId": "1", "status": "completed"}),
         {"tool_name": "TaskUpdate", "tool_use_id": "t5"}),
    ]  # fmt: skip
    return [ev(i, t, r, x, cwd="/w", **m) for i, (t, r, x, m) in enumerate(rows)]


def test_tool_work_says_what_it_touched_and_what_it_showed() -> None:
    events = _fix_session()
    calls = [render_tool_call(e.text, e.metadata) for e in events if e.event_type == "tool_call"]
    # an edit by the names it defines, then the functions it brings in (not `clone`, which the
    # replaced text called already); a command by its purpose, without the session's directory
    # or its redirections; a task by its subject; a task's status update is nothing
    assert [c.text if c else None for c in calls] == [
        "Edited `src/x/evaluator.py` (run_impact, _use_local, _clone_repo)",
        "Ran `pytest tests/test_evaluator.py -q` (run the evaluator tests)",
        "Ran `git status` (show working tree status)",
        "Planned: Use the local checkout in run_impact",
        None,
    ]
    s = ExtractiveSummarizer(COUNTER).summarize_events(events)
    # what the tool work did and showed is one line, in the order it happened
    assert s.bullets[-1] == (
        "Edited `src/x/evaluator.py` (run_impact, _use_local, _clone_repo); ran `pytest "
        "tests/test_evaluator.py -q` (run the evaluator tests) and `git status` (show working tree "
        "status); tests: 1 failed, 14 passed (test_reclone); error: AssertionError: cloned twice "
        "in `test_reclone`"
    )
    assert not [b for b in s.bullets[:-1] if b.startswith(("Edited", "Ran", "Tests", "Error"))]
    assert "Root cause: run_impact always clones, even when a local checkout exists." in s.bullets
    text = " ".join((s.title, s.abstract, *s.bullets, *s.keywords, s.overview))
    assert "TaskUpdate" not in text and "Called" not in text and "/w" not in text
    # the line's grip holds the edit it starts with
    grip = segment_grips("p", "n", "s1", events, s.bullets)[-1]
    assert grip.event_id_start <= events[2].event_id <= grip.event_id_end


def test_a_commands_opening_beside_its_purpose_still_finds_the_call() -> None:
    long = ("grep -rn 'formatShellTool\\|command' /Users/sean/src/specstory-cli/pkg/providers/"
            "cursorcli/markdown_tools.go /Users/sean/src/specstory-cli/pkg/providers/x.go")  # fmt: skip
    call = ev(0, "tool_call", "assistant", json.dumps({"command": long, "description":
              "Search for shell command formatting in Cursor markdown"}), tool_name="Bash")  # fmt: skip
    action = render_tool_call(call.text, call.metadata)
    assert action is not None
    assert action.text == (
        "Ran `grep -rn 'formatShellTool\\|command'…` (search for shell command formatting in Cursor "
        "markdown)"
    )
    assert action.subject in long  # a grip finds the call by it
    terse = ev(1, "tool_call", "assistant", json.dumps({"command": "make lint", "description":
               "Lint"}), tool_name="Bash")  # fmt: skip
    assert render_tool_call(terse.text, terse.metadata).text == "Ran `make lint`"  # type: ignore[union-attr]


def test_names_an_edit_touched() -> None:
    multi = {"file_path": "web/App.tsx", "edits": [
        {"old_string": "<Header />", "new_string": "<Header />\n<StepCard step={5} />"},
        {"old_string": "x", "new_string": "expect(result).toBe(3);\nconst total = sumIssues(list)"},
    ]}  # fmt: skip
    # a component rendered and a function called are names; a method of another object
    # (`toBe`), a plain word (`expect`), an attribute and a local constant are not
    assert edit_names(multi) == ["StepCard", "sumIssues"]
    write = {"content": "const LIMIT = 3\nexport interface Plan {}\nexport function buildPlan() {}"}
    assert edit_names(write) == ["buildPlan", "LIMIT", "Plan"]  # functions first


def test_tool_work_on_a_real_session(tmp_path: Path, hermetic_env: Path) -> None:
    """A real context-evaluator session cut to 16 lines (Apache-2.0): a test run, a lint fix
    and its verdict read as one line; the files changed named with the functions they define."""
    mem = _built(tmp_path, FIXTURES / "claude-code-context-evaluator")
    try:
        nodes = [n for p in mem.store.projects() for n in mem.store.list_nodes(p)]
        segments = [n for n in nodes if n.level == "segment"]
        bullets = [b.text for n in segments for b in n.bullets]
        line = ("Tests: 1216 passed, 0 failed; ran `bun run lint:fix` (auto-fix lint/format "
                "issues); lint (biome): 269 files checked, 4 files fixed")  # fmt: skip
        assert line in bullets
        # the segment quoting the user's plan also says which files its work changed, and how
        written = "`src/shared/file-system/file-reference-detector.ts` (isFileReference, "
        assert any(b.startswith("Edited " + written + "detectCrossReference") for b in bullets)
        overview = "\n".join(n.overview for n in segments)
        assert "/Users/cedricteyton" not in overview and "TaskUpdate" not in overview
    finally:
        mem.close()


def test_a_plan_handed_over_is_stated_whole_ish(tmp_path: Path, hermetic_env: Path) -> None:
    """The real context-evaluator session's plan (Apache-2.0) is the session's intent: its
    segment keeps 7 bullets, among them what each of the two functions the plan asks for does
    (with 5, the second was only in the L0); an ask of a few sentences keeps at most 5."""
    mem = _built(tmp_path, FIXTURES / "claude-code-context-evaluator")
    try:
        nodes = [n for p in mem.store.projects() for n in mem.store.list_nodes(p)]
        plan = next(n for n in nodes if n.level == "segment" and "`@` file references" in n.title)
        bullets = [b.text for b in plan.bullets]
        assert len(bullets) == 7
        assert any(b.startswith("`isFileReference(content)` — checks") for b in bullets)
        assert any(b.startswith("`detectCrossReference(agentsContent, claudeContent)` — checks")
                   for b in bullets)  # fmt: skip
        assert 60 <= COUNTER.count(plan.abstract) <= 140
    finally:
        mem.close()
    ask = session()
    assert len(ExtractiveSummarizer(COUNTER).summarize_events(ask).bullets) <= 5
    steps = " ".join(f"Step {i}: rename the `field{i}` column in the table." for i in range(14))
    long_ask = [ev(0, "user_message", "user", steps)]
    assert len(ExtractiveSummarizer(COUNTER).summarize_events(long_ask + ask[1:]).bullets) > 5


def test_a_chained_commands_opening_is_what_it_runs() -> None:
    call = ev(0, "tool_call", "assistant", json.dumps({"command": "cd specstory-cli 2>/dev/null "
              "&& go test -race ./pkg/...", "description": "Run the reindex tests"}),
              tool_name="Bash")  # fmt: skip
    action = render_tool_call(call.text, call.metadata)
    assert action is not None
    assert action.text == "Ran `go test -race ./pkg/...…` (run the reindex tests)"
    assert action.subject in call.text
