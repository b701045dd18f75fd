"""What memory_expand shows an agent: the evidence, not the agent's own notices. A real Claude
Code session (fixture cut from the shared transcripts, MIT) goes in through the hooks as Claude
Code runs them, and a real MCP session over stdio expands the bullets of its segment."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from hook_support import run_hook
from mcp_support import server_env
from memtoc.config import load_settings
from memtoc.memory import Memory

ROOT = Path(__file__).resolve().parent.parent
SESSION = (
    ROOT / "tests/fixtures/claude-code-real/-Users-dain-workspace-claude-code-log-sample"
    / "89488521-e2e7-4d97-bc02-38197efdddc8.jsonl"
)  # fmt: skip
"""A request, two "Running PostToolUse:Edit..." hook progress lines, the final answer."""


def hook(home: Path, *args: str, event: str) -> None:
    assert run_hook(home, SESSION, *args, event=event) == ""


async def expand_all(home: Path, grips: list[str]) -> list[Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtoc", "--home", str(home), "mcp", "--no-worker", "--structured"],
        env=server_env(),  # the static model when the shared models are there: no vector yet
    )
    async with Client(params, read_timeout_seconds=120) as client:
        found = await client.call_tool(
            "memory_search", {"query": "cache TUI session HTML", "project": "claude-code-log"}
        )
        return [found] + [await client.call_tool("memory_expand", {"grip_id": g}) for g in grips]


def test_expand_leaves_hook_progress_out_and_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook(home, "ingest", event="Stop")
    hook(home, "ingest", "--process", "--wait", event="SessionEnd")
    with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
        notices = [e for e in mem.events() if e.bookkeeping == "hook"]
        segments = mem.store.list_nodes("claude-code-log", level="segment")
        grips = [g for n in segments for b in n.bullets for g in b.grip_ids[:1]]
    assert len(notices) == 2 and grips  # kept in the store, searchable
    found, *results = anyio.run(expand_all, home, grips)
    degraded = next(line for line in found.content[0].text.splitlines() if "degraded" in line)
    assert degraded in ("degraded: vectors missing, BM25 only", "degraded: no embedder, BM25 only")
    nodes = [i for i in found.structured_content["items"] if i["kind"] == "node"]
    assert nodes
    for item in nodes:  # a node's L0 said its title twice ("Title\nTitle. Abstract…")
        title, _, rest = item["text"].partition("\n")
        assert title == item["title"], item["text"]
        assert not re.match(re.escape(title) + r"(?:[.!?]|\s|$)", rest), item["text"]
    left_out = 0
    for result in results:
        text = result.content[0].text
        assert "PostToolUse" not in text, text
        # no tool takes a session's uuid; an instant costs 15 tokens, its time of day 5
        assert SESSION.stem not in text and not re.search(r"T\d\d:\d\d:\d\d\.\d{3}Z", text), text
        data = result.structured_content
        assert all("PostToolUse" not in e["text"] for e in data["events"])
        left_out += data["left_out"]
        if data["left_out"]:
            assert f"{data['left_out']} agent notices" in text, text
    assert left_out >= 2  # the request's or the answer's expand names both notices it left out
