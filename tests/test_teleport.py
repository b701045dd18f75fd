"""Teleport (BM25) over a real processed store: filters, code-aware matching, score range,
citations that resolve, the degraded BM25-only mode, and the FTS rebuild."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import BOTH_BACKENDS
from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.retrieval.hybrid import SearchResult
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.surfaces.cli import app
from search_support import BASE, DAY, build_memory


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = build_memory(tmp_path_factory.mktemp("teleport") / "memtoc.db")
    yield mem
    mem.close()


def _event_texts(result: SearchResult, memory: Memory) -> list[str]:
    return [memory.store.get_event(i.id).text for i in result.items if i.kind == "event"]


def test_bm25_only_is_reported_as_degraded(memory: Memory) -> None:
    result = memory.search("vacuum")
    assert result.mode == "bm25"
    assert result.fusion is None
    assert result.degraded is not None and result.degraded.startswith("no embedder:")
    assert result.to_dict()["degraded"] == result.degraded
    # asking for BM25 explicitly is not degraded
    assert memory.search("vacuum", mode="bm25").degraded is None


def test_scores_are_normalised_and_ordered(memory: Memory) -> None:
    for query in ("vacuum migration", "refresh_token", "diagram", "auth.py tests"):
        result = memory.search(query, limit=20)
        scores = [i.score for i in result.items]
        assert scores, query
        assert all(0.0 <= s <= 1.0 for s in scores), scores
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == pytest.approx(1.0)


def test_code_identifier_beats_its_part(memory: Memory) -> None:
    hits = bm25_search(memory.store, "refresh_token", SearchFilters(kinds=("event",)), limit=10)
    texts = {memory.store.get_event(h.item_id).text: h.score for h in hits}
    exact = texts["The refresh_token expires too early in src/app/auth.py"]
    part_only = texts["I will refresh the page and check the cookie settings"]
    camel = texts["refreshToken handling in the JS client looks fine"]
    # decision: refresh_token finds refreshToken (shared separator-free form), below the exact
    # spelling and above a text holding only "refresh"
    assert exact > camel > part_only


def test_dotted_name_finds_a_path(memory: Memory) -> None:
    result = memory.search("auth.py", kinds=["event"], mode="bm25")
    texts = _event_texts(result, memory)
    assert texts[0] == "The refresh_token expires too early in src/app/auth.py"
    assert "pytest tests/test_auth.py passed 12 tests" in texts


def test_project_filter(memory: Memory) -> None:
    both = memory.search("vacuum", limit=50)
    assert {i.project for i in both.items} == {"alpha", "beta"}
    beta = memory.search("vacuum", project="beta", limit=50)
    assert beta.items and {i.project for i in beta.items} == {"beta"}
    several = memory.search("vacuum", projects=["beta", "alpha"], limit=50)
    assert {i.id for i in several.items} == {i.id for i in both.items}


def test_kind_and_level_filters(memory: Memory) -> None:
    grips = memory.search("vacuum", kinds=["grip"], limit=50)
    assert grips.items and {i.kind for i in grips.items} == {"grip"}
    days = memory.search("vacuum", level="day", limit=50)
    assert days.items and all(i.kind == "node" and i.id.startswith("toc:day:") for i in days.items)
    mixed = memory.search("vacuum", level="segment", kinds=["node", "event"], limit=50)
    nodes = [i for i in mixed.items if i.kind == "node"]
    assert nodes and all(i.id.startswith("toc:segment:") for i in nodes)
    assert any(i.kind == "event" for i in mixed.items)
    with pytest.raises(QueryError):
        memory.search("vacuum", kinds=["nope"])
    with pytest.raises(QueryError):
        memory.search("vacuum", level="decade")


def test_time_filters(memory: Memory) -> None:
    since = memory.search("vacuum", since_ms=BASE + 2 * DAY, limit=50)
    assert since.items
    assert all(i.end_ms >= BASE + 2 * DAY for i in since.items)
    assert {i.project for i in since.items if i.kind == "event"} == {"beta"}
    until = memory.search("vacuum", until_ms=BASE + 2 * DAY, kinds=["event", "grip"], limit=50)
    assert until.items and all(i.start_ms < BASE + 2 * DAY for i in until.items)
    assert {i.project for i in until.items} == {"alpha"}
    with pytest.raises(QueryError):
        memory.search("vacuum", since_ms=BASE + DAY, until_ms=BASE)


def test_session_filter(memory: Memory) -> None:
    result = memory.search("vacuum migration index", session_id="s2", limit=50)
    assert {i.kind for i in result.items} >= {"event", "grip"}
    for item in result.items:
        assert item.kind != "bookmark"
        if item.kind == "node":
            assert item.id.startswith("toc:segment:")
        for ev in memory.store.get_events([e.event_id for e in item.events] + list(item.cites)):
            assert ev.session_id == "s2"


def test_role_filter(memory: Memory) -> None:
    result = memory.search("vacuum diagram refresh", role="assistant", limit=50)
    assert result.items
    assert all(i.kind == "event" and i.events[0].role == "assistant" for i in result.items)
    with pytest.raises(QueryError):
        memory.search("x", role="robot")


@pytest.mark.parametrize("depth", ["L0", "L1", "L2"])
def test_citations_resolve(memory: Memory, depth: str) -> None:
    for query in ("vacuum", "refresh_token auth", "diagram mermaid"):
        result = memory.search(query, depth=depth, limit=30)
        assert result.items
        for item in result.items:
            ids = [e.event_id for e in item.events] + list(item.cites)
            assert ids, item
            assert len(memory.store.get_events(ids)) == len(set(ids))
            assert not set(item.cites) & {e.event_id for e in item.events}


def test_nothing_searchable_gives_nothing(memory: Memory) -> None:
    for query in ("", "   ", "\n\t", "!!! ??? ***", "( ) - ^ :"):
        result = memory.search(query)
        assert result.items == () and result.tokens == 0


def test_limit(memory: Memory) -> None:
    assert len(memory.search("vacuum", limit=2).items) == 2
    assert memory.search("vacuum", limit=0).items == ()


@BOTH_BACKENDS
def test_rebuild_fts_keeps_results(location: Path | str) -> None:
    """``rebuild --fts`` (the facade and the CLI) re-indexes on either store, results unchanged."""
    mem = build_memory(location)
    try:
        before = [(i.kind, i.id) for i in mem.search("refresh_token auth.py", limit=20).items]
        counts = mem.rebuild_fts()
        assert counts["events"] == 8 and counts["docs"] > 0
        after = [(i.kind, i.id) for i in mem.search("refresh_token auth.py", limit=20).items]
        assert after == before
        assert not [p for p in mem.verify().problems if "fts" in p]
        out = CliRunner().invoke(app, ["--db", str(location), "rebuild", "--fts", "--json"])
        assert out.exit_code == 0, out.output
        assert [(i.kind, i.id) for i in mem.search("refresh_token auth.py", limit=20).items] == (
            before
        )
    finally:
        mem.close()


def test_bounded_or_pass_sees_a_term_turn_common(tmp_path: Path) -> None:
    """The OR pass leaves out terms matching more than scan_cap rows; which terms those are is
    remembered per store only until the store changes."""
    from zoneinfo import ZoneInfo

    from memtoc.clock import ManualClock
    from memtoc.store.sqlite import SqliteStore

    clock = ManualClock(BASE + 10 * DAY)
    mem = Memory(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock=clock, tz=ZoneInfo("UTC"))

    def add(texts: list[str], start: int) -> None:
        records = [
            {"session_id": f"s{start}", "timestamp": BASE + (start + i) * 60_000,
             "role": "user", "text": t}
            for i, t in enumerate(texts)
        ]  # fmt: skip
        assert mem.ingest_records(records, project="p").ingested == len(texts)
        mem.process()

    def found(cap: int) -> set[str]:
        f = SearchFilters(kinds=("event",))
        hits = bm25_search(mem.store, "kestrel osprey", f, limit=10, scan_cap=cap)
        return {mem.store.get_event(h.item_id).text for h in hits}

    try:
        add(["a kestrel hovered", "the kestrel again", "kestrel at dusk", "one osprey"], 0)
        assert found(4) == {
            "a kestrel hovered",
            "the kestrel again",
            "kestrel at dusk",
            "one osprey",
        }
        add(["kestrel number four", "kestrel number five"], 100)
        # kestrel now matches 5 rows > 4: the OR pass keeps only the rare term
        assert found(4) == {"one osprey"}
        assert len(found(10)) == 6  # under a larger cap every match is ranked
    finally:
        mem.close()


def test_or_pass_finds_an_old_row_beyond_the_scan_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the OR expression matches more rows than the scan cap, the rows holding its rarest
    terms are ranked over the whole index — an old one is found although the newest ``scan_cap``
    matches do not hold it (on a seven-month coding history the newest 5,000 matches of a
    question's words were its last weeks, and older answers were never ranked)."""
    from zoneinfo import ZoneInfo

    from memtoc.clock import ManualClock
    from memtoc.store.sqlite import SqliteStore
    from memtoc.store.sqlite import search as teleport  # the FTS5 ranking lives in the store

    clock = ManualClock(BASE + 10 * DAY)
    mem = Memory(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock=clock, tz=ZoneInfo("UTC"))
    old = "the heron and the egret nest upstream"
    texts = [old] + [
        f"{bird} fishing at pool {i}" for i in range(20) for bird in ("heron", "egret")
    ]
    records = [
        {"session_id": "s", "timestamp": BASE + i * 60_000, "role": "user", "text": t}
        for i, t in enumerate(texts)
    ]
    mem.ingest_records(records, project="p")
    mem.process()
    f = SearchFilters(kinds=("event",))

    def search() -> list[tuple[str, float]]:
        hits = bm25_search(mem.store, "heron egret bittern", f, limit=10, scan_cap=30)
        return [(mem.store.get_event(h.item_id).text, h.score) for h in hits]

    try:
        # each term matches 21 rows (rare under the cap of 30), together 41: the newest 30
        # matches do not hold the old row, the rows of the rarest terms (bittern, heron) do
        monkeypatch.setattr(teleport, "MAX_PAIR_TERMS", 1)
        found = search()
        assert found[0][0] == old
        # two of three terms, above the one-term rows, and like every row without all the terms,
        # at most OR_ONLY_FACTOR
        assert found[0][1] == teleport.OR_ONLY_FACTOR > found[1][1]
        assert len(found) == 10
    finally:
        mem.close()


