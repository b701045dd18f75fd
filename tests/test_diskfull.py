"""Disk full and read-only media, on a real small filesystem (a size-limited tmpfs this test
mounts; root only — skipped with the reason elsewhere).

- Ingest into a store on a full filesystem fails with a clear ``StoreError`` (no raw sqlite3
  exception, no traceback from the CLI), every acknowledged event is still there and ``verify``
  passes; once space is freed the same ingest resumes and completes, each event stored once.
- A store on a filesystem remounted read-only still serves reads (toc, search, events, context)
  through ``read_only`` opens and the read-only CLI commands, and a write fails with a message.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.config import load_settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.maintenance import verify
from memtoc.surfaces.cli.app import app

T0 = 1_705_572_000_000
NOW = 1_893_456_000_000


def _mount(where: Path, size: str, *options: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``where``; the reason when that is impossible, else None."""
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root"
    opts = ",".join((f"size={size}", "mode=0700", *options))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "memtoc-test", str(where)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else f"mount failed: {done.stderr.strip()}"


def _remount(where: Path, *options: str) -> None:
    subprocess.run(["mount", "-o", ",".join(("remount", *options)), str(where)], check=True)


@pytest.fixture
def small_fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of ``request.param`` (default 6 MB) mounted for the test, unmounted after it.

    6 MB sits between the store after the first 2,000-event batch (3.2 MB with its WAL) and the
    whole 12,000-event transcript (11.5 MB): some batches commit, the rest cannot, with about a
    factor of two to spare either way as the schema or the batch size changes."""
    where = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    why = _mount(where, getattr(request, "param", "6m"))
    if why:
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _transcript(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            text = f"event {i}: " + " ".join(f"word{(i * 7 + k) % 997}" for k in range(60))
            fh.write(json.dumps({"session_id": f"s{i // 200}", "timestamp": T0 + i * 30_000,
                                 "role": "user" if i % 2 else "assistant", "text": text}) + "\n")  # fmt: skip


def _memory(db: Path) -> Memory:
    clock = ManualClock(NOW)
    store = SqliteStore(db, clock=clock)
    return Memory(store, clock=clock, semantic=SemanticIndex(store, kind="none"))


def test_ingest_on_a_full_disk_fails_cleanly_and_resumes(small_fs: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "big.jsonl"
    _transcript(transcript, 12_000)  # ~6.8 MB of text, ~11.5 MB stored: twice the filesystem
    db = small_fs / "memtoc.db"
    acknowledged: list[str] = []
    memory = _memory(db)
    with pytest.raises(StoreError) as info:
        memory.ingest([transcript], on_commit=lambda c: acknowledged.extend(c.event_ids))
    message = str(info.value)
    assert "full" in message and str(db) in message, message
    memory.close()
    assert acknowledged, "nothing was committed before the disk filled up"

    with SqliteStore(db, read_only=True) as store:  # readable while the disk is still full
        assert verify(store).ok, verify(store).problems
        stored = {e.event_id for e in store.get_events(acknowledged)}
        assert stored == set(acknowledged)
        partial = store.count_events()
    assert partial < 12_000

    # The CLI says so in one line, exit code 1, no traceback.
    settings_env = {"MEMTOC_DB": str(db)}
    result = CliRunner().invoke(app, ["ingest", str(transcript)], env=settings_env)
    assert result.exit_code == 1
    assert "error:" in result.output and "full" in result.output, result.output
    assert "Traceback" not in result.output

    _remount(small_fs, "size=64m")
    with _memory(db) as memory:
        report = memory.ingest([transcript])
        assert memory.store.count_events() == 12_000
        assert report.ingested == 12_000 - partial
        assert verify(memory.store).ok


@pytest.mark.parametrize("small_fs", ["64m"], indirect=True)
def test_read_only_store_still_serves_reads(small_fs: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    _transcript(transcript, 600)
    db = small_fs / "memtoc.db"
    with _memory(db) as memory:
        memory.ingest([transcript])
        memory.process()
        memory.rollup(force=True)
        year = memory.toc("default")[0].node_id
    _remount(small_fs, "ro")
    try:
        with Memory.open(load_settings({"db": str(db), "embedder": "none"}), read_only=True) as ro:
            assert ro.node(year).node.node_id == year
            assert ro.search("word5", limit=3).items
            assert len(ro.events(limit=10)) == 10
            assert ro.context("default").text
            with pytest.raises(StoreError) as info:
                ro.ingest_records([{"session_id": "s", "role": "user", "text": "new"}])
            assert str(info.value).strip()
        runner = CliRunner()
        env = {"MEMTOC_DB": str(db), "MEMTOC_EMBEDDER": "none"}
        for args in (["toc", "--json"], ["search", "word5", "--json"], ["stats", "--json"]):
            result = runner.invoke(app, args, env=env)
            assert result.exit_code == 0, (args, result.output)
        result = runner.invoke(app, ["ingest", str(transcript)], env=env)
        assert result.exit_code == 1 and "error:" in result.output, result.output
        assert "Traceback" not in result.output
    finally:
        _remount(small_fs, "rw")
