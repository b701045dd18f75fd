"""The evaluation metrics against hand-computed cases, and the BM25 query builder against FTS5."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memtoc.eval.baselines import fts_query, recency_weight, rrf
from memtoc.eval.metrics import (
    budget_cut,
    ndcg_at_k,
    percentile,
    ranked_events,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    sessions_of,
)
from memtoc.eval.modes import RetrievedItem
from memtoc.eval.scoring import tokens_to_cover


class WordCounter:
    """Counts whitespace-separated words: makes budget cases computable by hand."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def test_recall_at_k_ignores_duplicate_ranks_and_gold() -> None:
    ranked = ["a", "a", "b", "c", "d"]
    gold = ["b", "d", "d"]
    assert recall_at_k(ranked, gold, 1) == 0.0
    assert recall_at_k(ranked, gold, 2) == 0.5  # distinct top 2: a, b
    assert recall_at_k(ranked, gold, 3) == 0.5
    assert recall_at_k(ranked, gold, 4) == 1.0  # a, b, c, d
    assert recall_at_k(ranked, [], 4) == 0.0


def test_recall_any_all_and_ndcg() -> None:
    ranked = ["x", "g1", "y", "g2", "g1"]
    gold = {"g1", "g2"}
    assert recall_any_at_k(ranked, gold, 1) == 0.0
    assert recall_any_at_k(ranked, gold, 2) == 1.0
    assert recall_all_at_k(ranked, gold, 3) == 0.0
    assert recall_all_at_k(ranked, gold, 4) == 1.0
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert math.isclose(ndcg_at_k(ranked, gold, 4), dcg / ideal)
    assert math.isclose(ndcg_at_k(ranked, gold, 2), (1 / math.log2(3)) / ideal)
    assert ndcg_at_k(["g1", "g2"], gold, 10) == 1.0
    # One gold id: the ideal DCG is 1 whatever k.
    assert math.isclose(ndcg_at_k(["x", "g2"], {"g2"}, 5), 1 / math.log2(3))


def test_ranked_events_and_sessions_dedupe_in_order() -> None:
    items = [
        RetrievedItem("a b", ("e1", "e2"), 2),
        RetrievedItem("b", ("e2",), 1),
        RetrievedItem("c", ("e3",), 1),
    ]
    assert ranked_events(items) == ["e1", "e2", "e3"]
    assert sessions_of(["e3", "e1", "e2", "zz"], {"e1": "s1", "e2": "s1", "e3": "s2"}) == [
        "s2",
        "s1",
    ]


def _items() -> tuple[list[RetrievedItem], dict[str, str]]:
    text = {"e1": "a1 a2 a3", "e2": "b1 b2", "e3": "c1 c2 c3"}
    items = [
        RetrievedItem("a1 a2 a3", ("e1",), 3),
        RetrievedItem("b1 b2\nc1 c2 c3", ("e2", "e3"), 5),
    ]
    return items, text


def test_budget_cut_whole_and_partial_items() -> None:
    items, text = _items()
    counter = WordCounter()
    whole = budget_cut(items, 8, counter, text)
    assert whole.event_ids == ("e1", "e2", "e3") and whole.tokens == 8
    # 3 tokens left for the second item: "b1 b2" (2) fits, "... c1 c2 c3" (5) does not.
    part = budget_cut(items, 6, counter, text)
    assert part.event_ids == ("e1", "e2") and part.tokens == 5
    # The cut item ends the context: nothing after it is read even if it would fit.
    tail = [*items, RetrievedItem("d1", ("e4",), 1)]
    assert budget_cut(tail, 6, counter, {**text, "e4": "d1"}).event_ids == ("e1", "e2")
    # The first item does not fit at all: no event whose full text fits, no tokens.
    none = budget_cut(items, 2, counter, text)
    assert none.event_ids == () and none.tokens == 0


def test_budget_cut_counts_only_events_whose_text_is_in_the_item() -> None:
    counter = WordCounter()
    items = [RetrievedItem("summary of b", ("e1", "e2"), 3)]
    cut = budget_cut(items, 10, counter, {"e1": "a1 a2", "e2": "b"})
    assert cut.event_ids == ("e2",)  # e1's text is not in the context: it does not count


def test_tokens_to_cover_and_percentile() -> None:
    items, _ = _items()
    assert tokens_to_cover(items, 1) == 3
    assert tokens_to_cover(items, 2) == 8
    assert tokens_to_cover(items, 10) == 8
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    assert percentile([], 50) == 0.0


def test_rrf_and_recency_weight() -> None:
    # 1 is first in one list and third in the other; 2 is second in both.
    fused = rrf([[1, 2, 3], [4, 2, 1]])
    score = {1: 1 / 61 + 1 / 63, 2: 2 / 62, 3: 1 / 63, 4: 1 / 61}
    assert fused == sorted(score, key=lambda i: -score[i])
    day = 86_400_000
    w = recency_weight(np.array([10 * day, 10 * day - 30 * day, 11 * day]), 10 * day)
    assert np.allclose(w, [1.0, 0.75, 1.0])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_valid_bm25_query(text: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    db.execute("INSERT INTO t(text) VALUES ('the quick brown fox'), ('AND OR NOT NEAR')")
    query = fts_query(text)
    if query is None:
        assert not any(c.isalnum() or c == "_" for c in text)
        return
    db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (query,)).fetchall()


def test_fts_query_matches_operator_words_literally() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    db.execute("INSERT INTO t(text) VALUES ('the quick brown fox'), ('AND OR NOT NEAR')")
    query = fts_query('NOT "near" fox*')
    assert query == '"not" OR "near" OR "fox"'
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (query,)).fetchall()
    assert rows == [(1,), (2,)]
