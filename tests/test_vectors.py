"""VectorIndex: exact search equals brute force, filters, removal, the optional ANN path, and the
round trip through the store's ``vectors`` table with embedder provenance."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtoc.errors import QueryError, StoreError
from memtoc.model import Event
from memtoc.retrieval.vectors import VectorIndex
from memtoc.retrieval.vectors_ann import faiss_available
from memtoc.store.base import DocRow
from memtoc.store.capabilities import VectorKey
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
PROJECTS = ("alpha", "beta", "gamma")
KINDS = ("node", "grip", "event")


@dataclass
class Corpus:
    ids: list[str]
    vecs: np.ndarray
    projects: list[str]
    kinds: list[str]
    ts: np.ndarray
    queries: np.ndarray


def clustered(n: int, dim: int = 32, clusters: int = 20, seed: int = 7) -> Corpus:
    """Structured data (points around cluster centres), as real embeddings are."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, n)
    vecs = centres[labels] + 0.4 * rng.standard_normal((n, dim)).astype(np.float32)
    queries = centres[rng.integers(0, clusters, 25)] + 0.4 * rng.standard_normal((25, dim))
    return Corpus(
        ids=[f"i{i}" for i in range(n)],
        vecs=vecs,
        projects=[PROJECTS[i % 3] for i in range(n)],
        kinds=[KINDS[(i // 3) % 3] for i in range(n)],
        ts=np.arange(n, dtype=np.int64) * 1000,
        queries=queries.astype(np.float32),
    )


def build(c: Corpus, **kw: int) -> VectorIndex[str]:
    index: VectorIndex[str] = VectorIndex(c.vecs.shape[1], ann_min_rows=kw.get("ann_min_rows", 0))
    index.add(c.ids, c.vecs, projects=c.projects, kinds=c.kinds, ts_ms=c.ts)
    return index


def brute(c: Corpus, q: np.ndarray, k: int, keep: np.ndarray | None = None) -> list[str]:
    unit = c.vecs / np.linalg.norm(c.vecs, axis=1, keepdims=True)
    scores = unit @ (q / np.linalg.norm(q))
    candidates = [i for i in range(len(c.ids)) if keep is None or keep[i]]
    candidates.sort(key=lambda i: (-scores[i], i))
    return [c.ids[i] for i in candidates[:k]]


def test_exact_search_equals_brute_force() -> None:
    c = clustered(3000)
    index = build(c)
    assert len(index) == 3000
    for q in c.queries:
        for k in (1, 10, 50):
            hits = index.search(q, k)
            assert [h for h, _ in hits] == brute(c, q, k)
            scores = [s for _, s in hits]
            assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= 1.0001
    assert len(index.search(c.queries[0], 10_000)) == 3000


def test_filters_match_brute_force() -> None:
    c = clustered(2000)
    index = build(c)
    proj, kind, ts = np.array(c.projects), np.array(c.kinds), c.ts
    allowed = {f"i{i}" for i in range(0, 2000, 7)}
    cases = [
        ({"projects": {"beta"}}, proj == "beta"),
        ({"projects": {"alpha", "gamma"}}, (proj == "alpha") | (proj == "gamma")),
        ({"kinds": {"grip"}}, kind == "grip"),
        ({"projects": {"beta"}, "kinds": {"node", "event"}}, (proj == "beta") & (kind != "grip")),
        ({"since_ms": 500_000, "until_ms": 900_000}, (ts >= 500_000) & (ts < 900_000)),
        ({"allowed_ids": allowed}, np.array([i in allowed for i in c.ids])),
        (
            {"allowed_ids": allowed, "kinds": {"node"}},
            np.array([i in allowed for i in c.ids]) & (kind == "node"),
        ),
    ]
    for kwargs, keep in cases:
        for q in c.queries[:5]:
            got = [h for h, _ in index.search(q, 10, **kwargs)]  # type: ignore[arg-type]
            assert got == brute(c, q, 10, keep), kwargs
    assert index.search(c.queries[0], 10, projects=set()) == []
    assert index.search(c.queries[0], 10, projects={"nope"}) == []
    assert index.search(c.queries[0], 10, allowed_ids={"i3", "missing"})[0][0] == "i3"


def test_filters_on_grouped_rows_match_brute_force() -> None:
    """Rows grouped by kind then project (the store's load order): kind and project filters
    select a few contiguous runs, multiplied in place — same answers, also after more rows
    arrive out of order and after a removal."""
    c = clustered(2400)
    order = sorted(range(2400), key=lambda i: (c.kinds[i], c.projects[i], i))
    grouped = Corpus(
        ids=[c.ids[i] for i in order],
        vecs=c.vecs[order],
        projects=[c.projects[i] for i in order],
        kinds=[c.kinds[i] for i in order],
        ts=c.ts[order],
        queries=c.queries,
    )
    head = Corpus(grouped.ids[:2000], grouped.vecs[:2000], grouped.projects[:2000],
                  grouped.kinds[:2000], grouped.ts[:2000], c.queries)  # fmt: skip
    index = build(head)
    cases = [
        {"kinds": {"grip"}},
        {"kinds": {"grip", "node"}},
        {"projects": {"beta"}},
        {"projects": {"beta"}, "kinds": {"event"}},
    ]

    def check(corpus: Corpus) -> None:
        proj, kind = np.array(corpus.projects), np.array(corpus.kinds)
        for kwargs in cases:
            keep = np.ones(len(corpus.ids), dtype=bool)
            if "kinds" in kwargs:
                keep &= np.isin(kind, list(kwargs["kinds"]))
            if "projects" in kwargs:
                keep &= np.isin(proj, list(kwargs["projects"]))
            for q in c.queries[:5]:
                got = [h for h, _ in index.search(q, 10, **kwargs)]  # type: ignore[arg-type]
                assert got == brute(corpus, q, 10, keep), kwargs

    check(head)
    rest = slice(2000, 2400)
    index.add(grouped.ids[rest], grouped.vecs[rest], projects=grouped.projects[rest],
              kinds=grouped.kinds[rest], ts_ms=grouped.ts[rest])  # fmt: skip
    check(grouped)
    index.remove([grouped.ids[0]])
    assert grouped.ids[0] not in [h for h, _ in index.search(grouped.vecs[0], 5, kinds={"event"})]


def test_remove_replace_and_compaction() -> None:
    c = clustered(5000)
    index = build(c)
    q = c.queries[0]
    top = [h for h, _ in index.search(q, 5)]
    assert index.remove([top[0], "unknown"]) == 1
    assert top[0] not in index and len(index) == 4999
    assert [h for h, _ in index.search(q, 4)] == top[1:5]
    # replacing a vector moves the id to its new place in the ranking
    index.add([top[1]], -q[None, :], projects=["alpha"], kinds=["node"], ts_ms=[0])
    assert [h for h, _ in index.search(q, 3)] == top[2:5]
    assert index.search(-q, 1)[0][0] == top[1]
    # removing most rows triggers compaction; results stay equal to brute force
    gone = set(c.ids[:3000])
    index.remove(gone)
    keep = np.array([i not in gone and i not in top[:2] for i in c.ids])
    hits = [h for h, _ in index.search(q, 20, kinds={"node", "grip", "event"})]
    assert [h for h in hits if h != top[1]][:19] == brute(c, q, 19, keep)
    assert len(index) == int(keep.sum()) + (top[1] not in gone)


def test_bad_inputs_are_query_errors() -> None:
    index: VectorIndex[str] = VectorIndex(4, ann_min_rows=0)
    assert index.search(np.ones(4), 5) == []  # empty index
    with pytest.raises(QueryError, match="3-d"):
        index.search(np.ones(3), 5)
    with pytest.raises(QueryError, match="expected"):
        index.add(["a"], np.ones((1, 5)), projects=["p"], kinds=["k"], ts_ms=[0])
    with pytest.raises(QueryError, match="duplicate"):
        index.add(["a", "a"], np.ones((2, 4)), projects=["p"] * 2, kinds=["k"] * 2, ts_ms=[0, 0])
    index.add(["a"], np.ones((1, 4)), projects=["p"], kinds=["k"], ts_ms=[0])
    assert index.search(np.zeros(4), 5) == [] and index.search(np.ones(4), 0) == []
    with pytest.raises(QueryError):
        VectorIndex(0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    k=st.integers(1, 70),
    seed=st.integers(0, 10_000),
    removed=st.sets(st.integers(0, 59), max_size=30),
)
def test_property_search_equals_brute_force(n: int, k: int, seed: int, removed: set[int]) -> None:
    c = clustered(n, dim=8, clusters=3, seed=seed)
    index = build(c)
    gone = {i for i in removed if i < n}
    index.remove([c.ids[i] for i in gone])
    keep = np.array([i not in gone for i in range(n)])
    assert [h for h, _ in index.search(c.queries[0], k)] == brute(c, c.queries[0], k, keep)


@pytest.mark.skipif(not faiss_available(), reason="faiss (the optional 'ann' extra) not installed")
def test_ann_path_on_structured_data() -> None:
    c = clustered(20_000, dim=32, clusters=50)
    exact = build(c)
    approx = build(c, ann_min_rows=5_000)
    recalls = []
    for q in c.queries:
        truth = {h for h, _ in exact.search(q, 10)}
        got = approx.search(q, 10)
        assert len(got) == 10
        recalls.append(len(truth & {h for h, _ in got}) / 10)
    assert approx.ann_active and np.mean(recalls) >= 0.9
    # incremental add and remove keep the ANN index in step
    q = c.queries[0]
    approx.add(["new"], q[None, :], projects=["alpha"], kinds=["node"], ts_ms=[0])
    assert approx.search(q, 1)[0][0] == "new"
    approx.remove(["new"])
    assert "new" not in {h for h, _ in approx.search(q, 10)}
    # a filter still applies on the ANN path (and narrow ones fall back to exact)
    hits = approx.search(q, 10, projects={"beta", "gamma"})
    assert all(c.projects[int(h[1:])] != "alpha" for h, _ in hits) and len(hits) == 10
    narrow = approx.search(q, 10, allowed_ids={"i1", "i2"})
    assert {h for h, _ in narrow} == {"i1", "i2"}


# -- the store ------------------------------------------------------------------------------------
def _fill_store(store: SqliteStore) -> tuple[list[VectorKey], np.ndarray]:
    store.put_docs(
        [
            DocRow("node", "day:2024-01-18", "alpha", 1_000, "node text"),
            DocRow("node", "day:2024-01-18", "beta", 2_000, "same node id, other project"),
            DocRow("grip", "g1", "alpha", 3_000, "grip"),
        ]
    )
    store.append_events(
        [Event("e1", "s1", "alpha", "agent", 4_000, "user_message", "user", "an event")]
    )
    keys = [
        VectorKey("node", "alpha", "day:2024-01-18"),
        VectorKey("node", "beta", "day:2024-01-18"),
        VectorKey("grip", "alpha", "g1"),
        VectorKey("event", "alpha", "e1"),
        VectorKey("bookmark", "alpha", "b-missing"),
    ]
    emb = HashEmbedder(16)
    vecs = emb.embed(["node text", "same node id, other project", "grip", "an event", "x"])
    store.put_item_vectors(emb, keys, vecs)
    return keys, vecs


def test_store_round_trip(store: SqliteStore) -> None:
    keys, vecs = _fill_store(store)
    emb = HashEmbedder(16)
    index = VectorIndex.from_store(store, emb)
    assert len(index) == 5 and index.embedder == "hash:16"
    for key, vec in zip(keys, vecs, strict=True):
        assert index.search(vec, 1)[0][0] == key
    # timestamps come from docs / events (0 when the item is unknown)
    window = index.search(vecs[0], 5, since_ms=2_000, until_ms=4_001)
    assert {h for h, _ in window} == {keys[1], keys[2], keys[3]}
    assert {h for h, _ in index.search(vecs[0], 5, until_ms=1)} == {keys[4]}
    beta = VectorIndex.from_store(store, emb, projects={"beta"})
    assert len(beta) == 1 and beta.search(vecs[1], 5)[0][0] == keys[1]
    assert len(VectorIndex.from_store(store, emb, kinds={"node", "grip"})) == 3
    loaded = store.load_vectors("hash:16")
    np.testing.assert_array_equal(loaded.matrix[loaded.keys.index(keys[3])], vecs[3])
    # write the index back under another embedder name, then delete and clear
    other = HashEmbedder(16)
    other.name = "hash:copy"
    assert index.to_store(store, other) == 5
    assert store.count_vectors() == {"hash:16": 5, "hash:copy": 5}
    assert store.delete_vectors([keys[0]], embedder="hash:copy") == 1
    assert store.delete_vectors([keys[1]]) == 2
    assert store.count_vectors() == {"hash:16": 4, "hash:copy": 3}
    assert store.clear_vectors("hash:copy") == 3 and store.recorded_embedder("hash:copy") is None
    with pytest.raises(StoreError, match="4-d"):
        store.put_item_vectors(HashEmbedder(4), [keys[0]], np.ones((1, 5)))


def test_store_vectors_are_little_endian_float32(store: SqliteStore) -> None:
    _, vecs = _fill_store(store)
    blob = store.connection.execute(
        "SELECT dim, vec FROM vectors WHERE item_id = 'g1' AND embedder = 'hash:16'"
    ).fetchone()
    assert blob[0] == 16 and blob[1] == vecs[2].astype("<f4").tobytes()


def test_stale_embedder_detection(store: SqliteStore) -> None:
    emb = HashEmbedder(16)
    assert not store.stale_embedder(emb)  # nothing stored: nothing to redo
    _fill_store(store)
    assert store.recorded_embedder("hash:16") == (16, "hash-v1")
    assert not store.stale_embedder(emb)
    changed = HashEmbedder(16)
    changed.version = "hash-v2"
    assert store.stale_embedder(changed)
    store.connection.execute("DELETE FROM meta WHERE key = 'embedder:hash:16'")
    assert store.stale_embedder(emb)  # vectors of unknown provenance
    store.connection.execute("UPDATE vectors SET dim = 8 WHERE item_id = 'g1'")
    with pytest.raises(StoreError, match="disagree on dimension"):
        store.load_vectors("hash:16")


def test_real_static_model_end_to_end(store: SqliteStore) -> None:
    folder = MODELS / "minilm-static-256"
    if not folder.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"shared model folder {folder} is absent")
        pytest.skip(f"shared model folder {folder} is absent")
    from memtoc.text.embed_backends import StaticEmbedder

    emb = StaticEmbedder(str(folder))
    texts = [
        "the cat sat on the mat",
        "quarterly tax filing deadline is in April",
        "pytest fixture for the sqlite store",
        "the kitten slept on a rug",
    ]
    keys = [VectorKey("grip", "alpha", f"g{i}") for i in range(len(texts))]
    store.put_item_vectors(emb, keys, emb.embed(texts))
    index = VectorIndex.from_store(store, emb)
    hits = index.search(emb.embed(["a small cat lying on a carpet"])[0], 2)
    assert {h.item_id for h, _ in hits} == {"g0", "g3"}
    assert not store.stale_embedder(emb)
