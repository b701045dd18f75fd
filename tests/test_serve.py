"""``memtoc serve`` end to end, and its parts: the daemon lock, the background worker, status.

The end-to-end test starts the real daemon as a subprocess on a real store, ingests while it
runs, watches the events get processed and rolled up through ``/v1/status`` and ``/v1/toc``,
checks that a second daemon on the same store is refused (naming the pid), stops it with
SIGTERM (exit code 0) and verifies the store.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memtoc.config import Settings, load_settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.surfaces.cli import app
from memtoc.surfaces.http.auth import token_path
from memtoc.surfaces.serve import refuse_second_daemon
from memtoc.surfaces.serve_lock import ServeLock, lock_holder, lock_path
from memtoc.surfaces.serve_worker import BackgroundWorker

ROOT = Path(__file__).resolve().parent.parent
START_MS = 1_705_572_000_000  # 2024-01-18T10:00:00Z
runner = CliRunner()
SERVE = [sys.executable, "-m", "memtoc", "serve"]


def records(n: int, project: str = "webapp") -> list[dict[str, Any]]:
    return [
        {
            "session_id": f"s{i // 8}",
            "timestamp": START_MS + i * 11 * 60_000,
            "role": ("user", "assistant")[i % 2],
            "text": f"Step {i}: the redis cache evicts sessions too early; raise maxmemory.",
            "project": project,
        }
        for i in range(n)
    ]


def cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture
def env(hermetic_env: Path) -> dict[str, str]:
    return {
        "MEMTOC_HOME": str(hermetic_env),
        "MEMTOC_EMBEDDER": "none",
        "MEMTOC_TIMEZONE": "UTC",
    }


def settings_of(env: dict[str, str]) -> Settings:
    return load_settings(environ=env)


# -- end to end -------------------------------------------------------------------------------------
@pytest.fixture
def daemon(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """A running `memtoc serve` (subprocess) and its base URL and token."""
    code, out = cli(env, "init")
    assert code == 0, out
    proc_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")},
        **env,
        "PYTHONPATH": str(ROOT / "src"),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "400",
    }
    proc = subprocess.Popen(
        [*SERVE, "--port", "0", "--poll", "0.1", "--rollup-interval", "0.5"],
        env=proc_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = token = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            found = re.search(r"web UI\s+(http://\S+?)/#token=(\S+)", line)
            if found:
                url, token = found.group(1), found.group(2)
                break
        assert url and token, "serve did not print its URL"
        yield proc, url, token
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def wait_for(check: Any, timeout_s: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def test_serve_processes_what_is_ingested_and_stops_cleanly(
    daemon: tuple[subprocess.Popen[str], str, str], env: dict[str, str], tmp_path: Path
) -> None:
    proc, url, token = daemon
    auth = {"Authorization": f"Bearer {token}"}
    assert token == token_path(Path(env["MEMTOC_HOME"])).read_text().strip()
    with httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/v1/status").status_code == 401
        assert http.get("/").status_code == 200  # the web UI needs no token

        source = tmp_path / "events.jsonl"
        source.write_text("\n".join(json.dumps(r) for r in records(40)) + "\n")
        code, out = cli(env, "ingest", str(source))
        assert code == 0, out

        def processed() -> dict[str, Any] | None:
            status = http.get("/v1/status", headers=auth).json()
            nodes = status["nodes"]
            done = status["outbox"]["pending"] == 0 and nodes.get("year", 0) >= 1
            return status if done and status["events"] == 40 else None

        status = wait_for(processed)
        assert status["daemon"]["pid"] == proc.pid
        assert status["daemon"]["worker"]["running"] is True
        assert status["daemon"]["worker"]["events_filed"] == 40
        assert status["rollups"]["year"]["rolled"] >= 0
        toc = http.get("/v1/toc", headers=auth).json()
        assert [n["node_id"] for n in toc["nodes"]] == ["toc:year:2024"]
        assert toc["nodes"][0]["event_count"] == 40

        code, out = cli(env, "status", "--json")
        assert code == 0, out
        assert json.loads(out)["daemon"]["pid"] == proc.pid
        assert json.loads(out)["daemon"]["role"] == "serve"
        assert status["daemon"]["processing"]["by"] == "this-server"

        code, out = cli(env, "serve", "--port", "0")
        assert code == 1
        assert f"pid {proc.pid}" in out and "already processing this store" in out

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert proc.stdout is not None
    assert "stopping" in proc.stdout.read()
    code, out = cli(env, "verify")
    assert code == 0, out
    code, out = cli(env, "status", "--json")
    assert json.loads(out)["daemon"] is None


def test_sigterm_mid_work_exits_cleanly_and_nothing_is_lost(
    env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIGTERM while the worker is busy: exit 0, a consistent store, and what was not done is
    still queued (a later `memtoc process` files every event exactly once)."""
    source = tmp_path / "backlog.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in records(600)) + "\n")
    code, out = cli(env, "ingest", str(source))
    assert code == 0, out
    proc, url, token = request.getfixturevalue("daemon")
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=10) as http:
        wait_for(lambda: http.get("/v1/status", headers=auth).json()["daemon"]["worker"]["rounds"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    code, out = cli(env, "verify")
    assert code == 0, out
    code, out = cli(env, "process", "--json")
    assert code == 0, out
    with Memory.open(settings_of(env)) as memory:
        assert memory.store.outbox_counts().get("pending", 0) == 0
        filed = sum(n.event_count for n in memory.toc("webapp"))
        assert filed == 600  # every event filed once, none twice
    code, out = cli(env, "verify")
    assert code == 0, out


def test_serve_refuses_a_public_address_without_a_token(env: dict[str, str]) -> None:
    code, out = cli(env, "serve", "--host", "0.0.0.0", "--no-auth", "--port", "0")
    assert code == 1
    assert "refusing to bind 0.0.0.0 without a token" in " ".join(out.split())


def test_init_creates_the_token_and_token_prints_it(env: dict[str, str]) -> None:
    code, out = cli(env, "init", "--json")
    assert code == 0, out
    path = Path(json.loads(out)["token_file"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    code, out = cli(env, "token")
    assert code == 0 and out.strip() == path.read_text().strip()
    code, out = cli(env, "token", "--rotate", "--json")
    assert json.loads(out)["token"] == path.read_text().strip()


def test_status_reports_queue_rollups_and_backends(env: dict[str, str]) -> None:
    with Memory.open(settings_of(env)) as memory:
        memory.ingest_records(records(10))
    code, out = cli(env, "status", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["outbox"]["pending"] == 1 and data["daemon"] is None
    assert data["rollups"] == {}
    assert data["embedder"] is None and "embedder=none" in data["embedder_degraded"]
    code, out = cli(env, "status")
    assert code == 0
    assert "1 pending" in out and "nobody: new events wait" in out and "never" in out


def test_serve_refuses_a_second_serve_but_not_an_mcp_worker(env: dict[str, str]) -> None:
    settings = settings_of(env)
    Memory.open(settings).close()  # a store to report on
    path = lock_path(settings)
    with ServeLock(path, role="mcp"):  # an agent's `memtoc mcp` processing the store
        refuse_second_daemon(settings)  # serve starts beside it (and takes over later)
        code, out = cli(env, "status", "--json")
        assert code == 0, out
        assert json.loads(out)["daemon"] == {"pid": os.getpid(), "role": "mcp", "lock": str(path)}
        code, out = cli(env, "status")
        assert code == 0 and f"memtoc mcp running (pid {os.getpid()})" in out
    with ServeLock(path, role="serve"), pytest.raises(StoreError) as refused:
        refuse_second_daemon(settings)
    assert f"memtoc serve (pid {os.getpid()}) is already processing this store" in str(
        refused.value
    )
    refuse_second_daemon(settings)  # released: nothing in the way


# -- parts ------------------------------------------------------------------------------------------
def test_lock_is_exclusive_and_names_its_holder(env: dict[str, str]) -> None:
    path = lock_path(settings_of(env))
    assert path.name == "memtoc.db.serve.lock"
    assert lock_holder(path) is None
    with ServeLock(path):
        assert lock_holder(path) == os.getpid()
        with pytest.raises(StoreError, match=f"pid {os.getpid()}"):
            ServeLock(path).acquire()
    assert lock_holder(path) is None
    with ServeLock(path) as again:  # released locks can be taken again
        assert again.held


def test_worker_backfills_rollups_at_start_then_drains_new_work(env: dict[str, str]) -> None:
    settings = settings_of(env)
    with Memory.open(settings) as memory:
        memory.ingest_records(records(16))
        memory.process(rollup=False)  # filed into segments, but no daemon rolled them up
        assert memory.store.stats()["nodes"].get("year", 0) == 0  # type: ignore[union-attr]
    worker = BackgroundWorker(
        lambda: Memory.open(settings), poll_s=0.05, rollup_interval_s=3600
    ).start()
    try:
        wait_for(lambda: worker.info()["rollup_runs"])
        with Memory.open(settings) as memory:
            assert [n.node_id for n in memory.toc("webapp")] == ["toc:year:2024"]
            memory.ingest_records(records(8, project="ops"))
        wait_for(lambda: worker.info()["events_filed"] == 8)
        # the queue drained: a rollup run follows without waiting for the interval
        wait_for(lambda: worker.info()["rollup_runs"] >= 2)
        with Memory.open(settings) as memory:
            assert [n.node_id for n in memory.toc("ops")] == ["toc:year:2024"]
    finally:
        assert worker.stop(30)
    info = worker.info()
    assert info["running"] is False and info["state"] == "stopped" and info["errors"] == 0


def test_serve_rejects_an_unknown_log_level(env: dict[str, str]) -> None:
    code, out = cli(env, "serve", "--log-level", "loud", "--port", "0")
    assert code == 1 and "--log-level must be one of" in out
