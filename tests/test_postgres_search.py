"""Search, vectors and bookmarks on PostgreSQL: ``Memory.search`` (BM25, vectors, hybrid),
``bookmarks`` and ``refresh_bookmarks`` work on a PostgreSQL store as on SQLite — same filters,
scores in 0..1, any user text a valid query, vectors in pgvector with embedder provenance."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import ANY
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.teleport import SearchFilters, bm25_search, filter_keys
from memtoc.store.capabilities import TextScope, VectorKey
from memtoc.store.postgres import PostgresStore
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder
from search_support import BASE, CORPUS, DAY

Store = SqliteStore | PostgresStore


def load(memory: Memory) -> Memory:
    for project in ("alpha", "beta"):
        records = [
            {**{k: v for k, v in r.items() if k not in ("ts", "project")}, "timestamp": r["ts"]}
            for r in CORPUS
            if r.get("project", "alpha") == project
        ]
        assert memory.ingest_records(records, project=project).ingested == len(records)
    memory.process()
    memory.rollup(force=True)
    return memory


def open_memory(store: Store, clock: ManualClock, embedder: HashEmbedder | None) -> Memory:
    semantic = SemanticIndex(store, embedder=embedder) if embedder else SemanticIndex(store)
    return Memory(store, clock=clock, tz=ZoneInfo("UTC"), semantic=semantic)


@pytest.fixture
def pair(pg_url: str, tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    """The search corpus in a PostgreSQL store and in a SQLite store, both with a hash embedder."""
    clock = ManualClock(BASE + 10 * DAY)
    pg = load(open_memory(PostgresStore(pg_url, clock=clock, pool_size=2), clock, HashEmbedder(32)))
    lite = load(open_memory(SqliteStore(tmp_path / "m.db", clock=clock), clock, HashEmbedder(32)))
    yield pg, lite
    pg.close()
    lite.close()


QUERIES = ["vacuum", "refresh token", "diagram mermaid", "pytest passed", "migration index"]


def test_bm25_on_postgres_finds_what_sqlite_finds(pair: tuple[Memory, Memory]) -> None:
    pg, lite = pair
    for query in QUERIES:
        a = pg.search(query, mode="bm25", limit=5, kinds=("event",))
        b = lite.search(query, mode="bm25", limit=5, kinds=("event",))
        assert a.mode == "bm25" and a.items, query
        # the same events (ids differ between the two stores: compare their text)
        assert {i.text for i in a.items} == {i.text for i in b.items}, query
    # documents too: nodes and grips carry the words of their events
    found = pg.search("vacuum", mode="bm25", limit=10, kinds=("node", "grip"))
    ref = lite.search("vacuum", mode="bm25", limit=10, kinds=("node", "grip"))
    days = {i.id for i in found.items if i.id.startswith("toc:day:")}
    assert days and days == {i.id for i in ref.items if i.id.startswith("toc:day:")}


def test_hits_say_whether_they_hold_every_term_on_both_stores(
    pair: tuple[Memory, Memory],
) -> None:
    """``Hit.every_term``: set by the AND pass (recall pins a bookmark only on such a hit), not
    read back from a normalised score; the same rows on PostgreSQL and SQLite."""
    flags = []
    for memory in pair:
        store = memory.store
        assert isinstance(store, SqliteStore | PostgresStore)
        hits = bm25_search(
            store, "refresh_token expires", SearchFilters(kinds=("event",)), limit=10
        )
        texts = {store.get_event(h.item_id).text: h for h in hits}
        both = texts["The refresh_token expires too early in src/app/auth.py"]
        one = texts["refreshToken handling in the JS client looks fine"]
        assert both.every_term and not one.every_term
        assert both.score == 1.0 and one.score <= 0.5
        flags.append({t: h.every_term for t, h in texts.items()})
    assert flags[0] == flags[1]


def _small_stores(pg_url: str, tmp_path: Path) -> dict[str, Memory]:
    clock = ManualClock(BASE + 10 * DAY)
    return {
        "postgres": open_memory(PostgresStore(pg_url, clock=clock, pool_size=2), clock, None),
        "sqlite": open_memory(SqliteStore(tmp_path / "m.db", clock=clock), clock, None),
    }


def _add(memory: Memory, texts: list[str], start: int) -> None:
    records = [
        {"session_id": f"s{start}", "timestamp": BASE + (start + i) * 60_000,
         "role": "user", "text": t}
        for i, t in enumerate(texts)
    ]  # fmt: skip
    assert memory.ingest_records(records, project="p").ingested == len(texts)
    memory.process()


def test_the_callers_scan_cap_bounds_both_stores_alike(pg_url: str, tmp_path: Path) -> None:
    """``scan_cap`` is the caller's on both stores (recall's expansion asks for fewer rows than
    search): the OR pass leaves out a lexeme matching more than it, a larger cap ranks every
    match. (PostgreSQL used its own constant, so the expansion ranked 5,000 rows there.)"""
    stores = _small_stores(pg_url, tmp_path)

    def found(memory: Memory, cap: int) -> set[str]:
        f = SearchFilters(kinds=("event",))
        hits = bm25_search(memory.store, "kestrel osprey", f, limit=10, scan_cap=cap)
        return {memory.store.get_event(h.item_id).text for h in hits}

    try:
        for name, memory in stores.items():
            _add(memory, ["a kestrel hovered", "the kestrel again", "kestrel at dusk",
                          "one osprey"], 0)  # fmt: skip
            assert len(found(memory, 4)) == 4, name
            _add(memory, ["kestrel number four", "kestrel number five"], 100)
            # kestrel now matches 5 rows > 4: the OR pass keeps only the rare lexeme
            assert found(memory, 4) == {"one osprey"}, name
            assert len(found(memory, 10)) == 6, name  # under a larger cap every match is ranked
    finally:
        for memory in stores.values():
            memory.close()


def test_a_query_is_cut_into_the_same_terms_on_both_stores(pg_url: str, tmp_path: Path) -> None:
    """PostgreSQL stems the terms SQLite searches (``fts_text.build_match``: stop words dropped,
    a hyphenated word as its parts, a path as its identifier forms), not its own parse of the
    question, which added the whole ``plan-first`` and ``agents.md/claude.md`` as extra, rare
    lexemes: rows without that spelling left the AND pass and the spelling's rows scored it
    twice over."""
    stores = _small_stores(pg_url, tmp_path)
    texts = ["we plan first, then the pipeline runs", "the plan-first pipeline",
             "another pipeline", "the AGENTS.md and CLAUDE.md files conflict",
             "AGENTS.md/CLAUDE.md conflict"]  # fmt: skip
    flags: list[dict[str, dict[str, bool]]] = []
    try:
        for name, memory in stores.items():
            _add(memory, texts, 0)
            store = memory.store
            assert isinstance(store, SqliteStore | PostgresStore)
            found: dict[str, dict[str, bool]] = {}
            for query in ("plan-first pipeline", "AGENTS.md/CLAUDE.md conflict"):
                hits = bm25_search(store, query, SearchFilters(kinds=("event",)), limit=10)
                found[query] = {store.get_event(h.item_id).text: h.every_term for h in hits}
            assert found["plan-first pipeline"] == {
                texts[0]: True, texts[1]: True, texts[2]: False
            }, name  # fmt: skip
            assert found["AGENTS.md/CLAUDE.md conflict"][texts[4]], name
            flags.append(found)
    finally:
        for memory in stores.values():
            memory.close()
    assert flags[0] == flags[1]


def test_an_old_row_of_rare_terms_beyond_the_scan_cap_on_both_stores(
    pg_url: str, tmp_path: Path
) -> None:
    """When the OR pass can match more rows than it scores (the newest), the rows of the rarest
    lexemes are scored too, on PostgreSQL as on SQLite: an old row holding two of three terms
    ranks first."""
    clock = ManualClock(BASE + 10 * DAY)
    old = "the heron and the egret nest upstream"
    texts = [old] + [f"{b} fishing at pool {i}" for i in range(20) for b in ("heron", "egret")]
    texts += [f"sparrow number {i}" for i in range(100)]
    records = [
        {"session_id": "s", "timestamp": BASE + i * 60_000, "role": "user", "text": t}
        for i, t in enumerate(texts)
    ]
    stores: list[Store] = [
        PostgresStore(pg_url, clock=clock, pool_size=2),
        SqliteStore(tmp_path / "m.db", clock=clock),
    ]
    for store in stores:
        memory = open_memory(store, clock, None)
        try:
            memory.ingest_records(records, project="p")
            memory.process()
            f = SearchFilters(projects=("p",), kinds=("event",))
            hits = bm25_search(store, "heron egret bittern", f, limit=10, scan_cap=30)
            assert store.get_event(hits[0].item_id).text == old, store
            assert len(hits) == 10
        finally:
            memory.close()


def test_filters_on_postgres(pair: tuple[Memory, Memory]) -> None:
    pg, lite = pair
    store = pg.store
    hits = bm25_search(store, "vacuum", SearchFilters(projects=("beta",)), limit=20)
    assert hits and {h.project for h in hits} == {"beta"}
    assert all(0.0 <= h.score <= 1.0 for h in hits) and max(h.score for h in hits) == 1.0
    day = bm25_search(store, "vacuum", SearchFilters(levels=("day",)), limit=20)
    assert day and all(h.kind == "node" and h.item_id.startswith("toc:day:") for h in day)
    users = bm25_search(store, "vacuum migration", SearchFilters(role="user"), limit=20)
    assert users and all(h.kind == "event" for h in users)
    assert {store.get_event(h.item_id).role for h in users} == {"user"}
    window = SearchFilters(since_ms=BASE + DAY, until_ms=BASE + 2 * DAY)
    timed = bm25_search(store, "vacuum", window, limit=20)
    assert timed and all(h.kind != "event" or BASE + DAY <= h.ts_ms < BASE + 2 * DAY for h in timed)
    session = bm25_search(store, "vacuum", SearchFilters(session_id="s2"), limit=20)
    assert session and {h.kind for h in session} <= {"event", "grip", "node"}
    # each filter keeps the same items on both stores
    for f in (
        SearchFilters(projects=("alpha",), kinds=("event",)),
        window,
        SearchFilters(role="user"),
    ):
        a = bm25_search(store, "vacuum migration refresh", f, limit=50)
        b = bm25_search(lite.store, "vacuum migration refresh", f, limit=50)
        texts_a = {store.get_event(h.item_id).text for h in a if h.kind == "event"}
        texts_b = {lite.store.get_event(h.item_id).text for h in b if h.kind == "event"}
        assert texts_a == texts_b, f
    # filter_keys applies the same rules to keys found another way
    some = [h.key for h in bm25_search(store, "vacuum", None, limit=50)]
    kept = filter_keys(store, some, SearchFilters(projects=("alpha",)))
    assert kept == {k for k in some if k[1] == "alpha"}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=40))
def test_any_text_is_a_valid_query_on_postgres(pg_url: str, text: str) -> None:
    store = PostgresStore(pg_url, pool_size=1)
    try:
        hits = bm25_search(store, text, SearchFilters(), limit=5)
        assert all(0.0 <= h.score <= 1.0 for h in hits)
        assert (
            store.rank_text(text + " & | ! ( ) : * '", kinds=("node", "event"), scope=TextScope())
            is not None
        )
    finally:
        store.close()


def test_vectors_in_pgvector_and_hybrid_search(pair: tuple[Memory, Memory]) -> None:
    pg, lite = pair
    store = pg.store
    assert isinstance(store, PostgresStore)
    emb = HashEmbedder(32)
    count = store._query("SELECT COUNT(*), COUNT(DISTINCT dim) FROM vectors WHERE embedder = %s",
                         (emb.name,))[0]  # fmt: skip
    n_events = store.count_events()
    assert int(count[0]) > n_events and int(count[1]) == 1  # every event + docs, one dimension
    assert store.recorded_embedder(emb.name) == (emb.dim, emb.version)
    event = store.get_event(next(iter(store.scan_events(project="alpha"))).event_id)
    nearest = store.nearest(emb.name, emb.embed([event.text])[0], 1, kinds=("event",))
    assert nearest[0][0] == VectorKey("event", "alpha", event.event_id)
    assert nearest[0][1] == pytest.approx(1.0, abs=1e-5)
    for query in QUERIES:
        a = pg.search(query, mode="hybrid", limit=5)
        b = lite.search(query, mode="hybrid", limit=5)
        assert a.mode == "hybrid" and a.degraded is None and a.items
        assert {i.text for i in a.items} & {i.text for i in b.items}, query
    vec = pg.search("vacuum", mode="vector", limit=3, kinds=("event",))
    assert vec.mode == "vector" and len(vec.items) == 3
    # a second embed run writes nothing; a changed doc is re-embedded, a deleted one dropped
    step = pg.semantic.embed_step()
    assert step is not None and not step.run().changed
    doc = store._query("SELECT kind, project, doc_id FROM docs WHERE kind = 'node' LIMIT 1")[0]
    store._exec("UPDATE docs SET text = text || ' extra' WHERE kind = %s AND project = %s "
                "AND doc_id = %s", doc)  # fmt: skip
    assert step.run().docs == 1


def test_bookmarks_on_postgres(pair: tuple[Memory, Memory]) -> None:
    pg, lite = pair
    wrote_pg = pg.refresh_bookmarks(rebuild=True)
    wrote_lite = lite.refresh_bookmarks(rebuild=True)
    assert wrote_pg == wrote_lite
    a = [(b.content, b.type, b.event_ids) for b in pg.bookmarks(limit=50)]
    b = [(b.content, b.type, b.event_ids) for b in lite.bookmarks(limit=50)]
    assert a == b
    if a:
        found = pg.search(a[0][0], mode="bm25", kinds=("bookmark",), limit=3)
        assert found.items and found.items[0].kind == "bookmark"


FTS5_TEXTS = [
    "the retry loop stalls",
    "retry loop " + "log " * 60 + "done",  # long, but few distinct words
    "what is above the fold on the landing page",
    "the fold line sits low",
    "refresh_token expired again",
    "refresh token rotated",
    "the page renders",
    "the page loads",
    "the page scrolls",
    "the auth check runs first",
    "auth.go holds the auth check",
    "go build passed",
    "timeout " * 300 + "in the log",  # more often than a tsvector keeps positions (256)
    "timeout " * 270 + "in the other log",
]
FTS5_QUERIES = ["retry loop", "above the fold", "refresh_token", "landing page", "page",
                "the auth-check in auth.go", "auth go", "timeout log"]  # fmt: skip


def _ranked(memory: Memory, query: str) -> list[tuple[str, float, bool]]:
    hits = bm25_search(memory.store, query, SearchFilters(kinds=("event",)), limit=10)
    return [(memory.store.get_event(h.item_id).text, h.raw, h.every_term) for h in hits]


def _same_ranking(pg: Memory, lite: Memory) -> None:
    for query in FTS5_QUERIES:
        a, b = _ranked(pg, query), _ranked(lite, query)
        assert [(t, e) for t, _, e in a] == [(t, e) for t, _, e in b], query
        assert [r for _, r, _ in a] == pytest.approx([r for _, r, _ in b], rel=1e-9), query


def test_bm25_scores_are_fts5_scores_on_both_stores(pg_url: str, tmp_path: Path) -> None:
    """PostgreSQL's BM25 is FTS5's: the same rows in the same order with the same raw scores.
    Its ``english`` parse never indexed or searched stop words (``above``), split ``refresh_token``
    at ``_``, weighed a term in most rows above FTS5's near-zero IDF, measured a row by its
    distinct lexemes (a long row repeating one word ranked above a short one), weighed ``auth``
    once where FTS5's AND expression holds it twice (``auth-check``, ``auth.go``), and counted a
    word at most 256 times in a row (a tsvector's positions)."""
    stores = _small_stores(pg_url, tmp_path)
    try:
        for memory in stores.values():
            _add(memory, FTS5_TEXTS, 0)
        _same_ranking(stores["postgres"], stores["sqlite"])
        ranked = _ranked(stores["postgres"], "retry loop")
        assert [t for t, _, _ in ranked] == FTS5_TEXTS[:2]  # the short row first, as FTS5 ranks
        assert _ranked(stores["postgres"], "above the fold")[0] == (FTS5_TEXTS[2], ANY, True)
        assert _ranked(stores["postgres"], "refresh_token")[0][0] == FTS5_TEXTS[4]
    finally:
        for memory in stores.values():
            memory.close()


def test_a_store_indexed_before_fts5_tokens_is_reindexed_by_its_migration(
    pg_url: str, tmp_path: Path
) -> None:
    """Opening a store written before ``0011_fts5_tokens`` (``english`` tsvectors, no lengths)
    re-indexes its events and documents: it then ranks as SQLite does."""
    stores = _small_stores(pg_url, tmp_path)
    try:
        for memory in stores.values():
            _add(memory, FTS5_TEXTS, 0)
            memory.rollup(force=True)
        pg = stores["postgres"].store
        assert isinstance(pg, PostgresStore)
        pg._exec(
            "UPDATE event_search x SET tsv = to_tsvector('english'::regconfig, e.text) "
            "FROM events e WHERE e.seq = x.seq; "
        )
        pg._exec("ALTER TABLE event_search DROP COLUMN dl")
        pg._exec("ALTER TABLE docs DROP COLUMN dl")
        pg._exec("ALTER TABLE docs DROP COLUMN tsv")
        pg._exec(
            "ALTER TABLE docs ADD COLUMN tsv TSVECTOR GENERATED ALWAYS AS "
            "(to_tsvector('english'::regconfig, text)) STORED"
        )
        pg._exec("DELETE FROM schema_migrations WHERE name = '0011_fts5_tokens'")
        stores["postgres"].close()
        clock = ManualClock(BASE + 10 * DAY)
        stores["postgres"] = open_memory(
            PostgresStore(pg_url, clock=clock, pool_size=2), clock, None
        )
        _same_ranking(stores["postgres"], stores["sqlite"])
        for kinds in (("node",), ("grip",)):
            f = SearchFilters(kinds=kinds)
            a = [(h.item_id, h.raw) for h in bm25_search(stores["postgres"].store, "page", f)]
            b = [(h.item_id, h.raw) for h in bm25_search(stores["sqlite"].store, "page", f)]
            assert a and [r for _, r in a] == pytest.approx([r for _, r in b], rel=1e-9), kinds
    finally:
        for memory in stores.values():
            memory.close()


def test_a_text_past_the_tsvector_limit_is_indexed_by_its_first_words(pg_url: str) -> None:
    """PostgreSQL refuses a ``tsvector`` of 1 MB or more (``to_tsvector`` failed on such a text,
    and with it the pipeline's batch): the lexemes stop short of it, the row is still found by its
    first words and the events after it are indexed."""
    clock = ManualClock(BASE + 10 * DAY)
    memory = open_memory(PostgresStore(pg_url, clock=clock, pool_size=2), clock, None)
    rng = random.Random(3)
    huge = "zephyrine " + " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=12)) for _ in range(120_000)
    )
    try:
        _add(memory, [huge, "a quiet zephyrine morning"], 0)
        hits = _ranked(memory, "zephyrine")
        assert sorted(t[:20] for t, _, _ in hits) == ["a quiet zephyrine mo", huge[:20]]
    finally:
        memory.close()
