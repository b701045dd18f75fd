"""Using a bookmark refreshes ``last_relevant_at`` — through search, recall and the session-start
context, on every surface (Memory, CLI on a read-only store, MCP, HTTP, the SessionStart hook) and
on both stores (SQLite, PostgreSQL) — and listing does not."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from typer.testing import CliRunner

from memtoc.clock import ManualClock, SystemClock
from memtoc.config import load_settings
from memtoc.memory import TOUCH_EVERY_MS, Memory
from memtoc.model import Bookmark
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.surfaces.hooks.runner import HookInput, session_start
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server
from memtoc.text.tokens import HeuristicCounter

T0 = 1_710_000_000_000  # 2024-03-09T16:00Z
MIN = 60_000
DAY = 86_400_000
QUERY = "zeppelin rate limiter"
CONTEXT_BUDGET = 800
"""Room for every context section here (thread, recent day, bookmark: 438 tokens): the tests are
about use refreshing the mark, not about what a tight budget leaves out."""
TURNS = [
    ("user", "We keep hitting the zeppelin API rate limit in staging."),
    ("assistant", "Two options: a Redis token bucket, or shard the in-process dict. I'd go with Redis."),
    ("user", "OK. Let's use Redis for the zeppelin rate limiter instead of the in-process dict."),
    ("assistant", "Agreed, noted in the PR description."),
    ("session_end", "Session ended"),
]  # fmt: skip
runner = CliRunner()


def build(path: Path | str, clock: ManualClock) -> Memory:
    """A store holding one conclusion about the zeppelin rate limiter, created at T0 (SQLite at
    a path, PostgreSQL at a URL)."""
    if isinstance(path, str):
        from memtoc.store.postgres import PostgresStore

        store: Any = PostgresStore(path, clock=clock, pool_size=2)
    else:
        store = SqliteStore(path, clock=clock)
    memory = Memory(store, clock=clock, tz=ZoneInfo("UTC"), counter=HeuristicCounter())
    types = {"session_end": "session_end"}
    records = [
        {
            "session_id": "s1",
            "timestamp": T0 + n * MIN,
            "role": {"session_end": "system"}.get(role, role),
            "event_type": types.get(role, f"{role}_message"),
            "text": text,
        }
        for n, (role, text) in enumerate(TURNS)
    ]
    memory.ingest_records(records, project="p")
    memory.process()
    (mark,) = memory.store.list_bookmarks("p")
    assert mark.type == "conclusion" and "zeppelin rate limiter" in mark.content
    assert mark.last_relevant_ms < T0 + 10 * MIN
    return memory


def the_mark(path: Path) -> Bookmark:
    with SqliteStore(path, read_only=True) as store:
        (mark,) = store.list_bookmarks("p")
        return mark


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    clock = ManualClock(T0 + 30 * DAY)
    return build(tmp_path / "m.db", clock)


def test_search_recall_and_context_refresh_last_relevant(memory: Memory) -> None:
    check_search_recall_and_context(memory)


def test_search_recall_and_context_refresh_last_relevant_on_postgres(pg_url: str) -> None:
    memory = build(pg_url, ManualClock(T0 + 30 * DAY))
    try:
        check_search_recall_and_context(memory)
    finally:
        memory.close()


def check_search_recall_and_context(memory: Memory) -> None:
    assert isinstance(memory.clock, ManualClock)
    now = memory.clock.now_ms()
    found = memory.search(QUERY, project="p", kinds=["bookmark"])
    assert [i.kind for i in found.items] == ["bookmark"]
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == now
    memory.clock.advance(TOUCH_EVERY_MS)
    recalled = memory.recall(QUERY, project="p", budget=300)
    assert any(i.kind == "bookmark" for i in recalled.items)
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == memory.clock.now_ms()
    memory.clock.advance(TOUCH_EVERY_MS)
    view = memory.context("p", budget=CONTEXT_BUDGET)
    assert any(i.section == "bookmark" for i in view.items)
    used = memory.clock.now_ms()
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == used
    # Listing bookmarks is browsing, not use: the top ones would otherwise never decay.
    memory.clock.advance(TOUCH_EVERY_MS)
    memory.bookmarks("p")
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == used


@pytest.mark.parametrize(
    "args",
    [
        ["search", QUERY, "--project", "p", "--json"],
        ["recall", QUERY, "--budget", "300", "--all-projects", "--json"],
        ["context", "--project", "p", "--json"],
    ],
)
def test_cli_on_a_read_only_store_refreshes_last_relevant(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "cli.db"
    build(path, ManualClock(T0 + 30 * DAY)).close()
    before = SystemClock().now_ms()
    result = runner.invoke(app, ["--db", str(path), *args])
    assert result.exit_code == 0, result.output
    assert "zeppelin" in result.output
    assert the_mark(path).last_relevant_ms >= before


def test_mcp_tools_refresh_last_relevant(memory: Memory) -> None:
    assert isinstance(memory.clock, ManualClock)
    clock = memory.clock

    async def calls() -> list[int]:
        seen = []
        async with Client(build_server(memory)) as client:
            for tool, args in (
                ("memory_search", {"query": QUERY, "project": "p"}),
                ("memory_recall", {"query": QUERY, "project": "p", "budget": 300}),
                ("memory_context", {"project": "p", "budget": CONTEXT_BUDGET}),
            ):
                clock.advance(TOUCH_EVERY_MS)
                out = await client.call_tool(tool, args)
                assert not out.is_error, out
                seen.append(memory.store.list_bookmarks("p")[0].last_relevant_ms)
        return seen

    seen = anyio.run(calls)
    start = T0 + 30 * DAY
    assert seen == [start + k * TOUCH_EVERY_MS for k in (1, 2, 3)]


def test_http_search_recall_and_context_refresh_last_relevant(memory: Memory) -> None:
    assert isinstance(memory.clock, ManualClock)
    client = TestClient(
        create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1"
    )
    memory.clock.advance(TOUCH_EVERY_MS)
    assert client.get("/v1/search", params={"q": QUERY, "project": "p"}).status_code == 200
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == memory.clock.now_ms()
    memory.clock.advance(TOUCH_EVERY_MS)
    body: dict[str, Any] = {"query": QUERY, "project": "p", "budget": 300}
    assert client.post("/v1/recall", json=body).status_code == 200
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == memory.clock.now_ms()
    memory.clock.advance(TOUCH_EVERY_MS)
    reply = client.get("/v1/context", params={"project": "p", "budget": CONTEXT_BUDGET})
    assert reply.status_code == 200 and "zeppelin" in reply.text
    assert memory.store.list_bookmarks("p")[0].last_relevant_ms == memory.clock.now_ms()


def test_the_session_start_hook_refreshes_last_relevant(tmp_path: Path) -> None:
    """The SessionStart hook (read-only store, the project setting) injects the bookmark: used."""
    home = tmp_path / "home"
    home.mkdir()
    build(home / "memtoc.db", ManualClock(T0 + 30 * DAY)).close()
    before = SystemClock().now_ms()
    settings = load_settings({"home": str(home), "project": "p"}, environ={})
    out = session_start(settings, HookInput(event="SessionStart", cwd=str(tmp_path)))
    assert "zeppelin" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert the_mark(home / "memtoc.db").last_relevant_ms >= before


def test_a_store_that_cannot_take_the_write_keeps_the_use_for_later(tmp_path: Path) -> None:
    """Another process holds the write lock: the read-only search still answers at once, the use
    is kept and recorded at the next use once the lock is gone."""
    path = tmp_path / "busy.db"
    build(path, ManualClock(T0 + 30 * DAY)).close()
    clock = ManualClock(T0 + 31 * DAY)
    reader = Memory(SqliteStore(path, read_only=True, clock=clock), clock=clock)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        assert reader.search(QUERY, project="p", kinds=["bookmark"]).items
        assert the_mark(path).last_relevant_ms < T0 + DAY
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    clock.advance(MIN)  # another search (of anything) records the pending use too
    reader.search("nothing matches this", project="p")
    assert the_mark(path).last_relevant_ms == clock.now_ms()
    reader.close()


def test_json_of_a_used_bookmark_shows_the_new_last_relevant_at(memory: Memory) -> None:
    memory.search(QUERY, project="p")
    listed = json.loads(json.dumps([b.to_dict() for b in memory.bookmarks("p")]))
    assert listed[0]["last_relevant_at"].startswith("2024-04-08")  # T0 + 30 days
