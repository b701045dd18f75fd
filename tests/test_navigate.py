"""Navigation over a TOC built by the real pipeline: roots, node views, expand, timeline."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError, QueryError
from memtoc.ids import derived_ulid
from memtoc.memory import Memory
from memtoc.model import Event
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.retrieval.navigate import FOCUS_EVENT_TOKENS, expand, node_view, timeline, toc_roots
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server
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


def test_expand_with_a_focus_shows_a_long_event_by_its_passages(
    tmp_path: Path, counter: TokenCounter
) -> None:
    """A pasted plan of ~1,500 tokens behind a bullet: focused on a question, expand shows the
    passages holding its terms ("…" for the rest), so a budgeted reader can afford it; the event
    itself stays whole, and without a focus (or for a short event) nothing is cut."""
    clock = ManualClock(T0 + 86_400_000)
    store = SqliteStore(tmp_path / "f.db", durability="off", clock=clock)
    steps = [
        f"{n}. Update the renderer module step {n} with the widget layout." for n in range(120)
    ]
    steps[70] = "71. The zeppelin quota resets at midnight UTC, so the retry waits until then."
    plan = "Implement the following plan:\n# Plan: renderer cleanup\n" + "\n".join(steps)
    texts = [("user", plan), ("assistant", "Done: the renderer is cleaned up and tests pass.")]
    store.append_events(
        [
            Event(
                derived_ulid(T0 + i * MIN, f"f{i}"),
                "s",
                "p",
                "a",
                T0 + i * MIN,
                f"{role}_message",
                role,
                text,
            )
            for i, (role, text) in enumerate(texts)
        ]
    )
    proc = Processor(
        store, ExtractiveSummarizer(counter), counter, PipelineConfig(), clock, ZoneInfo("UTC")
    )
    proc.run()
    (seg,) = store.list_nodes("p", level="segment")
    gid = seg.bullets[0].grip_ids[0]
    whole = expand(store, counter, gid, before=3, after=3)
    assert [e.text for e in whole.events] == [plan, texts[1][1]]
    assert whole.tokens == counter.count(plan) + counter.count(texts[1][1]) > 1_200
    view = expand(
        store, counter, gid, before=3, after=3, focus="When does the zeppelin quota reset?"
    )
    assert view.events == whole.events  # the events are whole; what is shown is cut
    shown = view.shown(0)
    assert "zeppelin quota resets at midnight UTC" in shown and shown.startswith("…")
    assert counter.count(shown) <= FOCUS_EVENT_TOKENS + 5 and view.cut(0)
    assert view.shown(1) == texts[1][1] and not view.cut(1)
    assert view.tokens == sum(counter.count(view.shown(i)) for i in range(2)) < whole.tokens / 3
    d = view.to_dict()
    assert d["focus"] == "When does the zeppelin quota reset?"
    assert d["events"][0]["passages_only"] is True and d["events"][0]["text"] == shown
    assert "passages_only" not in d["events"][1]
    # No term of the focus in the plan: its opening stands for it.
    other = expand(store, counter, gid, focus="kubernetes ingress certificates")
    assert other.shown(0).startswith("Implement the following plan") and other.cut(0)
    with pytest.raises(QueryError):
        expand(store, counter, gid, focus="x", event_tokens=0)
    # The same through the MCP tool and the HTTP route an agent uses.
    memory = Memory(store, clock=clock, tz=ZoneInfo("UTC"), counter=counter)

    async def call() -> Any:
        async with Client(build_server(memory)) as client:
            return await client.call_tool("memory_expand", {"grip_id": gid, "focus": question})

    question = "When does the zeppelin quota reset?"
    reply = anyio.run(call)
    assert not reply.is_error
    text = reply.content[0].text
    assert "zeppelin quota resets at midnight UTC" in text and "left out" in text
    assert counter.count(text) < whole.tokens / 3
    client = TestClient(
        create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1"
    )
    got = client.get(f"/v1/grips/{gid}", params={"focus": question}).json()
    assert got["tokens"] == view.tokens and got["events"][0]["passages_only"] is True
