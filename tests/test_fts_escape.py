"""Any user text is a valid query: FTS5 syntax is escaped, nothing raises, no terms → no results.
Plus the index-side text: identifiers are kept whole and split, and the original is recoverable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtoc.memory import Memory
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.text.fts_text import (
    EXTRAS_MARK,
    build_match,
    identifier_forms,
    original_text,
    search_text,
)
from search_support import build_memory

FTS_SYNTAX = ["AND", "OR", "NOT", "NEAR", "NEAR(", "*", "^", ":", "(", ")", "-", '"', "'", "+", "{", "}"]  # fmt: skip
queries = st.one_of(
    st.text(max_size=60),
    st.lists(
        st.one_of(st.sampled_from(FTS_SYNTAX), st.text(min_size=1, max_size=8)), max_size=10
    ).map(" ".join),
    st.lists(st.sampled_from([*FTS_SYNTAX, "vacuum", "text:", "refresh_token", "a.b"])).map(
        "".join
    ),
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = build_memory(tmp_path_factory.mktemp("escape") / "memtoc.db")
    yield mem
    mem.close()


@settings(max_examples=300, deadline=None)
@given(query=queries)
def test_any_text_is_a_valid_query(memory: Memory, query: str) -> None:
    hits = bm25_search(memory.store, query, SearchFilters(), limit=5)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    if build_match(query) is None:
        assert hits == []
        assert memory.search(query).items == ()


@pytest.mark.parametrize(
    "query",
    [
        'vacuum" ',
        '"vacuum',
        "vacuum AND",
        "NOT vacuum",
        "vacuum NEAR(",
        "text:vacuum",
        "vac* vacuum",
        "^vacuum",
        "(vacuum",
        "-vacuum",
        "vacuum OR OR",
    ],
)
def test_operators_are_plain_text(memory: Memory, query: str) -> None:
    """FTS operators and quotes in a query neither raise nor change its meaning: the word is
    still found."""
    hits = bm25_search(memory.store, query, SearchFilters(kinds=("event",)), limit=5)
    assert hits, query
    assert "vacuum" in memory.store.get_event(hits[0].item_id).text.lower()


@pytest.mark.parametrize("query", ["", " ", "\t\n ", "!!!", "*", '""', "( )", "-", "^ :"])
def test_no_terms_no_match(query: str) -> None:
    assert build_match(query) is None


def test_only_stopwords_still_search() -> None:
    match = build_match("what is the")
    assert match is not None and set(match.terms) == {"what", "is", "the"}
    content = build_match("what is the vacuum")
    assert content is not None and content.terms == ("vacuum",)


def test_identifier_forms() -> None:
    assert identifier_forms("refresh_token")[:2] == ["refresh_token", "refreshtoken"]
    assert identifier_forms("refreshToken") == ["refreshtoken", "refresh", "token"]
    forms = identifier_forms("src/app/auth.py")
    assert {"src_app_auth_py", "auth_py", "auth", "py", "src", "app"} <= set(forms)
    assert identifier_forms("os.path.join()")[0] == "os_path_join"


def test_search_text_keeps_original_and_adds_forms() -> None:
    text = "fix src/app/auth.py and refreshToken now"
    indexed = search_text(text)
    assert original_text(indexed) == text
    extras = indexed.split(EXTRAS_MARK, 1)[1].split()
    assert {"auth_py", "refreshtoken", "refresh", "token", "src_app_auth_py"} <= set(extras)
    assert search_text("plain words only") == "plain words only"


@given(st.text(max_size=200))
def test_original_text_round_trip(text: str) -> None:
    assert original_text(search_text(text)) == text.replace(EXTRAS_MARK, " ")


def test_store_is_unharmed_by_hostile_queries(tmp_path: Path) -> None:
    """A query cannot write: FTS special-column commands inside a query stay text."""
    mem = build_memory(tmp_path / "memtoc.db")
    try:
        before = mem.store._query("SELECT COUNT(*) FROM events_fts")[0][0]
        for query in ["'delete-all'", "events_fts) VALUES ('delete-all')--", "rank:'x'"]:
            bm25_search(mem.store, query, SearchFilters(), limit=5)
        assert mem.store._query("SELECT COUNT(*) FROM events_fts")[0][0] == before
        assert bm25_search(mem.store, "vacuum", SearchFilters(), limit=5)
    finally:
        mem.close()
