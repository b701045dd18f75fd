"""Recall (``Memory.recall``, ``memtoc recall``, MCP ``memory_recall``): the budget is never
exceeded, every event and citation resolves, tiers step down instead of cutting, items come in
time order and once, the time limit and a missing embedder show in the result, and a time
expression in the question favours its window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from typer.testing import CliRunner

from conftest import BOTH_BACKENDS, create_pg_database, store_at
from memtoc.clock import ManualClock
from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall import RecallResult, recall
from memtoc.surfaces.cli import app
from memtoc.surfaces.mcp_server import build_server
from search_support import BASE, DAY, build_memory, require_model

WORDS = [
    "cache",
    "redis",
    "token",
    "refresh",
    "migration",
    "postgres",
    "vacuum",
    "index",
    "login",
    "cookie",
    "deploy",
    "docker",
    "build",
    "test",
    "flaky",
    "timeout",
    "retry",
    "queue",
    "worker",
    "schema",
    "parser",
    "config",
    "yaml",
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Memory]:
    """The shared search corpus (BM25 only: the embedder is ``none``), on each store."""
    where: Path | str = tmp_path_factory.mktemp("recall") / "m.db"
    drop = None
    if request.param == "postgres":
        where, drop = create_pg_database()
    memory = build_memory(where, "none")
    yield memory
    memory.close()
    if drop is not None:
        drop()


NO_LIMIT = float("inf")
"""The ranking and packing under test, not the time limit (a loaded machine reaches it; its
own tests are in test_cold_recall and test_recall_evidence)."""


def _fresh(path: Path | str, records: list[dict[str, Any]], kind: str | None = "none") -> Memory:
    clock = ManualClock(BASE + 30 * DAY)
    store = store_at(path, clock)
    memory = Memory(
        store, clock=clock, tz=ZoneInfo("UTC"), semantic=SemanticIndex(store, kind=kind)
    )
    report = memory.ingest_records(records, project="p")
    assert report.ingested == len(records), report.to_dict()
    memory.process()
    memory.rollup(force=True)
    return memory


def _check(memory: Memory, result: RecallResult) -> None:
    """The invariants every recall result holds."""
    counter = memory.counter
    assert result.tokens <= result.budget
    assert counter.count(result.context()) == result.tokens
    assert sum(i.tokens for i in result.items) + max(0, len(result.items) - 1) <= result.budget
    for item in result.items:
        assert item.tokens == counter.count(item.text)
        for event in item.events:
            assert memory.store.get_event(event.event_id).text in item.text
        for cited in item.cites:
            memory.store.get_event(cited)  # raises NotFoundError when it does not resolve
    included = [e.event_id for i in result.items for e in i.events]
    assert len(included) == len(set(included)), "an event appears twice"
    starts = [i.start_ms for i in result.items]
    assert starts == sorted(starts), "items are not in time order"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    budget=st.integers(min_value=0, max_value=5_000),
    query=st.sampled_from(
        ["refresh token", "vacuum migration", "diagram", "pytest", "what did we decide", "x"]
    ),
)
def test_budget_never_exceeded_on_the_corpus(corpus: Memory, budget: int, query: str) -> None:
    result = corpus.recall(query, budget=budget, at_ms=BASE + 10 * DAY)
    _check(corpus, result)
    if budget == 0:
        assert result.items == () and result.tokens == 0


@settings(max_examples=8, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(" ".join),
        min_size=1,
        max_size=14,
    ),
    budgets=st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=4),
)
def test_budget_never_exceeded_on_generated_corpora(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], budgets: list[int]
) -> None:
    records = [
        {
            "session_id": f"s{n % 3}",
            "timestamp": BASE + n * 3_600_000,
            "role": ("user", "assistant", "tool")[n % 3],
            "text": text,
        }
        for n, text in enumerate(texts)
    ]
    memory = _fresh(tmp_path_factory.mktemp("gen") / "m.db", records)
    try:
        for budget in budgets:
            for query in ("cache token", texts[0][:60], "nothing-here-at-all"):
                _check(memory, memory.recall(query, budget=budget))
    finally:
        memory.close()


def test_finds_the_right_events_in_time_order(corpus: Memory) -> None:
    result = corpus.recall("vacuum migration postgres", budget=400, project="alpha")
    _check(corpus, result)
    texts = [e.text for i in result.items for e in i.events]
    assert any("VACUUM ANALYZE" in t for t in texts)
    assert all(i.project == "alpha" for i in result.items)
    data = result.to_dict()
    assert {"query", "budget", "tokens", "items", "degraded", "truncated", "at"} <= set(data)
    assert data["budget"] == 400 and data["tokens"] == result.tokens
    first = data["items"][0]
    assert isinstance(first, dict)
    assert {"kind", "id", "tier", "text", "tokens", "events", "cites"} <= set(first)


def test_degraded_without_an_embedder(corpus: Memory) -> None:
    result = corpus.recall("refresh token", budget=300)
    assert result.method == "bm25"
    assert result.degraded is not None and result.degraded.startswith("no embedder")
    assert not result.truncated


@BOTH_BACKENDS
def test_hybrid_with_the_static_model(location: Path | str) -> None:
    model = require_model()
    memory = build_memory(location, "static", str(model))
    try:
        result = memory.recall(
            "token expiry in the auth module", budget=300, time_limit_ms=NO_LIMIT
        )
        _check(memory, result)
        assert result.method == "hybrid" and result.degraded is None
        assert any("refresh_token" in e.text for i in result.items for e in i.events)
    finally:
        memory.close()


@BOTH_BACKENDS
def test_tier_steps_down_instead_of_cutting(location: Path | str) -> None:
    long = "deploy " + " ".join(f"step{n} of the docker build pipeline" for n in range(300))
    memory = _fresh(
        location,
        [
            {"session_id": "s", "timestamp": BASE, "role": "assistant", "text": long},
            {"session_id": "s", "timestamp": BASE + 60_000, "role": "user", "text": "ok thanks"},
        ],
    )
    try:
        assert memory.counter.count(long) > 1_000
        result = memory.recall("docker build pipeline deploy", budget=300, time_limit_ms=NO_LIMIT)
        _check(memory, result)
        assert result.stepped_down >= 1
        stepped = [i for i in result.items if i.tier in ("L1", "L0")]
        assert stepped, [i.tier for i in result.items]
        # the long event is not listed as included (only its head is), but it is cited
        assert all(len(i.events) == 0 for i in stepped if i.kind == "event")
        assert any(i.cites for i in stepped)
        full = memory.recall("docker build pipeline deploy", budget=5_000, time_limit_ms=NO_LIMIT)
        assert any(i.tier == "L2" and long in i.text for i in full.items)
    finally:
        memory.close()


@BOTH_BACKENDS
def test_duplicates_removed(location: Path | str) -> None:
    same = "The redis cache TTL is 300 seconds for the login tokens"
    memory = _fresh(
        location,
        [
            {"session_id": "a", "timestamp": BASE, "role": "user", "text": same},
            {"session_id": "b", "timestamp": BASE + DAY, "role": "user", "text": same.upper()},
            {"session_id": "b", "timestamp": BASE + DAY + 1, "role": "user", "text": "unrelated"},
        ],
    )
    try:
        result = memory.recall("redis cache TTL login tokens", budget=2_000)
        _check(memory, result)
        hits = [e for i in result.items for e in i.events if "redis" in e.text.lower()]
        assert len(hits) == 1
    finally:
        memory.close()


def test_time_limit_returns_best_so_far_flagged(corpus: Memory) -> None:
    result = corpus.recall("refresh token", budget=500, time_limit_ms=0)
    _check(corpus, result)
    assert result.truncated
    assert result.degraded is not None and "time limit" in result.degraded
    ticks = iter(range(0, 10_000, 1))  # a timer that moves 1 s per reading

    def timer() -> float:
        return float(next(ticks))

    slow = recall(
        corpus.store,
        corpus.counter,
        "refresh token",
        budget=500,
        at_ms=BASE,
        tz=ZoneInfo("UTC"),
        time_limit_ms=2_500,
        timer=timer,
    )
    assert slow.truncated and slow.items  # BM25 ran, later stages were cut off
    relaxed = corpus.recall("refresh token", budget=500, time_limit_ms=60_000)
    assert not relaxed.truncated


@BOTH_BACKENDS
def test_time_expression_favours_its_window(location: Path | str) -> None:
    records = [
        {
            "session_id": f"d{n}",
            "timestamp": BASE + n * DAY,
            "role": "user",
            "text": f"standup {n}: the deploy of the queue worker went fine, version {n}",
        }
        for n in range(10)
    ]
    memory = _fresh(location, records)
    try:
        at = BASE + 9 * DAY + 3_600_000  # on day 9; "yesterday" is day 8
        result = memory.recall("deploy queue worker yesterday", budget=40, at_ms=at)
        _check(memory, result)
        assert result.time_range is not None and result.time_range["expression"] == "yesterday"
        texts = [e.text for i in result.items for e in i.events]
        assert texts and texts[0].startswith("standup 8:"), texts
        plain = memory.recall("deploy queue worker", budget=40, at_ms=at)
        assert plain.time_range is None
    finally:
        memory.close()


def test_bad_budget_is_a_query_error(corpus: Memory) -> None:
    with pytest.raises(QueryError, match="budget"):
        corpus.recall("x", budget=-1)


def test_cli_single_and_batch(tmp_path: Path, hermetic_env: Path) -> None:
    runner = CliRunner()
    src = tmp_path / "events.jsonl"
    lines = [
        {"session_id": "s1", "timestamp": BASE + n * 60_000, "role": "user", "text": t}
        for n, t in enumerate(
            ["the flaky login test times out", "retry the queue worker", "docker build is slow"]
        )
    ]
    src.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    env = {"MEMTOC_HOME": str(hermetic_env), "MEMTOC_EMBEDDER": "none"}
    assert runner.invoke(app, ["ingest", str(src), "--project", "p"], env=env).exit_code == 0
    assert runner.invoke(app, ["process"], env=env).exit_code == 0
    one = runner.invoke(
        app, ["recall", "flaky login test", "-p", "p", "--budget", "50", "--json"], env=env
    )
    assert one.exit_code == 0, one.output
    data = json.loads(one.stdout)
    assert data["budget"] == 50 and 0 < data["tokens"] <= 50
    assert "flaky login" in data["items"][0]["text"]
    queries = tmp_path / "q.txt"
    queries.write_text("docker build\nqueue worker\n", encoding="utf-8")
    batch = runner.invoke(app, ["recall", "--queries", str(queries), "-b", "30", "-A"], env=env)
    assert batch.exit_code == 0, batch.output
    rows = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [r["query"] for r in rows] == ["docker build", "queue worker"]
    assert all(r["tokens"] <= 30 for r in rows)
    human = runner.invoke(app, ["recall", "docker build", "-p", "p", "--at", "2024-01-16"], env=env)
    assert human.exit_code == 0 and "docker build is slow" in human.stdout
    assert runner.invoke(app, ["recall"], env=env).exit_code != 0


async def _mcp(memory: Memory) -> dict[str, Any]:
    async with Client(build_server(memory, structured=True)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        args = {"query": "vacuum migration", "budget": 80, "all_projects": True}
        ok = await client.call_tool("memory_recall", args)
        bad = await client.call_tool("memory_recall", {"query": "vacuum", "budget": -5})
    return {"tools": tools, "ok": ok, "bad": bad}


def test_mcp_tool_in_process(corpus: Memory) -> None:
    out = anyio.run(_mcp, corpus)
    tool = out["tools"]["memory_recall"]
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    ok = out["ok"]
    assert not ok.is_error
    data = ok.structured_content
    assert data["budget"] == 80 and 0 < data["tokens"] <= 80
    assert data["tokens"] == corpus.counter.count(ok.content[0].text)
    assert any("VACUUM" in item["text"] for item in data["items"])
    assert out["bad"].is_error


@BOTH_BACKENDS
def test_blank_events_never_crash_recall_nor_take_budget(location: Path | str) -> None:
    """Empty and whitespace-only events (a Claude Code tool result with no output is stored with
    empty text) are in the store beside the turns around them; no question at any budget crashes
    recall, and none of them is packed: they have nothing to show."""
    require_model()
    blanks = ["", " ", "\n", "\n\n\t ", "\u3000"]
    records: list[dict[str, Any]] = []
    ts = BASE
    for n, blank in enumerate(blanks):
        for role, text in (
            ("user", f"run the flaky docker build test number {n} again"),
            ("assistant", f'Bash {{"command":"docker build -t app{n} ."}}'),
            ("tool", blank),
            ("assistant", blank),
            ("user", blank),
            ("assistant", f"the docker build {n} passed after the retry"),
        ):
            records.append({"session_id": f"s{n}", "timestamp": ts, "role": role, "text": text})
            ts += 60_000
    memory = _fresh(location, records, kind=str(require_model()))
    try:
        blank_ids = {e.event_id for e in memory.events() if not e.text.strip()}
        assert len(blank_ids) == 3 * len(blanks)
        for query in ["docker build", "flaky test retry", "what passed?", "", "   ", "\n"]:
            for budget in (0, 5, 50, 500, 1_000, 2_000):
                result = memory.recall(query, budget=budget)
                _check(memory, result)
                assert not {e.event_id for i in result.items for e in i.events} & blank_ids
        assert memory.recall("docker build", budget=2_000).items  # the turns themselves come back
    finally:
        memory.close()
