"""SpecStory Markdown import (``memtoc.ingest.sources.specstory``) on excerpts of real exports.

The fixtures (``tests/fixtures/specstory``, Apache-2.0, see its README) are cut from the
getspecstory history: a Claude Code session (thinking, a Task whose output holds nested fences,
sub-agent turns, a Write with its output, a question with its answer), a Codex CLI session, a
Cursor session whose agent turns carry no time, and the turn whose tool output quotes a whole
SpecStory transcript.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memtoc.clock import ManualClock
from memtoc.ingest.importer import discover
from memtoc.ingest.positions import first_line_hash
from memtoc.ingest.sources import SOURCES, sniff_format
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.ingest.sources.specstory import agent_name
from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parent / "fixtures" / "specstory"
HISTORY = ROOT / "getspecstory" / ".specstory" / "history"
CLAUDE = HISTORY / "2026-01-16_22-28-53Z-after-a-cloud-sync.md"
CODEX = HISTORY / "2026-02-20_15-53-44Z-read-docs-git-provenance.md"
CURSOR = HISTORY / "2025-06-30_12-46-48Z-fix-unknown-field-error-in-api-request.md"
QUOTED = HISTORY / "2026-07-16_20-14-28Z.md"
SOURCE = SOURCES["specstory"]


def read(path: Path, start: int = 0, options: SourceOptions | None = None) -> list[RawRecord]:
    return list(SOURCE.read(path, start, options or SourceOptions()))


def drafts(records: list[RawRecord]) -> list[EventDraft]:
    return [d for r in records for d in r.drafts]


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


def test_sniffed_and_found_in_folders_beside_other_markdown() -> None:
    for path in (CLAUDE, CODEX, CURSOR, QUOTED):
        found = sniff_format(path)
        assert found is not None and found.name == "specstory"
    found_files = [p.name for p, _ in discover([ROOT])]
    assert sorted(found_files) == sorted(p.name for p in (CLAUDE, CODEX, CURSOR, QUOTED))
    assert sniff_format(ROOT / "README.md") is None  # a Markdown file that is not an export


def test_every_file_has_its_own_identity() -> None:
    # all exports share their first line; the identity must still tell the sessions apart
    identities = {first_line_hash(p) for p in (CLAUDE, CODEX, CURSOR, QUOTED)}
    assert len(identities) == 4 and None not in identities


def test_claude_code_session() -> None:
    records = read(CLAUDE)
    assert all(r.error is None for r in records)
    events = drafts(records)
    assert {d.session_id for d in events} == {"3e14b6e6-2330-496e-9c76-3eb7934bc3fd"}
    assert {d.agent for d in events} == {"claude-code"}
    # <project>/.specstory/history: the session ran in <project> (memtoc.projects names it)
    assert {Path(d.cwd).name for d in events if d.cwd} == {"getspecstory"}
    assert all(d.project is None for d in events)
    assert SOURCE.session_hint(CLAUDE) == {
        "session_id": "3e14b6e6-2330-496e-9c76-3eb7934bc3fd",
        "project": "getspecstory",
    }
    kinds = [(d.event_type, d.metadata["sidechain"]) for d in events]
    assert kinds == [
        ("user_message", False),
        ("assistant_message", False),
        ("tool_call", False),  # Task
        ("tool_result", False),
        ("assistant_message", True),  # the sub-agent's prompt, a turn without a model
        ("assistant_message", True),
        ("tool_call", True),  # Read ./ → EISDIR
        ("tool_result", True),
        ("assistant_message", True),
        ("assistant_message", False),
        ("tool_call", False),  # Write
        ("tool_result", False),
        ("assistant_message", False),
        ("tool_call", False),  # AskUserQuestion
        ("tool_result", False),
        ("assistant_message", False),
        ("tool_call", False),  # Edit
        ("tool_result", False),
    ]
    user = events[0]
    assert (user.role, iso_ms(user.ts_ms)) == ("user", "2026-01-16T22:28:53.000Z")
    assert user.text.startswith("After a cloud sync from `specstory sync` or `specstory run`")
    assert "---" not in user.text.splitlines()  # the separator is rendering, not text
    assert "model" not in user.metadata and user.metadata["provider"] == "Claude Code"
    reply = events[1]
    assert reply.metadata["model"] == "claude-opus-4-5-20251101"
    assert "Thought Process" not in reply.text and "<think>" not in reply.text
    # the thinking turn itself is skipped and counted, as the other importers do
    assert sum(r.skipped for r in records) == 3
    task_call, task_result = events[2], events[3]
    assert task_call.text == "Task\nExplore cloud sync output"
    assert (
        task_call.metadata["tool_name"] == "Task" and task_call.metadata["tool_type"] == "generic"
    )
    assert task_result.role == "tool"
    assert task_result.text.startswith("Excellent! Now I have gathered all the information")
    assert "```go" in task_result.text  # the output's own fences stay in the output
    assert task_result.text.endswith(
        "agentId: ae1302c (for resuming to continue this agent's work if needed)"
    )
    sub = events[4]
    assert "model" not in sub.metadata and iso_ms(sub.ts_ms) == "2026-01-16T22:29:04.000Z"
    assert (events[6].text, events[7].text) == (
        "Read\n`./`",
        "EISDIR: illegal operation on a directory, read",
    )
    write_call, write_result = events[10], events[11]
    assert write_call.text.startswith("Write\n```md\n# Plan: Add SpecStory Cloud promotional link")
    assert write_result.text == (
        "File created successfully at: /Users/sean/.claude/plans/wiggly-churning-petal.md"
    )
    ask_call, ask_result = events[13], events[14]
    assert "**Which emoji would you prefer for the promotional line?**" in ask_call.text
    assert ask_result.text == "**Answer:** 💡 (lightbulb), Two lines (Recommended)"
    assert events[16].text == "Edit"  # SpecStory renders no input for Edit, only its output
    assert events[17].text.startswith("The file /Users/sean/.claude/plans/wiggly-churning-petal.md")


def test_thinking_on_request() -> None:
    events = drafts(read(CLAUDE, options=SourceOptions(include_thinking=True)))
    thoughts = [d for d in events if d.metadata.get("kind") == "thinking"]
    assert len(thoughts) == 3
    assert thoughts[0].role == "assistant" and thoughts[0].event_type == "assistant_message"
    assert thoughts[0].text.startswith(
        "The user wants to add a promotional link to SpecStory Cloud"
    )
    assert "</details>" not in thoughts[0].text


def test_codex_session() -> None:
    events = drafts(read(CODEX))
    assert {d.agent for d in events} == {"codex"}
    assert {d.session_id for d in events} == {"019c7bbe-080b-7841-a755-9771f4a0e3d6"}
    calls = [d for d in events if d.event_type == "tool_call"]
    results = [d for d in events if d.event_type == "tool_result"]
    assert [c.metadata["tool_name"] for c in calls] == [
        "update_plan",
        "exec_command",
        "apply_patch",
    ]
    # Codex puts the command in the summary: it is the call's input
    assert calls[1].text == (
        "exec_command `ls -1 docs/git-provenance && echo '---' && ls -1 docs/git-provenance/systems`"
    )
    assert [r.metadata["tool_name"] for r in results] == ["update_plan", "exec_command"]
    assert results[0].text == "Plan updated"
    assert results[1].text.startswith("Chunk ID: eed436\nWall time: 0.0522 seconds")
    assert "\n---\n" in results[1].text  # a "---" printed by the command is output, kept
    assert calls[2].text.startswith("apply_patch\n**Add: `docs/git-provenance/SYSTEM-SUMMARY.md`**")
    assert next(d.metadata.get("model") for d in events if d.role == "assistant") == "gpt-5.2"


def test_turns_without_a_time_take_their_predecessors() -> None:
    records = read(CURSOR)
    events = drafts(records)
    assert {d.agent for d in events} == {"cursor"}
    assert {iso_ms(d.ts_ms) for d in events} == {"2025-08-18T14:14:40.000Z"}
    assert [d.metadata.get("time_inherited", False) for d in events if d.part == 0] == [
        False,  # the user turn names its time
        False,  # an agent turn with its own time
        True,
        True,
        True,
        True,
    ]
    assert {d.metadata.get("model") for d in events if d.role == "assistant"} == {"claude-4-sonnet"}
    # a resumed read finds the time of the last timed turn before it
    later = next(r for r in records if r.drafts and r.drafts[0].metadata.get("time_inherited"))
    resumed = read(CURSOR, start=later.offset)
    assert resumed[0].drafts[0].ts_ms == later.drafts[0].ts_ms


def test_a_transcript_printed_by_a_tool_is_output_not_turns() -> None:
    events = drafts(read(QUOTED))
    assert (events[0].text, events[0].metadata["bookkeeping"]) == ("/model", "command")
    assert [d.event_type for d in events] == [
        "system",  # the exported session opens with Claude Code's /model wrapper: bookkeeping
        "tool_call",
        "tool_result",
        "assistant_message",
        "tool_call",
        "tool_result",
        "assistant_message",
    ]
    printed = events[5]
    assert "_**User**_" in printed.text and "Tell me about what files are here!" in printed.text
    assert printed.text.startswith("<!-- Generated by SpecStory, Markdown v2.1.0 -->")
    assert "run_terminal_command_v2" in printed.text
    assert iso_ms(events[6].ts_ms) == "2026-07-16T22:18:10.000Z"
    assert events[6].text.startswith("That was it — the session now resolves fully")


@pytest.mark.parametrize("path", [CLAUDE, CODEX, CURSOR, QUOTED])
def test_reading_from_any_turn_yields_the_rest(path: Path) -> None:
    records = read(path)
    for index, record in enumerate(records[:-1]):
        assert read(path, start=record.end_offset) == records[index + 1 :]
    # the last turn keeps the watermark before it: it is read again next time
    assert records[-1].end_offset == records[-1].offset
    assert read(path, start=records[-1].end_offset) == records[-1:]


def test_an_offset_that_is_no_turn_start_rereads_the_file(tmp_path: Path) -> None:
    # the file was rewritten under the watermark: read it again (stored events are no-ops by id)
    assert read(CLAUDE, start=100) == read(CLAUDE)


def test_invalid_utf8_costs_its_turn_only(tmp_path: Path) -> None:
    data = CODEX.read_bytes().replace(b"I\xe2\x80\x99m going to", b"I\xff going to")
    path = tmp_path / CODEX.name
    path.write_bytes(data)
    records = read(path)
    bad = [r for r in records if r.error is not None]
    assert len(bad) == 1 and bad[0].line == 25 and "invalid UTF-8" in bad[0].error
    assert len(drafts(records)) == len(drafts(read(CODEX))) - 1


def test_agent_names() -> None:
    assert [agent_name(n) for n in ("Claude Code", "Codex CLI", "Cursor IDE", "Gemini CLI")] == [
        "claude-code",
        "codex",
        "cursor",
        "gemini",
    ]
    assert agent_name("Droid CLI") == "droid-cli"


def _memory(path: Path) -> Memory:
    return Memory(SqliteStore(path, durability="off", clock=ManualClock()), clock=ManualClock())


def _texts(memory: Memory) -> list[tuple[str, str, str]]:
    return sorted((e.event_id, e.event_type, e.text) for e in memory.events())


def test_incremental_import_of_a_growing_folder(tmp_path: Path) -> None:
    """A folder imported while its files grow, turn by turn, ends with exactly the events of one
    import of the finished folder: same ids, nothing twice, only the new turns read."""
    whole = tmp_path / "whole.db"
    with _memory(whole) as memory:
        report = memory.ingest([HISTORY])
        assert (report.rejected, report.files) == (0, 4)
        expected = _texts(memory)
        again = memory.ingest([HISTORY])
        assert again.ingested == 0 and again.rejected == 0  # re-import: nothing new
    folder = tmp_path / ".specstory" / "history"
    folder.mkdir(parents=True)
    full = {p.name: p.read_bytes() for p in (CLAUDE, CODEX, CURSOR, QUOTED)}
    cuts = {
        name: [r.offset for r in read(HISTORY / name) if r.drafts] + [len(data)]
        for name, data in full.items()
    }
    grown = tmp_path / "grown.db"
    with _memory(grown) as memory:
        steps = max(len(c) for c in cuts.values())
        for step in range(steps):
            for name, data in full.items():
                upto = cuts[name][min(step, len(cuts[name]) - 1)]
                (folder / name).write_bytes(data[:upto])
            report = memory.ingest([folder])
            assert report.rejected == 0, report.rejections
            assert report.bytes_read < sum(len(d) for d in full.values())
        assert _texts(memory) == expected


def test_a_tool_output_added_to_the_last_turn_is_imported(tmp_path: Path) -> None:
    # SpecStory writes a tool's call, then rewrites the file with its output
    data = CLAUDE.read_text(encoding="utf-8")
    call_only = data.rsplit("```text", 1)[0].rstrip() + "\n</details></tool-use>\n"
    path = tmp_path / CLAUDE.name
    path.write_text(call_only, encoding="utf-8")
    with _memory(tmp_path / "m.db") as memory:
        memory.ingest([path])
        before = memory.events()
        assert before[-1].event_type == "tool_call" and before[-1].text == "Edit"
        path.write_text(data, encoding="utf-8")
        report = memory.ingest([path])
        assert report.ingested == 1 and report.rejected == 0
        after = memory.events()
        assert [e.event_id for e in after[:-1]] == [e.event_id for e in before]
        assert after[-1].event_type == "tool_result"
        assert after[-1].text.startswith("The file /Users/sean/.claude/plans/")


def test_ingest_with_format_option_and_moved_file(tmp_path: Path) -> None:
    # the export's folder outside any repository (the fixture itself sits in memtoc's own
    # repository, which would be its project)
    history = tmp_path / "getspecstory" / ".specstory" / "history"
    history.mkdir(parents=True)
    original = history / CODEX.name
    shutil.copy(CODEX, original)
    moved = tmp_path / "renamed.md"
    shutil.copy(CODEX, moved)
    with _memory(tmp_path / "m.db") as memory:
        first = memory.ingest([original], fmt="specstory")
        second = memory.ingest([moved], fmt="specstory")
        assert first.ingested > 0 and second.ingested == 0  # same file, same identity
        assert {e.project for e in memory.events()} == {"getspecstory"}
        assert norm("we need to do this research and writing task") in norm(memory.events()[0].text)
