"""Hybrid search: RRF fusion, the embedding step in the pipeline (real static model), the
degraded mode when no embedder loads, ``rebuild --vectors`` and the search CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.errors import ConfigError
from memtoc.memory import Memory
from memtoc.pipeline.embed_step import EmbedStep
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.hybrid import Fusion, fusion_from_settings
from memtoc.surfaces.cli.app import app
from memtoc.surfaces.cli.commands import search_cmds
from search_support import CORPUS, build_memory, require_model

assert search_cmds  # the command module registers `search` and `rebuild` on the app


# -- fusion -----------------------------------------------------------------------------------
def test_fusion_name_and_scores() -> None:
    fusion = Fusion()
    assert fusion.name == "rrf-v1(k=60,w_bm25=1,w_vec=1)"
    fused = fusion.fuse(["a", "b", "c"], ["b", "d"])
    keys = [k for k, _ in fused]
    assert keys[0] == "b"  # ranked by both methods
    assert set(keys) == {"a", "b", "c", "d"}
    scores = dict(fused)
    assert scores["b"] == pytest.approx((1 / 62 + 1 / 61) / (2 / 61))
    assert all(0 < s <= 1 for s in scores.values())
    assert Fusion().fuse(["x"], ["x"]) == [("x", 1.0)]


def test_fusion_weights_change_the_order() -> None:
    bm25, vec = ["a", "b"], ["b", "a"]
    assert Fusion(w_bm25=2, w_vec=1).fuse(bm25, vec)[0][0] == "a"
    assert Fusion(w_bm25=1, w_vec=2).fuse(bm25, vec)[0][0] == "b"
    assert Fusion(k=0, w_bm25=1.5).name == "rrf-v1(k=0,w_bm25=1.5,w_vec=1)"
    with pytest.raises(ConfigError):
        Fusion(w_bm25=0, w_vec=0)


def test_fusion_from_settings() -> None:
    settings = load_settings({"fusion_k": "20", "fusion_w_vec": "0.5"}, environ={})
    assert fusion_from_settings(settings).name == "rrf-v1(k=20,w_bm25=1,w_vec=0.5)"


# -- degraded ---------------------------------------------------------------------------------
def test_unloadable_embedder_degrades_to_bm25(tmp_path: Path) -> None:
    mem = build_memory(tmp_path / "memtoc.db", "static", str(tmp_path / "no-such-model"))
    try:
        result = mem.search("vacuum")
        assert result.mode == "bm25" and result.items
        assert result.degraded is not None and result.degraded.startswith("no embedder: ")
        assert "no-such-model" in result.degraded
        assert mem.store.count_vectors() == {}
    finally:
        mem.close()


# -- with the real static model ---------------------------------------------------------------
@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    model = require_model()
    mem = build_memory(tmp_path_factory.mktemp("hybrid") / "memtoc.db", "static", str(model))
    yield mem
    mem.close()


def test_pipeline_embeds_events_and_docs(memory: Memory) -> None:
    embedder = memory.semantic.embedder
    assert embedder is not None and embedder.name == "static:minilm-static-256"
    rows = memory.store._query(
        "SELECT kind, COUNT(*) FROM vectors WHERE embedder = ? GROUP BY kind", (embedder.name,)
    )
    counts = dict(rows)
    docs = dict(memory.store._query("SELECT kind, COUNT(*) FROM docs GROUP BY kind"))
    assert counts.pop("event") == len(CORPUS)
    assert counts == docs
    assert memory.store.recorded_embedder(embedder.name) == (embedder.dim, embedder.version)
    again = EmbedStep(memory.store, embedder).run()
    assert not again.changed  # idempotent: nothing new


def test_hybrid_result_reports_fusion(memory: Memory) -> None:
    result = memory.search("vacuum migration", limit=10)
    assert result.mode == "hybrid" and result.degraded is None
    assert result.fusion == "rrf-v1(k=60,w_bm25=1,w_vec=1)"
    assert result.to_dict()["fusion"] == result.fusion
    scores = [i.score for i in result.items]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_vectors_find_what_words_miss(memory: Memory) -> None:
    query = "cleaning machine drawing"
    assert memory.search(query, kinds=["event"], mode="bm25").items == ()
    vec = memory.search(query, kinds=["event"], mode="vector", limit=3)
    assert vec.mode == "vector"
    top = memory.store.get_event(vec.items[0].id).text
    assert top == "The vacuum cleaner robot docs need a new diagram"


def test_vector_hits_obey_filters(memory: Memory) -> None:
    for mode in ("vector", "hybrid"):
        result = memory.search("robot diagram", project="alpha", mode=mode, limit=20)
        assert result.items and {i.project for i in result.items} == {"alpha"}
        result = memory.search("robot diagram", role="user", mode=mode, limit=20)
        assert result.items and all(i.events[0].role == "user" for i in result.items)
        result = memory.search("robot diagram", level="day", mode=mode, limit=20)
        assert result.items and all(i.id.startswith("toc:day:") for i in result.items)


def test_new_events_and_changed_docs_are_embedded(tmp_path: Path) -> None:
    model = require_model()
    mem = build_memory(tmp_path / "memtoc.db", "static", str(model))
    try:
        embedder = mem.semantic.embedder
        assert embedder is not None
        before = mem.store.count_vectors()[embedder.name]
        mem.remember("Kubernetes pod keeps crashing with OOMKilled", project="alpha")
        mem.process()
        hit = mem.search("pod memory crash", kinds=["event"], mode="vector", limit=1).items[0]
        assert "OOMKilled" in mem.store.get_event(hit.id).text
        assert mem.store.count_vectors()[embedder.name] > before
        # a doc that disappears loses its vector
        grip = mem.store._query("SELECT grip_id, project FROM grips LIMIT 1")[0]
        with mem.store.transaction():
            mem.store._delete_docs("grip", grip[1], [grip[0]])
        report = EmbedStep(mem.store, embedder).run()
        assert report.removed == 1
        left = mem.store._query(
            "SELECT 1 FROM vectors WHERE kind = 'grip' AND item_id = ?", grip[:1]
        )
        assert left == []
        # a changed embedder version is stale: the next run re-embeds everything
        mem.store.set_meta(f"embedder:{embedder.name}", json.dumps({"dim": 1, "version": "old"}))
        assert EmbedStep(mem.store, embedder).run().rebuilt
        assert mem.store.recorded_embedder(embedder.name) == (embedder.dim, embedder.version)
        rebuilt = mem.rebuild_vectors()
        assert rebuilt.rebuilt and rebuilt.events == mem.store.count_events()
    finally:
        mem.close()


def test_semantic_index_without_embedder(tmp_path: Path, memory: Memory) -> None:
    none = SemanticIndex(memory.store, kind="none")
    assert none.embedder is None and none.embed_step() is None
    assert none.degraded == "no embedder: none configured (embedder=none)"
    assert none.search("vacuum", 5) == []


# -- CLI --------------------------------------------------------------------------------------
def test_cli_search_json_batch_and_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = require_model()
    db = tmp_path / "memtoc.db"
    build_memory(db, "static", str(model)).close()
    monkeypatch.setenv("MEMTOC_EMBEDDER", "static")
    monkeypatch.setenv("MEMTOC_EMBED_MODEL", str(model))
    runner = CliRunner()
    out = runner.invoke(app, ["--db", str(db), "search", "vacuum", "-A", "--json", "--limit", "3"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["mode"] == "hybrid" and data["degraded"] is None and len(data["items"]) == 3
    assert data["tokens"] == sum(i["tokens"] for i in data["items"])
    queries = tmp_path / "q.txt"
    queries.write_text("vacuum\n\nrefresh_token\n", encoding="utf-8")
    out = runner.invoke(
        app, ["--db", str(db), "search", "-A", "--queries", str(queries), "--kind", "event"]
    )
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["query"] for r in lines] == ["vacuum", "", "refresh_token"]
    assert lines[1]["items"] == [] and lines[0]["items"]
    assert all(i["kind"] == "event" for r in lines for i in r["items"])
    human = runner.invoke(app, ["--db", str(db), "search", "auth.py", "-A", "--depth", "L1"])
    assert human.exit_code == 0 and "auth.py" in human.stdout
    out = runner.invoke(app, ["--db", str(db), "rebuild", "--vectors", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["vectors"]["events"] == len(CORPUS)
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")
    out = runner.invoke(app, ["--db", str(db), "search", "vacuum", "-A", "--json"])
    assert json.loads(out.stdout)["degraded"].startswith("no embedder:")
    bad = runner.invoke(app, ["--db", str(db), "search"])
    assert bad.exit_code != 0
