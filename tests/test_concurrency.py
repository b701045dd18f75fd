"""Concurrency on one SQLite store: 4 ingesting processes and 2 processing processes, with MCP
and HTTP readers in this process reading the TOC and searching while they run.

- every event is stored exactly once (the ingesters overlap: each file is imported by two of
  them at the same time), and each process's acknowledged events are all there;
- no child prints "database is locked" (or any error) and all exit 0;
- readers never see partial state: in every read snapshot the outbox ranges tile the event log
  exactly (an event batch and its outbox entry commit together) and every child a latest node
  names exists; MCP tool calls never fail and HTTP requests answer 200 (the TOC 404 until the project
  exists);
- after the run, ``verify`` passes and the TOC equals a build of the same events in one process.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from fastapi.testclient import TestClient
from mcp import Client

import memtoc
from memtoc.eval.soak import toc_snapshot, write_lines
from memtoc.eval.soak_child import open_memory
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.maintenance import verify
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server

FILES = 4
LINES = 1_000

INGESTER = """
import json, sys
from memtoc.eval.soak_child import open_memory
with open_memory(sys.argv[1]) as memory:
    for path in sys.argv[2:]:
        memory.ingest([path], on_commit=lambda i: print(json.dumps(list(i.event_ids)), flush=True))
"""

PROCESSOR = """
import os, sys, time
from memtoc.eval.soak_child import open_memory
stop = sys.argv[2]
with open_memory(sys.argv[1]) as memory:
    while True:
        finished = os.path.exists(stop)
        report = memory.process()
        if finished and report.entries == 0:
            break
        time.sleep(0.05)
print("done", flush=True)
"""

REFERENCE = """
import sys
from memtoc.eval.soak_child import open_memory
with open_memory(sys.argv[1]) as memory:
    memory.ingest(sys.argv[2:])
    memory.process()
print("done")
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(memtoc.__file__).resolve().parent.parent),
        "PYTHONHASHSEED": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def _snapshot_problems(db: Path) -> list[str]:
    """Read one consistent snapshot and list what would betray a partial write."""
    with SqliteStore(db, read_only=True) as store:
        conn = store.connection
        conn.execute("BEGIN")
        try:
            events = conn.execute("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM events").fetchone()
            ranges = conn.execute(
                "SELECT COALESCE(SUM(json_extract(payload, '$.last_seq') "
                "- json_extract(payload, '$.first_seq') + 1), 0) FROM outbox WHERE kind = 'events'"
            ).fetchone()[0]
            problems = []
            if events[0] != ranges:
                problems.append(f"{events[0]} events but outbox ranges cover {ranges}")
            for project in store.projects():
                ids = {n.node_id for n in store.list_nodes(project)}
                for node in store.list_nodes(project):
                    gone = [c for c in node.child_node_ids if c not in ids]
                    if gone:
                        problems.append(f"{node.node_id} names missing children {gone[:3]}")
            return problems
        finally:
            conn.execute("COMMIT")


async def _mcp_reads(db: Path, stop: threading.Event, seen: list[Any]) -> None:
    with open_memory(str(db)) as memory:
        async with Client(build_server(memory)) as client:
            while not stop.is_set():
                for name, args in (
                    ("memory_toc", {"project": "webapp"}),
                    (
                        "memory_search",
                        {"query": "auth token refresh", "limit": 5, "project": "webapp"},
                    ),
                    ("memory_status", {}),
                ):
                    result = await client.call_tool(name, args)
                    seen.append((name, result.is_error, str(result.content)[:300]))
                await anyio.sleep(0.05)


def test_four_ingesters_two_processors_and_readers(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    open_memory(str(db)).close()  # create and migrate once
    files = []
    for i in range(FILES):
        path = tmp_path / f"t{i}.jsonl"
        write_lines(path, i * LINES, LINES, random.Random(i))
        files.append(path)
    stop_file = tmp_path / "stop"
    ingesters = [
        _spawn(INGESTER, str(db), str(files[i]), str(files[(i + 1) % FILES])) for i in range(4)
    ]
    processors = [_spawn(PROCESSOR, str(db), str(stop_file)) for _ in range(2)]

    stop = threading.Event()
    mcp_seen: list[Any] = []
    snapshot_problems: list[str] = []
    snapshots = 0

    def snapshot_reader() -> None:
        nonlocal snapshots
        while not stop.is_set():
            snapshot_problems.extend(_snapshot_problems(db))
            snapshots += 1
            time.sleep(0.02)

    http_seen: list[tuple[str, int]] = []

    def http_reader() -> None:
        """The HTTP API (FastAPI app, its Memory pool) read while the writers run."""
        app = create_app(lambda: open_memory(str(db)), token="t", pool_size=2, web=False)
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            while not stop.is_set():
                for url in (
                    "/v1/toc?project=webapp",
                    "/v1/search?q=auth+token&all=true",
                    "/v1/status",
                ):
                    response = client.get(url, headers={"Authorization": "Bearer t"})
                    http_seen.append((url, response.status_code))
                time.sleep(0.05)

    reader = threading.Thread(target=snapshot_reader)
    reader.start()
    http_thread = threading.Thread(target=http_reader)
    http_thread.start()
    mcp_thread = threading.Thread(target=lambda: anyio.run(_mcp_reads, db, stop, mcp_seen))
    mcp_thread.start()
    try:
        outputs = [p.communicate(timeout=300) for p in ingesters]
        stop_file.touch()
        outputs += [p.communicate(timeout=300) for p in processors]
    finally:
        stop.set()
        reader.join()
        mcp_thread.join()
        http_thread.join()

    for proc, (_, err) in zip(ingesters + processors, outputs, strict=True):
        assert "locked" not in err and proc.returncode == 0, err[-2000:]
    acknowledged = {
        eid for out, _ in outputs[:4] for line in out.splitlines() for eid in json.loads(line)
    }
    assert snapshot_problems == []
    assert snapshots >= 5
    # a project is unknown (a clear error naming the known ones) until its first event is in
    errors = [s for s in mcp_seen if s[1] and "unknown project 'webapp'" not in s[2]]
    assert mcp_seen and not errors, errors[:3]
    assert any(not s[1] for s in mcp_seen if s[0] == "memory_search")
    # toc answers 404 until the project's first event is filed; nothing may be a 5xx
    assert http_seen and all(c == 200 or (c == 404 and "toc" in u) for u, c in http_seen)

    with SqliteStore(db) as store:
        assert verify(store).ok, verify(store).problems
        conn = store.connection
        total, distinct = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT event_id) FROM events"
        ).fetchone()
        assert total == distinct == FILES * LINES
        assert acknowledged <= {e.event_id for e in store.get_events(acknowledged)}
        assert len(acknowledged) == FILES * LINES
        assert store.outbox_counts().get("pending", 0) == 0
        crashed = toc_snapshot(store)

    reference = tmp_path / "reference.db"
    build = _spawn(REFERENCE, str(reference), *map(str, files))  # same hash seed as the writers
    assert build.communicate(timeout=300)[0].strip() == "done"
    with SqliteStore(reference) as store:
        assert toc_snapshot(store) == crashed
