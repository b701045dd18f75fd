"""Stale vectors and a degraded summariser are never silent (issue #16 part 3).

Vectors: the real static model, swapped for another version under the same name (its folder
copied, one file changed), for another model (a new name), and events filed while no embedder ran.
``status``, search and recall output (JSON field, human text, log) say so and search does not use
vectors that do not fit the model, until ``rebuild --vectors`` (or ``process``) re-embeds.

Summaries: an OpenAI-compatible server on 127.0.0.1 that fails (the LLM summariser falls back to
the extractive one, marking nodes ``degraded``) or answers; and a store summarised extractively
before the summariser was switched. ``status`` and search/recall results name the summaries built
by the fallback or by another backend, and ``rebuild --summaries`` re-summarises them as new node
versions (the old ones stay).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.summarize.llm import LLMSummarizer
from memtoc.pipeline.summarize.llm_clients import OpenAIChatClient, RetryPolicy
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.services import store_timezone
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.text.tokens import default_counter
from pipeline_support import make_events
from search_support import require_model

STORE_BACKENDS = ("sqlite", "postgres")
T0 = 1_700_000_000_000  # 2023-11-14
NOW = 1_706_000_000_000
EXTRACTIVE = ExtractiveSummarizer.name  # the extractive backend and version nodes record


def memory_over(store: Any, model: Path | None, **kw: Any) -> Memory:
    semantic = SemanticIndex(store, kind="static" if model else "none", model=str(model or ""))
    return Memory(
        store, clock=ManualClock(NOW), tz=store_timezone(store, "UTC"), semantic=semantic, **kw
    )


def filed(memory: Memory, seed: int = 3, sessions: int = 4) -> None:
    memory.store.append_events(
        make_events(seed=seed, sessions=sessions, per_session=(5, 10), start_ms=T0)
    )
    memory.process()
    memory.rollup(force=True)


def swapped(tmp_path: Path, name: str = "minilm-static-256") -> Path:
    """The static model copied under ``name`` with one file changed: a new version."""
    target = tmp_path / "swap" / name
    shutil.copytree(require_model(), target)
    config = target / "config.json"
    config.chmod(0o644)
    config.write_text(config.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    return target


# -- vectors ------------------------------------------------------------------------------------------
def test_an_embedder_change_makes_status_and_search_say_vectors_are_stale_until_rebuilt(
    store: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = memory_over(store, require_model())
    filed(before)
    assert before.status()["vectors"]["state"] == "current"
    found = before.search("postgres migration vacuum")
    assert (found.mode, found.degraded) == ("hybrid", None)

    after = memory_over(store, swapped(tmp_path))  # same name, another version of the model
    assert after.semantic.embedder is not None
    assert after.semantic.embedder.name == before.semantic.embedder.name  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="memtoc"):
        status = after.status()
    vectors = status["vectors"]
    assert vectors["state"] == "stale" and not vectors["usable"]
    assert str(status["embedder_degraded"]).startswith("vectors stale")
    assert "memtoc rebuild --vectors" in str(vectors["detail"])
    assert any("vectors stale" in r.getMessage() for r in caplog.records)  # logged
    found = after.search("postgres migration vacuum")
    assert found.mode == "bm25" and found.items  # the old vectors are not used
    assert found.degraded is not None and found.degraded.startswith("vectors stale")
    assert found.to_dict()["degraded"] == found.degraded
    recalled = after.recall("postgres migration vacuum", budget=300)
    assert recalled.method == "bm25" and "vectors stale" in str(recalled.degraded)
    report = after.verify()
    assert any(f.problem.startswith("stale") for f in report.findings), report.problems

    rebuilt = after.rebuild(["vectors"])
    assert rebuilt.parts["vectors"]["rebuilt"] is True
    assert after.status()["vectors"]["state"] == "current"
    found = after.search("postgres migration vacuum")
    assert (found.mode, found.degraded) == ("hybrid", None)
    assert after.verify().ok


def test_a_new_embedder_has_no_vectors_until_processed_and_the_cli_says_so(
    sqlite_store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filed(memory_over(sqlite_store, require_model()))
    sqlite_store.close()
    other = swapped(tmp_path, "minilm-static-256-b")  # another name: no vector of it yet
    monkeypatch.setenv("MEMTOC_EMBED_MODEL", str(other))
    db = str(sqlite_store.path)
    runner = CliRunner()  # the store's projects, not the working directory's (none here)
    status = runner.invoke(app, ["--db", db, "status"])
    assert status.exit_code == 0, status.output
    assert "missing" in status.stdout and "static:minilm-static-256" in status.stdout
    out = runner.invoke(app, ["--db", db, "search", "postgres vacuum", "--all-projects", "--json"])
    data = json.loads(out.stdout)
    assert data["mode"] == "bm25" and data["degraded"].startswith("vectors missing")
    assert "static:minilm-static-256-b" in data["degraded"]
    human = runner.invoke(app, ["--db", db, "search", "postgres vacuum", "--all-projects"])
    assert "degraded: vectors missing" in re.sub(r"\s+", " ", human.stdout)
    out = runner.invoke(app, ["--db", db, "recall", "postgres vacuum", "--all-projects", "--json"])
    assert "vectors missing" in json.loads(out.stdout)["degraded"]
    assert runner.invoke(app, ["--db", db, "verify"]).exit_code == 1  # no vectors of the model
    assert runner.invoke(app, ["--db", db, "process"]).exit_code == 0  # back-fills the new name
    out = runner.invoke(app, ["--db", db, "status", "--json"])
    assert json.loads(out.stdout)["vectors"]["state"] == "current"
    out = runner.invoke(app, ["--db", db, "search", "postgres vacuum", "--all-projects", "--json"])
    assert (json.loads(out.stdout)["mode"], json.loads(out.stdout)["degraded"]) == ("hybrid", None)


def test_filed_events_without_vectors_are_reported_behind(store: Any) -> None:
    filed(memory_over(store, require_model()), seed=3)
    filed(memory_over(store, None), seed=4)  # a worker without an embedder filed more
    memory = memory_over(store, require_model())
    state = memory.status()["vectors"]
    assert state["state"] == "behind" and state["filed_not_embedded"] > 0
    found = memory.search("postgres migration vacuum")
    assert found.mode == "hybrid"  # the vectors there are still used
    assert found.degraded is not None and found.degraded.startswith("vectors behind")
    memory.process()  # the embedding step catches up
    assert memory.status()["vectors"]["state"] == "current"
    assert memory.search("postgres migration vacuum").degraded is None


# -- summaries ----------------------------------------------------------------------------------------
class ChatServer:
    """A local OpenAI-compatible chat server: answers a summary made of the prompt's words, or
    fails with 500 while ``failing``."""

    def __init__(self) -> None:
        self.failing = False
        self.calls = 0
        self.clients: list[LLMSummarizer] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.calls += 1
                if server.failing:
                    self._send(500, {"error": {"message": "upstream overloaded", "type": "server"}})
                    return
                prompt = " ".join(str(m.get("content", "")) for m in body["messages"][1:])
                words = [w.lower() for w in re.findall(r"[A-Za-z]{5,}", prompt)][:40]
                picked = [*dict.fromkeys(words), "session", "worker", "review", "change", "notes"]
                picked = list(dict.fromkeys(picked))[:6]
                summary = {
                    "title": "LLM: " + " ".join(picked[:3]),
                    "bullets": [
                        f"Worked on {' and '.join(picked[:2])}",
                        f"Changed {picked[2]} after {picked[3]}",
                        f"Checked {picked[-1]}",
                    ],
                    "keywords": picked[:5],
                    "abstract": f"The session was about {', '.join(picked[:3])}.",
                    "overview": f"Work on {', '.join(picked)}.",
                }
                self._send(200, {
                    "id": "c1", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": json.dumps(summary)}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
                })  # fmt: skip

            def _send(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    for summarizer in server.clients:
        summarizer.close()
    server.close()


def llm(server: ChatServer) -> LLMSummarizer:
    client = OpenAIChatClient(
        server.url, "test-model", "sk-test", 5.0, retry=RetryPolicy(max_attempts=1)
    )
    summarizer = LLMSummarizer(client, ExtractiveSummarizer(default_counter()), max_concurrency=1)
    server.clients.append(summarizer)
    return summarizer


def nodes(memory: Memory) -> list[Any]:
    return [n for p in memory.store.projects() for n in memory.store.list_nodes(p)]


def test_a_failing_llm_summariser_shows_in_status_and_results_until_rebuilt(
    store: Any, chat: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat.failing = True
    summarizer = llm(chat)
    memory = memory_over(store, None, summarizer=summarizer)
    filed(memory)
    built = nodes(memory)
    assert built and all(n.degraded and "upstream overloaded" in n.degraded for n in built)
    summaries = memory.status()["summaries"]
    assert summaries["degraded"] == len(built) and summaries["configured"] == summarizer.name
    assert "upstream overloaded" in str(summaries["degraded_reason"])
    assert "rebuild --summaries" in str(summaries["hint"])
    with caplog.at_level(logging.WARNING, logger="memtoc"):
        found = memory.search("postgres migration vacuum", kinds=("node",))
    assert found.items and found.summaries is not None
    assert set(found.summaries["degraded"]) == {i.id for i in found.items}  # type: ignore[arg-type]
    assert found.degraded is not None and "summaries degraded" in found.degraded
    assert "rebuild --summaries" in found.degraded
    assert any("summaries degraded" in r.getMessage() for r in caplog.records)

    chat.failing = False
    versions = {(n.project, n.node_id): n.version for n in built}
    report = memory.rebuild(["summaries"])
    assert report.parts["summaries"]["summarizer"] == summarizer.name
    rebuilt = nodes(memory)
    assert rebuilt and all(n.summarizer == summarizer.name and not n.degraded for n in rebuilt)
    for n in rebuilt:  # a new version; the degraded one stays
        assert n.version > versions.get((n.project, n.node_id), 0)
        if (n.project, n.node_id) in versions:
            old = memory.store.get_node(n.project, n.node_id, version=1)
            assert old.degraded and old.summarizer == EXTRACTIVE
    assert memory.status()["summaries"]["degraded"] == 0
    found = memory.search(rebuilt[0].title.removeprefix("LLM: "), kinds=("node",))
    assert found.items and found.summaries is None
    assert found.degraded == "no embedder: none configured (embedder=none)"  # that alone
    assert memory.verify().ok


def test_switching_the_summariser_re_summarises_history_as_new_versions(
    sqlite_store: SqliteStore, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    filed(memory_over(sqlite_store, None))  # history summarised extractively
    summarizer = llm(chat)
    memory = memory_over(sqlite_store, None, summarizer=summarizer)
    status = memory.status()["summaries"]
    assert status["other_backend"] == status["nodes"] > 0 and status["degraded"] == 0
    found = memory.search("postgres migration vacuum", kinds=("node",))
    assert found.summaries is not None and found.summaries["other_backend"]
    assert "summaries stale" in str(found.degraded) and EXTRACTIVE in str(found.degraded)
    recalled = memory.recall("postgres migration vacuum", budget=400)
    shown = [i for i in recalled.items if i.built_by is not None]  # summaries shown (L0/L1)
    assert (recalled.summaries is not None) == bool(shown)
    assert ("summaries stale" in str(recalled.degraded)) == bool(shown)
    # the CLI with the LLM configured says the same (no summarising needed to read)
    monkeypatch.setenv("MEMTOC_SUMMARIZER", "openai")
    monkeypatch.setenv("MEMTOC_LLM_MODEL", "test-model")
    monkeypatch.setenv("MEMTOC_LLM_BASE_URL", chat.url)
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")
    runner = CliRunner()
    human = runner.invoke(app, ["--db", str(sqlite_store.path), "status"])
    assert "not by the configured summariser" in re.sub(r"\s+", " ", human.stdout)

    memory.rebuild(["summaries"])
    assert chat.calls > 0
    after = nodes(memory)
    assert all(n.summarizer == summarizer.name for n in after)
    assert all(n.version >= 2 for n in after)
    assert all(
        memory.store.get_node(n.project, n.node_id, version=1).summarizer == EXTRACTIVE
        for n in after
    )
    assert memory.status()["summaries"]["other_backend"] == 0
    again = memory.rebuild(["summaries"])  # idempotent: the same summaries write nothing new
    assert again.parts["summaries"]["nodes_written"] == 0
    assert memory.verify().ok
