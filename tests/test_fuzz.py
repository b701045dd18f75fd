"""Fuzzing every input edge: importers, the JSONL event parser, queries and filters, time
expressions, and MCP tool arguments. No crash and no hang — only memtoc errors with a message.

``MEMTOC_FUZZ_EXAMPLES`` sets the examples per test (default 40, so the suite stays fast; the
soak run, ``make soak``, sets it so the file runs ≥ 100k cases in total). Every case must finish
within ``DEADLINE`` (a hang shows up as a hypothesis deadline failure).

Inputs are shape-aware: records are built from the keys and type names the readers look at
(Claude Code, Codex, generic JSONL, OpenAI chat, Gemini CLI; SpecStory Markdown from its own
fragments), with values of any JSON type and the poisons of issue #16 (instants past 9999 or before
1970, non-ASCII digits, 400-digit numbers, nesting hundreds deep), so the fuzzer reaches deep into
each parser instead of stopping at "not JSON".

Each test tallies its cases, the records it fed, the rejections they got and the tracebacks (an
exception that is not a memtoc error, or a reader error the importer's net caught); the module
prints the totals at the end (``fuzz figures: …``) and, with ``MEMTOC_FUZZ_REPORT=PATH``, writes
them as JSON.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
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
from memtoc.model import EVENT_TYPES, MAX_TS_MS, ROLES, iso_ms
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.retrieval.timeparse import parse_bound, parse_time
from memtoc.surfaces.mcp_server import build_server
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
    # Gemini CLI
    "projectHash",
    "startTime",
    "lastUpdated",
    "$set",
    "$rewindTo",
    "toolCalls",
    "thoughts",
    "args",
    "result",
    "status",
    "resultDisplay",
    "functionResponse",
    "response",
    "directories",
    "subject",
    "description",
    "tokens",
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
    "gemini",
    "info",
    "warning",
    "main",
    "subagent",
]
POISON = [
    MAX_TS_MS,
    MAX_TS_MS + 1,
    (1 << 48) - 1,  # year 10889, the largest instant a ULID holds
    int("9" * 400),
    -1,
    iso_ms(MAX_TS_MS),
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999Z",
    "\u0661\u0667\u0660\u0665\u0665\u0667\u0662\u0660\u0660\u0660\u0660\u0660\u0660",
    "\u0660",
    "\u00b2",
    "9" * 400,
    "nul\x00byte",
    "x" * 1100,
]
"""The inputs issue #16 found poisoning a store or crashing a command."""
odd_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(TYPE_NAMES),
    st.sampled_from(["2024-01-18T10:00:00Z", "2024-02-30", "1705572000000", "", "\x00", "NaN"]),
    st.sampled_from([p for p in POISON if isinstance(p, str)]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([p for p in POISON if isinstance(p, int)]),
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
instants = st.integers(min_value=0, max_value=MAX_TS_MS)


def mostly(valid: Any, odd: Any = odd_text) -> Any:
    """``valid`` three times in four, else ``odd``."""
    return st.one_of(valid, valid, valid, odd)


timestamps = mostly(
    st.one_of(instants, instants.map(iso_ms)), st.one_of(st.sampled_from(POISON), scalars)
)
names = st.text(min_size=1, max_size=20)
near_events = st.fixed_dictionaries(
    {
        "session_id": mostly(names),
        "timestamp": timestamps,
        "role": mostly(st.sampled_from(ROLES)),
        "text": mostly(st.text(max_size=80)),
    },
    optional={
        "event_type": mostly(st.sampled_from(EVENT_TYPES)),
        "event_id": mostly(names),
        "project": mostly(names),
        "agent": mostly(names),
        "metadata": mostly(
            st.dictionaries(st.text(max_size=8), json_values, max_size=4), json_values
        ),
    },
)
"""Generic JSONL events that are valid or nearly so (one field off, a poisoned instant), so the
accept path is fuzzed too: any instant of the range must go in and be filed."""


def _encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8")


def _deep(depth: int, opener: bytes) -> bytes:
    closer = b"]" if opener == b"[" else b"}"
    inner = opener * depth if opener == b"[" else b'{"a":' * depth
    return inner + b"0" * (opener != b"[") + closer * depth


deep_lines = st.tuples(
    st.integers(min_value=90, max_value=1500), st.sampled_from([b"[", b"{"]), records
).map(
    lambda t: (
        _encode(t[2])[:-1]
        + (b", " if len(t[2]) else b"")
        + b'"metadata": '
        + _deep(t[0], t[1])
        + b"}"
    )
)
"""A record with a value nested 90 to 1,500 levels deep (990 raised RecursionError)."""
raw_number_lines = st.tuples(
    records, st.sampled_from([b"1e400", b"-1e400", b"9" * 400, b"1e18"])
).map(
    lambda t: _encode({**t[0], "timestamp": 0}).replace(b'"timestamp": 0', b'"timestamp": ' + t[1])
)
"""Numbers JSON can hold but a float cannot (``1e400`` decodes as infinity)."""
lines = st.one_of(
    records.map(_encode),
    near_events.map(_encode),
    json_values.map(_encode),
    st.binary(max_size=120),
    records.map(_encode).map(lambda b: b[: len(b) // 2]),  # cut mid-record
    deep_lines,
    raw_number_lines,
)
jsonl_files = st.tuples(st.lists(lines, max_size=8), st.booleans()).map(
    lambda t: b"\n".join(t[0]) + (b"\n" if t[1] else b"")
)
gemini_documents = st.fixed_dictionaries(
    {"sessionId": odd_text, "messages": st.lists(records, max_size=5)},
    optional={"projectHash": odd_text, "startTime": odd_text, "summary": json_values},
).map(lambda d: json.dumps(d, indent=2).encode())
"""A Gemini CLI session document (the layout up to 0.38)."""
SPECSTORY_FRAGMENTS = [
    "<!-- Generated by SpecStory, Markdown v2.1.0 -->",
    "# 2026-01-16 22:28:53Z",
    "<!-- Claude Code Session 3e14b6e6-2330 (2026-01-16 22:28:53Z) -->",
    "<!-- Cursor IDE Session x -->",
    "_**User (2026-01-16 22:28:53Z)**_",
    "_**User (9999-12-31 23:59:59Z)**_",
    "_**User (10889-01-01 00:00:00Z)**_",
    "_**Agent (claude-opus-4-5 2026-01-16 22:28:59Z)**_",
    "_**Agent - sidechain (model 2026-01-16 22:29:01Z)**_",
    "_**Agent**_",
    "<think><details><summary>Thought Process</summary>",
    "</details></think>",
    '<tool-use data-tool-type="shell" data-tool-name="Bash"><details>',
    "<summary>Tool use: **Bash**</summary>",
    "</details></tool-use>",
    "```text",
    "```",
    "**Answer:**",
    "---",
    "",
]
specstory_files = st.lists(
    st.one_of(st.sampled_from(SPECSTORY_FRAGMENTS), st.text(max_size=30)), max_size=14
).map(lambda parts: ("\n".join([SPECSTORY_FRAGMENTS[0], *parts]) + "\n").encode("utf-8", "replace"))
"""A SpecStory Markdown export assembled from the format's own lines and any text."""
files = st.one_of(jsonl_files, jsonl_files, gemini_documents, specstory_files)


TALLY: dict[str, Counter[str]] = defaultdict(Counter)
"""Per test: cases, records fed, rejections, tracebacks."""


@contextmanager
def case(test: str) -> Iterator[Counter[str]]:
    """Count one case of ``test``; an exception other than a memtoc error is a traceback."""
    tally = TALLY[test]
    tally["cases"] += 1
    try:
        yield tally
    except MemtocError:
        raise
    except Exception:
        tally["tracebacks"] += 1
        raise


def count_report(tally: Counter[str], report: Any) -> None:
    """Add an ingest report to the tally: a reader error the importer's net caught is a
    traceback (a reader bug), and fails the case."""
    tally["records"] += report.read
    tally["rejections"] += len(report.rejections)
    bugs = [r for r in report.rejections if r.reason.startswith("reader error")]
    tally["tracebacks"] += len(bugs)
    assert not bugs, bugs
    assert all(r.reason.strip() for r in report.rejections)


@pytest.fixture(scope="module", autouse=True)
def figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Leave the module's totals for the end of the run (conftest's ``pytest_terminal_summary``
    prints them) and, with ``MEMTOC_FUZZ_REPORT``, write them as JSON."""
    yield
    if not TALLY:
        return
    total: Counter[str] = Counter()
    for tally in TALLY.values():
        total.update(tally)
    line = (
        f"fuzz figures: {total['cases']:,} cases, {total['records']:,} records fed, "
        f"{total['rejections']:,} rejections, {total['tracebacks']} tracebacks"
    )
    summary = [line] + [
        f"  {test}: {tally['cases']:,} cases, {tally['records']:,} records, "
        f"{tally['rejections']:,} rejections, {tally['tracebacks']} tracebacks"
        for test, tally in sorted(TALLY.items())
    ]
    request.config.memtoc_summary = summary  # type: ignore[attr-defined]  # conftest prints it
    out = os.environ.get("MEMTOC_FUZZ_REPORT")
    if out:
        Path(out).write_text(
            json.dumps({"total": dict(total), "tests": {k: dict(v) for k, v in TALLY.items()}})
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
        # whatever the cases stored is within the supported range and files without a failure
        assert mem.store.stats()["events_out_of_range"] == 0
        assert not mem.process().failed_entries


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the fuzzed files (rewritten per case: cheaper than a folder per case)."""
    return tmp_path_factory.mktemp("fuzz-files")


suffixes = st.sampled_from([".jsonl", ".json", ".md"])


# -- importers ---------------------------------------------------------------------------------
@FUZZ
@given(files, st.sampled_from(sorted(SOURCES)), st.booleans(), suffixes)
def test_every_reader_survives_any_file(
    scratch: Path, data: bytes, fmt: str, thinking: bool, suffix: str
) -> None:
    with case("every reader, any file") as tally:
        path = scratch / f"t{suffix}"
        path.write_bytes(data)
        try:
            records = list(SOURCES[fmt].read(path, 0, SourceOptions(include_thinking=thinking)))
        except MemtocError as exc:
            assert str(exc)  # a whole-document format may refuse the file, with a message
            tally["rejections"] += 1
            return
        sniff_format(path)  # never raises for a file it can read
        tally["records"] += len(records)
        for record in records:
            assert record.error is None or record.error.strip()
            tally["rejections"] += record.error is not None
            assert 0 <= record.offset <= record.end_offset <= len(data)
            for draft in record.drafts:
                assert isinstance(draft.text, str) and isinstance(draft.ts_ms, int)


@FUZZ
@given(files, st.sampled_from(["auto", *sorted(SOURCES)]), suffixes)
def test_ingest_keeps_the_good_records_and_names_the_bad(
    memory: Memory, scratch: Path, data: bytes, fmt: str, suffix: str
) -> None:
    with case("Memory.ingest, any file, any format") as tally:
        path = scratch / f"fuzz{suffix}"
        path.write_bytes(data)
        before = memory.store.count_events()
        try:
            report = memory.ingest([path], fmt=fmt, project="fuzz", rescan=True)
        except MemtocError as exc:
            assert str(exc)
            tally["rejections"] += 1
            return
        assert memory.store.count_events() == before + report.ingested
        count_report(tally, report)


_CASES = itertools.count()


def _good(i: int, text: str, session: str) -> bytes:
    return _encode(
        {
            "session_id": session or "s",
            "timestamp": 1_705_572_000_000 + i * 1_000,
            "role": "user",
            "text": text,
            "event_id": f"good-{session}-{i}",
            "metadata": {"n": i, "text": text},
        }
    )


bad_timestamps = st.sampled_from(
    [p for p in POISON if p not in (MAX_TS_MS, iso_ms(MAX_TS_MS), "nul\x00byte", "x" * 1100)]
)
bad_lines = st.one_of(
    deep_lines,
    raw_number_lines,
    bad_timestamps.map(
        lambda ts: _encode({"session_id": "s", "timestamp": ts, "role": "user", "text": "bad"})
    ),
    st.sampled_from([b"{broken", b'{"session_id": "s"}', b"[1, 2]", b'"text"']),
    st.sampled_from(["session_id", "agent", "event_id"]).map(
        lambda key: _encode(
            {"session_id": "s", "timestamp": 0, "role": "user", "text": "x", key: "nul\x00byte"}
        )
    ),
)
"""Lines that must each be rejected, with a reason, and nothing else."""


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.text(max_size=60).map(lambda t: ("good", t)), bad_lines.map(lambda b: ("bad", b))
        ),
        max_size=10,
    ),
    st.just(""),
)
def test_one_bad_line_never_costs_a_good_one(
    memory: Memory, scratch: Path, mix: list[tuple[str, Any]], session: str
) -> None:
    """Good events mixed with the poisons of issue #16: every good one is stored and filed,
    every bad one is rejected with its line, and the pipeline has nothing to quarantine."""
    session = f"mix-{next(_CASES)}"  # each case's events are new (examples repeat values)
    with case("good lines among poisons (+ process)") as tally:
        lines = [_good(i, v, session) if kind == "good" else v for i, (kind, v) in enumerate(mix)]
        path = scratch / "mix.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        report = memory.ingest([path], fmt="jsonl", project="fuzz-mix", rescan=True)
        count_report(tally, report)
        good = [f"good-{session}-{i}" for i, (kind, _) in enumerate(mix) if kind == "good"]
        bad = [i + 1 for i, (kind, _) in enumerate(mix) if kind == "bad"]
        assert sorted(r.line or 0 for r in report.rejections) == bad, report.rejections
        assert {e.event_id for e in memory.store.get_events(good)} == set(good)
        assert not memory.process().failed_entries


