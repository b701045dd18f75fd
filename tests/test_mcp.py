"""The MCP server through real MCP client sessions: in-process and a stdio subprocess."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from mcp_support import (
    FIXTURE,
    HANDLE_LEAD,
    NOTE,
    RECALL_QUERY,
    assert_delivered,
    assert_recall,
    server_env,
    wait_processed,
)
from memtoc.config import load_settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.model import Bookmark, iso_ms
from memtoc.surfaces.mcp_server import build_server
from memtoc.surfaces.processing import Processing
from memtoc.surfaces.serve_lock import ServeLock, lock_holder, lock_owner, lock_path

TOOLS = {
    "memory_context",
    "memory_search",
    "memory_recall",
    "memory_bookmarks",
    "memory_toc",
    "memory_expand",
    "memory_timeline",
    "memory_remember",
    "memory_forget",
    "memory_status",
}


@pytest.fixture
def memory(hermetic_env: Path) -> Iterator[Memory]:
    with Memory.open(load_settings({"home": str(hermetic_env)})) as mem:
        mem.ingest([FIXTURE])
        yield mem


async def _scenario(memory: Memory) -> dict[str, Any]:
    """remember → process → toc → expand, plus errors, the resource and the prompt."""
    out: dict[str, Any] = {}
    server = build_server(memory, structured=True, working_dir="/home/dev/webapp")
    async with Client(server) as client:
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
        out["recall"] = await client.call_tool(
            "memory_recall", {"query": RECALL_QUERY, "budget": 400, "project": "webapp"}
        )
        out["recall_tiny"] = await client.call_tool(
            "memory_recall", {"query": "flaky login test timeout", "budget": 80}
        )
        # a recall item's handle is what memory_expand (and memory_toc) take
        text = out["recall"].content[0].text
        handle = re.findall(HANDLE_LEAD, text)[0]
        out["handle"] = handle
        out["expand_handle"] = await client.call_tool("memory_expand", {"grip_id": handle})
        out["again"] = await client.call_tool(
            "memory_recall", {"query": RECALL_QUERY, "budget": 400, "project": "webapp"}
        )
        out["bad_handle"] = await client.call_tool("memory_expand", {"grip_id": "#99999"})
        out["instructions"] = client.instructions
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
    cited = tuple(e.event_id for e in memory.events()[:3])
    project = memory.scope("webapp").project
    assert project is not None
    mark = Bookmark("bm:1:cited", project, "The export runs in batches", cited, 0.9,
                    "conclusion", 1_749_000_000_000, 1_749_000_000_000)  # fmt: skip
    memory.store.put_bookmark(mark)
    out = anyio.run(_scenario, memory)
    tools = out["tools"]
    assert set(tools) == TOOLS
    for name in TOOLS:  # the instructions point an agent at every tool
        assert name in out["instructions"], name
    assert "dry_run" in out["instructions"] and "never by query" in out["instructions"]
    assert "within N tokens" in tools["memory_recall"].description
    for name, tool in tools.items():
        ann = tool.annotations
        writes = name in ("memory_remember", "memory_forget")
        assert ann is not None and ann.read_only_hint is (not writes)
        assert ann.destructive_hint is (name == "memory_forget")
        assert tool.description and len(tool.description) > 80
        assert "\n " not in tool.description, name  # no source indentation to pay for
    assert "grip_id" in tools["memory_expand"].input_schema["required"]

    event = out["remember"].structured_content["event"]
    assert out["remember"].is_error is False
    assert event["text"] == NOTE and event["metadata"]["kind"] == "decision"
    assert event["event_id"] in assert_delivered(out["remember"], memory)
    stored = memory.store.get_event(event["event_id"])
    assert stored.project == "webapp" and stored.text == NOTE

    roots = out["roots"].structured_content
    assert roots["project"] == "webapp" and roots["roots"]
    assert "toc:year:2025" in assert_delivered(out["roots"], memory)
    years = {r["node"]["node_id"] for r in roots["roots"]}
    assert "toc:year:2025" in years

    days = out["days"].structured_content
    assert [n["node_id"] for n in days["nodes"]] == ["toc:day:2025-06-03", "toc:day:2025-06-04"]
    day = out["day"].structured_content
    assert day["tier"] == "L1" and day["tokens"] > 0 and day["node"]["overview"]
    assert day["node"]["node_id"] in assert_delivered(out["day"], memory)

    expand = out["expand"].structured_content
    text = assert_delivered(out["expand"], memory)
    assert all(f"({e['event_id']})" in text for e in expand["events"])
    assert any(e["in_grip"] for e in expand["events"])

    search = out["search"].structured_content
    text = assert_delivered(out["search"], memory)
    assert search["items"] and all(f"({i['id']})" in text for i in search["items"])
    assert all(i["tier"] == "L0" and i["id"] for i in search["items"])
    note = out["search_note"].structured_content  # no project: the working directory's
    assert note["scope"]["how"] == "working-directory" and note["scope"]["projects"] == ["webapp"]
    assert any(NOTE in i["text"] for i in note["items"])  # the remembered note is findable
    recall = assert_recall(out["recall"], 400, memory)
    assert any(NOTE in i["text"] for i in recall["items"])  # the remembered note is recalled
    # the handle expands to what it stands for; the same item keeps its handle in a later call
    cited = recall["handles"][out["handle"]]
    expanded = out["expand_handle"].structured_content
    assert out["expand_handle"].is_error is False, out["expand_handle"].content[0].text
    shown = {e["event_id"] for e in expanded["events"]} | set(expanded.get("grip_ids", []))
    assert cited in shown or expanded.get("grip_id") == cited, (cited, expanded)
    assert assert_recall(out["again"], 400, memory)["handles"] == recall["handles"]
    assert_recall(out["recall_tiny"], 80, memory)
    marks = out["bookmarks"].structured_content
    assert out["bookmarks"].is_error is False
    text = assert_delivered(out["bookmarks"], memory)
    assert all(b["bookmark_id"] in text for b in marks["bookmarks"])
    assert [len(m["event_ids"]) for m in marks["bookmarks"]] == [3]
    for mark in marks["bookmarks"]:  # the first event cited, and how many more (~20 tokens each)
        first, *more = mark["event_ids"]
        assert f"[events: {first}{f' +{len(more)}' if more else ''}]" in text
        assert not [e for e in more if e in text]

    text = assert_delivered(out["context"], memory, 300)
    assert "project webapp" in text and out["context"].structured_content["items"]
    assert text.startswith("# memtoc memory — project webapp\n")  # named once
    status = out["status"].structured_content
    assert_delivered(out["status"], memory)
    assert status["events"] == memory.store.count_events() and status["token_counter"]
    assert status["outbox"]["pending"] == 0 and status["tokens"] > 0
    assert status["working_project"]["project"] == "webapp"
    # built without a worker and no daemon holds the lock: nobody processes, and status says so
    assert status["processing"]["by"] == "nobody" and status["processing"]["pid"] is None
    assert "nothing processes new events" in status["processing"]["degraded"]
    # instants are dates in the text (thirteen-digit epoch ms mean nothing to a model)
    said = out["status"].content[0].text
    assert not re.search(r"\b1\d{12}\b", said), said
    span = f"{iso_ms(status['first_event_ms'])[:10]} .. {iso_ms(status['last_event_ms'])[:10]}"
    assert span in said, said

    for key, needle in [
        ("bad_grip", "grip not found: grip:0:nope"),
        ("bad_handle", "handle not found: #99999 (this server did not give it"),
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
    """remember → (the server's worker processes) → toc → search → expand → recall, over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtoc", "--home", str(home), "mcp", "--structured"],
        env=server_env(),
    )
    out: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=120) as client:
        out["status_before"] = (await client.call_tool("memory_status", {})).structured_content
        out["remember"] = await client.call_tool(
            "memory_remember", {"text": NOTE, "kind": "decision", "project": "webapp"}
        )
        out["status"] = await wait_processed(client)
        out["roots"] = await client.call_tool("memory_toc", {"project": "webapp"})
        node_id = "toc:year:2025"
        out["path"] = []
        while True:  # drill down: year → month → week → day, the first child each time
            args = {"node_id": node_id, "project": "webapp"}
            view = (await client.call_tool("memory_toc", args)).structured_content
            out["path"].append(view)
            if view["node"]["level"] == "day":
                break
            node_id = view["node"]["child_node_ids"][0]
        out["search"] = await client.call_tool(
            "memory_search",
            {"query": "session cookie TTL staging", "depth": "L2", "limit": 5, "project": "webapp"},
        )
        grip = next(g for b in out["path"][-1]["node"]["bullets"] for g in b["grip_ids"])
        out["expand"] = await client.call_tool("memory_expand", {"grip_id": grip, "after": 2})
        out["recall"] = await client.call_tool(
            "memory_recall", {"query": RECALL_QUERY, "budget": 500, "project": "webapp"}
        )
        handle = re.findall(HANDLE_LEAD, out["recall"].content[0].text)[-1]
        out["handle"] = handle
        out["expand_handle"] = await client.call_tool(
            "memory_expand", {"grip_id": handle, "before": 0, "after": 0}
        )
        out["bad"] = await client.call_tool(
            "memory_toc", {"node_id": "toc:week:1999-W01", "project": "webapp"}
        )
        # the server runs in this repository's checkout, a project with no memory: the default
        # is that project — nothing, said so — never webapp's memory
        out["unknown"] = await client.call_tool("memory_context", {})
        out["bad_project"] = await client.call_tool(
            "memory_search", {"query": "x", "project": "nope"}
        )
        out["refused"] = await client.call_tool(
            "memory_remember", {"text": NOTE, "session_id": "a\u0000b"}
        )
    return out


