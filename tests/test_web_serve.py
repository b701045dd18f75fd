"""The README path end to end: ``memtoc demo`` prints the web URL, ``memtoc serve`` (a real
subprocess: worker, rollups, HTTP API, web UI) serves it, and the URL opens signed in.

Chromium and Playwright are required as in ``test_web_browser.py`` (skip locally, fail under CI).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memtoc.config import load_settings
from memtoc.memory import Memory
from test_web_browser import (
    ARTIFACTS,
    STATIC_MODEL,
    VIEWPORT,
    WAIT_MS,
    browser,  # noqa: F401  (the module-scoped Chromium fixture)
)

URL = re.compile(r"(http://127\.0\.0\.1:\d+)/#token=([A-Za-z0-9_\-]+)")


@dataclass
class Daemon:
    home: Path
    demo_url: str
    """The web URL ``memtoc demo`` printed."""
    served_url: str
    """The web URL ``memtoc serve`` printed."""
    proc: subprocess.Popen[str]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="200")
    if STATIC_MODEL.is_dir():
        env["MEMTOC_EMBED_MODEL"] = str(STATIC_MODEL)
    else:
        env["MEMTOC_EMBEDDER"] = "none"
    return env


def _memtoc(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "memtoc", "--home", str(home), *args]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """``memtoc demo`` then ``memtoc serve --port 0`` on the demo's store."""
    home = tmp_path / "home"
    demo = subprocess.run(
        _memtoc(home, "demo", "--events", "400"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    demo_url = next((m for m in URL.finditer(demo.stdout)), None)
    assert demo_url is not None, demo.stdout[-2000:]
    assert f"memtoc --home {home} serve" in demo.stdout
    # The web URL comes before the MCP snippet, and both are printed.
    assert demo.stdout.index(demo_url.group(0)) < demo.stdout.index('"mcpServers"')

    proc = subprocess.Popen(
        _memtoc(home, "serve", "--port", "0"),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[str] = []
    served = None
    deadline = time.monotonic() + 60
    while served is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if "web UI" in line:
            served = URL.search(line)
    try:
        assert served is not None, "memtoc serve printed no web URL:\n" + "".join(seen)
        yield Daemon(home, demo_url.group(0), served.group(0), proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        reader.join(timeout=10)  # EOF once the process is gone; then the pipe can close
        stdout.close()


def test_demo_url_opens_the_served_browser(daemon: Daemon, browser: Any) -> None:  # noqa: F811
    demo_url, served_url, proc = daemon.demo_url, daemon.served_url, daemon.proc
    demo_match, served_match = URL.search(demo_url), URL.search(served_url)
    assert demo_match and served_match
    assert demo_match.group(1) == "http://127.0.0.1:8765"  # serve's default address
    assert demo_match.group(2) == served_match.group(2), "demo and serve disagree on the token"

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(served_url)
        page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
        settings = load_settings({"home": str(daemon.home)}, environ={})
        with Memory.open(settings, read_only=True) as memory:
            projects = memory.store.projects()
        options = page.locator("[data-testid=project-picker] option")
        assert sorted(options.evaluate_all("els => els.map(e => e.value)")) == sorted(projects)
        page.get_by_text(f"memtoc serve, pid {proc.pid}").wait_for()
        status = page.locator("[data-testid=status]").inner_text()
        assert "Worker" in status and "events filed" in status
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "09-serve.png"))

        # Search all projects; a result from another project switches the picker and the tree.
        shown = page.locator("[data-testid=project-picker]").input_value()
        other = next(p for p in projects if p != shown)
        with Memory.open(settings, read_only=True) as memory:
            title = memory.toc(other)[-1].title
        page.check("[data-testid=search-all]")
        page.fill("[data-testid=search-input]", title)
        page.press("[data-testid=search-input]", "Enter")
        hit = page.locator(f'[data-testid=search-result][data-project="{other}"]').first
        hit.click()
        # Opening ends by recording the project and node in the address.
        page.wait_for_function("p => location.hash.startsWith('#project=' + p + '&')", arg=other)
        assert page.locator("[data-testid=project-picker]").input_value() == other
        node_id = page.locator("[data-testid=node-detail]").get_attribute("data-node-id")
        selected = page.locator("[data-testid=tree] [aria-selected=true] [data-testid=tree-node]")
        assert selected.first.get_attribute("data-node-id") == node_id
    finally:
        context.close()
    assert not errors, errors
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
