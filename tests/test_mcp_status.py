"""memory_status is a few lines an agent can afford, with problems named.

User trial 4: on a store of the real transcripts (4,862 events, 10 projects) memory_status listed
every field nested — 571 tokens for a health check. Through a real MCP client session on the
real Claude Code transcripts (fixture cut from them, MIT): the text stays under 200 tokens and
still says what an agent acts on — the memory's size and span, who processes (nobody here:
events wait), search running BM25-only without an embedder, the project its calls are about —
and a failure gets its own line with the fix; ``detail=true`` lists every field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memtoc.memory import Memory
from memtoc.surfaces.mcp_server import build_server
from real_fixture import real_memory

PROJECT = "claude-code-log"
AGENT_DIR = "/Users/dain/workspace/claude-code-log/claude_code_log"


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    with real_memory(tmp_path) as memory:
        yield memory


def _status(memory: Memory, args: dict[str, Any] | None = None) -> tuple[str, Any]:
    async def call() -> tuple[str, Any]:
        async with Client(build_server(memory, working_dir=AGENT_DIR, structured=True)) as c:
            result = await c.call_tool("memory_status", args or {})
            assert result.is_error is False, result.content[0].text
            return result.content[0].text, result.structured_content

    return anyio.run(call)


def test_status_is_short_and_says_what_an_agent_acts_on(memory: Memory) -> None:
    text, data = _status(memory)
    tokens = memory.counter.count(text)
    assert tokens < 200 and text.endswith(f"[{tokens} tokens]"), text
    events = memory.store.count_events()
    assert text.startswith(f"memtoc: {events:,} events, 3 projects, "), text
    assert "queue: 0 pending, 0 failed" in text
    assert "processing: nobody — nothing processes new events" in text  # no worker: said
    assert "search: BM25 only — no embedder" in text  # the degraded mode is named
    assert f"your project: {PROJECT} (" in text
    assert "failed:" not in text and "rollups pending" not in text  # no problem, no line
    assert "node_versions" not in text and "durability" not in text  # fields that say nothing
    assert data["events"] == events and data["working_project"]["known"] is True  # all fields


def test_a_failure_gets_a_line_with_its_fix(memory: Memory) -> None:
    segment = memory.store.list_nodes(PROJECT, level="segment")[0]
    memory.store.fail_segment(PROJECT, segment.node_id, "summariser crashed: boom")
    text, _ = _status(memory)
    assert f"failed: {segment.node_id}: summariser crashed: boom" in text, text
    assert "`memtoc process --retry-failed` retries them" in text


def test_detail_lists_every_field(memory: Memory) -> None:
    short, _ = _status(memory)
    text, _ = _status(memory, {"detail": True})
    assert "node_versions:" in text and "rollups:" in text and "outbox:\n  pending: 0" in text
    assert memory.counter.count(text) > 2 * memory.counter.count(short)
