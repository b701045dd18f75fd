"""One owner per contract the surfaces show (issue 18 part 4): the CLI, the HTTP API and the MCP
tools read times with one parser and report them in one shape, over a real store filled through
the real CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from typer.testing import CliRunner

from memtoc.config import Settings, load_settings
from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.retrieval.timeparse import parse_time
from memtoc.surfaces.cli import app as cli
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server

DAY_MS = 86_400_000
TOKEN = "contracts-token-0123456789"
PHRASES = ("last week", "yesterday", "the last 10 days", "3 days ago", "this month")


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store with one event every 6 hours over the last 40 days, ingested by ``memtoc ingest``
    (times relative to the real clock: the CLI reads "last week" at the system's now)."""
    base = tmp_path_factory.mktemp("contracts")
    now = int(time.time() * 1000)
    rows = [
        {
            "session_id": f"s{i // 4}",
            "timestamp": now - i * DAY_MS // 4 - 60_000,
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"event {i}: the cache invalidation work on the orders service",
            "project": "webapp",
        }
        for i in range(160)
    ]
    transcript = base / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMTOC_TIMEZONE", "Europe/Paris")
        mp.setenv("MEMTOC_EMBEDDER", "none")
        code, out = cli_run("--home", str(base / "home"), "ingest", str(transcript), "--json")
        assert code == 0, out
        code, out = cli_run("--home", str(base / "home"), "process")
        assert code == 0, out
        yield base / "home"


def settings(home: Path) -> Settings:
    return load_settings({"home": str(home), "timezone": "Europe/Paris", "embedder": "none"})


def expected(memory: Memory, phrase: str) -> tuple[int, int]:
    found = parse_time(phrase, memory.clock.now_ms(), memory.tz)
    assert found is not None and found.range is not None, phrase
    return found.range


