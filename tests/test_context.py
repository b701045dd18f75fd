"""Session-start context over a TOC built by the real pipeline: budget, order, open thread."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.config import load_settings
from memtoc.ids import derived_ulid
from memtoc.memory import Memory
from memtoc.model import Bookmark, Event
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.text.tokens import default_counter
from pipeline_support import make_events

T0 = int(datetime(2024, 3, 4, 9, 0, tzinfo=UTC).timestamp() * 1000)
DAY = 86_400_000


def _ev(sid: str, i: int, t: int, etype: str, role: str, text: str, **meta: object) -> Event:
    return Event(derived_ulid(t, f"{sid}:{i}"), sid, "p", "test", t, etype, role, text, meta)


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    clock = ManualClock(T0 + 60 * DAY)
    store = SqliteStore(tmp_path / "c.db", durability="off", clock=clock)
    counter = default_counter()
    events = make_events(
        seed=9, sessions=24, per_session=(10, 25), start_ms=T0, projects=("p",), spread_ms=20 * DAY
    )
    # The latest session: a question, then a failing tool call (the open thread).
    last = T0 + 30 * DAY
    events += [
        _ev("tail", 0, last, "user_message", "user", "Why does the nightly export job time out?"),
        _ev("tail", 1, last + 5_000, "assistant_message", "assistant", "Running the export."),
        _ev(
            "tail",
            2,
            last + 9_000,
            "tool_result",
            "tool",
            "TimeoutError: export exceeded 300s",
            is_error=True,
        ),
    ]
    store.append_events(events)
    mem = Memory(
        store,
        clock=clock,
        counter=counter,
        summarizer=ExtractiveSummarizer(counter),
        tz=ZoneInfo("UTC"),
        pipeline=PipelineConfig(),
    )
    mem.process()
    mem.rollup(force=True)
    return mem


def test_budget_respected_and_counted(memory: Memory) -> None:
    for budget in (0, 30, 120, 400, 800, 3000):
        view = memory.context("p", budget=budget)
        assert view.tokens <= budget
        assert view.tokens == (memory.counter.count(view.text) if view.text else 0)
    small, big = memory.context("p", budget=120), memory.context("p", budget=3000)
    assert len(small.items) < len(big.items)
    assert small.omitted > big.omitted


def test_recent_days_first_and_open_thread(memory: Memory) -> None:
    view = memory.context("p", budget=3000)
    recent = [i for i in view.items if i.section == "recent"]
    assert len(recent) >= 3
    starts = [i.start_ms for i in recent]
    assert starts == sorted(starts, reverse=True)  # most recent first
    newest_day = memory.store.latest_nodes("p", "day", 1)[0]
    assert any(i.ref == newest_day.node_id for i in recent)
    assert newest_day.abstract.split()[0] in view.text
    thread = [i.text for i in view.items if i.section == "thread"]
    assert thread[1] == "Asked: “Why does the nightly export job time out?”"
    assert thread[2] == "Outcome: “Running the export.”"
    assert thread[3] == "Unresolved error: “TimeoutError: export exceeded 300s”"  # it ended there
    # Sections in reading order: thread, then recent activity.
    assert view.text.index("Where we left off") < view.text.index("Recent activity")


def test_bookmarks_included_by_importance(memory: Memory) -> None:
    for n, importance in enumerate((0.2, 0.9)):
        memory.store.put_bookmark(
            Bookmark(
                f"bm{n}",
                "p",
                f"Decision {n}: ship the exporter in batches",
                (),
                importance,
                "conclusion",
                T0,
                T0,
            )
        )
    view = memory.context("p", budget=3000)
    marks = [i.ref for i in view.items if i.section == "bookmark"]
    assert marks == ["bm1", "bm0"]


def test_default_project_and_empty_store(memory: Memory, tmp_path: Path) -> None:
    assert memory.context().project == "p"
    empty = Memory(SqliteStore(tmp_path / "empty.db"))
    view = empty.context(budget=100)
    assert (view.project, view.tokens, view.text) == (None, 0, "")


def test_cli_context_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    with Memory.open(load_settings({"home": str(home)})) as mem:
        mem.remember("We decided to keep the cache TTL at 5 minutes.", project="webapp")
        mem.remember("Unrelated: the docs site moves to a new host.", project="docs")
    runner = CliRunner()
    # the current directory's project: a folder named webapp claims the project of that name
    (tmp_path / "webapp").mkdir()
    monkeypatch.chdir(tmp_path / "webapp")
    result = runner.invoke(app, ["--home", str(home), "context", "--budget", "200", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["project"] == "webapp" and data["tokens"] <= 200
    assert "cache TTL" in data["text"] and "docs site" not in data["text"]
    # a folder with no memory: nothing, and a note on stderr naming the known projects
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["--home", str(home), "context", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["text"] == ""
    assert "known projects: docs, webapp" in " ".join(result.stderr.split())


def _session(sid: str, t: int, turns: list[tuple[str, str, str]], **meta: object) -> list[Event]:
    kinds = {"user": ("user_message", "user"), "assistant": ("assistant_message", "assistant"),
             "error": ("tool_result", "tool"), "ok": ("tool_result", "tool")}  # fmt: skip
    out = []
    for i, (who, text, _) in enumerate(turns):
        etype, role = kinds[who]
        extra = {"is_error": who == "error", **meta}
        out.append(_ev(sid, i, t + i * 60_000, etype, role, text, **extra))
    return out


def test_where_we_left_off_is_the_intent_and_outcome_of_the_latest_sessions(
    tmp_path: Path,
) -> None:
    """The opening request and the last reply of the latest session and of the ones before it;
    an error the session went on from is not 'unresolved'; a sub-agent's session and an agent's
    bookkeeping never stand for the work."""
    clock = ManualClock(T0 + 2 * DAY)
    store = SqliteStore(tmp_path / "c.db", durability="off", clock=clock)
    events = _session("s1", T0, [
        ("user", "Add a CSV export to the reports page", ""),
        ("assistant", "Exported reports as CSV from ReportsPage.tsx; 212 tests pass.", ""),
    ])  # fmt: skip
    events += _session("s2", T0 + DAY, [
        ("user", "Fix the flaky login test in test_auth.py", ""),
        ("error", "FAILED tests/test_auth.py::test_login - TimeoutError", ""),
        ("assistant", "The session fixture raced the token refresh; I pinned the clock.", ""),
        ("user", "commit", ""),
        ("assistant", "Committed 4f1c2aa: login test pinned to a fake clock, suite green.", ""),
    ])  # fmt: skip
    events += _session("s2/agent-a1", T0 + DAY + 90_000, [
        ("user", "Search the repo for token refresh callers", ""),
        ("assistant", "Found 3 callers of refresh_token.", ""),
    ], parent_session_id="s2")  # fmt: skip
    events.append(
        _ev("s2", 9, T0 + DAY + 600_000, "system", "system", "/model", bookkeeping="command")
    )
    store.append_events(events)
    counter = default_counter()
    mem = Memory(store, clock=clock, counter=counter, summarizer=ExtractiveSummarizer(counter),
                 tz=ZoneInfo("UTC"), pipeline=PipelineConfig())  # fmt: skip
    mem.process()
    view = mem.context("p", budget=800)
    thread = [i.text for i in view.items if i.section == "thread"]
    assert thread[1:] == [
        "Asked: “Fix the flaky login test in test_auth.py”",
        "Last request: “commit”",
        "Outcome: “Committed 4f1c2aa: login test pinned to a fake clock, suite green.”",
    ]
    earlier = [i.text for i in view.items if i.section == "earlier"]
    assert [t.split(" — ", 1)[1] for t in earlier] == [
        "asked: “Add a CSV export to the reports page”",
        "outcome: “Exported reports as CSV from ReportsPage.tsx; 212 tests pass.”",
    ]
    # the sub-agent's session is not where we left off nor a session before it (the day's summary
    # under "Recent activity" may tell what it found, as part of that day's work); bookkeeping is
    # nowhere
    told = "\n".join(i.text for i in view.items if i.section in ("thread", "earlier"))
    assert "refresh" not in told and "agent-a1" not in told
    assert "/model" not in view.text
    assert view.text.index("Where we left off") < view.text.index("Sessions before it")


def test_sessions_before_a_long_latest_session_are_still_found(tmp_path: Path) -> None:
    """A latest session of many segments fills the newest segments: the session before it is
    found by looking just before the latest one began."""
    clock = ManualClock(T0 + 5 * DAY)
    store = SqliteStore(tmp_path / "c.db", durability="off", clock=clock)
    events = _session("old", T0, [
        ("user", "Migrate the settings page to the new form library", ""),
        ("assistant", "Settings page now uses react-hook-form; 40 tests pass.", ""),
    ])  # fmt: skip
    long = [("user", "Profile the importer on the 1M store", "")]
    long += [("assistant", f"Step {i}: measured batch {i} of the importer.", "") for i in range(80)]
    events += [
        dataclasses.replace(e, ts_ms=T0 + DAY + i * 3_600_000)  # an hour apart: a segment each
        for i, e in enumerate(_session("long", T0 + DAY, long))
    ]
    store.append_events(events)
    counter = default_counter()
    mem = Memory(store, clock=clock, counter=counter, summarizer=ExtractiveSummarizer(counter),
                 tz=ZoneInfo("UTC"), pipeline=PipelineConfig())  # fmt: skip
    mem.process()
    assert len(store.latest_nodes("p", "segment", 100)) > 12
    view = mem.context("p", budget=800)
    assert "Asked: “Profile the importer on the 1M store”" in view.text
    assert "asked: “Migrate the settings page to the new form library”" in view.text


def test_the_text_cites_only_ids_a_tool_opens(memory: Memory) -> None:
    """Every id in brackets is a node memory_toc opens; event and bookmark ids (which no tool
    opens, 15-25 tokens each) stay in the data, not in what the agent pays for."""
    import re

    mark = Bookmark("bm:1:abc", "p", "Decision: ship the exporter", (), 0.9, "conclusion", T0, T0)
    memory.store.put_bookmark(mark)
    view = memory.context("p", budget=3000)
    cited = re.findall(r"\[([^\]\s]+)\]$", view.text, flags=re.M)
    assert cited and all(ref.startswith("toc:") for ref in cited), cited
    for ref in cited:
        assert memory.node(ref, project="p").node.node_id == ref
    hidden = [i.ref for i in view.items if not i.ref.startswith("toc:")]
    assert "bm:1:abc" in hidden and len(hidden) >= 3  # the thread's quotes, the bookmark
    assert not any(ref in view.text for ref in hidden)
    assert "ship the exporter" in view.text
    assert {i["id"] for i in view.to_dict()["items"]} >= set(hidden)  # type: ignore[union-attr]


def test_the_latest_session_line_does_not_repeat_its_request(tmp_path: Path) -> None:
    """A segment titled by its request is cited, not retitled, above the quoted request; markdown
    heading and bold marks are left out of quotes (they cost tokens and say nothing)."""
    clock = ManualClock(T0 + 2 * DAY)
    store = SqliteStore(tmp_path / "c.db", durability="off", clock=clock)
    store.append_events(_session("s1", T0, [
        ("user", "Fix the flaky login test in test_auth.py", ""),
        ("assistant", "## ✅ Fixed\n**The session fixture** raced the token refresh.", ""),
    ]))  # fmt: skip
    counter = default_counter()
    mem = Memory(store, clock=clock, counter=counter, summarizer=ExtractiveSummarizer(counter),
                 tz=ZoneInfo("UTC"), pipeline=PipelineConfig())  # fmt: skip
    mem.process()
    thread = [i for i in mem.context("p", budget=800).items if i.section == "thread"]
    segment = mem.store.latest_nodes("p", "segment", 1)[0]
    assert "flaky login test" in segment.title  # what the line would repeat
    assert (thread[0].ref, thread[0].text) == (
        segment.node_id,
        "Latest session (2024-03-04 09:01 UTC)",
    )
    assert [i.text for i in thread[1:]] == [
        "Asked: “Fix the flaky login test in test_auth.py”",
        "Outcome: “✅ Fixed The session fixture raced the token refresh.”",
    ]


def test_the_heading_names_the_project_as_the_user_named_it(memory: Memory) -> None:
    """A project's id is internal (``app-149990`` when two folders are called ``app``): the
    context says the name the user knows, the one `memtoc projects list` shows."""
    memory.rename_project("p", "billing-service")
    text = memory.context("p", budget=400).text
    assert text.startswith("# memtoc memory — project billing-service\n"), text[:80]
    assert memory.context("billing-service", budget=400).text == text


def test_a_day_shrunk_to_its_title_keeps_the_whole_title(memory: Memory) -> None:
    """A day that does not fit whole is shown by its date and title; a title holding ": " itself
    (a commit subject 'docs(graders): add …', Gemini's '[CONTEXT PULSE: 2026-03-17_2155]') was cut
    there: '- 2026-06-26 — Docs(graders)', '- 2026-03-17 — [CONTEXT PULSE'."""
    days = memory.store.list_nodes("p", level="day")
    title = "[CONTEXT PULSE: 2026-03-17_2155] Mental Model (5 segments)"
    for node in days:
        memory.store.put_node(dataclasses.replace(node, title=title, abstract="x " * 400))
    lines = []
    for budget in (150, 250, 400, 800):
        text = memory.context("p", budget=budget).text
        lines += [line for line in text.splitlines() if "[toc:day:" in line]
    assert lines
    for line in lines:
        assert title in line, line
