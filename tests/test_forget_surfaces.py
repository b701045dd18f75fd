"""Forget through the real surfaces: the CLI (typer runner: confirmation, --query listing,
--dry-run, --json, forget-log) and the MCP tool over an in-process client session."""

from __future__ import annotations

import json
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from conftest import BOTH_BACKENDS
from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.surfaces.mcp_server import build_server
from search_support import require_model
from store_tables import relation_bytes, tables_holding

runner = CliRunner()
BASE = 1_705_572_000_000  # 2024-01-18T10:00:00Z
SECRET = "hunter2quux"


def transcript(path: Path) -> Path:
    rows = [
        {
            "event_id": f"E{i}",
            "session_id": "s1" if i < 6 else "s2",
            "timestamp": BASE + i * 60_000,
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"the api key is {SECRET}"
            if i == 2
            else f"step {i}: refactor the session code",
        }
        for i in range(9)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(db: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["--db", db, *args], input=stdin)
    return result.exit_code, result.output


def prepared(tmp_path: Path) -> str:
    db = str(tmp_path / "m.db")
    code, out = cli(db, "ingest", str(transcript(tmp_path / "t.jsonl")), "--json")
    assert code == 0, out
    code, out = cli(db, "process", "--json")
    assert code == 0, out
    return db


def event_ids(db: str) -> list[str]:
    code, out = cli(db, "events", "--json", "--limit", "1000")
    assert code == 0, out
    return [e["event_id"] for e in json.loads(out)["events"]]


def test_cli_confirms_lists_query_matches_and_forgets(tmp_path: Path) -> None:
    db = prepared(tmp_path)
    # --query shows what matches, asks, and a "no" changes nothing
    code, out = cli(db, "forget", "--query", SECRET, stdin="n\n")
    assert code == 1 and "Would forget 1 events" in out and "E2" in out and "aborted" in out
    assert "E2" in event_ids(db)
    # --json without --yes is refused (nothing to confirm with)
    code, out = cli(db, "forget", "--event", "E2", "--json")
    assert code == 1 and "--json needs --yes" in out
    # dry run: a plan, nothing forgotten
    code, out = cli(db, "forget", "--session", "s2", "--dry-run", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["dry_run"] is True and plan["event_ids"] == ["E6", "E7", "E8"]
    assert len(event_ids(db)) == 9
    # yes at the prompt forgets exactly what was shown
    code, out = cli(db, "forget", "--query", SECRET, stdin="y\n")
    assert code == 0 and "Forgot 1 events" in out, out
    assert "E2" not in event_ids(db)
    code, out = cli(db, "forget", "--session", "s2", "--yes", "--json")
    report = json.loads(out)
    assert code == 0 and report["events"] == 3 and report["segments_removed"] == 1
    assert report["selector"]["session_id"] == "s2" and report["audit_id"] == 2
    assert event_ids(db) == ["E0", "E1", "E3", "E4", "E5"]
    code, out = cli(db, "search", SECRET, "--json", "--all-projects")
    assert code == 0 and json.loads(out)["items"] == []
    code, out = cli(db, "forget-log", "--json")
    log = json.loads(out)
    assert [e["event_ids"] for e in log] == [["E6", "E7", "E8"], ["E2"]]
    assert log[1]["selector"]["query"] is True and SECRET not in out
    code, out = cli(db, "verify")
    assert code == 0, out
    code, out = cli(db, "forget", "--project", "default")
    assert code == 1 and "needs a selector" in out


async def _mcp(memory: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(build_server(memory, structured=True)) as client:
        out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        out["plan"] = await client.call_tool(
            "memory_forget", {"event_ids": ["E2"], "dry_run": True}
        )
        out["forget"] = await client.call_tool("memory_forget", {"event_ids": ["E2"]})
        out["range"] = await client.call_tool(
            "memory_forget",
            {"since": "2024-01-18T10:06:00Z", "until": "2024-01-18T10:09:00Z", "project": "p"},
        )
        out["nothing"] = await client.call_tool("memory_forget", {})
        out["half_range"] = await client.call_tool("memory_forget", {"since": "2024-01-18"})
        out["no_query"] = await client.call_tool("memory_forget", {"query": SECRET})
        out["bad_time"] = await client.call_tool(
            "memory_forget", {"since": "whenever", "until": "later"}
        )
    return out


def test_mcp_memory_forget(hermetic_env: Path, tmp_path: Path) -> None:
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        memory.ingest([transcript(tmp_path / "t.jsonl")], project="p")
        memory.process()
        out = anyio.run(_mcp, memory)
        tool = out["tools"]["memory_forget"]
        assert tool.annotations.destructive_hint is True
        assert tool.annotations.read_only_hint is False
        assert "query" not in tool.input_schema["properties"]
        plan = out["plan"].structured_content
        assert out["plan"].is_error is False and plan["dry_run"] and plan["event_ids"] == ["E2"]
        done = out["forget"].structured_content
        assert done["events"] == 1 and done["audit_id"] == 1 and done["tokens"] > 0
        assert out["range"].structured_content["event_ids"] == ["E6", "E7", "E8"]
        assert [e.event_id for e in memory.events()] == ["E0", "E1", "E3", "E4", "E5"]
        for key, needle in [
            ("nothing", "give event_ids, or since and until"),
            ("half_range", "needs both since and until"),
            ("bad_time", "since='whenever'"),
        ]:
            result = out[key]
            assert result.is_error is True, key
            assert needle in result.content[0].text, (key, result.content[0].text)
        # an unknown argument (a free-text query) is not accepted: nothing more was forgotten
        assert len(memory.forget_audit()) == 2
        assert memory.verify().ok


def test_cli_query_forgets_all_80_matches_or_refuses_above_limit(tmp_path: Path) -> None:
    """`forget --query` used to stop at the 50 best BM25 hits and say "Forgot 50" while 30
    remained; now every match is listed and forgotten, or the forget is refused with the count."""
    db = str(tmp_path / "m.db")
    rows = [
        {
            "event_id": f"M{i:02d}",
            "session_id": f"s{i % 5}",
            "timestamp": BASE + i * 60_000,
            "role": "user",
            "text": f"step {i}: the staging password {SECRET} went into the log",
        }
        for i in range(80)
    ]
    rows.append({**rows[0], "event_id": "META", "text": "clean", "metadata": {"note": SECRET}})
    rows.append({**rows[0], "event_id": "KEEP", "text": "nothing to see here"})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli(db, "ingest", str(path), "--json")[0] == 0
    code, out = cli(db, "forget", "--query", SECRET, "--limit", "50", "--yes")
    assert code == 1 and "81 events match --query, more than --limit 50" in out, out
    assert "nothing was forgotten" in out and len(event_ids(db)) == 82
    code, out = cli(db, "forget", "--query", SECRET, "--dry-run", "--json")
    assert code == 0 and len(json.loads(out)["event_ids"]) == 81
    code, out = cli(db, "forget", "--query", SECRET, stdin="y\n")
    assert code == 0 and "Would forget 81 events" in out and "… and 61 more" in out, out
    assert "Forgot 81 events" in out
    assert event_ids(db) == ["KEEP"]
    code, out = cli(db, "events", "--json", "--limit", "1000")
    assert SECRET not in out


@BOTH_BACKENDS
def test_cli_forget_session_leaves_the_text_in_no_table(
    location: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memtoc --db <store> forget --session s1`` on either store: afterwards no table of the
    store (every one its catalogue lists, read whole) holds the session's text — events, search
    index, segments, nodes and their versions, grips, docs, vectors, bookmarks — and on
    PostgreSQL no relation file (tables, TOAST, indexes) holds its bytes: VACUUM FULL rewrote
    what the forget deleted or updated."""
    db = str(location)
    monkeypatch.setenv("MEMTOC_EMBEDDER", "static")  # vectors too (pgvector on PostgreSQL)
    monkeypatch.setenv("MEMTOC_EMBED_MODEL", str(require_model()))
    code, out = cli(db, "ingest", str(transcript(Path(mkdtemp()) / "t.jsonl")), "--json")
    assert code == 0, out
    code, out = cli(db, "process", "--json")
    assert code == 0, out
    with Memory.open(load_settings({"db": db, "embedder": "none"}, environ={})) as memory:
        memory.rollup(force=True)
        before = tables_holding(memory.store, SECRET)
        assert {"events", "docs"} <= set(before), before
    code, out = cli(db, "forget", "--session", "s1", "--yes", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["events"] == 6 and report["tables_rewritten"] > 0
    with Memory.open(load_settings({"db": db, "embedder": "none"}, environ={})) as memory:
        store = memory.store
        for gone in (SECRET, *(f"step {i}: refactor" for i in (0, 1, 3, 4, 5))):
            held = tables_holding(store, gone)  # FTS5's own encoding: checked by bytes below
            assert [t for t in held if not t.startswith(("events_fts", "docs_fts"))] == [], gone
        assert "events" in tables_holding(store, "step 7: refactor")  # s2 is kept
        if isinstance(store, SqliteStore):
            assert Path(db).read_bytes().count(SECRET.encode()) == 0
        else:
            assert relation_bytes(store, SECRET) == {}
        assert [e.event_id for e in memory.events()] == ["E6", "E7", "E8"]
        assert memory.verify().ok
