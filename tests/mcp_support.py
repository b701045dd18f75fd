"""What the MCP tests share: the fixture transcript, the note, the server's environment, polling
for the server's worker, and the recall contract."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from memtoc.memory import Memory
from memtoc.retrieval.recall_pack import SEPARATOR

ROOT = Path(__file__).resolve().parent.parent
STATIC_MODEL = ROOT.parent / "shared" / "models" / "minilm-static-256"
FIXTURE = ROOT / "tests" / "fixtures" / "claude-code"
NOTE = "Decision: keep the session cookie TTL at 15 minutes for the staging login."
RECALL_QUERY = "what did we decide about the session cookie TTL for staging?"


def assert_recall(recall: dict[str, Any], budget: int, memory: Memory) -> None:
    """A recall result keeps its contract: every item's `tokens` is its text's count; the total
    `tokens` counts the assembled context (the items joined by newlines: the separators cost a few
    tokens more than the items' sum) and stays within budget; items in time order; every event an
    item includes or cites is stored."""
    items = recall["items"]
    assert items and recall["budget"] == budget
    for item in items:
        assert item["tokens"] == memory.counter.count(item["text"]), item["id"]
    context = SEPARATOR.join(i["text"] for i in items)
    assert recall["tokens"] == memory.counter.count(context)
    assert sum(i["tokens"] for i in items) <= recall["tokens"] <= budget
    starts = [i["start_time"] for i in items]
    assert starts == sorted(starts)
    for item in items:
        for event_id in [e["event_id"] for e in item["events"]] + item["cites"]:
            memory.store.get_event(event_id)  # NotFoundError if a citation is dangling


def server_env() -> dict[str, str]:
    """The environment an agent would give `memtoc mcp`: no MEMTOC_* leaking in, offline, and the
    product's default embedder (the static model) when the shared models are there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    if STATIC_MODEL.is_dir():
        env["MEMTOC_EMBED_MODEL"] = str(STATIC_MODEL)
    else:
        env["MEMTOC_EMBEDDER"] = "none"
    return env


async def wait_processed(client: Client, timeout_s: float = 240.0) -> dict[str, Any]:
    """Poll memory_status until the server's own worker has drained the outbox and gone idle."""
    deadline = anyio.current_time() + timeout_s
    while True:
        status = (await client.call_tool("memory_status", {})).structured_content
        worker = status["processing"]["worker"] or {}
        if status["outbox"]["pending"] == 0 and worker.get("state") == "idle":
            return status
        if anyio.current_time() > deadline:
            raise AssertionError(f"not processed within {timeout_s} s: {status}")
        await anyio.sleep(0.5)