def test_stdio_session_processed_by_the_servers_own_worker(
    memory: Memory, hermetic_env: Path
) -> None:
    """Nothing is processed before the session (no daemon, no `memtoc process`): the MCP server's
    worker files the transcript and the remembered note into the TOC on its own."""
    events = memory.store.count_events()
    memory.close()
    out = anyio.run(_stdio, hermetic_env)

    before = out["status_before"]["processing"]
    assert before["by"] == "this-server" and before["role"] == "mcp"
    assert before["degraded"] is None and before["worker"]["running"] in (True, False)
    assert out["remember"].is_error is False
    event_id = out["remember"].structured_content["event"]["event_id"]
    status = out["status"]
    assert status["events"] == events + 1 and status["outbox"]["failed"] == 0
    worker = status["processing"]["worker"]
    assert worker["events_filed"] == events + 1 and worker["segments_built"] > 0
    assert worker["rollup_runs"] >= 1 and worker["last_error"] is None

    roots = out["roots"].structured_content
    assert "toc:year:2025" in {r["node"]["node_id"] for r in roots["roots"]}
    levels = [v["node"]["level"] for v in out["path"]]
    assert levels == ["year", "month", "week", "day"]
    assert all(v["tokens"] > 0 and v["node"]["title"] for v in out["path"])

    with Memory.open(load_settings({"home": str(hermetic_env)})) as again:
        assert again.store.get_event(event_id).text == NOTE
        search = out["search"].structured_content
        assert_delivered(out["search"], again)
        assert any(NOTE in i["text"] for i in search["items"])  # filed by the worker: findable
        expand = out["expand"].structured_content
        assert_delivered(out["expand"], again)
        assert any(e["in_grip"] for e in expand["events"])
        for e in expand["events"]:
            assert again.store.get_event(e["event_id"]).text == e["text"]
        recall = assert_recall(out["recall"], 500, again)
        assert any(NOTE in i["text"] for i in recall["items"])
        assert out["expand_handle"].is_error is False, out["expand_handle"].content[0].text
        assert_delivered(out["expand_handle"], again)
        cited = recall["handles"][out["handle"]]
        view = out["expand_handle"].structured_content
        assert cited in {e["event_id"] for e in view["events"]} or view.get("grip_id") == cited
    assert out["bad"].is_error is True and "node not found" in out["bad"].content[0].text
    refused = out["refused"]  # refused with the importer's reason, nothing stored
    assert refused.is_error is True and "session_id contains a NUL" in refused.content[0].text
    unknown = out["unknown"].content[0].text
    assert "no memory yet for project" in unknown and "known projects: webapp" in unknown
    assert out["unknown"].structured_content["items"] == []
    assert out["bad_project"].is_error is True
    assert "unknown project 'nope' (known projects: webapp)" in out["bad_project"].content[0].text


