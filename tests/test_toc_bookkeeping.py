"""The TOC an agent or a user browses lists no node of an agent's bookkeeping alone.

User trial 4, on the real Claude Code transcripts: Claude Code starts sub-agents with a "Warmup"
prompt, and a month later one arrived alone — the year's view listed "toc:month:2025-11  Agent
bookkeeping: sub-agent warm-up", a day listed "Agent bookkeeping: local-command notice" among its
segments, each an id an agent pays to open for nothing. On the real fixture (cut from those
transcripts, MIT; its sub-agent warm-up a month after the session): years, a node's children and
the timeline leave such nodes out, through a real MCP session and the HTTP API the web tree
reads; opened by id, such a node still shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from memtoc.memory import Memory
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server
from real_fixture import real_memory

PROJECT = "danieldemmel.me-next"
WORK_MONTH, WARMUP_MONTH = "toc:month:2025-09", "toc:month:2025-10"
WORK_DAY, WARMUP_DAY = "toc:day:2025-09-29", "toc:day:2025-10-29"
TOKEN = "bookkeeping-test-token"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    home = tmp_path_factory.mktemp("bookkeeping")
    with real_memory(home) as memory:
        yield memory


def test_the_fixture_has_a_month_of_warm_ups_alone(memory: Memory) -> None:
    nodes = {n.node_id: n for n in memory.store.list_nodes(PROJECT, level="month")}
    assert nodes[WARMUP_MONTH].bookkeeping_only, nodes[WARMUP_MONTH].title
    assert nodes[WARMUP_MONTH].title.startswith("Agent bookkeeping: sub-agent warm-up")
    assert not nodes[WORK_MONTH].bookkeeping_only


def test_mcp_browsing_lists_no_bookkeeping_node(memory: Memory) -> None:
    async def calls() -> dict[str, Any]:
        async with Client(build_server(memory, working_dir="/nowhere")) as client:
            out = {}
            out["roots"] = await client.call_tool("memory_toc", {"project": PROJECT})
            out["year"] = await client.call_tool(
                "memory_toc", {"project": PROJECT, "node_id": "toc:year:2025"}
            )
            out["days"] = await client.call_tool(
                "memory_timeline", {"project": PROJECT, "level": "day"}
            )
            out["segments"] = await client.call_tool(
                "memory_timeline", {"project": PROJECT, "level": "segment"}
            )
            out["opened"] = await client.call_tool(
                "memory_toc", {"project": PROJECT, "node_id": WARMUP_MONTH}
            )
            return {k: v.content[0].text for k, v in out.items()}

    texts = anyio.run(calls)
    for name in ("roots", "year"):
        assert f"[{WORK_MONTH}]" in texts[name] and WARMUP_MONTH not in texts[name], texts[name]
        assert "Agent bookkeeping" not in texts[name]
    assert f"[{WORK_DAY}]" in texts["days"] and WARMUP_DAY not in texts["days"], texts["days"]
    assert "Agent bookkeeping" not in texts["segments"] and "toc:segment:" in texts["segments"]
    opened = texts["opened"]  # asked for by id, it is there, with its week
    assert f"{WARMUP_MONTH} — Agent bookkeeping: sub-agent warm-up" in opened, opened
    assert "[toc:week:2025-W44]" in opened


def test_the_web_trees_api_lists_no_bookkeeping_node(memory: Memory) -> None:
    app = create_app(lambda: Memory.open(memory.settings), token=TOKEN, pool_size=1)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        year = client.get("/v1/nodes/toc:year:2025", params={"project": PROJECT}, headers=auth)
        assert year.status_code == 200, year.text
        assert [c["node_id"] for c in year.json()["children"]] == [WORK_MONTH]
        assert year.json()["total_children"] == 1
