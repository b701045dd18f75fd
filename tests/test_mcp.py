"""The MCP server through real MCP client sessions: in-process and a stdio subprocess."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.mcp_server import build_server

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "claude-code"
NOTE = "Decision: keep the session cookie TTL at 15 minutes for the staging login."


@pytest.fixture
def memory(hermetic_env: Path) -> Iterator[Memory]:
    with Memory.open(load_settings({"home": str(hermetic_env)})) as mem:
        mem.ingest([FIXTURE])
        yield mem


async def _scenario(memory: Memory) -> dict[str, Any]:
    """remember → process → toc → expand, plus errors, the resource and the prompt."""
    out: dict[str, Any] = {}
    async with Client(build_server(memory)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out["tools"] = tools
        remembered = await client.call_tool(
            "memory_remember", {"text": NOTE, "kind": "decision", "project": "webapp"}
        )
        out["remember"] = remembered
        memory.process()
        memory.rollup(force=True)
        out["roots"] = await client.call_tool("memory_toc", {"project": "webapp"})
        out["days"] = await client.call_tool(
            "memory_timeline", {"since": "2025-06-01", "until": "2025-06-05", "project": "webapp"}
        )
        day_id = out["days"].structured_content["nodes"][0]["node_id"]
        out["day"] = await client.call_tool("memory_toc", {"node_id": day_id, "depth": "L1"})
        bullets = out["day"].structured_content["node"]["bullets"]
        grip = next(g for b in bullets for g in b["grip_ids"])
        out["expand"] = await client.call_tool(
            "memory_expand", {"grip_id": grip, "before": 1, "after": 1}
        )
        out["search"] = await client.call_tool(
            "memory_search", {"query": "flaky login test timeout", "project": "webapp"}
        )
        out["search_note"] = await client.call_tool(
            "memory_search", {"query": "session cookie TTL staging", "depth": "L2", "limit": 3}
        )
        out["bookmarks"] = await client.call_tool("memory_bookmarks", {"project": "webapp"})
        out["context"] = await client.call_tool("memory_context", {"budget": 300})
        out["status"] = await client.call_tool("memory_status", {})
        out["bad_grip"] = await client.call_tool("memory_expand", {"grip_id": "grip:0:nope"})
        out["bad_node"] = await client.call_tool("memory_toc", {"node_id": "toc:day:1999-01-01"})
        out["bad_time"] = await client.call_tool("memory_timeline", {"since": "the other day"})
        out["bad_args"] = await client.call_tool("memory_expand", {"grip_id": grip, "before": -1})
        out["resource"] = await client.read_resource("memtoc://context/webapp")
        out["prompt"] = await client.get_prompt("memtoc_session_start", {"project": "webapp"})
    return out


def test_in_process_session(memory: Memory) -> None:
    out = anyio.run(_scenario, memory)
    tools = out["tools"]
    assert {
        "memory_context",
        "memory_search",
        "memory_bookmarks",
        "memory_toc",
        "memory_expand",
        "memory_timeline",
        "memory_remember",
        "memory_status",
    } <= set(tools)
    for name, tool in tools.items():
        ann = tool.annotations
        writes = name in ("memory_remember", "memory_forget")
        assert ann is not None and ann.read_only_hint is (not writes)
        assert ann.destructive_hint is (name == "memory_forget")
        assert tool.description and len(tool.description) > 80
    assert "grip_id" in tools["memory_expand"].input_schema["required"]

    event = out["remember"].structured_content["event"]
    assert out["remember"].is_error is False
    assert event["text"] == NOTE and event["metadata"]["kind"] == "decision"
    assert out["remember"].structured_content["tokens"] == memory.counter.count(NOTE)
    stored = memory.store.get_event(event["event_id"])
    assert stored.project == "webapp" and stored.text == NOTE

    roots = out["roots"].structured_content
    assert roots["project"] == "webapp" and roots["roots"]
    assert roots["tokens"] == sum(r["tokens"] for r in roots["roots"]) > 0
    years = {r["node"]["node_id"] for r in roots["roots"]}
    assert "toc:year:2025" in years

    days = out["days"].structured_content
    assert [n["node_id"] for n in days["nodes"]] == ["toc:day:2025-06-03", "toc:day:2025-06-04"]
    day = out["day"].structured_content
    assert day["tier"] == "L1" and day["tokens"] > 0 and day["node"]["overview"]

    expand = out["expand"].structured_content
    assert expand["tokens"] == sum(memory.counter.count(e["text"]) for e in expand["events"])
    assert any(e["in_grip"] for e in expand["events"])

    search = out["search"].structured_content
    assert search["items"] and search["tokens"] == sum(i["tokens"] for i in search["items"]) > 0
    assert all(i["tier"] == "L0" and i["id"] for i in search["items"])
    note = out["search_note"].structured_content
    assert any(NOTE in i["text"] for i in note["items"])  # the remembered note is findable
    marks = out["bookmarks"].structured_content
    assert out["bookmarks"].is_error is False
    assert marks["tokens"] == sum(memory.counter.count(b["content"]) for b in marks["bookmarks"])

    ctx = out["context"].structured_content
    assert 0 < ctx["tokens"] <= 300 and "webapp" in ctx["text"]
    status = out["status"].structured_content
    assert status["events"] == memory.store.count_events() and status["token_counter"]
    assert status["outbox"]["pending"] == 0 and status["tokens"] > 0

    for key, needle in [
        ("bad_grip", "grip not found: grip:0:nope"),
        ("bad_node", "node not found: toc:day:1999-01-01"),
        ("bad_time", "since='the other day'"),
        ("bad_args", "before"),
    ]:
        result = out[key]
        assert result.is_error is True, key
        assert needle in result.content[0].text, (key, result.content[0].text)

    text = out["resource"].contents[0].text
    assert "project webapp" in text and "Where we left off" in text
    prompt = out["prompt"].messages[0].content.text
    assert "memtoc remembers" in prompt and "project webapp" in prompt


async def _stdio(home: Path) -> dict[str, Any]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")},
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memtoc", "--home", str(home), "mcp"], env=env
    )
    out: dict[str, Any] = {}
    async with Client(params) as client:
        out["remember"] = await client.call_tool(
            "memory_remember", {"text": NOTE, "project": "webapp"}
        )
        out["roots"] = await client.call_tool("memory_toc", {"project": "webapp"})
        out["bad"] = await client.call_tool("memory_toc", {"node_id": "toc:week:1999-W01"})
    return out


def test_stdio_subprocess_session(memory: Memory, hermetic_env: Path) -> None:
    memory.process()
    memory.rollup(force=True)
    memory.close()
    out = anyio.run(_stdio, hermetic_env)
    assert out["remember"].is_error is False
    event_id = out["remember"].structured_content["event"]["event_id"]
    assert out["roots"].structured_content["tokens"] > 0
    assert out["bad"].is_error is True and "node not found" in out["bad"].content[0].text
    with Memory.open(load_settings({"home": str(hermetic_env)})) as again:
        assert again.store.get_event(event_id).text == NOTE
