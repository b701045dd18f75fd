"""``memtoc process`` says what it could not do as configured.

User trial 3: with an LLM summariser configured whose API failed, ``memtoc process`` ran 38 s on
the real Gemini CLI sessions and printed only its counts — every summary had been written by the
extractive fallback, which only ``memtoc status`` told. Without an embedder it filed events with
no vectors, silently too. Here a real HTTP server answers the summariser's calls with 401 (a
wrong key: not retried), and the real Gemini CLI transcript (fixture, MIT) goes through the CLI.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.surfaces.cli import app

FIXTURE = Path(__file__).parent / "fixtures" / "gemini"


class _WrongKey(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"error": {"message": "Incorrect API key provided"}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@contextmanager
def wrong_key_server() -> Iterator[str]:
    """A real OpenAI-style endpoint on a loopback port that refuses every call (401)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WrongKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def llm_url() -> Iterator[str]:
    with wrong_key_server() as url:
        yield url


def _run(home: Path, env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(app, ["--home", str(home), *args], env={"COLUMNS": "300", **env})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_process_names_the_summaries_the_fallback_wrote(tmp_path: Path, llm_url: str) -> None:
    env = {
        "MEMTOC_SUMMARIZER": "openai",
        "MEMTOC_LLM_MODEL": "gpt-4o-mini",
        "MEMTOC_LLM_BASE_URL": llm_url,
        "MEMTOC_LLM_API_KEY": "sk-wrong",
        "MEMTOC_EMBEDDER": "none",
    }
    _run(tmp_path, env, "ingest", str(FIXTURE), "--project", "aim")
    out = _run(tmp_path, env, "process")
    lines = [line for line in out.splitlines() if line.startswith("degraded: ")]
    assert len(lines) == 2, out
    fell_back, unembedded = lines
    assert " summaries built by the extractive fallback: " in fell_back
    assert "401" in fell_back and "memtoc rebuild --summaries" in fell_back
    status = json.loads(_run(tmp_path, env, "status", "--json"))
    count = status["summaries"]["degraded"]
    assert count > 0 and fell_back.startswith(f"degraded: {count:,} summaries")
    events = status["events"]
    assert unembedded == (
        f"degraded: {events:,} events filed without vectors (no embedder, BM25 only; "
        "memtoc status says why)"
    )
    # Nothing new: nothing to say; the JSON names the modes too.
    again = json.loads(_run(tmp_path, env, "process", "--json"))
    assert again["degraded"] == []


def test_memory_toc_says_a_summary_is_the_fallbacks(tmp_path: Path, llm_url: str) -> None:
    """The CLI and the web marked a node the extractive fallback built; memory_toc's text did
    not, so an agent read fallback summaries as the LLM's."""
    import anyio
    from mcp import Client

    from memtoc.config import load_settings
    from memtoc.memory import Memory
    from memtoc.surfaces.mcp_server import build_server

    settings = load_settings(
        {
            "home": str(tmp_path),
            "embedder": "none",
            "summarizer": "openai",
            "llm_model": "gpt-4o-mini",
            "llm_base_url": llm_url,
            "llm_api_key": "sk-wrong",
        },
        environ={},
    )
    with Memory.open(settings) as memory:
        memory.ingest([FIXTURE], project="aim")
        memory.process()
        nodes = [
            n for level in ("year", "day") for n in memory.store.list_nodes("aim", level=level)
        ]
        assert nodes and all(n.degraded for n in nodes)

        async def toc() -> list[str]:
            async with Client(build_server(memory, working_dir="/nowhere")) as client:
                return [
                    (await client.call_tool("memory_toc", args)).content[0].text
                    for args in (
                        {"project": "aim"},
                        {"project": "aim", "node_id": nodes[-1].node_id},
                    )
                ]

        for text in anyio.run(toc):
            line = next(x for x in text.splitlines() if x.startswith("degraded: "))
            assert line.startswith("degraded: summary by the extractive fallback (")
            assert "401" in line and len(line) < 160, line