def test_or_pass_over_the_cap_ranks_as_an_uncapped_one(tmp_path: Path) -> None:
    """The bounded OR pass scores the rows it ranks over every term: its best rows and their
    scores are those of ranking every match, when the best rows hold a rare term or are new."""
    from zoneinfo import ZoneInfo

    from memtoc.clock import ManualClock
    from memtoc.store.sqlite import SqliteStore

    clock = ManualClock(BASE + 10 * DAY)
    mem = Memory(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock=clock, tz=ZoneInfo("UTC"))
    texts = ["a bittern and a heron by the reeds", "one bittern alone in the reeds"]
    texts += [f"heron fishing at pool {i}" for i in range(40)]
    texts += [f"egret resting on post {i}" for i in range(40)]
    texts += [f"heron and egret together at dawn {i}" for i in range(5)]
    texts += [f"sparrow number {i}" for i in range(200)]  # so the birds' IDFs are not nil
    records = [
        {"session_id": "s", "timestamp": BASE + i * 60_000, "role": "user", "text": t}
        for i, t in enumerate(texts)
    ]
    mem.ingest_records(records, project="p")
    mem.process()

    def search(cap: int, projects: tuple[str, ...] | None) -> list[tuple[str, float]]:
        f = SearchFilters(projects=projects, kinds=("event",))
        hits = bm25_search(mem.store, "heron egret bittern", f, limit=12, scan_cap=cap)
        return [(h.item_id, round(h.raw, 9)) for h in hits]

    try:
        # bittern 2 rows, egret 45, heron 46: together 93 matches over a cap of 50
        for projects in (None, ("p",)):
            capped, every = search(50, projects), search(10**9, projects)
            assert [r for _, r in capped] == [r for _, r in every]
            last = capped[-1][1]  # rows tied with the last may differ
            assert {i for i, r in capped if r > last} == {i for i, r in every if r > last}
            texts_found = {mem.store.get_event(i).text for i, _ in capped}
            assert texts[0] in texts_found and texts[1] in texts_found
    finally:
        mem.close()


