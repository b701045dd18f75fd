"""Fuzzing every input edge: importers, the JSONL event parser, queries and filters, time
expressions, and MCP tool arguments. No crash and no hang — only memtoc errors with a message.

``MEMTOC_FUZZ_EXAMPLES`` sets the examples per test (default 40, so the suite stays fast; the
soak run, ``make soak``, sets it so the file runs ≥ 100k cases in total). Every case must finish
within ``DEADLINE`` (a hang shows up as a hypothesis deadline failure).

Inputs are shape-aware: records are built from the keys and type names the four readers look at
(Claude Code, Codex, generic JSONL, OpenAI chat), with values of any JSON type, so the fuzzer
reaches deep into each parser instead of stopping at "not JSON".
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import typer
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from memtoc.errors import MemtocError
from memtoc.eval.soak import write_lines
from memtoc.eval.soak_child import open_memory
from memtoc.ingest.sources import SOURCES, SourceOptions, sniff_format
from memtoc.ingest.sources.jsonl import parse_event
from memtoc.memory import Memory
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.retrieval.timeparse import parse_time
from memtoc.surfaces.cli.timeparse import parse_instant
from memtoc.surfaces.mcp_server import build_server
from memtoc.surfaces.mcp_time import parse_when
from memtoc.text.fts_text import build_match

EXAMPLES = int(os.environ.get("MEMTOC_FUZZ_EXAMPLES", "40"))
DEADLINE = timedelta(seconds=10)
PURE_WEIGHT = 15
"""Pure parsers (no file, no store) cost microseconds: they get 15x the examples."""


def _profile(weight: int = 1) -> Any:
    return settings(
        max_examples=EXAMPLES * weight,
        deadline=DEADLINE,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )


FUZZ = _profile()
FUZZ_PURE = _profile(PURE_WEIGHT)
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

KEYS = [
    "type",
    "uuid",
    "sessionId",
    "session_id",
    "timestamp",
    "message",
    "role",
    "content",
    "text",
    "event_type",
    "event_id",
    "project",
    "agent",
    "metadata",
    "payload",
    "name",
    "input",
    "output",
    "arguments",
    "call_id",
    "tool_use_id",
    "tool_call_id",
    "tool_calls",
    "function",
    "function_call",
    "is_error",
    "summary",
    "leafUuid",
    "cwd",
    "git",
    "branch",
    "isMeta",
    "isSidechain",
    "isCompactSummary",
    "subtype",
    "level",
    "reason",
    "refusal",
    "model",
    "id",
    "created",
    "exit_code",
    "success",
    "thinking",
    "messages",
    "kind",
]
TYPE_NAMES = [
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "summary",
    "message",
    "response_item",
    "session_meta",
    "event_msg",
    "function_call",
    "function_call_output",
    "local_shell_call",
    "reasoning",
    "text",
    "thinking",
    "tool_use",
    "tool_result",
    "input_text",
    "output_text",
    "input_image",
    "refusal",
    "turn_aborted",
    "error",
    "user_message",
    "assistant_message",
    "session_start",
    "session_end",
]
odd_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(TYPE_NAMES),
    st.sampled_from(["2024-01-18T10:00:00Z", "2024-02-30", "1705572000000", "", "\x00", "NaN"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    odd_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=6),
    ),
    max_leaves=25,
)
records = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=9)


def _encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8")


lines = st.one_of(
    records.map(_encode),
    json_values.map(_encode),
    st.binary(max_size=120),
    records.map(_encode).map(lambda b: b[: len(b) // 2]),  # cut mid-record
)
files = st.tuples(st.lists(lines, max_size=8), st.booleans()).map(
    lambda t: b"\n".join(t[0]) + (b"\n" if t[1] else b"")
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """A small processed store: the Claude Code fixture plus synthetic history."""
    home = tmp_path_factory.mktemp("fuzz")
    transcript = home / "history.jsonl"
    import random

    write_lines(transcript, 0, 400, random.Random(5))
    with open_memory(str(home / "memtoc.db")) as mem:
        mem.ingest([FIXTURES / "claude-code", transcript])
        mem.process()
        mem.rollup(force=True)
        yield mem


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the fuzzed files (rewritten per case: cheaper than a folder per case)."""
    return tmp_path_factory.mktemp("fuzz-files")


# -- importers ---------------------------------------------------------------------------------
@FUZZ
@given(files, st.sampled_from(sorted(SOURCES)), st.booleans())
def test_every_reader_survives_any_file(
    scratch: Path, data: bytes, fmt: str, thinking: bool
) -> None:
    path = scratch / "t.jsonl"
    path.write_bytes(data)
    try:
        records = list(SOURCES[fmt].read(path, 0, SourceOptions(include_thinking=thinking)))
    except MemtocError as exc:
        assert str(exc)  # a whole-document format may refuse the file, with a message
        return
    sniff_format(path)  # never raises for a file it can read
    for record in records:
        assert record.error is None or record.error.strip()
        assert 0 <= record.offset <= record.end_offset <= len(data)
        for draft in record.drafts:
            assert isinstance(draft.text, str) and isinstance(draft.ts_ms, int)


