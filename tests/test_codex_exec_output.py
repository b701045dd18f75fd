"""Codex wraps every command's output in lines of its own ("Chunk ID: 5ede14 / Wall time: 0.0000
seconds / Process exited with code 0 / Original token count: 1089 / Output:"). Read as the
output they made "seconds", "exited" and "count" the keywords of every Codex node and titled
segments "Tool output (415 lines): Chunk ID: 52e2dc". Through the real hooks (Codex's Stop) on a
real rollout (fixture cut from the shared transcripts, MIT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memtoc.config import load_settings
from memtoc.memory import Memory

ROOT = Path(__file__).resolve().parent.parent
ROLLOUT = next((ROOT / "tests/fixtures/codex-real").glob("rollout-*.jsonl"))
WRAPPER = ("Chunk ID", "Wall time", "Process exited", "Original token count", "Output:")


def test_a_commands_output_is_its_output_and_the_wrapper_its_metadata(tmp_path: Path) -> None:
    home = tmp_path / "home"
    meta = json.loads(ROLLOUT.read_text().splitlines()[0])["payload"]
    payload = {"session_id": meta["id"], "transcript_path": str(ROLLOUT), "cwd": meta["cwd"],
               "hook_event_name": "Stop", "turn_id": "t1", "stop_hook_active": False}  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTOC_")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", MEMTOC_EMBEDDER="none")
    proc = subprocess.run([sys.executable, "-m", "memtoc", "--home", str(home), "hook", "ingest",
                           "--process", "--wait"], input=json.dumps(payload), capture_output=True,
                          text=True, env=env, timeout=90)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    with Memory.open(load_settings({"home": str(home)}), read_only=True) as mem:
        results = [e for e in mem.events() if e.event_type == "tool_result"]
        nodes = mem.store.list_nodes("agentv")
        unwrapped = [e for e in results if "wall_time_s" in e.metadata]
        assert len(unwrapped) == 3, [e.text[:80] for e in results]  # the fixture's three
        for e in unwrapped:
            assert not e.text.startswith(WRAPPER), e.text[:200]
            assert e.metadata["is_error"] is (e.metadata["exit_code"] != 0)
            assert isinstance(e.metadata["original_tokens"], int)
        assert nodes
        for n in nodes:
            words = {w.lower() for k in n.keywords for w in k.split()}
            assert not words & {"seconds", "exited", "chunk"}, (n.node_id, n.keywords)
            assert "Chunk ID" not in n.title and "Chunk ID" not in n.abstract, n.node_id


def test_search_and_recall_labels_are_cut_at_a_word(tmp_path: Path) -> None:
    """Search and recall items' titles were their text's first 80 characters ("One validation
    command I tried (`bun --check scripts/publish.ts`) actually execu"): through the HTTP API
    (the real app) on the real rollout, every label is whole words, marked "…" when cut."""
    from fastapi.testclient import TestClient

    from memtoc.surfaces.http.app import create_app

    settings = load_settings({"home": str(tmp_path / "home"), "embedder": "none"})
    with Memory.open(settings) as mem:
        assert mem.ingest([ROLLOUT]).rejected == 0
        mem.process()
        words = {w.strip(",;:.") for e in mem.events() for w in e.text.split()}
    app = create_app(lambda: Memory.open(settings), token=None)
    titles: list[str] = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for query in ("stale branches main", "delete branch worktree", "git push origin"):
            got = client.get("/v1/search", params={"q": query, "project": "agentv", "limit": 20})
            assert got.status_code == 200, got.text
            titles += [i["title"] for i in got.json()["items"] if i["kind"] == "grip"]
            body = {"query": query, "project": "agentv", "budget": 1500}
            got = client.post("/v1/recall", json=body)
            assert got.status_code == 200, got.text
            titles += [i["title"] for i in got.json()["items"] if i["kind"] in ("grip", "event")]
    assert len(titles) > 10
    for title in (t for t in titles if t.strip()):
        assert len(title) <= 80, title
        assert title.removesuffix("…").split()[-1].strip(",;:.") in words, title  # a whole word