def test_pairs_join_different_words_only() -> None:
    from memtoc.store.sqlite.search import _pairs
    from memtoc.text.fts_text import build_match

    match = build_match("refresh_token sockets socket limit")
    assert match is not None
    pairs = _pairs(list(match.terms), match)
    assert pairs is not None
    clauses = set(pairs.split(" OR "))
    assert {'("refresh" AND "limit")', '("sockets" AND "limit")'} <= clauses
    # a code token's own forms, and two forms of one word, never make a pair
    forms = ('"refresh_token"', '"refreshtoken"', '"refresh"', '"token"')
    assert not [c for c in clauses if sum(f in c for f in forms) == 2]
    assert not [c for c in clauses if '"sockets"' in c and '"socket"' in c]
    one = build_match("socket sockets")
    assert one is not None and _pairs(list(one.terms), one) is None


def test_two_term_pass_with_a_tiny_candidate_cap_still_falls_back_to_or(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from memtoc.clock import ManualClock
    from memtoc.store.sqlite import SqliteStore

    clock = ManualClock(BASE + 10 * DAY)
    mem = Memory(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock=clock, tz=ZoneInfo("UTC"))
    texts = [f"{bird} fishing at pool {i}" for i in range(20) for bird in ("heron", "egret")]
    records = [
        {"session_id": "s", "timestamp": BASE + i * 60_000, "role": "user", "text": t}
        for i, t in enumerate(texts)
    ]
    mem.ingest_records(records, project="p")
    mem.process()
    try:
        f = SearchFilters(kinds=("event",))
        # no row holds two of the terms: with one candidate wanted, the OR pass still answers
        hits = bm25_search(mem.store, "heron egret", f, limit=1, candidates=1, scan_cap=30)
        assert len(hits) == 1
    finally:
        mem.close()


def test_a_selective_filter_still_finds_old_rows_of_the_commoner_terms(tmp_path: Path) -> None:
    """Over the scan cap, rows holding only the commoner terms are ranked among the newest
    matches; when a filter (an old project) leaves fewer rows than wanted, every match is ranked,
    so the filter's old rows are found."""
    from zoneinfo import ZoneInfo

    from memtoc.clock import ManualClock
    from memtoc.store.sqlite import SqliteStore

    clock = ManualClock(BASE + 10 * DAY)
    mem = Memory(SqliteStore(tmp_path / "memtoc.db", clock=clock), clock=clock, tz=ZoneInfo("UTC"))

    def add(project: str, texts: list[str], start: int) -> None:
        records = [
            {"session_id": f"{project}-s", "timestamp": BASE + (start + i) * 60_000,
             "role": "user", "text": t}
            for i, t in enumerate(texts)
        ]  # fmt: skip
        assert mem.ingest_records(records, project=project).ingested == len(texts)

    try:
        old = [f"a heron on the old pond {i}" for i in range(3)]
        add("old", old, 0)
        add("new", [f"heron fishing at pool {i}" for i in range(25)], 100)
        add("new", [f"egret resting on post {i}" for i in range(15)], 200)
        add("new", [f"sparrow number {i}" for i in range(100)], 300)
        mem.process()
        # heron 28 rows, egret 15, bittern none: together 43 over a cap of 30; the rarest rows
        # (egret) are all in the new project, the old project's rows hold heron only
        f = SearchFilters(projects=("old",), kinds=("event",))
        hits = bm25_search(mem.store, "heron egret bittern", f, limit=10, scan_cap=30)
        assert {mem.store.get_event(h.item_id).text for h in hits} == set(old)
    finally:
        mem.close()
