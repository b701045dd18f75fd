"""Acceptance of the project rule and of what MCP delivers, through real `mcp` client sessions.

- Servers started in a subfolder of a git repository (stdio, then HTTP) and in a linked worktree
  of it (HTTP) file to and read from the same project; a repository with the same folder name
  elsewhere, reached through a linked worktree that is also named ``app`` (stdio), stays apart, in
  both directions.
- For every tool of a default server (text only), the reported token count equals a re-count of
  the delivered text, and recall and context fit their budgets, whole text included.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ListRootsResult, Root
from pydantic import FileUrl

from git_support import git, make_repo
from mcp_support import FIXTURE, HANDLE_LEAD, assert_delivered, server_env, wait_processed
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.mcp_server import build_server

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

NOTE_MAIN = "Decision: the checkout flow retries payment webhooks three times with backoff."
NOTE_WORKTREE = "Decision: payment webhooks are verified with the provider's signing secret."
NOTE_OTHER = "Decision: the other app ships payment webhooks to a queue, never retries inline."


def _stdio(home: Path, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtoc", "--home", str(home), "mcp", "--structured"],
        env=server_env(),
        cwd=str(cwd),
    )


async def _session(client: Client, note: str) -> dict[str, Any]:
    """Remember a note without naming a project, wait for the server's worker, read back."""
    out: dict[str, Any] = {}
    out["remember"] = await client.call_tool("memory_remember", {"text": note, "kind": "decision"})
    out["status"] = await wait_processed(client)
    out["search"] = await client.call_tool(
        "memory_search", {"query": "payment webhooks decision", "depth": "L2", "limit": 20}
    )
    out["recall"] = await client.call_tool(
        "memory_recall", {"query": "what did we decide about payment webhooks?", "budget": 600}
    )
    out["context"] = await client.call_tool("memory_context", {"budget": 400})
    return out


async def _over_stdio(home: Path, cwd: Path, note: str) -> dict[str, Any]:
    async with Client(_stdio(home, cwd), read_timeout_seconds=120) as client:
        return await _session(client, note)


def _over_http(home: Path, cwd: Path, note: str) -> dict[str, Any]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "memtoc", "--home", str(home), "mcp", "--structured"),
            *("--transport", "http", "--port", "0"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
        cwd=str(cwd),
    )
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                url = found.group(1)
                break
        assert url, "no endpoint line on stderr"
        token = (home / "http-token").read_text().strip()

        async def run() -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {token}"}
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300))
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                return await _session(client, note)

        return anyio.run(run)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err


def _texts(result: Any) -> list[str]:
    return [i["text"] for i in result.structured_content["items"]]


def test_a_repository_its_subfolders_and_worktrees_are_one_project(
    hermetic_env: Path, tmp_path: Path
) -> None:
    app = make_repo(tmp_path / "work" / "app")
    worktree = tmp_path / "trees" / "app-payments"
    git(app, "worktree", "add", "-q", str(worktree), "-b", "payments")
    other = make_repo(tmp_path / "clients" / "app")  # same folder name, another repository
    other_tree = tmp_path / "elsewhere" / "app"  # its worktree, named app as well
    git(other, "worktree", "add", "-q", str(other_tree), "-b", "queue")
    home = hermetic_env

    first = anyio.run(_over_stdio, home, app / "src" / "pkg", NOTE_MAIN)
    second = _over_http(home, worktree / "src", NOTE_WORKTREE)
    third = anyio.run(_over_stdio, home, other_tree / "src", NOTE_OTHER)
    back = _over_http(home, app / "src", NOTE_MAIN + " (restated)")

    stored = [x["remember"].structured_content["event"] for x in (first, second, third, back)]
    assert stored[0]["project"] == stored[1]["project"] == stored[3]["project"] == "app"
    assert stored[2]["project"] != "app"
    # the worktree's session reads what the subfolder's filed, and its own
    found = _texts(second["search"])
    assert any(NOTE_MAIN in t for t in found) and any(NOTE_WORKTREE in t for t in found)
    recalled = _texts(second["recall"])
    assert any(NOTE_MAIN in t for t in recalled) and any(NOTE_WORKTREE in t for t in recalled)
    assert not any(NOTE_OTHER in t for t in found + recalled)
    # the other repository named app sees only its own memory ...
    other_found = _texts(third["search"]) + _texts(third["recall"])
    assert any(NOTE_OTHER in t for t in other_found)
    assert not any(NOTE_MAIN in t or NOTE_WORKTREE in t for t in other_found)
    assert "project clients/app" in third["context"].content[0].text
    # ... and the first repository never sees it
    back_found = _texts(back["search"]) + _texts(back["recall"])
    assert any(NOTE_WORKTREE in t for t in back_found)
    assert not any(NOTE_OTHER in t for t in back_found)
    assert back["status"]["working_project"]["project"] == "app"

    with Memory.open(load_settings({"home": str(home)})) as memory:
        projects = {p["name"]: p for p in memory.projects()}
        assert set(projects) == {"app", "clients/app"}
        assert projects["app"]["roots"] == [str(app.resolve())]
        assert projects["clients/app"]["roots"] == [str(other.resolve())]
        assert projects["app"]["events"] == 3 and projects["clients/app"]["events"] == 1


