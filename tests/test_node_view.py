"""Node views an agent can afford: a busy day paged and focused, compact L0, expand by event."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from typer.testing import CliRunner

from conftest import open_backend
from memtoc.clock import ManualClock
from memtoc.errors import NotFoundError, QueryError
from memtoc.ids import derived_ulid
from memtoc.memory import Memory
from memtoc.model import Bullet, Event, TocNode
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.pipeline.worker import PipelineConfig, Processor
from memtoc.retrieval.navigate import expand
from memtoc.retrieval.node_focus import SNIPPET_TOKENS
from memtoc.retrieval.node_view import (
    DEFAULT_CHILD_LIMIT,
    MATCH_CHILDREN,
    ChildView,
    novel_abstract,
)
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.mcp_server import build_server
from memtoc.text.tokens import default_counter

T0 = int(datetime(2024, 3, 5, 6, 0, tzinfo=UTC).timestamp() * 1000)
MIN = 60_000
SESSIONS = 30
TOPICS = [
    "renderer widget layout", "login form validation", "cache eviction policy",
    "release workflow signing", "database index tuning", "websocket reconnect backoff",
]  # fmt: skip


def _filed(backend: str, path: Path, events: list[Event]) -> Iterator[Memory]:
    """A Memory over a fresh store of ``backend`` holding ``events``, processed and rolled up."""
    counter = default_counter()
    clock = ManualClock(int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000))
    store, close = open_backend(backend, path, clock)
    store.append_events(events)
    proc = Processor(
        store, ExtractiveSummarizer(counter), counter, PipelineConfig(), clock, ZoneInfo("UTC")
    )
    proc.run()
    proc.rollup(force=True)
    yield Memory(store, clock=clock, tz=ZoneInfo("UTC"), counter=counter)
    close()


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """One busy day: 30 sessions 20 minutes apart, one segment each; session 17 holds the
    zeppelin quota answer. On both stores."""
    events = []
    for s in range(SESSIONS):
        topic = TOPICS[s % len(TOPICS)]
        talk = [
            ("user", f"Session {s}: please fix the {topic} bug in module{s}."),
            ("assistant", f"I changed the {topic} code in module{s} and the tests pass."),
            ("user", f"Thanks, commit the {topic} fix for module{s}."),
        ]
        if s == 17:
            talk[1] = ("assistant", "The zeppelin quota resets at midnight UTC, so retries wait.")
        for i, (role, text) in enumerate(talk):
            t = T0 + s * 20 * MIN + i * MIN
            event_id = derived_ulid(t, f"{s}.{i}")
            kind = f"{role}_message"
            events.append(Event(event_id, f"s{s}", "p", "a", t, kind, role, text))
    yield from _filed(request.param, tmp_path / "v.db", events)


def test_a_busy_day_is_listed_a_page_at_a_time_one_line_per_child(memory: Memory) -> None:
    view = memory.node("toc:day:2024-03-05", project="p")
    segments = memory.store.list_nodes("p", level="segment")
    assert len(segments) == SESSIONS and view.total_children == SESSIONS
    assert len(view.children) == DEFAULT_CHILD_LIMIT and view.more == SESSIONS - 8
    text = view.render()
    assert view.tokens == memory.counter.count(text)
    for child in view.children:  # one short line: id (its start time) and title, no abstract
        (line,) = [ln for ln in text.splitlines() if child.node_id in ln]
        assert line.startswith(f"- [{child.node_id}] ") and child.abstract not in line
    assert text.endswith(f"… {SESSIONS - 8} more: offset=8")
    assert "children 1-8 of 30, in time order:" in text
    page = memory.node("toc:day:2024-03-05", project="p", offset=8, limit=20)
    assert [c.node_id for c in page.children] == [s.node_id for s in segments[8:28]]
    assert page.more == 2 and page.to_dict()["more"] == 2 and page.to_dict()["offset"] == 8
    last = memory.node("toc:day:2024-03-05", project="p", offset=28)
    assert len(last.children) == 2 and last.more == 0 and "more:" not in last.render()
    # L1 shows what L0 leaves out: children's abstracts, every grip, the keywords.
    full = memory.node("toc:day:2024-03-05", project="p", tier="L1", limit=500)
    assert len(full.children) == SESSIONS and full.tokens > 3 * view.tokens
    assert all(c.abstract in full.render() for c in full.children)
    with pytest.raises(QueryError):
        memory.node("toc:day:2024-03-05", project="p", offset=-1)
    with pytest.raises(QueryError):
        memory.node("toc:day:2024-03-05", project="p", limit=0)


def test_a_focused_view_lists_the_children_holding_the_answer_first(memory: Memory) -> None:
    question = "When does the zeppelin quota reset?"
    answer = [
        n.node_id for n in memory.store.list_nodes("p", level="segment") if n.session_id == "s17"
    ]
    view = memory.node("toc:day:2024-03-05", project="p", focus=question)
    assert [view.children[0].node_id] == answer and view.children[0].score is not None
    text = view.render()
    assert 1 <= (view.matched or 0) < SESSIONS and view.more == 25
    header = f"children 1-5 of 30, most about the focus first ({view.matched} hold matches):"
    assert header in text and view.to_dict()["focus_matched"] == view.matched
    # no embedder in this memory: the order comes from BM25 alone, and the view says so
    assert view.degraded and "focus order degraded: no embedder" in text
    assert view.to_dict()["focus"] == question and view.to_dict()["focus_degraded"]
    # every child of the page holding a hit quotes it (the evidence where the listing points)
    quoted = view.children[: min(view.matched or 0, MATCH_CHILDREN)]
    assert quoted and all(c.snippet and f"> {c.snippet}" in text for c in quoted)
    # Up the tree each view lists its one child holding the answer.
    for node_id in ("toc:year:2024", "toc:month:2024-03", "toc:week:2024-W10"):
        up = memory.node(node_id, project="p", focus=question)
        assert up.children[0].start_ms <= T0 + 17 * 20 * MIN < up.children[0].end_ms
    # A period whose children hold the answer leaves its own bullets out: they are the way on.
    day = memory.store.find_node("toc:day:2024-03-05", "p")
    assert view.bullets == () and view.to_dict()["bullets_shown"] == []
    assert f"({len(day.bullets)} bullets left out: the children are the way on)" in text


def test_a_focused_day_shows_the_bullet_leading_to_the_answer(
    memory: Memory, tmp_path: Path
) -> None:
    """Under its best segment a focused day shows that segment's bullet over the answer, with
    the grip that expands to it; the segment itself lists that bullet first — on every surface."""
    question = "When does the zeppelin quota reset?"
    answer = "The zeppelin quota resets at midnight UTC"
    view = memory.node("toc:day:2024-03-05", project="p", focus=question)
    best = view.children[0]
    assert best.match is not None and best.match.text.startswith(answer)
    assert all(c.match is None for c in view.children[1:])  # no other segment holds a match
    grip = best.match.grip_ids[0]
    assert answer in memory.expand(grip, before=0, after=0).events[0].text
    lines = view.render().splitlines()
    first = lines.index(next(ln for ln in lines if ln.startswith(f"- [{best.node_id}]")))
    # the quote of the hit holds the bullet (a short turn is its own bullet): said once, as the
    # quote citing the bullet's grip
    assert best.snippet is not None and best.match.text in best.snippet
    assert lines[first + 1] == f"  > {best.snippet} ({grip})"
    # The segment: in summary order the answer's bullet is not first; focused it is, its grip
    # (the narrowest over the hit) cited first, and the view says how many bullets hold a hit.
    plain = memory.node(best.node_id, project="p")
    assert not plain.bullets[0].text.startswith(answer)
    seg = memory.node(best.node_id, project="p", focus=question)
    assert seg.bullets[0].text.startswith(answer) and seg.bullets[0].grip_ids[0] == grip
    assert {b.text for b in seg.bullets} == {b.text for b in plain.bullets}  # all kept
    assert f"bullets most about the focus first ({seg.bullet_matches} hold matches):" in (
        seg.render()
    )
    assert seg.to_dict()["bullets_shown"][0]["text"].startswith(answer)

    async def calls() -> tuple[Any, Any]:
        async with Client(build_server(memory)) as client:
            toc = await client.call_tool(
                "memory_toc",
                {"node_id": "toc:day:2024-03-05", "project": "p", "focus": question},
            )
            ev = await client.call_tool("memory_expand", {"grip_id": grip, "before": 0, "after": 0})
            return toc, ev

    toc, ev = anyio.run(calls)
    assert not toc.is_error and f"  > {best.snippet} ({grip})" in toc.content[0].text
    assert not ev.is_error and answer in ev.content[0].text
    client = TestClient(
        create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1"
    )
    got = client.get(
        "/v1/nodes/toc:day:2024-03-05", params={"project": "p", "focus": question}
    ).json()
    assert got["children"][0]["match"]["text"].startswith(answer)
    assert got["children"][0]["match"]["grip_ids"][0] == grip and got["bullets_shown"] == []
    if isinstance(memory.store, SqliteStore):  # the CLI opens the same file
        out = CliRunner().invoke(
            app,
            ["--db", str(tmp_path / "v.db"), "toc", "toc:day:2024-03-05", "-p", "p",
             "--focus", question],
            env={"COLUMNS": "200"},
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        assert answer in out.output and grip in out.output


def test_an_l0_view_does_not_repeat_its_bullets_in_the_abstract() -> None:
    node = TocNode(
        node_id="toc:day:2024-03-05",
        project="p",
        level="day",
        title="Fixed the login form and 2 more",
        start_ms=T0,
        end_ms=T0 + 86_400_000,
        bullets=(
            Bullet("Fixed the login form: validation runs on blur", ("grip:1:a", "grip:2:b")),
            Bullet("Tuned the cache: eviction is LRU now", ("grip:3:c",)),
        ),
        abstract="Fixed the login form and 2 more. Fixed the login form: validation runs… "
        "Tuned the cache: eviction is LRU now. The release was signed by hand.",
    )
    assert novel_abstract(node) == "The release was signed by hand."


def test_expand_takes_an_event_id_and_says_where_it_is_filed(memory: Memory) -> None:
    hit = next(
        i
        for i in memory.search("zeppelin quota", project="p", kinds=("event",)).items
        if "zeppelin" in i.text
    )
    view = memory.expand(hit.id, before=1, after=1, focus="zeppelin quota")
    assert [e.event_id for e in view.events][view.range_start] == hit.id
    assert view.range_start == view.range_end == 1 and len(view.events) == 3
    assert {e.session_id for e in view.events} == {"s17"}
    (segment,) = [n for n in memory.store.list_nodes("p", level="segment") if n.session_id == "s17"]
    assert view.grip is None and view.event_id == hit.id and view.toc_node_id == segment.node_id
    d = view.to_dict()
    assert d["grip"] is None and d["event_id"] == hit.id and d["toc_node_id"] == segment.node_id
    # a grip expands as before, anchored in its node
    gid = segment.bullets[0].grip_ids[0]
    assert expand(memory.store, memory.counter, gid).toc_node_id == segment.node_id
    with pytest.raises(NotFoundError):
        memory.expand("no-such-event")

    async def calls() -> tuple[Any, Any]:
        async with Client(build_server(memory)) as client:
            toc = await client.call_tool(
                "memory_toc",
                {"node_id": "toc:day:2024-03-05", "project": "p",
                 "focus": "When does the zeppelin quota reset?", "limit": 3},
            )  # fmt: skip
            ev = await client.call_tool("memory_expand", {"grip_id": hit.id, "before": 0})
            return toc, ev

    toc, ev = anyio.run(calls)
    toc_text = toc.content[0].text
    listed = [ln for ln in toc_text.splitlines() if ln.startswith("- [")]
    assert not toc.is_error and listed[0].startswith(f"- [{segment.node_id}]") and len(listed) == 3
    assert "… 27 more: offset=3" in toc_text
    ev_text = ev.content[0].text
    assert not ev.is_error and f"event {hit.id} ({segment.node_id})" in ev_text
    assert "zeppelin quota resets at midnight UTC" in ev_text
    client = TestClient(
        create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1"
    )
    got = client.get(
        "/v1/nodes/toc:day:2024-03-05", params={"project": "p", "offset": 29, "limit": 5}
    ).json()
    assert len(got["children"]) == 1 and got["more"] == 0 and got["total_children"] == SESSIONS
    assert client.get(f"/v1/grips/{hit.id}").json()["toc_node_id"] == segment.node_id


@pytest.fixture(params=["sqlite", "postgres"])
def plan_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """One day of six sessions; session 3 is a long pasted plan whose answer (the zeppelin
    quota's reset) sits deep inside, far from its first lines. On both stores."""
    plan = ["# Plan: retry budget for the uploader", ""]
    plan += [f"- Step {i}: adjust the {TOPICS[i % len(TOPICS)]} settings in module{i}." for i in range(40)]  # fmt: skip
    plan[30] = "- Step 28: the zeppelin quota resets at 04:00 UTC, so retries wait for it."
    events = []
    for s in range(6):
        topic = TOPICS[s]
        talk = [
            ("user", "\n".join(plan) if s == 3 else f"Please fix the {topic} bug in module{s}."),
            ("assistant", f"I changed the {topic} code in module{s} and the tests pass."),
        ]
        for i, (role, text) in enumerate(talk):
            t = T0 + s * 20 * MIN + i * MIN
            ev = Event(derived_ulid(t, f"{s}.{i}"), f"s{s}", "p", "a", t, f"{role}_message", role, text)  # fmt: skip
            events.append(ev)
    yield from _filed(request.param, tmp_path / "p.db", events)


def test_a_focused_day_quotes_the_passage_holding_the_answer(plan_memory: Memory) -> None:
    """Under its best segment a focused day quotes the best hit's passage about the question —
    from deep inside a long plan, not its opening — within SNIPPET_TOKENS; on every surface."""
    question = "When does the zeppelin quota reset?"
    answer = "the zeppelin quota resets at 04:00 UTC"
    memory = plan_memory
    view = memory.node("toc:day:2024-03-05", project="p", focus=question)
    best = view.children[0]
    assert best.snippet is not None and answer in best.snippet
    assert "# Plan: retry budget" not in best.snippet and best.snippet.startswith("…")
    assert memory.counter.count(best.snippet) <= SNIPPET_TOKENS + 4  # the "…" marks
    assert all(c.snippet is None for c in view.children if c.score is None)
    text = view.render()
    assert f"  > {best.snippet}" in text and view.tokens == memory.counter.count(text)
    assert view.to_dict()["children"][0]["snippet"] == best.snippet  # type: ignore[index]
    # Unfocused, nothing is quoted.
    plain = memory.node("toc:day:2024-03-05", project="p")
    assert all(c.snippet is None for c in plain.children) and "  > " not in plain.render()
    got = (
        TestClient(create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1")
        .get("/v1/nodes/toc:day:2024-03-05", params={"project": "p", "focus": question})
        .json()
    )
    assert answer in got["children"][0]["snippet"]

    async def call() -> Any:
        async with Client(build_server(memory)) as client:
            return await client.call_tool(
                "memory_toc", {"node_id": "toc:day:2024-03-05", "project": "p", "focus": question}
            )

    toc = anyio.run(call)
    assert not toc.is_error and answer in toc.content[0].text


def test_a_match_and_its_quote_are_not_said_twice() -> None:
    """A bullet the quote already holds is shown once, as the quote citing the bullet's grip;
    a quote the bullet already says is left out."""
    kid = ChildView("toc:segment:x", "segment", "Fixed it", "", T0, T0 + MIN)
    bullet = Bullet("Auto-open the panel when no issues are selected", ("grip:1:a",))
    inside = replace(kid, match=bullet, snippet="… 3. **Auto-open the panel** when no issues are selected. Tests: 9 pass")  # fmt: skip
    assert inside.render("L0").splitlines()[1:] == [f"  > {inside.snippet} (grip:1:a)"]
    short = replace(kid, match=bullet, snippet="Auto-open the panel")
    assert short.render("L0").splitlines()[1:] == [f"  * {bullet.text} (grip:1:a)"]
    both = replace(kid, match=bullet, snippet="The header text is larger now")
    assert both.render("L0").splitlines()[1:] == [
        f"  * {bullet.text} (grip:1:a)",
        "  > The header text is larger now",
    ]


def test_a_quote_is_said_once_per_view(plan_memory: Memory) -> None:
    """Two segments holding the same text (a resumed session repeats its predecessor's plan)
    are not quoted twice: the second gives way to its next hit, or shows no quote."""
    memory = plan_memory
    plan = next(e for e in memory.events(project="p") if e.text.startswith("# Plan"))
    t = T0 + 200 * MIN
    copy = Event(derived_ulid(t, "copy"), "s9", "p", "a", t, "user_message", "user", plan.text)
    memory.store.append_events([copy])
    proc = Processor(
        memory.store,
        ExtractiveSummarizer(memory.counter),
        memory.counter,
        PipelineConfig(),
        memory.clock,
        ZoneInfo("UTC"),
    )
    proc.run()
    proc.rollup(force=True)
    view = memory.node(
        "toc:day:2024-03-05", project="p", focus="When does the zeppelin quota reset?"
    )
    quotes = [c.snippet for c in view.children if c.snippet is not None]
    holding = [c for c in view.children if c.score is not None]
    assert len(holding) >= 2 and any("zeppelin quota resets" in q for q in quotes)
    assert len(quotes) == len(set(quotes))


DAYS = (5, 6, 12, 26)
"""Days of March 2024 in the spread fixture (weeks W10, W10, W11, W13)."""


@pytest.fixture(params=["sqlite", "postgres"])
def spread_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """Four days of March 2024, four sessions each: the zeppelin quota comes up twice on the
    5th, its reset is answered on the 12th; the rest is other work. On both stores."""
    said = {
        (5, 1): "We hit the zeppelin quota again in the uploader.",
        (5, 2): "The zeppelin quota was exceeded by the nightly job.",
        (12, 3): "The zeppelin quota resets at midnight UTC, so the retries wait for it.",
    }
    events = []
    for day in DAYS:
        start = int(datetime(2024, 3, day, 9, 0, tzinfo=UTC).timestamp() * 1000)
        for s in range(4):
            topic = TOPICS[(day + s) % len(TOPICS)]
            talk = [
                ("user", f"Please fix the {topic} bug in module{s}."),
                ("assistant", said.get((day, s), f"I changed the {topic} code in module{s}.")),
            ]
            for i, (role, text) in enumerate(talk):
                t = start + s * 30 * MIN + i * MIN
                ev = Event(derived_ulid(t, f"{day}.{s}.{i}"), f"d{day}s{s}", "p", "a", t, f"{role}_message", role, text)  # fmt: skip
                events.append(ev)
    yield from _filed(request.param, tmp_path / "s.db", events)


def test_a_focused_period_names_the_days_holding_its_best_matches(spread_memory: Memory) -> None:
    """A focused year or month says which days hold its best hits (the day with the best hit
    first, each with how many it holds): a way down past the month and the week, and to the
    second day when the first is not it. Weeks list their days anyway; unfocused views, and
    pages after the first, name none."""
    memory = spread_memory
    question = "When does the zeppelin quota reset?"
    hits, _ = memory._focus_hits(question, memory.store.find_node("toc:year:2024", "p"))
    best = max(hits, key=lambda h: h.score)
    assert datetime.fromtimestamp(best.ts_ms / 1000, UTC).day == 12
    for node_id in ("toc:year:2024", "toc:month:2024-03"):
        view = memory.node(node_id, project="p", focus=question)
        days = [h.node_id for h in view.hot]
        assert days[0] == "toc:day:2024-03-12" and "toc:day:2024-03-05" in days
        assert len(days) == len(set(days)) <= 3
        assert view.hot_of == min(10, len(hits)) >= sum(h.hits for h in view.hot)
        text = view.render()
        assert f"days holding the {view.hot_of} best matches:" in text
        first = view.hot[0]
        assert f"- [{first.node_id}] " in text and f"({first.hits} of {view.hot_of})" in text
        assert view.to_dict()["hot_days"][0] == {
            "node_id": first.node_id,
            "title": first.title,
            "hits": first.hits,
        }
        # the days are listed before the children, which keep their own order
        assert text.index("days holding") < text.index("children 1-")
    for node_id in ("toc:week:2024-W11", "toc:day:2024-03-12"):
        assert memory.node(node_id, project="p", focus=question).hot == ()
    plain = memory.node("toc:year:2024", project="p")
    assert plain.hot == () and "days holding" not in plain.render()
    assert memory.node("toc:month:2024-03", project="p", focus=question, offset=1).hot == ()
    # a question matching nothing names no day
    none = memory.node("toc:year:2024", project="p", focus="xylophone")
    assert none.hot == () and "days holding" not in none.render()