@FUZZ
@given(files, st.sampled_from(["auto", *sorted(SOURCES)]))
def test_ingest_keeps_the_good_records_and_names_the_bad(
    memory: Memory, scratch: Path, data: bytes, fmt: str
) -> None:
    path = scratch / "fuzz.jsonl"
    path.write_bytes(data)
    before = memory.store.count_events()
    try:
        report = memory.ingest([path], fmt=fmt, project="fuzz", rescan=True)
    except MemtocError as exc:
        assert str(exc)
        return
    assert memory.store.count_events() == before + report.ingested
    for rejection in report.rejections:
        assert rejection.reason.strip()


@FUZZ_PURE
@given(json_values)
def test_jsonl_event_parser_returns_a_draft_or_a_reason(value: Any) -> None:
    result = parse_event(value, "fuzz")
    assert (isinstance(result, str) and result.strip()) or hasattr(result, "ts_ms")


@FUZZ
@given(st.lists(records, max_size=5))
def test_ingest_records_rejects_with_reasons(memory: Memory, batch: list[dict[str, Any]]) -> None:
    report = memory.ingest_records(batch, project="fuzz-records")
    assert report.ingested + report.duplicates + len(report.rejections) == len(batch)
    assert all(r.reason.strip() for r in report.rejections)


# -- queries and time --------------------------------------------------------------------------
query_text = st.one_of(
    st.text(max_size=120),
    st.lists(
        st.sampled_from(
            [
                '"',
                "*",
                "NEAR(",
                "AND",
                "OR",
                "NOT",
                "(",
                ")",
                "^",
                ":",
                "-",
                "+",
                "'",
                "%",
                "_",
                "auth",
                "token",
                "src/app.py",
                "DROP TABLE events;--",
                "\x00",
                "é",
                "日本",
            ]
        ),
        max_size=12,
    ).map(" ".join),
)
_FTS = sqlite3.connect(":memory:", check_same_thread=False)
_FTS.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
_FTS.execute("INSERT INTO t(body) VALUES ('auth token refresh in src/app.py')")
levels = st.one_of(
    st.none(), st.sampled_from(["segment", "day", "week", "month", "year"]), odd_text
)
depths = st.one_of(st.sampled_from(["L0", "L1", "L2"]), odd_text)


@FUZZ
@given(
    query_text,
    levels,
    depths,
    st.integers(min_value=-5, max_value=10**9),
    st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
)
def test_search_takes_any_text_and_filter(
    memory: Memory, query: str, level: str | None, depth: str, limit: int, since: int | None
) -> None:
    try:
        result = memory.search(query, level=level, depth=depth, limit=limit, since_ms=since)
    except MemtocError as exc:
        assert str(exc).strip()
        return
    assert len(result.items) <= max(limit, 0)
    assert result.tokens == sum(item.tokens for item in result.items)


@FUZZ_PURE
@given(query_text)
def test_match_expression_is_built_or_declined(query: str) -> None:
    """The FTS5 expressions built from any text are valid FTS5 syntax."""
    match = build_match(query)
    if match is None:
        return
    assert match.groups
    for expression in (match.any_terms, match.all_terms):
        _FTS.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@FUZZ
@given(query_text)
def test_bm25_never_raises(memory: Memory, query: str) -> None:
    hits = bm25_search(memory.store, query, SearchFilters(), limit=5)
    assert all(0.0 <= h.score <= 1.0 for h in hits)


@FUZZ_PURE
@given(
    st.one_of(st.text(max_size=60), odd_text),
    st.integers(min_value=0, max_value=4 * 10**12),
    st.sampled_from(["UTC", "Europe/London", "Pacific/Chatham"]),
)
def test_time_inputs_parse_or_fail_clearly(value: str, now: int, zone: str) -> None:
    parse_time(value, now, ZoneInfo(zone))
    try:
        parse_when(value, now_ms=now, tz=ZoneInfo(zone), edge="end", name="since")
    except MemtocError as exc:
        assert str(exc).strip()
    try:
        parse_instant(value, now_ms=now, option="--since")
    except typer.BadParameter as exc:  # the CLI's own error type: shown as a usage error
        assert "--since" in str(exc.param_hint) and str(exc).strip()


# -- MCP tool arguments ------------------------------------------------------------------------
TOOLS = {
    "memory_search": ("query", "project", "level", "since", "until", "depth", "limit", "kinds"),
    "memory_toc": ("node_id", "project", "depth"),
    "memory_expand": ("grip_id", "before", "after"),
    "memory_timeline": ("since", "until", "level", "project"),
    "memory_context": ("project", "budget"),
    "memory_bookmarks": ("project", "limit", "query"),
    "memory_status": (),
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(TOOLS)))
    args: dict[str, Any] = {}
    for key in TOOLS[name]:
        if draw(st.booleans()):
            args[key] = draw(st.one_of(query_text, scalars, json_values))
    return name, args


@pytest.fixture(scope="module")
def mcp_client(memory: Memory) -> Iterator[Any]:
    """One MCP client session over the fuzz store, driven from sync tests through a portal."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_server(memory))) as client,
    ):
        yield portal, client


@FUZZ
@given(tool_calls())
def test_mcp_tools_answer_or_name_the_problem(
    mcp_client: Any, call: tuple[str, dict[str, Any]]
) -> None:
    portal, client = mcp_client
    name, args = call
    result = portal.call(client.call_tool, name, args)
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        # The SDK's generic text for an unexpected exception (a crash), with nothing after it.
        assert text.strip() and text.strip() != f"Error executing tool {name}", (name, args)
