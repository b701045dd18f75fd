"""MCP over HTTP (``memtoc mcp --transport http``): the same bearer token as the HTTP API and the
same loopback rule, checked against the real MCP app over a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.errors import ConfigError
from memtoc.memory import Memory
from memtoc.surfaces.cli import app
from memtoc.surfaces.http.mcp_http import mcp_http_app

TOKEN = "mcp-token"
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
