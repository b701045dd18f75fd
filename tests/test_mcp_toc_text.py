"""memory_toc's head line says a node's span only where its id does not.

User trial 3: every memory_toc answer opened each node with its span in milliseconds — "year
2025-01-01T00:00:00.000Z..2026-01-01T00:00:00.000Z · 982 events", ~30 tokens, 9% of a project's
roots — although the next line's id (``toc:year:2025``) names the period. Through a real MCP
client session on the real Claude Code transcripts (fixture cut from them, MIT): a year, month
or day says its event count only, a week its dates (its id says ``2025-W29``), a segment its
instants to the second.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import anyio
import pytest
from mcp import Client

from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.surfaces.mcp_server import build_server
from real_fixture import real_memory

PROJECT = "claude-code-log"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("toc-text")
    with real_memory(home) as memory:
        yield memory


def test_a_node_head_says_what_its_id_does_not(memory: Memory) -> None:
    nodes = {
        level: memory.store.list_nodes(PROJECT, level=level)
        for level in ("year", "month", "week", "day", "segment")
    }
    assert all(nodes.values()), {k: len(v) for k, v in nodes.items()}

    async def calls() -> dict[str, str]:
        async with Client(build_server(memory, working_dir="/nowhere")) as client:
            out = {"roots": (await client.call_tool("memory_toc", {"project": PROJECT}))}
            for level, found in nodes.items():
                args = {"project": PROJECT, "node_id": found[0].node_id}
                out[level] = await client.call_tool("memory_toc", args)
        return {k: v.content[0].text for k, v in out.items()}

    texts = anyio.run(calls)
    year = nodes["year"][0]
    assert f"year · {year.event_count} events\n{year.node_id} — " in texts["roots"]
    for level in ("year", "month", "day"):
        node = nodes[level][0]
        assert texts[level].startswith(f"{level} · {node.event_count} events\n{node.node_id} — ")
    week = nodes["week"][0]
    found = re.fullmatch(r"toc:week:(\d{4})-W(\d{2})", week.node_id)
    assert found
    monday = date.fromisocalendar(int(found.group(1)), int(found.group(2)), 1)
    head = f"week {monday}..{monday + timedelta(days=6)} · {week.event_count} events"
    assert texts["week"].startswith(head + f"\n{week.node_id} — ")
    segment = nodes["segment"][0]
    start, end = iso_ms(segment.start_ms)[:19], iso_ms(segment.end_ms)[:19]
    tail = end[11:] if end[:10] == start[:10] else end
    assert texts["segment"].startswith(
        f"segment {start}Z..{tail}Z · {segment.event_count} events\n{segment.node_id} — "
    )
    assert "000Z" not in "".join(texts.values())


def test_a_searched_event_says_who_spoke(memory: Memory) -> None:
    """memory_search headed an event hit 'event <time>': a user's request and the agent's
    reply read alike. It says the speaker or the tool, as the CLI and the web do."""

    async def search() -> tuple[str, Any]:
        async with Client(build_server(memory, working_dir="/nowhere", structured=True)) as c:
            args = {"query": "GitHub Action workflow", "project": PROJECT}
            result = await c.call_tool("memory_search", args)
            return result.content[0].text, result.structured_content

    text, data = anyio.run(search)
    events = [(n, i) for n, i in enumerate(data["items"], start=1) if i["kind"] == "event"]
    assert events, text
    for n, item in events:
        assert f"{n}. ({item['id']}) event · {item['title']} " in text
        assert item["title"].split(" · ")[0] in {"user", "assistant", "tool call", "tool output"}


def test_memory_status_leaves_out_what_says_nothing(memory: Memory) -> None:
    """memory_status (detail=true) listed every empty field as '-' (failures, degraded reasons,
    the worker of a server without one): what is not there is left out; False and 0 stay."""

    async def status() -> tuple[str, Any]:
        async with Client(build_server(memory, working_dir="/nowhere", structured=True)) as c:
            result = await c.call_tool("memory_status", {"detail": True})
            return result.content[0].text, result.structured_content

    text, data = anyio.run(status)
    assert data["failures"] == {"outbox": [], "segments": []} and data["embedder_degraded"]
    assert not re.search(r": -$", text, re.M), text
    assert "failures" not in text and "outbox:\n  pending: 0" in text
    assert "token_counter_degraded: False" in text