@FUZZ_PURE
@given(st.one_of(json_values, near_events))
def test_jsonl_event_parser_returns_a_draft_or_a_reason(value: Any) -> None:
    with case("JSONL event parser") as tally:
        result = parse_event(value, "fuzz")
        tally["records"] += 1
        tally["rejections"] += isinstance(result, str)
        assert (isinstance(result, str) and result.strip()) or hasattr(result, "ts_ms")


@FUZZ
@given(st.lists(st.one_of(records, near_events), max_size=5))
def test_ingest_records_rejects_with_reasons(memory: Memory, batch: list[dict[str, Any]]) -> None:
    with case("Memory.ingest_records") as tally:
        report = memory.ingest_records(batch, project="fuzz-records")
        assert report.ingested + report.duplicates + len(report.rejections) == len(batch)
        count_report(tally, report)


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
    with case("Memory.search"):
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
    with case("FTS5 match builder"):
        match = build_match(query)
        if match is None:
            return
        assert match.groups
        for expression in (match.any_terms, match.all_terms):
            _FTS.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@FUZZ
@given(query_text)
def test_bm25_never_raises(memory: Memory, query: str) -> None:
    with case("bm25_search"):
        hits = bm25_search(memory.store, query, SearchFilters(), limit=5)
        assert all(0.0 <= h.score <= 1.0 for h in hits)


@FUZZ_PURE
@given(
    st.one_of(st.text(max_size=60), odd_text),
    st.integers(min_value=0, max_value=4 * 10**12),
    st.sampled_from(["UTC", "Europe/London", "Pacific/Chatham"]),
)
def test_time_inputs_parse_or_fail_clearly(value: str, now: int, zone: str) -> None:
    with case("time inputs (the query parser and the argument reader)"):
        parse_time(value, now, ZoneInfo(zone))
        try:
            parse_bound(value, reference_ms=now, tz=ZoneInfo(zone), edge="end", name="--since")
        except MemtocError as exc:
            assert "--since" in str(exc) and str(exc).strip()


# -- MCP tool arguments ------------------------------------------------------------------------
TOOLS = {
    "memory_search": ("query", "project", "level", "since", "until", "depth", "limit", "kinds"),
    "memory_toc": ("node_id", "project", "depth"),
    "memory_expand": ("grip_id", "before", "after", "focus", "budget"),
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
    with case("MCP tools"):
        portal, client = mcp_client
        name, args = call
        result = portal.call(client.call_tool, name, args)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            # The SDK's generic text for an unexpected exception (a crash), with nothing after it.
            assert text.strip() and text.strip() != f"Error executing tool {name}", (name, args)
