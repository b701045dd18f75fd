"""MCP over HTTP (``memtoc mcp --transport http``): the same bearer token as the HTTP API and the
same loopback rule, checked against the real MCP app over a real store."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from mcp_support import (
    FIXTURE,
    NOTE,
    RECALL_QUERY,
    assert_delivered,
    assert_recall,
    server_env,
    wait_processed,
)
from memtoc.config import load_settings
from memtoc.errors import ConfigError
from memtoc.memory import Memory
from memtoc.surfaces.cli import app
from memtoc.surfaces.http.mcp_http import mcp_http_app
from memtoc.surfaces.serve_lock import lock_holder, lock_path

TOKEN = "mcp-token"
HTTP_ARGS = ("--transport", "http", "--port", "0")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def memory_at(home: Path) -> Memory:
    return Memory.open(load_settings({"home": str(home), "embedder": "none"}, environ={}))


def test_mcp_over_http_needs_the_token(tmp_path: Path) -> None:
    with memory_at(tmp_path / "home") as memory:
        asgi = mcp_http_app(memory, host="127.0.0.1", token=TOKEN)
        with TestClient(asgi, base_url="http://127.0.0.1:8766") as client:
            body = json.dumps(INITIALIZE)
            assert client.post("/mcp", content=body, headers=HEADERS).status_code == 401
            wrong = {**HEADERS, "Authorization": "Bearer nope"}
            assert client.post("/mcp", content=body, headers=wrong).status_code == 401
            ok = client.post(
                "/mcp", content=body, headers={**HEADERS, "Authorization": f"Bearer {TOKEN}"}
            )
            assert ok.status_code == 200, ok.text
            assert '"serverInfo"' in ok.text and "memtoc" in ok.text


def test_mcp_over_http_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    with memory_at(tmp_path / "home") as memory:
        with pytest.raises(ConfigError, match=r"refusing to bind 0\.0\.0\.0"):
            mcp_http_app(memory, host="0.0.0.0", token=None)
        mcp_http_app(memory, host="127.0.0.1", token=None)  # loopback may run without one


def test_mcp_cli_refuses_no_auth_on_a_public_address(hermetic_env: Path) -> None:
    result = CliRunner().invoke(
        app, ["mcp", "--transport", "http", "--host", "0.0.0.0", "--no-auth", "--port", "0"]
    )
    assert result.exit_code == 1
    assert "refusing to bind 0.0.0.0 without a token" in " ".join(result.output.split())


def test_mcp_over_streamable_http_end_to_end(hermetic_env: Path) -> None:
    """`memtoc mcp --transport http` as a subprocess: a real streamable-HTTP client session with
    the bearer token; the server's own worker files what is remembered; SIGTERM stops it (exit
    0, lock released)."""
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        memory.ingest([FIXTURE])
        assert memory.settings is not None
        lock = lock_path(memory.settings)
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "memtoc", "--home", str(hermetic_env), "mcp", *HTTP_ARGS, "--structured"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:  # the first line names the endpoint (port 0: a free one)
            found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                url = found.group(1)
                break
        assert url, "no endpoint line on stderr"
        token = (hermetic_env / "http-token").read_text().strip()
        out = anyio.run(_http_session, url, token)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "processing: this server's worker" in err and "stopped" in err
    assert lock_holder(lock) is None

    assert out["status"]["processing"]["by"] == "this-server"
    assert out["status"]["processing"]["pid"] == proc.pid
    assert out["remember"].is_error is False
    search = out["search"].structured_content
    assert any(NOTE in i["text"] for i in search["items"])
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        assert_delivered(out["search"], memory)
        recall = assert_recall(out["recall"], 300, memory)
    assert any(NOTE in i["text"] for i in recall["items"])


async def _http_session(url: str, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300))
    out: dict[str, Any] = {}
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        out["remember"] = await client.call_tool(
            "memory_remember", {"text": NOTE, "project": "webapp"}
        )
        out["status"] = await wait_processed(client)
        out["search"] = await client.call_tool(
            "memory_search",
            {"query": "session cookie TTL staging", "depth": "L2", "project": "webapp"},
        )
        out["recall"] = await client.call_tool(
            "memory_recall", {"query": RECALL_QUERY, "budget": 300, "project": "webapp"}
        )
    return out
