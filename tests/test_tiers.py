"""Tiers: each kind at L0, L1 and L2 — what text it carries, which events it includes or cites,
and that ``tokens`` is the one counter's count of that text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.model import Bookmark
from memtoc.retrieval.tiers import TierRenderer, grip_events
from search_support import BASE, build_memory


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = build_memory(tmp_path_factory.mktemp("tiers") / "memtoc.db")
    yield mem
    mem.close()


def _renderer(memory: Memory) -> TierRenderer:
    return TierRenderer(memory.store, memory.counter)


def test_search_defaults_to_l0_and_sums_tokens(memory: Memory) -> None:
    result = memory.search("vacuum migration", limit=10)
    assert result.depth == "L0" and {i.tier for i in result.items} == {"L0"}
    assert result.tokens == sum(i.tokens for i in result.items) > 0
    for item in result.items:
        assert item.tokens == memory.counter.count(item.text)
    data = result.to_dict()
    assert data["tokens"] == result.tokens
    for item in data["items"]:
        assert set(item) >= {"kind", "id", "tier", "text", "tokens", "start_time", "end_time"}
        assert set(item) >= {"events", "cites", "score"}
        for ev in item["events"]:
            assert set(ev) == {"event_id", "timestamp", "session_id", "role", "metadata"}


def test_deeper_tiers_cost_more(memory: Memory) -> None:
    tokens = {d: memory.search("vacuum migration", depth=d, limit=10).tokens for d in ("L0", "L2")}
    assert tokens["L2"] > tokens["L0"]


def test_event_tiers(memory: Memory) -> None:
    ev = next(iter(memory.store.scan_events(project="alpha", limit=1)))
    long_text = "word " * 2_000
    r = _renderer(memory)
    l0 = r.render("event", ev.project, ev.event_id, "L0", 0.5)
    l2 = r.render("event", ev.project, ev.event_id, "L2", 0.5)
    assert l2.text == ev.text and l0.events == l2.events == (ev,)
    assert l0.cites == () and l0.start_ms == ev.ts_ms and l0.score == 0.5
    assert l0.to_dict()["events"][0]["metadata"] == {"n": 1}
    big = memory.remember(long_text, project="gamma")
    head = r.render("event", "gamma", big.event_id, "L0", 1.0)
    mid = r.render("event", "gamma", big.event_id, "L1", 1.0)
    full = r.render("event", "gamma", big.event_id, "L2", 1.0)
    assert head.tokens <= 102 < mid.tokens <= 502 < full.tokens
    assert head.text.endswith("…") and full.text == long_text


def test_grip_tiers(memory: Memory) -> None:
    grip = memory.store._query("SELECT grip_id FROM grips WHERE session_id = 's1' LIMIT 1")[0][0]
    g = memory.store.get_grip(grip)
    rng = grip_events(memory.store, g)
    r = _renderer(memory)
    l0 = r.render("grip", g.project, grip, "L0", 1.0)
    l1 = r.render("grip", g.project, grip, "L1", 1.0)
    l2 = r.render("grip", g.project, grip, "L2", 1.0)
    assert l0.text == g.excerpt and l0.events == ()
    assert list(l0.cites) == [e.event_id for e in rng]
    assert l1.text.endswith(g.excerpt) and l1.text.startswith("* ")
    assert l2.events == tuple(rng) and l2.cites == ()
    assert all(e.text in l2.text for e in rng)


def test_node_tiers(memory: Memory) -> None:
    seg = memory.store.list_nodes("alpha", level="segment")[0]
    r = _renderer(memory)
    l0 = r.render("node", "alpha", seg.node_id, "L0", 1.0)
    l1 = r.render("node", "alpha", seg.node_id, "L1", 1.0)
    l2 = r.render("node", "alpha", seg.node_id, "L2", 1.0)
    rest = seg.abstract.removeprefix(seg.title).lstrip(" .:;—-")  # the title said once
    assert l0.text == f"{seg.title}\n{rest}"
    assert all(f"* {b.text}" in l1.text for b in seg.bullets)
    members = memory.store.segment_member_events("alpha", seg.node_id)
    assert l2.events == tuple(members) and l2.cites == ()
    assert l0.cites and set(l0.cites) <= {e.event_id for e in members}
    assert (l0.start_ms, l0.end_ms) == (seg.start_ms, seg.end_ms)
    day = memory.store.list_nodes("alpha", level="day")[0]
    day_l2 = r.render("node", "alpha", day.node_id, "L2", 1.0)
    assert day_l2.events, "a period node's L2 holds the events its grips cover"


def test_bookmark_tiers(memory: Memory) -> None:
    events = list(memory.store.scan_events(project="alpha", session_id="s2"))
    bm = Bookmark(
        "bm-1", "alpha", "Vacuum runs after migrations.", tuple(e.event_id for e in events),
        0.8, "conclusion", BASE, BASE,
    )  # fmt: skip
    memory.store.put_bookmark(bm)
    r = _renderer(memory)
    l0 = r.render("bookmark", "alpha", "bm-1", "L0", 1.0)
    l1 = r.render("bookmark", "alpha", "bm-1", "L1", 1.0)
    l2 = r.render("bookmark", "alpha", "bm-1", "L2", 1.0)
    assert l0.text == bm.content and l0.cites == bm.event_ids and l0.events == ()
    assert "conclusion" in l1.text and bm.content in l1.text
    assert [e.event_id for e in l2.events] == list(bm.event_ids) and l2.cites == ()


def test_unknown_tier_or_kind(memory: Memory) -> None:
    with pytest.raises(QueryError):
        memory.search("vacuum", depth="L3")
    with pytest.raises(QueryError):
        _renderer(memory).render("thing", "alpha", "x", "L0", 1.0)


def test_render_many_equals_render_item_by_item_and_is_lazy(memory: Memory) -> None:
    from memtoc.retrieval.tiers import item_spans

    found = memory.search("vacuum migration refresh_token", limit=20, mode="bm25").items
    keys = [((i.kind, i.project, i.id), i.score) for i in found]
    assert {k[0][0] for k in keys} >= {"event", "node"}, "a mix of kinds to render"
    r = _renderer(memory)
    for tier in ("L0", "L1", "L2"):
        one_by_one = [r.render(*key, tier, score) for key, score in keys]
        assert list(r.render_many(keys, tier, batch=3)) == one_by_one
        spans = item_spans(memory.store, [key for key, _ in keys])
        assert [spans[key] for key, _ in keys] == [(i.start_ms, i.end_ms) for i in one_by_one]
    lazy = r.render_many(keys, "L2", batch=2)
    first = next(lazy)
    assert (first.kind, first.project, first.id) == keys[0][0]
