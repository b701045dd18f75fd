"""Drill-down against a real store built by the real pipeline: the path stays inside the chosen
parents' periods, an answer under a year that is not the top year by summary is still found (and
the naive summary-only drill with a beam of one loses it), time expressions restrict the roots,
the fallback cascade, and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import open_backend
from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.drill import DrillResult, drill
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli.app import app
from memtoc.surfaces.cli.commands import search_cmds
from search_support import require_model

assert search_cmds  # registers `search` on the app

QUERY = "deploy pipeline pinning"


def ms(y: int, m: int, d: int, h: int = 10) -> int:
    return int(datetime(y, m, d, h, tzinfo=UTC).timestamp() * 1000)


def _session(sid: str, start: int, texts: list[str]) -> list[dict[str, object]]:
    roles = ("user", "assistant")
    return [
        {"session_id": sid, "timestamp": start + i * 60_000, "role": roles[i % 2], "text": t}
        for i, t in enumerate(texts)
    ]


OTHER_2023: list[tuple[str, list[str]]] = [
    ("garden", ["The tomatoes in the garden need more water", "Mulch keeps the soil moist"]),
    ("cooking", ["Fresh pasta needs eggs and semolina flour", "Let the dough rest an hour"]),
    ("hiking", ["The hiking trail to the lake is closed", "Bring boots, the path is muddy"]),
    ("piano", ["Practise the piano scales slowly", "The metronome helps with the tempo"]),
    ("cycling", ["The bicycle chain needs oil", "Tyre pressure matters on gravel roads"]),
    ("painting", ["Watercolour paper must be stretched", "Mix ultramarine with burnt sienna"]),
    ("birds", ["A robin nests in the hedge", "The feeder attracts goldfinches in winter"]),
    ("chess", ["The Sicilian defence suits aggressive players", "Endgames reward patience"]),
    ("baking", ["Sourdough starter needs daily feeding", "Bake the loaf in a dutch oven"]),
    ("sailing", ["Reef the mainsail when the wind picks up", "Tie a bowline on the cleat"]),
]


def corpus() -> list[dict[str, object]]:
    """2022: every month has sessions full of weak matches ("deploy", "pipeline"); 2023: unrelated
    sessions and, in July, the one session with the exact answer — a detail in the middle of it
    (the session's request and outcome are what its summaries carry up to the year, so the
    year's summary does not hold the answer's words)."""
    records: list[dict[str, object]] = []
    for month in range(1, 7):
        for day in (5, 19):
            records += _session(
                f"weak-{month}-{day}",
                ms(2022, month, day),
                [
                    "Status of the deploy pipeline: deploy pipeline green, deploy again later",
                    "The pipeline deploy dashboard shows the deploy pipeline queue",
                    "We should document the deploy pipeline for the new team members",
                ],
            )
    for month, (topic, texts) in enumerate(OTHER_2023, start=1):
        if month >= 7:
            month += 1  # July holds the answer
        records += _session(topic, ms(2023, month, 7), texts)
        records += _session(f"{topic}-again", ms(2023, month, 21), texts[::-1])
    records += _session(
        "answer",
        ms(2023, 7, 18),
        [
            "Yesterday's release failed in production, the consumers stopped",
            "Root cause: the kafka rollback used an expired offset",
            "Fix it, and add an alert on consumer lag",
            "Looking at the deploy pipeline config: pinning every consumer group would hold them",
            "Go ahead",
            "Done: consumers restarted, lag alert added, the release is green again",
        ],
    )
    return records


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def memory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Memory]:
    """The drill corpus, filed and rolled up, on each store (navigation runs on both)."""
    path = tmp_path_factory.mktemp("drill") / "memtoc.db"
    clock = ManualClock(ms(2024, 1, 10))
    store, close = open_backend(request.param, path, clock)
    mem = Memory(store, clock=clock, tz=UTC)
    report = mem.ingest_records(corpus(), project="p")
    assert not report.rejections
    mem.process()
    mem.rollup(force=True)
    yield mem
    close()


def _run(memory: Memory, query: str = QUERY, **kw: object) -> DrillResult:
    args: dict[str, object] = {"projects": ["p"], "at_ms": ms(2024, 1, 10), "tz": UTC, **kw}
    return drill(memory.store, memory.counter, query, **args)  # type: ignore[arg-type]


def _chosen(result: DrillResult, level: str) -> list[str]:
    step = next(s for s in result.path if s.level == level)
    return [c.node.node_id for c in step.chosen]


def test_every_step_and_item_stays_inside_the_chosen_parents(memory: Memory) -> None:
    result = _run(memory, beam=1, segments=1, limit=1)
    assert [s.level for s in result.path] == ["year", "month", "week", "day", "segment"]
    for upper, lower in zip(result.path, result.path[1:], strict=False):
        for child in lower.chosen:
            assert any(
                p.window[0] <= child.window[0] and child.window[1] <= p.window[1]
                for p in upper.chosen
            ), (child.node.node_id, [p.node.node_id for p in upper.chosen])
            assert any(
                child.node.start_ms < p.node.end_ms and p.node.start_ms < child.node.end_ms
                for p in upper.chosen
            )
    year = result.path[0].chosen[0].node
    segment = result.chosen_segments[0]
    assert result.items and not result.fallback and result.reason is None
    for item in result.items:
        assert segment.window[0] <= item.start_ms < segment.window[1]
        assert year.start_ms <= item.start_ms < year.end_ms
        assert all(e.session_id == segment.node.session_id for e in item.events)


def test_answer_under_a_year_that_is_not_the_top_year_by_summary(memory: Memory) -> None:
    # the naive drill (periods scored by their summaries, one kept per level) picks 2022, whose
    # summary is full of weak matches, and never sees July 2023
    naive = _run(memory, beam=1, segments=1, evidence=False, min_similarity=0.0, limit=3)
    assert _chosen(naive, "year") == ["toc:year:2022"]
    assert naive.chosen_segments[0].node.start_ms < ms(2023, 1, 1, 0)
    assert naive.items and not naive.fallback
    assert not any("pinning" in item.text for item in naive.items)
    # the drill: the beam keeps 2023 and the evidence inside July 2023 wins across the beam
    result = _run(memory)
    years = _chosen(result, "year")
    assert set(years) == {"toc:year:2022", "toc:year:2023"}
    assert _chosen(result, "month")[0] == "toc:month:2023-07"
    assert _chosen(result, "day")[0] == "toc:day:2023-07-18"
    top = result.items[0]
    assert "pinning" in top.text and top.start_ms >= ms(2023, 7, 18)
    # even with a beam of one, evidence ranks the right year first
    narrow = _run(memory, beam=1, segments=1)
    assert _chosen(narrow, "year") == ["toc:year:2023"]
    assert "pinning" in narrow.items[0].text


def test_time_expression_restricts_the_roots(memory: Memory) -> None:
    result = _run(memory, "deploy pipeline in March 2022", limit=4)
    assert result.time_range is not None and result.time_range["expression"] == "in March 2022"
    assert result.query == "deploy pipeline"
    assert _chosen(result, "year") == ["toc:year:2022"]
    assert _chosen(result, "month") == ["toc:month:2022-03"]
    assert result.items and not result.fallback
    for item in result.items:
        assert ms(2022, 3, 1, 0) <= item.start_ms < ms(2022, 4, 1, 0)
    # the same words without the expression rank other months first: the filter did the work
    assert _chosen(_run(memory, "deploy pipeline"), "month")[0] != "toc:month:2022-03"


def test_fallback_cascade_range_then_flat(memory: Memory) -> None:
    # a threshold nothing reaches: the drill's items are dropped, the time range is searched flat
    ranged = _run(memory, "kafka rollback in 2023", min_similarity=2.0, limit=3)
    assert ranged.reason is not None and ranged.reason.startswith("best segment similarity")
    assert ranged.fallback == ("range",)
    assert "kafka" in ranged.items[0].text
    assert all(ms(2023, 1, 1, 0) <= i.start_ms < ms(2024, 1, 1, 0) for i in ranged.items)
    # a range holding fewer matches than asked: flat search fills the rest, after the range items
    filled = _run(memory, "deploy pipeline kafka in July 2023", min_similarity=2.0, limit=6)
    assert filled.fallback == ("range", "flat")
    in_july = [ms(2023, 7, 1, 0) <= i.start_ms < ms(2023, 8, 1, 0) for i in filled.items]
    assert in_july[0] and not all(in_july)
    assert in_july == sorted(in_july, reverse=True)
    # no expression, no match anywhere in the TOC: empty, and it says why
    none = _run(memory, "zeppelin quasar")
    assert none.items == () and none.reason == "no segment matched" and none.fallback == ()


def test_drill_without_rollups_starts_at_segments(tmp_path: Path) -> None:
    clock = ManualClock(ms(2024, 1, 10))
    mem = Memory(SqliteStore(tmp_path / "m.db", clock=clock), clock=clock, tz=UTC)
    mem.ingest_records(corpus(), project="p")
    mem.process(rollup=False)
    result = mem.drill(QUERY, project="p")
    assert [s.level for s in result.path] == ["segment"]
    assert "pinning" in result.items[0].text


def test_memory_drill_and_cli(memory: Memory, tmp_path: Path) -> None:
    result = memory.drill(QUERY, project="p", depth="L2", limit=2)
    assert result.depth == "L2" and len(result.items) == 2
    assert result.items[0].text == result.items[0].events[0].text
    db = memory.store.location
    runner = CliRunner()
    out = runner.invoke(
        app, ["--db", db, "search", QUERY, "-p", "p", "--drill", "--json", "-n", "1"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [s["level"] for s in data["path"]][-1] == "segment"
    assert "pinning" in data["items"][0]["text"] and data["fallback"] == []
    out = runner.invoke(app, ["--db", db, "search", QUERY, "-A", "--drill"])
    assert out.exit_code == 0, out.output
    assert "toc:month:2023-07" in out.stdout and "pinning" in out.stdout


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_drill_with_vectors(backend: str, tmp_path: Path) -> None:
    """With a real (static) embedder every step averages BM25 and cosine, and still finds it
    (pgvector's nearest rows on PostgreSQL, the in-memory index on SQLite)."""
    model = require_model()
    clock = ManualClock(ms(2024, 1, 10))
    store, close = open_backend(backend, tmp_path / "v.db", clock)
    try:
        semantic = SemanticIndex(store, kind="static", model=str(model))
        mem = Memory(store, clock=clock, tz=UTC, semantic=semantic)
        mem.ingest_records(corpus(), project="p")
        mem.process()
        mem.rollup(force=True)
        result = mem.drill(QUERY, project="p", limit=1)
        assert result.degraded is None
        assert "pinning" in result.items[0].text and not result.fallback
        assert _chosen(result, "month")[0] == "toc:month:2023-07"
        # cosine gives summaries that share no word with the query a similarity of their own
        months = next(s for s in result.path if s.level == "month").chosen
        assert all(c.own > 0 for c in months)
    finally:
        close()
