"""A result read for a time window that holds none of its items says so.

User trial 4: an agent asking memory_recall "what was I doing yesterday?" of a Codex project last
touched in June got "time: yesterday → 2026-11-24…2026-11-25" and then June's work, with nothing
saying yesterday held none of it — an agent reports it as yesterday's. On the real Claude Code
fixture (cut from the shared transcripts, MIT; its sessions are in 2025): "yesterday" (today is
later) holds nothing and the MCP and CLI results say so; "in June 2025" holds the session and
nothing is said. memory_timeline said "no day nodes in that range" alone: it names the latest
day; and it said each day's title twice (an extractive L0 opens with it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.cli import app
from memtoc.surfaces.labels import OUTSIDE_WINDOW
from memtoc.surfaces.mcp_server import build_server
from real_fixture import real_memory

PROJECT = "claude-code-log"
EMPTY = "what was I doing yesterday?"
HELD = "what did we do about the GitHub Action in June 2025?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("window")
    with real_memory(home, rollup=False):
        pass
    return home


def test_mcp_says_when_the_window_holds_nothing(home: Path) -> None:
    settings = load_settings({"home": str(home), "embedder": "none"}, environ={})

    async def calls(memory: Memory) -> dict[str, str]:
        async with Client(build_server(memory, working_dir="/nowhere")) as client:
            out: dict[str, Any] = {}
            for key, query in (("empty", EMPTY), ("held", HELD)):
                args = {"query": query, "project": PROJECT}
                out[f"recall_{key}"] = await client.call_tool("memory_recall", args)
                out[f"search_{key}"] = await client.call_tool("memory_search", args)
            return {k: v.content[0].text for k, v in out.items()}

    with Memory.open(settings) as memory:
        texts = anyio.run(calls, memory)
    for tool in ("recall", "search"):
        empty, held = texts[f"{tool}_empty"], texts[f"{tool}_held"]
        assert "time: yesterday → " in empty and f"— {OUTSIDE_WINDOW}" in empty, empty
        assert "2025-" in empty  # the items shown are from other times
        assert "time: in June 2025 → 2025-06-01" in held and OUTSIDE_WINDOW not in held, held


def test_cli_says_when_the_window_holds_nothing(home: Path) -> None:
    runner = CliRunner(env={"MEMTOC_EMBEDDER": "none"})
    for command in ("recall", "search"):
        empty = runner.invoke(app, ["--home", str(home), command, EMPTY, "-p", PROJECT])
        held = runner.invoke(app, ["--home", str(home), command, HELD, "-p", PROJECT])
        assert empty.exit_code == 0 and held.exit_code == 0, empty.output + held.output
        flat = " ".join(empty.output.split())
        assert OUTSIDE_WINDOW in flat, empty.output
        assert OUTSIDE_WINDOW not in " ".join(held.output.split()), held.output


def test_the_timeline_says_each_title_once_and_where_the_latest_day_is(home: Path) -> None:
    settings = load_settings({"home": str(home), "embedder": "none"}, environ={})

    async def calls(memory: Memory) -> dict[str, str]:
        async with Client(build_server(memory, working_dir="/nowhere")) as client:
            out = {
                "all": await client.call_tool("memory_timeline", {"project": PROJECT}),
                "empty": await client.call_tool(
                    "memory_timeline", {"project": PROJECT, "since": "yesterday"}
                ),
            }
            return {k: v.content[0].text for k, v in out.items()}

    with Memory.open(settings) as memory:
        days = memory.store.list_nodes(PROJECT, level="day")
        texts = anyio.run(calls, memory)
    assert days and all(d.abstract.startswith(d.title) for d in days)  # what was said twice
    for day in days:
        (line,) = [ln for ln in texts["all"].splitlines() if ln.startswith(f"- [{day.node_id}]")]
        assert line.count(day.title) == 1, line
    latest = days[-1]
    assert texts["empty"].startswith(
        f"no day nodes in that range; the latest: [{latest.node_id}] {latest.title}"
    ), texts["empty"]
