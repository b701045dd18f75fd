"""What ``memtoc demo`` tells a new user to run works as printed, from another folder.

After ``make demo`` in a fresh clone memtoc is ``.venv/bin/memtoc`` (not on PATH) and the home is
``.memtoc-demo`` (relative): the demo printed ``memtoc --home .memtoc-demo mcp``, which a shell
could not find and which an agent, started in its own folder, ran against an empty store. The
demo's later commands also ran without ``make``'s ``MEMTOC_EMBED_MODEL``: every search was
"degraded: no embedder". Here the real ``memtoc`` script runs the demo with a relative home and a
PATH without it, then the printed MCP command (as ``status``) and the printed ``toc`` command run
from another folder without the embedder variable.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

STATIC_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "minilm-static-256"
SCRIPT = Path(sys.executable).parent / "memtoc"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="80", PATH="/usr/bin:/bin", **extra)  # a laptop
    return env


def _printed(stdout: str, lead: str) -> list[str]:
    """The command a line of the demo's output gives after ``lead``."""
    line = next(x for x in stdout.splitlines() if lead in x)
    return shlex.split(line.split(lead, 1)[1])


@pytest.mark.skipif(not SCRIPT.is_file(), reason=f"no memtoc script at {SCRIPT}")
@pytest.mark.skipif(not STATIC_MODEL.is_dir(), reason=f"no static model at {STATIC_MODEL}")
def test_the_printed_commands_run_from_another_folder(tmp_path: Path) -> None:
    here, elsewhere = tmp_path / "clone", tmp_path / "agent-project"
    here.mkdir()
    elsewhere.mkdir()
    demo = subprocess.run(
        [str(SCRIPT), "--home", ".memtoc-demo", "demo", "--events", "200"],
        cwd=here,
        env=_env(MEMTOC_EMBED_MODEL=str(STATIC_MODEL)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    home = here / ".memtoc-demo"

    mcp = _printed(demo.stdout, "claude mcp add memtoc -- ")
    assert mcp == [str(SCRIPT), "--home", str(home), "mcp"]
    snippet = json.loads(demo.stdout[demo.stdout.index("{\n") : demo.stdout.rindex("}") + 1])
    server = snippet["mcpServers"]["memtoc"]
    assert [server["command"], *server["args"]] == mcp
    assert _printed(demo.stdout, "Run:   ") == [str(SCRIPT), "--home", str(home), "serve"]

    # The agent's command, from the agent's folder, without the demo's environment.
    status = subprocess.run(
        [*mcp[:-1], "status", "--json"],
        cwd=elsewhere,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = json.loads(status.stdout)
    assert data["location"] == str(home / "memtoc.db")
    assert data["events"] > 100
    assert data["embedder_degraded"] is None, data["embedder_degraded"]
    assert data["vectors"]["usable"] is True

    toc = _printed(demo.stdout, "(try: ")
    toc[-1] = toc[-1].rstrip(")")
    shown = subprocess.run(
        toc, cwd=elsewhere, env=_env(), capture_output=True, text=True, timeout=120, check=True
    )
    assert "toc:year:" in shown.stdout and "degraded" not in shown.stdout + shown.stderr


@pytest.mark.skipif(not SCRIPT.is_file(), reason=f"no memtoc script at {SCRIPT}")
def test_hooks_install_writes_a_home_that_holds_from_the_agents_folder(tmp_path: Path) -> None:
    """`memtoc --home .rel hooks install claude-code` wrote '--home .rel' into the agent's
    hooks: each project folder the agent ran in got a store of its own."""
    here = tmp_path / "clone"
    here.mkdir()
    subprocess.run(
        [str(SCRIPT), "--home", ".rel-home", "hooks", "install", "claude-code"],
        cwd=here,
        env=_env(HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    commands = [
        h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]
    ]
    assert commands
    for command in commands:
        assert shlex.split(command)[:3] == [str(SCRIPT), "--home", str(here / ".rel-home")]