async def _every_tool(memory: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(build_server(memory, working_dir="/home/dev/webapp")) as client:
        out["remember"] = await client.call_tool("memory_remember", {"text": NOTE_MAIN})
        memory.process()
        memory.rollup(force=True)
        out["context"] = {
            b: await client.call_tool("memory_context", {"budget": b}) for b in (40, 150, 800)
        }
        out["toc"] = await client.call_tool("memory_toc", {})
        out["node"] = await client.call_tool(
            "memory_toc", {"node_id": "toc:year:2025", "depth": "L1"}
        )
        out["timeline"] = await client.call_tool(
            "memory_timeline", {"since": "2025-06-01", "until": "2025-06-05"}
        )
        out["search"] = await client.call_tool(
            "memory_search", {"query": "flaky login test", "depth": "L2"}
        )
        out["recall"] = {
            b: await client.call_tool(
                "memory_recall", {"query": "why did the login test time out?", "budget": b}
            )
            for b in (30, 90, 250, 700, 2000)
        }
        out["bookmarks"] = await client.call_tool("memory_bookmarks", {})
        grip = re.search(r"grip:\d+:[0-9a-z]+", out["node"].content[0].text)
        assert grip, out["node"].content[0].text
        out["expand"] = await client.call_tool("memory_expand", {"grip_id": grip.group(0)})
        out["forget"] = await client.call_tool(
            "memory_forget", {"since": "2025-06-03", "until": "2025-06-04", "dry_run": True}
        )
        out["status"] = await client.call_tool("memory_status", {})
    return out


def test_every_tool_reports_the_tokens_it_delivers(hermetic_env: Path) -> None:
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        memory.ingest([FIXTURE])
        out = anyio.run(_every_tool, memory)
        for name in ("remember", "toc", "node", "timeline", "search", "bookmarks", "expand"):
            result = out[name]
            assert result.is_error is False, (name, result.content[0].text)
            assert result.structured_content is None  # text only, by default
            assert_delivered(result, memory)
        assert_delivered(out["forget"], memory)
        assert "would forget" in out["forget"].content[0].text
        assert "your project: " in assert_delivered(out["status"], memory)
        for budget, result in out["context"].items():
            assert_delivered(result, memory, budget)
        assert "Where we left off" in out["context"][800].content[0].text
        for budget, result in out["recall"].items():
            text = assert_delivered(result, memory, budget)
            if budget >= 250:
                assert text.startswith("recall · ") and re.search(HANDLE_LEAD, text)
        # the text is written for a model: no JSON, ids first
        search = out["search"].content[0].text
        assert not search.lstrip().startswith("{") and '": ' not in search.splitlines()[0]
        assert re.search(r"^1\. \(", search, re.M)
        big = out["recall"][2000].content[0].text
        assert json.dumps({"tokens": 1})[:3] not in big


async def _with_roots(memory: Memory, root: Path, elsewhere: Path) -> dict[str, Any]:
    asked: list[int] = []

    async def roots(_context: Any) -> ListRootsResult:
        asked.append(1)
        return ListRootsResult(roots=[Root(uri=FileUrl(root.as_uri()), name="repo")])

    out: dict[str, Any] = {}
    server = build_server(memory, working_dir=str(elsewhere), structured=True)
    async with Client(server, list_roots_callback=roots) as client:
        out["remember"] = await client.call_tool("memory_remember", {"text": NOTE_MAIN})
        out["status"] = await client.call_tool("memory_status", {})
    async with Client(server) as client:  # a client without roots: where the server started
        out["plain"] = await client.call_tool("memory_status", {})
    out["asked"] = len(asked)
    return out


def test_the_clients_roots_name_the_working_directory(hermetic_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "svc")
    elsewhere = make_repo(tmp_path / "started-here")
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        out = anyio.run(_with_roots, memory, repo / "src", elsewhere)
        assert out["remember"].structured_content["event"]["project"] == "svc"
        working = out["status"].structured_content["working_project"]
        assert working["project"] == "svc" and working["root"] == str(repo.resolve())
        assert out["asked"] >= 1
        plain = out["plain"].structured_content["working_project"]
        assert plain["root"] == str(elsewhere.resolve()) and plain["known"] is False
