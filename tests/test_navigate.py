"""Navigation over a TOC built by the real pipeline: roots, node views, expand, timeline."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError, QueryError
from memtoc.ids import derived_ulid
from memtoc.model import Event
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.retrieval.navigate import expand, node_view, timeline, toc_roots
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import TokenCounter, default_counter
from pipeline_support import make_events

T0 = int(datetime(2024, 1, 8, 9, 0, tzinfo=UTC).timestamp() * 1000)
MIN = 60_000


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return default_counter()


@pytest.fixture
def built(tmp_path: Path, counter: TokenCounter) -> SqliteStore:
    clock = ManualClock(int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000))
    store = SqliteStore(tmp_path / "n.db", durability="off", clock=clock)
    events = make_events(seed=4, sessions=10, per_session=(12, 30), start_ms=T0, projects=("p",))
    # Two interleaved sessions at the same time: expand must never cross into the other one.
    for i in range(12):
        for sid in ("left", "right"):
            t = T0 - 86_400_000 + i * MIN + (sid == "right") * 1_000
            text = f"{sid} step {i}: migrate the {sid} database schema"
            events.append(
                Event(derived_ulid(t, f"{sid}{i}"), sid, "p", "a", t, "user_message", "user", text)
            )
    store.append_events(events)
    proc = Processor(
        store, ExtractiveSummarizer(counter), counter, PipelineConfig(), clock, ZoneInfo("UTC")
    )
    proc.run()
    proc.rollup(force=True)
    return store


def test_roots_are_years_and_node_views_list_children(
    built: SqliteStore, counter: TokenCounter
) -> None:
    roots = toc_roots(built, "p")
    assert [r.node_id for r in roots] == ["toc:year:2024"]
    assert toc_roots(built, "nobody") == []
    view = node_view(built, counter, "toc:year:2024", "p")
    assert [c.node_id for c in view.children] == list(roots[0].child_node_ids)
    assert all(c.level == "month" and c.title for c in view.children)
    d = view.to_dict()
    assert d["tokens"] == view.tokens == counter.count(view.render()) > 0
    assert "overview" not in d["node"]  # L0 by default
    l1 = node_view(built, counter, "toc:year:2024", tier="L1")
    assert "overview" in l1.to_dict()["node"] and l1.tokens > view.tokens
    # Drill down to a segment: the view of a leaf has no children.
    node = roots[0]
    while node.child_node_ids:
        node = built.find_node(node.child_node_ids[0], "p")
    leaf = node_view(built, counter, node.node_id)
    assert leaf.node.level == "segment" and leaf.children == ()
    assert any(c.title in view.render() for c in view.children)
    with pytest.raises(NotFoundError):
        node_view(built, counter, "toc:day:1999-01-01", "p")
    with pytest.raises(QueryError):
        node_view(built, counter, "toc:year:2024", "p", tier="L2")


def test_expand_stays_in_the_session_and_honours_before_after_and_window(
    built: SqliteStore, counter: TokenCounter
) -> None:
    (seg,) = [n for n in built.list_nodes("p", level="segment") if n.session_id == "left"]
    gid = seg.bullets[0].grip_ids[0]
    grip = built.get_grip(gid)
    view = expand(built, counter, gid, before=2, after=2, window_ms=None)
    assert {e.session_id for e in view.events} == {"left"}
    core = view.events[view.range_start : view.range_end + 1]
    assert core[0].event_id == grip.event_id_start and core[-1].event_id == grip.event_id_end
    assert view.range_start <= 2 and len(view.events) - view.range_end - 1 <= 2
    all_left = [e.event_id for e in built.scan_events(session_id="left")]
    ids = [e.event_id for e in view.events]
    assert ids == all_left[all_left.index(ids[0]) : all_left.index(ids[0]) + len(ids)]
    assert view.tokens == sum(counter.count(e.text) for e in view.events)
    d = view.to_dict()
    assert d["tokens"] == view.tokens and d["grip"]["grip_id"] == gid
    assert sum(e["in_grip"] for e in d["events"]) == len(core)
    # Zero context gives just the range; a tiny window drops neighbours a minute away.
    bare = expand(built, counter, gid, before=0, after=0)
    assert bare.events == core
    narrow = expand(built, counter, gid, before=5, after=5, window_ms=30_000)
    assert narrow.events == core
    with pytest.raises(QueryError):
        expand(built, counter, gid, before=-1)
    with pytest.raises(NotFoundError):
        expand(built, counter, "grip:0000000000000:nope")


def test_timeline_selects_overlapping_periods(built: SqliteStore) -> None:
    days = timeline(built, "p", T0 - 2 * 86_400_000, T0 + 90 * 86_400_000)
    assert days and all(d.level == "day" for d in days)
    assert [d.start_ms for d in days] == sorted(d.start_ms for d in days)
    one = timeline(built, "p", T0 - 86_400_000, T0 - 86_400_000 + 1)
    assert [d.node_id for d in one] == ["toc:day:2024-01-07"]
    segs = timeline(built, "p", T0 - 86_400_000, T0 - 86_400_000 + 30 * MIN, level="segment")
    assert {s.session_id for s in segs} == {"left", "right"}
    assert timeline(built, "p", T0 + 400 * 86_400_000, T0 + 401 * 86_400_000) == []
    with pytest.raises(QueryError):
        timeline(built, "p", T0, T0)
    with pytest.raises(QueryError):
        timeline(built, "p", T0, T0 + 1, level="decade")
