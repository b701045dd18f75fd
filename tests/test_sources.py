"""The transcript readers (``memtoc.ingest.sources``) on fixture files faithful to each format."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.errors import ConfigError, IngestError
from memtoc.ingest.sources import SOURCES, get_source, sniff_format
from memtoc.ingest.sources._lines import parse_timestamp
from memtoc.ingest.sources.base import EventDraft, RawRecord, SourceOptions
from memtoc.model import (
    DEFAULT_ROLE_FOR_TYPE,
    DEFAULT_TYPE_FOR_ROLE,
    EVENT_TYPES,
    MAX_TS_MS,
    ROLES,
    iso_ms,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CC_DIR = FIXTURES / "claude-code" / "-home-dev-webapp"
CC_SID = "3f2a1c9e-8b7d-4e6f-a5c4-1d2e3f4a5b6c"
CC_MAIN = CC_DIR / f"{CC_SID}.jsonl"
CC_SECOND = CC_DIR / "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d.jsonl"
CODEX_SID = "0197a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
CODEX_NEW = FIXTURES / "codex/2025/06/03" / f"rollout-2025-06-03T10-15-00-{CODEX_SID}.jsonl"
CODEX_LEGACY_SID = "4a5b6c7d-1e2f-4a3b-9c8d-7e6f5a4b3c2d"
CODEX_LEGACY = FIXTURES / "codex/2025/04/18" / f"rollout-2025-04-18-{CODEX_LEGACY_SID}.jsonl"
JSONL_GOOD = FIXTURES / "jsonl/good.jsonl"
JSONL_BAD = FIXTURES / "jsonl/malformed.jsonl"
OPENAI_CHAT = FIXTURES / "openai/chat.json"
OPENAI_CONVS = FIXTURES / "openai/conversations.json"

DEFAULT = SourceOptions()
THINKING = SourceOptions(include_thinking=True)


def read(
    name: str, path: Path, start: int = 0, options: SourceOptions = DEFAULT
) -> list[RawRecord]:
    return list(SOURCES[name].read(path, start, options))


def drafts(records: list[RawRecord]) -> list[EventDraft]:
    return [d for r in records for d in r.drafts]


def by_type(records: list[RawRecord]) -> Counter[str]:
    return Counter(d.event_type for d in drafts(records))


def ms(iso: str) -> int:
    return parse_timestamp(iso)


# --- Claude Code -------------------------------------------------------------------------------


def test_claude_code_session_events_and_skips() -> None:
    records = read("claude-code", CC_MAIN)
    assert len(records) == 31  # 32 lines, one blank
    assert all(r.error is None for r in records)
    assert by_type(records) == {
        "user_message": 4,
        "assistant_message": 7,
        "tool_call": 7,
        "tool_result": 7,
        "system": 4,  # the summary, the hook notice, the local-command caveat, /cost
    }
    # two file-history-snapshots, a queue-operation, a thinking, a redacted_thinking, an empty text
    assert sum(r.skipped for r in records) == 6
    events = drafts(records)
    assert {d.session_id for d in events} == {CC_SID}
    # the project is the one of the session's starting directory (memtoc.projects maps it)
    assert {(d.project, d.cwd) for d in events} == {(None, "/home/dev/webapp")}
    assert {d.agent for d in events} == {None}
    assert all(d.metadata["cwd"] == "/home/dev/webapp" for d in events)
    assert [d.line for d in records][:14] == [*range(1, 14), 15]  # line 14 is blank


def test_claude_code_exact_events() -> None:
    records = read("claude-code", CC_MAIN)
    events = {d.event_id: d for d in drafts(records)}
    first = events["a0000001-0000-4000-8000-000000000001"]
    assert first.event_type == "user_message"
    assert first.role == "user"
    assert first.ts_ms == ms("2025-06-03T10:00:01.037Z")
    assert first.text.startswith("The login test in tests/test_auth.py fails intermittently")
    assert first.metadata == {
        "uuid": "a0000001-0000-4000-8000-000000000001",
        "cwd": "/home/dev/webapp",
        "git_branch": "fix/login-timeout",
        "version": "1.0.17",
        "sidechain": False,
    }
    bash = events["a0000001-0000-4000-8000-000000000006"]
    assert bash.event_type == "tool_call"
    assert bash.role == "assistant"
    assert bash.text == (
        'Bash {"command":"pytest tests/test_auth.py -x -q","description":"Run the auth tests"}'
    )
    assert bash.metadata["tool_name"] == "Bash"
    assert bash.metadata["tool_use_id"] == "toolu_02Bash"
    assert bash.metadata["model"] == "claude-sonnet-4-20250514"
    assert bash.metadata["parent_uuid"] == "a0000001-0000-4000-8000-000000000005"
    failed = events["a0000001-0000-4000-8000-000000000007"]
    assert (failed.event_type, failed.role) == ("tool_result", "tool")
    assert failed.metadata["is_error"] is True
    assert failed.metadata["tool_use_id"] == "toolu_02Bash"
    assert failed.text.startswith("F\nFAILED tests/test_auth.py::test_login - TimeoutError")
    grep = events["a0000001-0000-4000-8000-000000000009"]
    assert grep.text == (
        "config/settings.py:14:SESSION_TIMEOUT = 0.5\n"
        "tests/conftest.py:8:    app.config['SESSION_TIMEOUT'] = SESSION_TIMEOUT"
    )
    assert grep.metadata["is_error"] is False
    hook = events["a0000001-0000-4000-8000-000000000015"]
    assert (hook.event_type, hook.metadata["kind"], hook.metadata["level"]) == (
        "system",
        "hook",
        "info",
    )
    caveat = events["a0000001-0000-4000-8000-000000000021"]
    assert caveat.metadata["is_meta"] is True
    assert (caveat.event_type, caveat.metadata["bookkeeping"]) == ("system", "caveat")
    assert hook.metadata["bookkeeping"] == "hook"
    cost = events["a0000001-0000-4000-8000-000000000022"]
    assert (cost.text, cost.metadata["bookkeeping"], cost.metadata["command"]) == (
        "/cost",
        "command",
        "/cost",
    )


def test_claude_code_multi_block_line_ids_and_parts() -> None:
    records = read("claude-code", CC_MAIN)
    line10 = next(r for r in records if r.line == 10)
    assert [(d.event_id, d.part, d.event_type) for d in line10.drafts] == [
        ("a0000001-0000-4000-8000-000000000008", 0, "assistant_message"),
        ("a0000001-0000-4000-8000-000000000008#1", 1, "tool_call"),
    ]
    assert line10.drafts[1].text == 'Grep {"pattern":"SESSION_TIMEOUT","path":"/home/dev/webapp"}'
    image_line = next(r for r in records if r.line == 26)
    assert image_line.drafts[0].text == "[image]"
    assert image_line.drafts[1].text.endswith("does the spinner look right? ✨")
    assert image_line.drafts[1].event_id == "a0000001-0000-4000-8000-000000000019#1"
    empty_text_line = next(r for r in records if r.line == 25)
    assert (empty_text_line.skipped, len(empty_text_line.drafts)) == (1, 1)
    assert empty_text_line.drafts[0].event_id == "a0000001-0000-4000-8000-000000000018"


def test_claude_code_sidechain_and_summary() -> None:
    events = drafts(read("claude-code", CC_MAIN))
    side = [d for d in events if d.metadata.get("sidechain")]
    assert [d.event_type for d in side] == [
        "user_message",
        "tool_call",
        "tool_result",
        "assistant_message",
    ]
    summary = events[0]
    assert summary.event_type == "system"
    assert summary.text == "Fix flaky login test timeout in webapp"
    assert summary.metadata == {
        "kind": "summary",
        "leaf_uuid": "0c1d2e3f-aaaa-4bbb-8ccc-000000000001",
        "cwd": "/home/dev/webapp",
    }
    assert summary.event_id is None
    assert summary.ts_ms == events[1].ts_ms  # the session's first timestamp
    assert (summary.session_id, summary.cwd) == (CC_SID, "/home/dev/webapp")


def test_claude_code_thinking_included_on_request() -> None:
    records = read("claude-code", CC_MAIN, options=THINKING)
    thinking = [d for d in drafts(records) if d.metadata.get("kind") == "thinking"]
    assert [d.text for d in thinking] == [
        "The user reports a flaky timeout. I should read the test and the session config first."
    ]
    assert thinking[0].event_type == "assistant_message"
    assert sum(r.skipped for r in records) == 5  # redacted_thinking is still skipped


def test_claude_code_summary_appended_at_end_keeps_the_session_start() -> None:
    records = read("claude-code", CC_SECOND)
    assert by_type(records) == {
        "user_message": 1,
        "tool_call": 1,
        "tool_result": 1,
        "assistant_message": 1,
        "system": 1,
    }
    summary = records[-1].drafts[0]
    assert summary.ts_ms == ms("2025-06-04T08:00:00Z")
    assert summary.session_id == "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
    resumed = read("claude-code", CC_SECOND, start=records[-2].end_offset)
    assert resumed == records[-1:]


def test_claude_code_session_hint_and_fallbacks(tmp_path: Path) -> None:
    assert dict(SOURCES["claude-code"].session_hint(CC_MAIN)) == {
        "session_id": CC_SID,
        "cwd": "/home/dev/webapp",
        "project": "webapp",
    }
    only_summaries = tmp_path / "1234.jsonl"
    only_summaries.write_text('{"type":"summary","summary":"Old chat","leafUuid":"x"}\n')
    (record,) = read("claude-code", only_summaries)  # no time known: it waits, never the mtime
    assert not record.complete and record.error is None and not record.drafts
    os.utime(only_summaries, ns=(1_717_000_000_123_000_000, 1_717_000_000_123_000_000))
    (record,) = read("claude-code", only_summaries)  # unchanged for long: its chat is gone
    assert record.complete and record.skipped == 1 and not record.drafts and not record.error
    leaf = {"type": "user", "uuid": "x", "sessionId": "older", "cwd": "/home/dev/webapp",
            "timestamp": "2024-05-01T10:00:00Z", "message": {"role": "user", "content": "hi"}}  # fmt: skip
    (tmp_path / "older.jsonl").write_text(json.dumps(leaf) + "\n")
    (record,) = read("claude-code", only_summaries)  # where the chat it titles ends
    draft = record.drafts[0]
    assert (draft.session_id, draft.ts_ms, draft.cwd) == (
        "older",
        1_714_557_600_000,
        "/home/dev/webapp",
    )


def test_claude_code_bad_lines_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": "s",
            "message": {"role": "user", "content": "x"},
        },
        {"type": "user", "uuid": "u2", "timestamp": "2025-01-01T00:00:00Z"},
        {"type": "assistant", "uuid": "u3", "timestamp": "soon", "message": {"content": []}},
        {"uuid": "u4", "timestamp": "2025-01-01T00:00:00Z"},
        {"type": "user", "timestamp": "2025-01-01T00:00:00Z", "message": {"content": 5}},
        {"type": "user", "timestamp": "2025-01-01T00:00:00Z", "message": {"content": "ok"}},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    records = read("claude-code", path)
    assert [r.error for r in records] == [
        "missing field 'timestamp'",
        "missing field 'message'",
        "unparseable timestamp 'soon'",
        "missing field 'type'",
        "field 'message.content' must be a string or a list of blocks",
        None,
    ]
    ok = records[-1].drafts[0]
    assert (ok.session_id, ok.event_id, ok.project) == ("s", None, None)  # file stem, no uuid


# --- Codex -------------------------------------------------------------------------------------


def test_codex_current_format() -> None:
    records = read("codex", CODEX_NEW)
    assert len(records) == 22
    assert all(r.error is None for r in records)
    assert by_type(records) == {
        "system": 5,
        "user_message": 3,
        "assistant_message": 1,
        "tool_call": 4,
        "tool_result": 3,
    }
    # the opening's user instructions (kept by hash on the session event), turn_context,
    # reasoning, and 4 event_msg mirrors (user/agent message, agent_reasoning, token_count)
    assert sum(r.skipped for r in records) == 7
    events = drafts(records)
    assert {(d.session_id, d.cwd, d.event_id) for d in events} == {
        (CODEX_SID, "/home/dev/api", None)
    }
    assert all(d.metadata["git_branch"] == "feature/healthz" for d in events)
    system = [d for d in events if d.event_type == "system"]
    assert [(d.metadata.get("kind"), d.metadata["bookkeeping"]) for d in system] == [
        ("session_meta", "instructions"),
        (None, "context"),
        ("turn_aborted", "interrupt"),
        ("compacted", "compact_summary"),
        (None, "instructions"),  # a developer message after the opening: a stub with its hash
    ]
    assert [b["kind"] for b in system[0].metadata["instructions"]] == ["user_instructions"]
    assert system[4].text.startswith("[Codex developer instructions: developer, 33 characters")
    user = next(d for d in events if d.event_type == "user_message")
    assert user.text == "Add a /healthz endpoint to the API server that returns the git sha."
    assert user.ts_ms == ms("2025-06-03T10:15:01.053Z")
    calls = [d for d in events if d.event_type == "tool_call"]
    assert [d.metadata["tool_name"] for d in calls] == [
        "shell",
        "apply_patch",
        "local_shell",
        "web_search",
    ]
    assert calls[0].text == (
        'shell {"command":["bash","-lc","rg -n \\"app.get\\" src"],'
        '"workdir":"/home/dev/api","timeout_ms":120000}'
    )
    assert calls[0].metadata["tool_use_id"] == "call_Hq1"
    results = [d for d in events if d.event_type == "tool_result"]
    assert results[0].text.startswith("src/server.ts:12:app.get('/users', listUsers)\n")
    assert (results[0].metadata["exit_code"], results[0].metadata["is_error"]) == (0, False)
    assert "exit_code" not in results[1].metadata
    assert (results[2].metadata["exit_code"], results[2].metadata["is_error"]) == (1, True)
    image_line = next(r for r in records if r.line == 18)
    assert [(d.text, d.part) for d in image_line.drafts] == [
        ("Here is what CI shows — can you look up the usual convention?", 0),
        ("[image]", 1),
    ]


def test_codex_reasoning_on_request() -> None:
    records = read("codex", CODEX_NEW, options=THINKING)
    thinking = [d for d in drafts(records) if d.metadata.get("kind") == "thinking"]
    assert [d.text for d in thinking] == ["**Locating route definitions**"]
    assert sum(r.skipped for r in records) == 6


def test_codex_resumed_read_still_knows_the_session() -> None:
    records = read("codex", CODEX_NEW)
    tail = read("codex", CODEX_NEW, start=records[9].end_offset)
    assert tail == records[10:]
    assert {d.cwd for d in drafts(tail)} == {"/home/dev/api"}
    assert dict(SOURCES["codex"].session_hint(CODEX_NEW)) == {
        "session_id": CODEX_SID,
        "cwd": "/home/dev/api",
        "project": "api",
    }


def test_codex_legacy_format() -> None:
    records = read("codex", CODEX_LEGACY)
    assert all(r.error is None for r in records)
    assert sum(r.skipped for r in records) == 4  # three state markers, reasoning
    events = drafts(records)
    assert [d.event_type for d in events] == [
        "system",  # the session, its instructions by hash
        "system",
        "user_message",
        "tool_call",
        "tool_result",
        "assistant_message",
    ]
    start = ms("2025-04-18T09:30:00Z")
    lines = [r.line for r in records for _ in r.drafts]
    assert [d.ts_ms for d in events] == [start + line - 1 for line in lines]
    assert {d.session_id for d in events} == {CODEX_LEGACY_SID}
    assert events[0].metadata["instructions"][0]["kind"] == "instructions"
    assert events[4].text.startswith("ruff check .\nsrc/cli.py:88:101: E501")
    assert (events[4].metadata["exit_code"], events[4].metadata["is_error"]) == (2, True)
    assert events[3].text == 'shell {"command":["make","lint"]}'
    assert read("codex", CODEX_LEGACY, start=records[5].end_offset) == records[6:]


def test_codex_session_id_from_file_name(tmp_path: Path) -> None:
    uuid = "11111111-2222-4333-8444-555555555555"
    path = tmp_path / f"rollout-2025-06-03T10-15-00-{uuid}.jsonl"
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    path.write_text(
        json.dumps({"timestamp": "2025-06-03T10:15:00Z", "type": "response_item", "payload": item})
        + "\n"
    )
    (record,) = read("codex", path)
    assert record.drafts[0].session_id == uuid
    assert record.drafts[0].project is None


CODEX_SHARED = Path(__file__).resolve().parents[2] / "shared/datasets/transcripts/codex"


@pytest.mark.skipif(not CODEX_SHARED.is_dir(), reason="../shared transcripts not present")
def test_codex_app_tool_keeps_its_namespace() -> None:
    """Codex 0.14x records an app's (MCP) tool as ``namespace`` + ``name``; the name alone
    (``_fetch_pr``) lost which server was called. On the real rollout (MIT, ../shared)."""
    events = drafts(read("codex", CODEX_SHARED / "rollout-1f-4427577930-1.jsonl"))
    calls = [d for d in events if d.event_type == "tool_call"]
    apps = [d for d in calls if "tool_namespace" in d.metadata]
    assert [d.metadata["tool_name"] for d in apps] == ["mcp__codex_apps__github._fetch_pr"] * 2
    assert {d.metadata["tool_namespace"] for d in apps} == {"mcp__codex_apps__github"}
    assert apps[1].text == (
        'mcp__codex_apps__github._fetch_pr {"repo_full_name":"WiseTechGlobal/WTG.AI.Prompts",'
        '"pr_number":714}'
    )
    assert apps[1].metadata["tool_use_id"] == "call_Xpwlioxy8FILT8SdQrtnXLmE"
    plain = [d for d in calls if "tool_namespace" not in d.metadata]
    assert {d.metadata["tool_name"] for d in plain} == {"exec_command", "apply_patch", "web_search"}


# --- generic JSONL -----------------------------------------------------------------------------


def test_jsonl_good_file() -> None:
    records = read("jsonl", JSONL_GOOD)
    assert [r.line for r in records] == [1, 2, 3, 4, 6, 7, 8, 9]  # line 5 is blank
    assert all(r.error is None and r.skipped == 0 for r in records)
    events = drafts(records)
    assert events[0] == EventDraft(
        session_id="sess-a",
        ts_ms=ms("2024-01-18T10:00:00Z"),
        event_type="user_message",
        role="user",
        text="How do I rotate the API keys?",
        project="infra",
        agent="my-bot",
    )
    assert events[1].metadata == {"model": "local-7b", "latency_ms": 812, "tags": ["ops", "keys"]}
    assert (events[2].event_type, events[2].role, events[2].ts_ms) == (
        "tool_call",
        "assistant",
        1_705_572_010_000,
    )
    assert (events[3].ts_ms, events[3].event_id) == (1_705_572_012_000, "ext-0004")  # epoch s
    assert events[4].ts_ms == ms("2024-01-19T07:30:00Z")  # +02:00
    assert events[5].ts_ms == ms("2024-01-19T07:31:00Z")  # no zone: UTC
    assert events[5].text == "Grüße 👋 — naïve café ☕"
    assert (events[6].text, events[6].metadata, events[6].project) == ("", {}, None)
    assert (events[7].event_type, events[7].role, events[7].text) == (
        "session_end",
        "system",
        "bye",
    )
    assert records[-1].end_offset == JSONL_GOOD.stat().st_size  # the CRLF line included


def test_jsonl_malformed_lines_are_reported_and_the_rest_kept() -> None:
    records = read("jsonl", JSONL_BAD)
    errors = {r.line: r.error for r in records if r.error is not None}
    data = JSONL_BAD.read_bytes()
    bad_byte = data.index(b"\xff")
    assert errors == {
        2: "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 90 (char 89)",
        3: "missing field 'timestamp'",
        4: "unparseable timestamp 'yesterday at noon'",
        5: "field 'role' must be one of user, assistant, tool, system (got 'bot')",
        6: "field 'text' must be a string (got int)",
        7: "field 'metadata' must be an object (got list)",
        8: f"invalid UTF-8 at byte {bad_byte}",
        9: "line is not a JSON object",
        12: "field 'session_id' must be a non-empty string (got '')",
        13: "field 'event_type' must be one of user_message, assistant_message, tool_call, "
        "tool_result, system, session_start, session_end (got 'chat')",
        14: "invalid JSON: Unterminated string starting at: line 1 column 35 (char 34)",
    }
    assert [d.text for d in drafts(records)] == ["first good line", "still fine: ünïcödé"]
    assert [r.line for r in records if r.drafts] == [1, 11]
    assert [r.complete for r in records] == [True] * (len(records) - 1) + [False]
    assert records[-1].end_offset == len(data)


def test_jsonl_unterminated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "tail.jsonl"
    line = b'{"session_id":"s","timestamp":1705572000000,"role":"user","text":"done"}'
    path.write_bytes(line + b"\n" + line)
    records = read("jsonl", path)
    assert [r.complete for r in records] == [True, True]
    assert records[1].end_offset == 2 * len(line) + 1
    path.write_bytes(line + b"\n" + line[:-1])
    records = read("jsonl", path)
    assert (records[1].complete, records[1].error is not None) == (False, True)
    # a parsed object that fails validation is complete: waiting will not fix it
    path.write_bytes(line + b"\n" + b'{"session_id":"s"}')
    assert read("jsonl", path)[1].complete is True


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("claude-code", CC_MAIN),
        ("claude-code", CC_SECOND),
        ("codex", CODEX_NEW),
        ("codex", CODEX_LEGACY),
        ("jsonl", JSONL_GOOD),
        ("jsonl", JSONL_BAD),
    ],
)
def test_reading_from_any_record_end_yields_exactly_the_rest(name: str, path: Path) -> None:
    records = read(name, path)
    for index, record in enumerate(records):
        assert read(name, path, start=record.end_offset) == records[index + 1 :]


def test_offsets_must_be_line_starts_inside_the_file() -> None:
    with pytest.raises(IngestError, match="not at the start of a line"):
        read("jsonl", JSONL_GOOD, start=5)
    with pytest.raises(IngestError, match="past the end of the file"):
        read("jsonl", JSONL_GOOD, start=JSONL_GOOD.stat().st_size + 1)


def test_jsonl_repairs_lone_surrogates_and_rejects_nan(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf"  # a BOM before the first line is ignored
        b'{"session_id":"s","timestamp":1705572000000,"role":"user","text":"cut \\ud83d here",'
        b'"metadata":{"pair":"\\ud83d\\ude00"}}\n'
        b'{"session_id":"s","timestamp":1705572000000,"role":"user","text":"x","metadata":{"v":NaN}}\n'
    )
    first, second = read("jsonl", path)
    assert first.drafts[0].text == "cut \ufffd here"
    assert first.drafts[0].metadata == {"pair": "😀"}
    assert second.error == "invalid JSON: NaN is not valid JSON"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-18T10:00:00Z", 1_705_572_000_000),
        ("2024-01-18T10:00:00.1234567Z", 1_705_572_000_123),
        ("2024-01-18T11:00:00+01:00", 1_705_572_000_000),
        ("2024-01-18T10:00:00", 1_705_572_000_000),
        (1_705_572_000_000, 1_705_572_000_000),
        (1_705_572_000, 1_705_572_000_000),
        (1_705_572_000.5, 1_705_572_000_500),
        ("1705572000000", 1_705_572_000_000),
    ],
)
def test_parse_timestamp(value: Any, expected: int) -> None:
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    "value", ["", "not a date", True, None, [1], float("nan"), -5, "1969-12-31T00:00:00Z"]
)
def test_parse_timestamp_rejects(value: Any) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        parse_timestamp(value)


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_optional_name = st.none() | st.text(min_size=1)


@st.composite
def _event_lines(draw: st.DrawFn) -> tuple[dict[str, Any], EventDraft]:
    event_type = draw(st.sampled_from(EVENT_TYPES))
    role = draw(st.sampled_from(ROLES))
    omit = draw(st.sampled_from(["none", "role", "event_type"]))
    ts_ms = draw(st.integers(min_value=100_000_000_000, max_value=MAX_TS_MS))
    draft = EventDraft(
        session_id=draw(st.text(min_size=1)),
        ts_ms=ts_ms,
        event_type=DEFAULT_TYPE_FOR_ROLE[role] if omit == "event_type" else event_type,
        role=DEFAULT_ROLE_FOR_TYPE[event_type] if omit == "role" else role,
        text=draw(st.text()),
        metadata=draw(st.dictionaries(st.text(), _json_values, max_size=5)),
        project=draw(_optional_name),
        agent=draw(_optional_name),
        event_id=draw(_optional_name),
    )
    obj: dict[str, Any] = {
        "session_id": draft.session_id,
        "timestamp": draw(st.sampled_from([iso_ms(ts_ms), ts_ms])),
        "text": draft.text,
    }
    if omit != "role":
        obj["role"] = role
    if omit != "event_type":
        obj["event_type"] = event_type
    write_empty_metadata = draw(st.booleans())
    if draft.metadata or write_empty_metadata:
        obj["metadata"] = draft.metadata
    for key in ("project", "agent", "event_id"):
        if getattr(draft, key) is not None:
            obj[key] = getattr(draft, key)
    return obj, draft


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event_lines(), min_size=1, max_size=6), st.booleans())
def test_jsonl_round_trips_random_events(
    events: list[tuple[dict[str, Any], EventDraft]], ascii_only: bool
) -> None:
    lines = [json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8") for obj, _ in events]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        records = read("jsonl", path)
    assert [r.error for r in records] == [None] * len(events)
    assert drafts(records) == [draft for _, draft in events]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    assert [(r.offset, r.end_offset) for r in records] == list(itertools.pairwise(offsets))


# --- OpenAI chat -------------------------------------------------------------------------------


def test_openai_chat_document() -> None:
    records = read("openai-chat", OPENAI_CHAT)
    assert [r.line for r in records] == list(range(1, 9))
    assert all(r.error is None for r in records)
    assert records[-1].skipped == 1  # an empty assistant message
    events = drafts(records)
    assert [d.event_type for d in events] == [
        "system",
        "user_message",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "assistant_message",
        "user_message",
    ]
    assert {d.session_id for d in events} == {"chat-42"}
    created = 1_717_400_000_000
    assert [d.ts_ms for d in events] == [created + i for i in (0, 1, 2, 2, 3, 4, 5, 6)]
    assert (
        events[2].text == 'check_availability {"party_size":4,"date":"2024-06-07","time":"19:00"}'
    )
    assert events[2].metadata == {
        "exported_by": "chat-export 1.2",
        "model": "gpt-4o-2024-08-06",
        "tool_name": "check_availability",
        "tool_use_id": "call_9xA",
    }
    assert (events[3].part, events[3].metadata["tool_use_id"]) == (1, "call_9xB")
    assert events[5].text == "12:00\u201323:00"
    assert events[5].metadata["tool_name"] == "get_opening_hours"
    assert (
        events[6].text == "Yes — tables 12 and 15 are free at 19:00 on Friday.\nShall I book one?"
    )
    assert events[7].text == "Book 12, and here is my loyalty card:\n[image]"
    # offsets are the exact byte span of each message, non-ASCII before them included
    data = OPENAI_CHAT.read_bytes()
    messages = json.loads(data)["messages"]
    assert [json.loads(data[r.offset : r.end_offset]) for r in records] == messages


def test_openai_conversation_list(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(OPENAI_CONVS.read_bytes())
    os.utime(path, ns=(1_717_000_000_000_000_000, 1_717_000_000_000_000_000))
    records = read("openai-chat", path)
    assert [r.line for r in records] == list(range(1, 8))
    assert {r.line: r.error for r in records if r.error} == {
        5: "conversation 2, message 2: missing field 'role'",
        7: "conversation 2, message 4: field 'content' must be a string, a list of parts or null",
    }
    events = drafts(records)
    assert [(d.session_id, d.event_type) for d in events] == [
        ("conv-1", "system"),
        ("conv-1", "user_message"),
        ("conv-1", "assistant_message"),
        ("conversations-2", "user_message"),
        ("conversations-2", "assistant_message"),
    ]
    assert events[0].metadata == {"kind": "developer"}
    assert [d.ts_ms for d in events[:3]] == [ms("2024-05-01T08:00:00Z") + i for i in range(3)]
    # no `created`: the conversation ends at the file's mtime, 1 ms per message
    assert [d.ts_ms for d in events[3:]] == [1_717_000_000_000 - 3, 1_717_000_000_000 - 1]


def test_openai_bare_message_list_and_bad_documents(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]'
    )
    records = read("openai-chat", path)
    assert [(d.session_id, d.text) for d in drafts(records)] == [
        ("plain", "hi"),
        ("plain", "hello"),
    ]
    assert [r.line for r in records] == [1, 2]
    with pytest.raises(IngestError, match="read whole"):
        read("openai-chat", path, start=3)
    path.write_text('{"messages": [{"role": "user", "content": "hi"}')
    (broken,) = read("openai-chat", path)
    assert broken.error is not None and broken.error.startswith(
        "invalid JSON: Expecting ',' delimiter"
    )
    path.write_text('{"model": "x"}')
    (no_messages,) = read("openai-chat", path)
    assert no_messages.error == "invalid JSON: the document is an object without a 'messages' list"


# --- registry and sniffing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CC_MAIN, "claude-code"),
        (CC_SECOND, "claude-code"),
        (CODEX_NEW, "codex"),
        (CODEX_LEGACY, "codex"),
        (JSONL_GOOD, "jsonl"),
        (JSONL_BAD, "jsonl"),
        (OPENAI_CHAT, "openai-chat"),
        (OPENAI_CONVS, "openai-chat"),
    ],
)
def test_sniff_fixture_formats(path: Path, expected: str) -> None:
    found = sniff_format(path)
    assert found is not None and found.name == expected


def test_sniff_rejects_binary_empty_and_unknown(tmp_path: Path) -> None:
    cases = {
        "empty.jsonl": b"",
        "blank.jsonl": b"\n\n  \n",
        "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
        "other.jsonl": b'{"foo": 1}\n{"foo": 2}\n',
        "text.txt": b"just some notes\n",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        assert sniff_format(path) is None, name


def test_sniff_with_a_first_line_longer_than_the_head(tmp_path: Path) -> None:
    cc = tmp_path / "cc.jsonl"
    big = "x" * 40_000
    cc.write_text(
        json.dumps(
            {
                "parentUuid": None,
                "sessionId": "s",
                "type": "user",
                "message": {"role": "user", "content": big},
            }
        )
        + "\n"
    )
    codex = tmp_path / "rollout.jsonl"
    meta = {"id": "i", "timestamp": "2025-06-03T10:15:00Z", "cwd": "/w", "instructions": big}
    codex.write_text(
        json.dumps(
            {"timestamp": "2025-06-03T10:15:00Z", "type": "session_meta", "payload": meta},
            separators=(",", ":"),
        )
        + "\n"
    )
    assert [getattr(sniff_format(p), "name", None) for p in (cc, codex)] == ["claude-code", "codex"]


def test_registry() -> None:
    assert set(SOURCES) == {"jsonl", "claude-code", "codex", "gemini", "openai-chat", "specstory"}
    for name, source in SOURCES.items():
        assert source.name == name
        assert isinstance(source.agent, str) and source.agent
    assert get_source("codex") is SOURCES["codex"]
    assert {n: s.incremental for n, s in SOURCES.items()} == {
        "gemini": True, "claude-code": True, "codex": True, "jsonl": True, "openai-chat": False,
        "specstory": True,
    }  # fmt: skip
    with pytest.raises(
        ConfigError,
        match=r"unknown format 'csv' \(valid: auto, gemini, claude-code, codex, jsonl, openai-chat, "
        r"specstory\)",
    ):
        get_source("csv")


def test_resuming_after_a_last_line_that_later_got_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "growing.jsonl"
    line = b'{"session_id":"s","timestamp":1705572000000,"role":"user","text":"one"}'
    path.write_bytes(line)
    (first,) = read("jsonl", path)
    assert (first.complete, first.end_offset) == (True, len(line))
    assert read("jsonl", path, start=first.end_offset) == []
    path.write_bytes(line + b"\r\n" + line.replace(b"one", b"two") + b"\n")
    (second,) = read("jsonl", path, start=first.end_offset)
    assert (second.line, second.drafts[0].text) == (2, "two")


def test_openai_conversation_level_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            [
                {"session_id": 5, "messages": [{"role": "user", "content": "a"}]},
                {"created": "last tuesday", "messages": [{"role": "user", "content": "b"}]},
                "not a conversation",
            ]
        )
    )
    assert [r.error for r in read("openai-chat", path)] == [
        "conversation 1, message 1: field 'session_id' must be a non-empty string",
        "conversation 2, message 1: field 'created': unparseable timestamp 'last tuesday'",
        "conversation 3, message 1: not a conversation object with 'messages'",
    ]
    data = b'\xef\xbb\xbf[{"role": "user", "content": "caf\xe9"}]'
    path.write_bytes(data)
    (record,) = read("openai-chat", path)
    bad_byte = data.index(b"\xe9")
    assert record.error == f"invalid UTF-8 at byte {bad_byte}"


def test_codex_bad_lines_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    lines = [
        {"type": "response_item", "payload": item},
        {"timestamp": "2025-06-03T10:15:00Z", "type": "response_item", "payload": "text"},
        {
            "timestamp": "2025-06-03T10:15:00Z",
            "type": "response_item",
            "payload": {**item, "role": "bot"},
        },
        {"timestamp": "2025-06-03T10:15:00Z", "type": "future_kind", "payload": {}},
        {"role": "user"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    records = read("codex", path)
    assert [(r.error, r.skipped) for r in records] == [
        ("missing field 'timestamp'", 0),
        ("field 'payload' must be an object", 0),
        ("unknown message role 'bot'", 0),
        (None, 1),
        ("missing field 'type'", 0),
    ]
