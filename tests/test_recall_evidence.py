"""Recall's extra evidence: query expansion (``recall_expand``) and time in the turns
(``recall_time``), with the real static model and real stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.model import Event
from memtoc.retrieval import recall_rank
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall import rank_only
from memtoc.retrieval.recall_expand import content_words, expansion_terms
from memtoc.retrieval.recall_rank import RankConfig
from memtoc.retrieval.recall_subject import substance
from memtoc.retrieval.recall_time import asks_when, mentioned_ranges, mentions_window
from memtoc.retrieval.teleport import DEFAULT_SCAN_CAP, Hit
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder, load_embedder
from search_support import file_records, rank_scope, require_model

UTC_TZ = ZoneInfo("UTC")


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _event(text: str, at: str, event_id: str = "01HX0000000000000000000001") -> Event:
    return Event(
        event_id=event_id,
        session_id="s",
        project="p",
        agent="a",
        ts_ms=_ms(at),
        event_type="user_message",
        role="user",
        text=text,
        metadata={},
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Caroline go to the support group?", True),
        ("How long has Nate had his turtles?", True),
        ("Which year did Jolene start yoga?", True),
        ("Since when is the cache flaky?", True),
        ("How many weeks did the migration take?", True),
        ("What did Caroline research?", False),
        ("Where did we put the when-clause?", False),
        ("How many turtles does Nate have?", False),
    ],
)
def test_asks_when(question: str, expected: bool) -> None:
    assert asks_when(question) is expected


@pytest.mark.parametrize(
    ("text", "told", "window"),
    [
        ("Yesterday I went bowling and got 2 strikes", "2022-03-17T15:00", ("2022-03-16", "2022-03-17")),
        ("I read Avalanche two weeks ago", "2023-01-20T10:00", ("2023-01-03", "2023-01-10")),
        ("we shipped the parser last month", "2024-02-10T09:00", ("2024-01-01", "2024-02-01")),
        ("back in May 2023 we moved to postgres", "2024-02-10T09:00", ("2023-05-01", "2023-06-01")),
    ],
)  # fmt: skip
def test_mentioned_ranges_resolve_at_the_events_time(
    text: str, told: str, window: tuple[str, str]
) -> None:
    event = _event(text, told)
    ranges = mentioned_ranges(event, UTC_TZ)
    assert ranges == ((_ms(window[0] + "T00:00"), _ms(window[1] + "T00:00")),)
    assert mentions_window(event, ranges[0], UTC_TZ)
    # the turn's own timestamp lies outside the window it names
    assert not ranges[0][0] <= event.ts_ms < ranges[0][1]


def test_a_turn_without_time_words_names_no_window() -> None:
    event = _event("the deploy of the queue worker went fine", "2024-01-15T10:00")
    assert mentioned_ranges(event, UTC_TZ) == ()


def test_content_words_leave_out_names_stopwords_and_identifiers() -> None:
    words = content_words("What martial arts has John done with refresh_token and the API?")
    assert words == ["martial", "arts"]


def test_expansion_finds_words_the_question_does_not_use() -> None:
    embedder = load_embedder("static", str(require_model()))
    terms = expansion_terms("What martial arts has John done?", embedder)
    assert {"karate", "taekwondo", "judo"} & set(terms), terms
    assert not {"martial", "arts", "john"} & set(terms)  # not the question's own words
    assert expansion_terms("What has John done?", embedder) == []  # nothing to expand
    assert expansion_terms("What martial arts?", HashEmbedder()) == []  # no vocabulary


def _memory(path: Path, texts: list[tuple[str, str]], kind: str, model: str | None) -> Memory:
    clock = ManualClock(_ms("2024-03-01T12:00"))
    store = SqliteStore(path, clock=clock)
    memory = Memory(
        store, clock=clock, tz=UTC_TZ, semantic=SemanticIndex(store, kind=kind, model=model)
    )
    records: list[dict[str, Any]] = [
        {"session_id": f"s{n}", "timestamp": _ms(at), "role": "user", "text": text}
        for n, (at, text) in enumerate(texts)
    ]
    return file_records(memory, records)


FILLER = [
    "John: the standup ran long again, we talked about the sprint board",
    "John: lunch was tacos with the team, then a long design review",
    "John: my commute was slow because of the rain and traffic",
    "John: I finally cleaned up the garage over the weekend",
    "John: we watched a documentary about deep sea creatures",
    "John: the new laptop arrived and setting it up took all evening",
]


def test_expansion_brings_in_a_turn_sharing_no_word_with_the_question(tmp_path: Path) -> None:
    model = str(require_model())
    texts = [(f"2024-01-{10 + n:02d}T10:00", t) for n, t in enumerate(FILLER * 3)]
    texts.append(("2024-02-02T10:00", "John: off to my taekwondo class tonight, wish me luck"))
    memory = _memory(tmp_path / "m.db", texts, "static", model)
    try:
        store = memory.store
        question = "Which martial arts has John practised?"
        kwargs = rank_scope(memory, "p")
        # expansion alone: the substance prior (test_recall_subject) would rank this short turn
        # (three content words) below the longer filler the name's vector brings
        on = RankConfig(substance_words=0)
        ranked = rank_only(store, question, config=on, **kwargs)
        assert "expand" in ranked.stages
        first = ranked.ranked_events()[0].text
        assert "taekwondo" in first, [e.text for e in ranked.ranked_events()[:5]]
        without = rank_only(store, question, config=replace(on, w_expand=0), **kwargs)
        assert "expand" not in without.stages
        order = [e.text for e in without.ranked_events()]
        assert order.index(first) > 0, order[:5]  # the whole-turn vector alone ranks it lower
    finally:
        memory.close()


def test_the_expansion_search_ranks_within_its_own_scan_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expansion's many alternative words are searched with ``expand_scan_cap`` (smaller
    than search's): with a cap of one row, "taekwondo" (two rows) is a common word, left out
    of the expansion's OR pass for the rarer expansion words."""
    model = str(require_model())
    texts = [(f"2024-01-{10 + n:02d}T10:00", t) for n, t in enumerate(FILLER)]
    old = "John: my first taekwondo belt test went well"
    new = "John: off to my taekwondo class tonight, wish me luck"
    texts += [("2024-02-01T10:00", old), ("2024-02-02T10:00", new)]
    memory = _memory(tmp_path / "m.db", texts, "static", model)
    calls: list[tuple[str, int]] = []
    real = recall_rank.bm25_search

    def spy(*args: Any, **kwargs: Any) -> list[Hit]:
        hits = real(*args, **kwargs)
        calls.append((args[1], kwargs.get("scan_cap", DEFAULT_SCAN_CAP)))
        expanded.extend(h.item_id for h in hits if args[1] != question)
        return hits

    monkeypatch.setattr(recall_rank, "bm25_search", spy)
    question = "Which martial arts has John practised?"
    expanded: list[str] = []
    try:
        store = memory.store
        kwargs = rank_scope(memory, "p")
        ids = {e.text: e.event_id for e in store.scan_events()}
        rank_only(store, question, config=RankConfig(), **kwargs)
        expansion = [cap for q, cap in calls if q != question and "taekwondo" in q.split()]
        assert expansion == [RankConfig().expand_scan_cap]
        assert {ids[old], ids[new]} <= set(expanded)
        calls.clear()
        expanded.clear()
        rank_only(store, question, config=RankConfig(expand_scan_cap=1), **kwargs)
        assert ids[new] not in expanded and ids[old] not in expanded
    finally:
        memory.close()


