"""What the MCP tests share: the fixture transcript, the note, the server's environment, polling
for the server's worker, and the recall contract."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from memtoc.memory import Memory

ROOT = Path(__file__).resolve().parent.parent
STATIC_MODEL = ROOT.parent / "shared" / "models" / "minilm-static-256"
FIXTURE = ROOT / "tests" / "fixtures" / "claude-code"
NOTE = "Decision: keep the session cookie TTL at 15 minutes for the staging login."
RECALL_QUERY = "what did we decide about the session cookie TTL for staging?"


def delivered(result: Any) -> tuple[str, int, int | None]:
    """A tool result's text, the token count its last line reports, and the budget it names."""
    text = result.content[0].text
    last = text.rsplit("\n", 1)[-1]
    found = re.fullmatch(r"\[(\d+)(?: of (\d+))? tokens\]", last)
    assert found, f"no token line at the end of: {text[-200:]!r}"
    return text, int(found.group(1)), int(found.group(2)) if found.group(2) else None


def assert_delivered(result: Any, memory: Memory, budget: int | None = None) -> str:
    """What the agent receives keeps its contract: the reported tokens are the one counter's
    count of the whole delivered text (±2%; in practice exact), within ``budget`` when given;
    structured content, when present, reports the same count."""
    text, reported, named = delivered(result)
    actual = memory.counter.count(text)
    assert abs(reported - actual) <= max(1, round(0.02 * actual)), (reported, actual)
    if budget is not None:
        assert named == budget and actual <= budget, (actual, budget)
    if result.structured_content is not None:
        assert result.structured_content["tokens"] == reported
    return text


HANDLE_LEAD = r"\((#[1-9][0-9]*)(?: (?:user|assistant))?\) "
"""What leads a recall item over MCP: its handle, and who spoke for a turn."""


def assert_recall(result: Any, budget: int, memory: Memory) -> dict[str, Any]:
    """A recall over MCP keeps its contract: the delivered text (header, cited context, token
    line) fits the budget; every item leads with a handle of its own in the text (``(#12)``, in
    the items' order); items in time order; every event an item includes or cites is stored.
    Returns the structured content, plus ``handles``: each handle's item id."""
    text = assert_delivered(result, memory, budget)
    recall = result.structured_content
    items = recall["items"]
    assert items and recall["budget"] == budget
    handles = re.findall(HANDLE_LEAD, text)
    assert len(handles) == len(items) == len(set(handles)), (handles, text)
    leads = re.findall(r"\((#[1-9][0-9]*(?: (?:user|assistant))?)\) ", text)
    for item, lead in zip(items, leads, strict=True):
        assert item["tokens"] == memory.counter.count(item["text"]), item["id"]
        assert item["id"] not in text  # the handle stands for it
        if item["kind"] == "event":  # a turn says who spoke
            role = memory.store.get_event(item["id"]).role
            assert lead.endswith(f" {role}") == (role in ("user", "assistant")), (lead, role)
    starts = [i["start_time"] for i in items]
    assert starts == sorted(starts)
    for item in items:
        for event_id in [e["event_id"] for e in item["events"]] + item["cites"]:
            memory.store.get_event(event_id)  # NotFoundError if a citation is dangling
    return {**recall, "handles": dict(zip(handles, (i["id"] for i in items), strict=True))}


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
