"""The approximate vector index (IVFFlat) on PostgreSQL: built by the embed step once an embedder has enough vectors (a
threshold lowered here), used by ``nearest`` (the server's index statistics say so), answering as
the exact scan does on a small store, and stepping aside for the exact scan when filters leave it
short of k."""

from __future__ import annotations

from collections.abc import Iterator
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.pipeline.embed_step import EmbedStep
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.postgres import PostgresStore
from memtoc.store.postgres import ann as postgres_ann
from memtoc.store.postgres.ann import ann_index_name
from memtoc.text.embed import HashEmbedder
from search_support import BASE, CORPUS, DAY

EMB = HashEmbedder(32)


@pytest.fixture
def memory(pg_url: str) -> Iterator[Memory]:
    clock = ManualClock(BASE + 10 * DAY)
    store = PostgresStore(pg_url, clock=clock, pool_size=2)
    m = Memory(store, clock=clock, tz=ZoneInfo("UTC"), semantic=SemanticIndex(store, embedder=EMB))
    for project in ("alpha", "beta"):
        records = [
            {**{k: v for k, v in r.items() if k not in ("ts", "project")}, "timestamp": r["ts"]}
            for r in CORPUS
            if r.get("project", "alpha") == project
        ]
        m.ingest_records(records, project=project)
    yield m
    m.close()


def test_embed_step_builds_the_index_and_search_uses_it(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = memory.store
    assert isinstance(store, PostgresStore)
    memory.process()  # the configured embed step: default threshold, far above this corpus
    index = ann_index_name(EMB.name, EMB.dim)
    assert store.vector_indexes() == []
    total = int(store._query("SELECT COUNT(*) FROM vectors")[0][0])
    queries = [EMB.embed([q])[0] for q in ("vacuum", "refresh token", "pytest passed")]
    exact = [store.nearest(EMB.name, q, 5) for q in queries]
    assert "vectors_ivf" not in store.explain_nearest(EMB.name, queries[0], 5)
    EmbedStep(store, EMB, ann_min_rows=total + 1).rebuild()
    assert store.vector_indexes() == []  # below the threshold: still exact
    EmbedStep(store, EMB, ann_min_rows=total).rebuild()  # at it: the step builds the index
    (info,) = store.vector_indexes()
    assert info == {"index": index, "valid": True, "lists": 10, "bytes": info["bytes"]}
    assert f"Index Scan using {index}" in store.explain_nearest(EMB.name, queries[0], 5)
    approx = [store.nearest(EMB.name, q, 5) for q in queries]
    assert all(
        len(a) == 5 and a[0][1] <= e[0][1] + 1e-6 for a, e in zip(approx, exact, strict=True)
    )
    monkeypatch.setattr(postgres_ann, "probes_for", lambda lists: lists)  # probe every list
    approx = [store.nearest(EMB.name, q, 5) for q in queries]
    for a, e in zip(approx, exact, strict=True):  # through the index, exhaustively: exact
        assert [c for _, c in a] == pytest.approx([c for _, c in e], abs=1e-6)
        last = e[-1][1]  # items tied with the k-th may differ; the ones above it may not
        assert [k for k, c in a if c > last + 1e-6] == [k for k, c in e if c > last + 1e-6]
    # a filter the index cannot satisfy with k rows: the exact scan answers
    few = store.nearest(EMB.name, queries[0], 50, projects=["beta"], kinds=["event"])
    ref = store._query(
        "SELECT COUNT(*) FROM vectors WHERE project = 'beta' AND kind = 'event' AND embedder = %s",
        (EMB.name,),
    )[0][0]
    assert len(few) == min(50, int(ref)) and {k.project for k, _ in few} == {"beta"}
    hybrid = memory.search("vacuum", mode="hybrid", limit=5)
    assert hybrid.mode == "hybrid" and hybrid.items


def test_new_vectors_after_the_build_are_found(memory: Memory) -> None:
    store = memory.store
    assert isinstance(store, PostgresStore)
    store.ann_min_rows = 1  # PostgresStore(url, ann_min_rows=…): the pipeline's embed step builds
    memory.process()
    assert [i["valid"] for i in store.vector_indexes()] == [True]
    text = "zeppelin maintenance window moved to thursday"
    memory.ingest_records([{"session_id": "s9", "timestamp": BASE + 9 * DAY, "role": "user",
                            "text": text}], project="alpha")  # fmt: skip
    memory.process()  # embeds the new event into the indexed table
    hit = store.nearest(EMB.name, EMB.embed([text])[0], 1, kinds=["event"])
    assert store.get_event(hit[0][0].item_id).text == text
    assert hit[0][1] == pytest.approx(1.0, abs=1e-5)


def test_an_outgrown_index_is_rebuilt_and_swapped_in(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = memory.store
    assert isinstance(store, PostgresStore)
    memory.process()
    assert store.ensure_vector_index(EMB.name, EMB.dim, min_rows=1) is True
    index = ann_index_name(EMB.name, EMB.dim)
    assert [(i["index"], i["lists"]) for i in store.vector_indexes()] == [(index, 10)]
    monkeypatch.setattr(postgres_ann, "lists_for", lambda rows: 15)  # not twice: kept
    assert store.ensure_vector_index(EMB.name, EMB.dim, min_rows=1) is True
    assert [i["lists"] for i in store.vector_indexes()] == [10]
    monkeypatch.setattr(postgres_ann, "lists_for", lambda rows: 20)  # the rows call for 2x
    assert store.ensure_vector_index(EMB.name, EMB.dim, min_rows=1) is True
    assert [(i["index"], i["lists"], i["valid"]) for i in store.vector_indexes()] == [
        (index, 20, True)
    ]
    q = EMB.embed(["vacuum"])[0]
    assert f"Index Scan using {index}" in store.explain_nearest(EMB.name, q, 5)
    assert len(store.nearest(EMB.name, q, 5)) == 5


def test_a_failed_build_is_recorded_and_search_stays_exact(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = memory.store
    assert isinstance(store, PostgresStore)
    memory.process()
    monkeypatch.setattr(postgres_ann, "build_mb", lambda lists, dim: 1)  # below pgvector's need
    monkeypatch.setattr(postgres_ann, "BUILD_MB", (1, 1))
    monkeypatch.setattr(postgres_ann, "lists_for", lambda rows: 100)
    assert store.ensure_vector_index(EMB.name, EMB.dim, min_rows=1) is False
    (info,) = store.vector_indexes()
    assert info["valid"] is False and "maintenance_work_mem" in str(info["error"])
    assert store.stats()["vector_indexes"] == [info]
    q = EMB.embed(["vacuum"])[0]
    assert "vectors_ivf" not in store.explain_nearest(EMB.name, q, 5)
    assert len(store.nearest(EMB.name, q, 5)) == 5
    monkeypatch.undo()
    assert store.ensure_vector_index(EMB.name, EMB.dim, min_rows=1) is True
    (info,) = store.vector_indexes()
    assert info["valid"] is True and "error" not in info