def test_a_turn_naming_the_questions_day_is_preferred(tmp_path: Path) -> None:
    told_later = "James: yesterday I went bowling with friends and got 2 strikes"
    texts = [
        ("2022-03-15T18:00", "James: bowling on TV, not my thing"),
        ("2022-03-16T12:00", "Maria: quiet day, I read a book at home"),
        ("2022-03-17T09:00", told_later),
        ("2022-03-17T10:00", "James: bowling league sign-ups open soon"),
        ("2022-03-17T11:00", "James: the bowling alley downtown has new lanes"),
    ]
    memory = _memory(tmp_path / "m.db", texts, "none", None)
    try:
        store = memory.store
        question = "Where did James go bowling on March 16, 2022?"
        at = _ms("2022-04-01T12:00")
        ranked = rank_only(store, question, projects=("p",), at_ms=at, tz=UTC_TZ)
        assert "time" in ranked.stages
        first = ranked.ranked_events()[0]
        assert first.text == told_later, [e.text for e in ranked.ranked_events()]
        off = RankConfig(w_mention=0)
        plain = rank_only(store, question, projects=("p",), at_ms=at, tz=UTC_TZ, config=off)
        gain = ranked.scores[first.event_id] - plain.scores[first.event_id]
        cfg = RankConfig()  # the mention bonus, scaled by the turn's substance prior
        prior = substance(first, cfg.substance_words, cfg.substance_power)
        assert gain == pytest.approx(cfg.w_mention * prior)
        others = [i for i in plain.scores if i != first.event_id]
        assert all(ranked.scores[i] == pytest.approx(plain.scores[i]) for i in others)
    finally:
        memory.close()