@pytest.mark.parametrize("phrase", PHRASES)
def test_cli_since_and_until_take_the_phrases_mcp_and_http_take(
    home: Path, phrase: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memtoc events --since "last week" --until "last week"`` lists exactly that week's events:
    ``since`` takes the period's start, ``until`` its end, in the store's time zone."""
    monkeypatch.setenv("MEMTOC_TIMEZONE", "Europe/Paris")
    code, out = cli_run(
        "--home", str(home), "events", "-p", "webapp", "--since", phrase, "--until", phrase,
        "--limit", "1000", "--json",
    )  # fmt: skip
    assert code == 0, out
    with Memory.open(settings(home), read_only=True) as memory:
        lo, hi = expected(memory, phrase)
        inside = memory.events(project="webapp", since_ms=lo, until_ms=hi, limit=1000)
    got = [e["event_id"] for e in json.loads(out)["events"]]
    assert got and got == [e.event_id for e in inside]


def test_search_since_last_week_on_every_surface(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``search --since "last week"`` works in the CLI, as in HTTP and MCP, with the same window."""
    monkeypatch.setenv("MEMTOC_TIMEZONE", "Europe/Paris")
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")
    args = ("search", "cache invalidation", "-p", "webapp", "-n", "50", "--depth", "L2")
    code, out = cli_run("--home", str(home), *args, "--since", "last week", "--json")
    assert code == 0, out
    with Memory.open(settings(home), read_only=True) as memory:
        lo, _ = expected(memory, "last week")
    cli_items = json.loads(out)["items"]

    http_app = create_app(lambda: Memory.open(settings(home)), token=TOKEN, pool_size=1)
    with TestClient(http_app, base_url="http://127.0.0.1:8765") as client:
        response = client.get(
            "/v1/search",
            params={
                "q": "cache invalidation",
                "project": "webapp",
                "since": "last week",
                "limit": 50,
                "depth": "L2",
            },
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert response.status_code == 200, response.text
    http_items = response.json()["items"]

    async def mcp() -> Any:
        with Memory.open(settings(home)) as memory:
            async with Client(build_server(memory, structured=True)) as client:
                return await client.call_tool(
                    "memory_search",
                    {
                        "query": "cache invalidation",
                        "project": "webapp",
                        "since": "last week",
                        "limit": 50,
                        "depth": "L2",
                    },
                )

    mcp_items = anyio.run(mcp).structured_content["items"]
    for items in (cli_items, http_items, mcp_items):
        assert items
        for item in items:
            assert iso_ms(lo) <= item["end_time"], item  # everything overlaps [lo, now)
            if item["kind"] == "event":
                assert iso_ms(lo) <= item["start_time"], item
    assert (
        {i["id"] for i in cli_items}
        == {i["id"] for i in http_items}
        == {i["id"] for i in mcp_items}
    )


def test_one_time_range_shape_in_search_drill_recall_and_their_texts(home: Path) -> None:
    """A query's time expression is reported in one JSON shape by search, drill and recall, and
    the MCP texts show the window (search's used to print 'None…None')."""
    query = "cache invalidation last week"
    with Memory.open(settings(home)) as memory:
        lo, hi = expected(memory, "last week")
        ranges = {
            "search": memory.search(query, project="webapp").time_range,
            "drill": memory.drill(query, projects=("webapp",)).time_range,
            "recall": memory.recall(query, project="webapp").time_range,
        }

        async def texts() -> list[str]:
            async with Client(build_server(memory)) as client:
                args = {"query": query, "project": "webapp"}
                found = [
                    await client.call_tool(t, args) for t in ("memory_search", "memory_recall")
                ]
                return [r.content[0].text for r in found]

        mcp_texts = anyio.run(texts)
    keys = {name: set(tr or ()) for name, tr in ranges.items()}
    assert keys["search"] == keys["drill"] == keys["recall"] and keys["search"], keys
    for tr in ranges.values():
        assert tr is not None and tr["expression"] == "last week"
        assert (tr["start_ms"], tr["end_ms"]) == (lo, hi)
        assert (tr["start_time"], tr["end_time"]) == (iso_ms(lo), iso_ms(hi))
    for text in mcp_texts:
        assert f"time: last week → {iso_ms(lo)}…{iso_ms(hi)}" in text, text[:300]


def test_one_timeline_view_on_every_surface(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``memtoc timeline --json``, ``/v1/timeline`` and ``memory_timeline`` return the same view
    (``TimelineView.to_dict``) for the same arguments, phrases included."""
    monkeypatch.setenv("MEMTOC_TIMEZONE", "Europe/Paris")
    args = {"since": "last week", "until": "last week", "level": "day", "project": "webapp"}
    code, out = cli_run(
        "--home", str(home), "timeline", *(x for k, v in args.items() for x in (f"--{k}", v)),
        "--json",
    )  # fmt: skip
    assert code == 0, out
    from_cli = json.loads(out)
    http_app = create_app(lambda: Memory.open(settings(home)), token=TOKEN, pool_size=1)
    with TestClient(http_app, base_url="http://127.0.0.1:8765") as client:
        response = client.get(
            "/v1/timeline", params=args, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 200, response.text

    async def mcp() -> Any:
        with Memory.open(settings(home)) as memory:
            async with Client(build_server(memory, structured=True)) as client:
                return await client.call_tool("memory_timeline", args)

    from_mcp = dict(anyio.run(mcp).structured_content)
    from_mcp.pop("tokens")  # what the delivered text costs (every MCP result says it)
    assert from_cli == response.json() == from_mcp
    with Memory.open(settings(home)) as memory:
        lo, hi = expected(memory, "last week")
    assert (from_cli["since"], from_cli["until"]) == (iso_ms(lo), iso_ms(hi))
    assert [n["node_id"][:8] for n in from_cli["nodes"]] == ["toc:day:"] * 7
    assert {"keywords", "event_count", "session_id", "abstract"} <= set(from_cli["nodes"][0])


def test_the_project_setting_is_one_explicit_project_for_every_verb(tmp_path: Path) -> None:
    """One default-project rule (``memtoc.projects``): the ``project`` setting counts as an
    explicit project for reads, navigation, session-start context, remember and ingest alike
    (before, ingest took it as a last resort below the session's folder, and toc/timeline/context
    ignored it: 'several projects')."""
    home = tmp_path / "home"
    repo = tmp_path / "webapp"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")

    def transcript(session: str) -> Path:
        rows = [
            {"session_id": session, "timestamp": 1_705_572_000_000 + i * 60_000, "role": "user",
             "text": f"step {i}: the ledger export"}
            for i in range(4)
        ]  # fmt: skip
        path = tmp_path / f"{session}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return path

    with Memory.open(load_settings({"home": str(home), "embedder": "none"})) as memory:
        memory.remember("The docs site moves to a new host.", project="docs")
        memory.ingest([transcript("s1")], default_cwd=str(repo))
        assert {p["name"] for p in memory.projects()} == {"docs", "webapp"}
    pinned = load_settings({"home": str(home), "embedder": "none", "project": "docs"})
    with Memory.open(pinned) as memory:
        memory.ingest([transcript("s2")], default_cwd=str(repo))
        memory.remember(
            "Decision: the ledger export runs nightly.", project=memory.project_for_write()
        )
        memory.process()
        memory.rollup(force=True)
        assert memory.scope().project == "docs"
        assert memory.project_for_write(working_dir=repo) == "docs"
        assert memory.toc() and all(n.project == "docs" for n in memory.toc())
        assert memory.timeline().project == "docs"
        assert memory.context().project == "docs"
        counts = {p["name"]: p["events"] for p in memory.projects()}
    assert counts == {"docs": 2 + 4, "webapp": 4}


INTERNALS = {
    "sqlite_store", "summarizer", "pipeline", "fusion", "semantic", "processor", "registry",
    "bookmark_step", "reconcile_forget_log",
}  # fmt: skip
"""Memory members that hand out a component (for tools and tests), not the result of a verb."""


def test_the_result_types_of_memorys_verbs_are_exported_from_the_package() -> None:
    """``from memtoc import RecallResult`` works for every type a verb of ``Memory`` returns."""
    import ast
    import inspect

    import memtoc

    tree = ast.parse(inspect.getsource(Memory))
    (cls,) = tree.body
    assert isinstance(cls, ast.ClassDef)
    missing = {}
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_") or fn.name in INTERNALS:
            continue
        assert fn.returns is not None, fn.name
        names = {
            n.id
            for n in ast.walk(fn.returns)
            if isinstance(n, ast.Name) and n.id[0].isupper() and n.id not in {"None", "JsonValue"}
        }
        missing.update({name: fn.name for name in names if name not in memtoc.__all__})
    assert not missing, missing
    for name in memtoc.__all__:
        assert getattr(memtoc, name) is not None
    assert memtoc.RecallResult.__name__ == "RecallResult"