def spawn_mcp(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memtoc", "--home", str(home), "mcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )


def wait_for_lock(path: Path, pid: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while lock_holder(path) != pid:
        assert time.monotonic() < deadline, f"pid {pid} never took {path}"
        time.sleep(0.1)


def test_mcp_process_stops_cleanly_on_sigterm_and_on_stdin_close(memory: Memory) -> None:
    """The worker's lock is released and the exit code is 0 whether the client closes stdin or
    sends SIGTERM (what the MCP client does after its 2 s grace)."""
    assert memory.settings is not None
    path = lock_path(memory.settings)
    memory.close()
    home = memory.settings.home
    first = spawn_mcp(home)
    wait_for_lock(path, first.pid)
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert "SIGTERM: finishing the work in hand" in err
    assert lock_holder(path) is None

    second = spawn_mcp(home)
    wait_for_lock(path, second.pid)
    _, err = second.communicate(input="", timeout=120)  # EOF on stdin: the client went away
    assert second.returncode == 0, err
    assert "processing: this server's worker" in err and "stopped" in err
    assert lock_holder(path) is None


def wait_until(check: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_processing_is_left_to_the_lock_holder_and_taken_over_when_it_ends(
    memory: Memory,
) -> None:
    """The real daemon lock and worker: a `memtoc serve` (here: this test holding the lock as
    one) processes; the MCP server says so, then takes over once the lock is free."""
    settings = memory.settings
    assert settings is not None
    daemon = ServeLock(lock_path(settings), role="serve")
    daemon.acquire()
    processing = Processing(settings, poll_s=0.05, takeover_s=0.1).start()
    try:
        info = processing.info()
        assert info["by"] == "other-process" and info["pid"] == os.getpid()
        assert info["role"] == "serve" and info["worker"] is None and info["degraded"] is None
        assert f"memtoc serve (pid {os.getpid()}) processes this store" in str(info["note"])
        daemon.release()
        wait_until(lambda: processing.info()["by"] == "this-server")
        assert lock_owner(lock_path(settings)) == (os.getpid(), "mcp")
        with pytest.raises(StoreError, match=r"another memtoc mcp \(pid \d+\).*--no-worker"):
            ServeLock(lock_path(settings)).acquire()  # a serve started now names the MCP holder
        wait_until(lambda: processing.info()["worker"]["state"] == "idle")  # type: ignore[index]
        assert memory.store.outbox_counts()["pending"] == 0  # it processed the ingested fixture
    finally:
        processing.stop()
        daemon.release()
    assert lock_owner(lock_path(settings)) is None
    gone = processing.info()
    assert gone["by"] == "nobody" and "stopped processing" in str(gone["degraded"])


def test_no_worker_leaves_events_queued_and_says_so(memory: Memory) -> None:
    processing = Processing(memory.settings, worker=False).start()
    try:
        info = processing.info()
        assert info["by"] == "nobody" and info["worker"] is None
        assert "(--no-worker)" in str(info["degraded"])
        assert lock_owner(lock_path(memory.settings)) is None  # type: ignore[arg-type]
    finally:
        processing.stop()
    assert memory.store.outbox_counts()["pending"] > 0


async def _busy(memory: Memory, db: Path) -> dict[str, Any]:
    """Tool calls while another process's connection holds the store's write lock for 1.5 s."""
    locked, release = threading.Event(), threading.Event()

    def writer() -> None:  # what a long ingest or processing batch does to the file
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(10)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    locked.wait(10)
    out: dict[str, Any] = {}
    async with Client(build_server(memory, structured=True)) as client:
        # readers do not wait for the writer (WAL): these return while the lock is still held
        out["toc"] = await client.call_tool("memory_toc", {"project": "webapp"})
        out["status"] = await client.call_tool("memory_status", {})
        out["held_during_reads"] = not release.is_set()
        started = time.monotonic()
        threading.Timer(1.5, release.set).start()
        out["remember"] = await client.call_tool(
            "memory_remember", {"text": NOTE, "project": "webapp"}
        )
        out["write_s"] = time.monotonic() - started
    thread.join()
    return out


def test_a_busy_store_does_not_fail_tool_calls(memory: Memory) -> None:
    memory.process()
    memory.rollup(force=True)
    out = anyio.run(_busy, memory, memory.store.path)  # type: ignore[union-attr]
    assert out["toc"].is_error is False and out["status"].is_error is False
    assert out["held_during_reads"]
    assert out["remember"].is_error is False, out["remember"].content
    assert out["write_s"] >= 1.4  # the write queued behind the lock, then went through
    stored = memory.store.get_event(out["remember"].structured_content["event"]["event_id"])
    assert stored.text == NOTE
