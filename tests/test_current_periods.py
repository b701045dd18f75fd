"""Current periods exist at once, weeks live in every month their days do, and the hints of an
empty TOC say what to do — through the Memory (injected clock), the CLI and the HTTP API."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.model import TocNode
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.surfaces.http.app import create_app

runner = CliRunner()
UTC_ZONE = ZoneInfo("UTC")


def ms(y: int, m: int, d: int, h: int = 10, mi: int = 0) -> int:
    return int(datetime(y, m, d, h, mi, tzinfo=UTC).timestamp() * 1000)


def session(sid: str, start: int, texts: list[str]) -> list[dict[str, object]]:
    roles = ("user", "assistant")
    return [
        {"session_id": sid, "timestamp": start + i * 60_000, "role": roles[i % 2], "text": t}
        for i, t in enumerate(texts)
    ]


def memory_at(tmp_path: Path, now_ms: int) -> tuple[Memory, ManualClock]:
    clock = ManualClock(now_ms)
    store = SqliteStore(tmp_path / "m.db", durability="off", clock=clock)
    return Memory(store, clock=clock, tz=UTC_ZONE), clock


def own_text(node: TocNode) -> str:
    """A node's own summary (not its children's titles)."""
    parts = [node.title, node.abstract, node.overview, *(b.text for b in node.bullets)]
    return " ".join([*parts, *node.keywords]).lower()


def walk_down(memory: Memory, node_id: str, path: list[str]) -> TocNode:
    """Follow ``path`` (child ids) from ``node_id`` through node views; return the last node."""
    view = memory.node(node_id)
    for child in path:
        assert child in [c.node_id for c in view.children], (view.node.node_id, child)
        view = memory.node(child)
    return view.node


def test_first_process_of_a_new_year_shows_the_year_and_reaches_today(tmp_path: Path) -> None:
    """Acceptance: the store's history reaches today (1 January, 40 minutes after midnight); right
    after the first ``process`` the TOC shows the new year and drilling reaches today's segments."""
    memory, _ = memory_at(tmp_path, ms(2025, 1, 1, 0, 40))
    records = [
        *session("dec", ms(2024, 12, 30, 15), ["Ported the ingest queue to asyncio", "Done."]),
        *session(
            "today",
            ms(2025, 1, 1, 0, 5),
            ["The zeppelin uploader drops chunks over 4 MB", "Fixed: the chunk size is now 1 MB"],
        ),
    ]
    assert memory.ingest_records(records, project="p").ingested == 4
    memory.process()
    years = [n.node_id for n in memory.toc("p")]
    assert years == ["toc:year:2024", "toc:year:2025"]
    day = walk_down(
        memory, "toc:year:2025", ["toc:month:2025-01", "toc:week:2025-W01", "toc:day:2025-01-01"]
    )
    segments = [c for c in memory.node(day.node_id).children if c.level == "segment"]
    assert len(segments) == 1 and "zeppelin" in memory.node(segments[0].node_id).render().lower()
    # Week 2025-W01 (30 Dec - 5 Jan) holds days of both months: it is under both.
    assert walk_down(memory, "toc:year:2024", ["toc:month:2024-12", "toc:week:2025-W01"])
    week = memory.node("toc:week:2025-W01").node
    assert list(week.parents) == ["toc:month:2024-12", "toc:month:2025-01"]
    view = memory.node("toc:year:2025")
    assert view.provisional  # the year is running
    assert "(provisional summary)" in view.render()
    drilled = memory.drill("zeppelin uploader chunks", project="p")
    assert [s.level for s in drilled.path][:4] == ["year", "month", "week", "day"]
    assert drilled.path[0].chosen[0].node.node_id == "toc:year:2025"
    assert any("zeppelin" in item.text for item in drilled.items)


def test_first_process_of_a_new_year_on_postgres(pg_url: str) -> None:
    """The same acceptance on the team store: the current year at once, today's segment below."""
    from memtoc.store.postgres import PostgresStore

    clock = ManualClock(ms(2025, 1, 1, 0, 40))
    store = PostgresStore(pg_url, clock=clock, pool_size=2)
    memory = Memory(store, clock=clock, tz=UTC_ZONE)
    try:
        records = [
            *session("dec", ms(2024, 12, 30, 15), ["Ported the ingest queue to asyncio", "Done."]),
            *session(
                "today", ms(2025, 1, 1, 0, 5), ["The zeppelin uploader drops chunks", "Fixed."]
            ),
        ]
        memory.ingest_records(records, project="p")
        assert "run `memtoc process`" in memory.toc_hint("p")
        memory.process()
        assert [n.node_id for n in memory.toc("p")] == ["toc:year:2024", "toc:year:2025"]
        assert memory.node("toc:year:2025").provisional
        day = walk_down(
            memory,
            "toc:year:2025",
            ["toc:month:2025-01", "toc:week:2025-W01", "toc:day:2025-01-01"],
        )
        (segment,) = memory.node(day.node_id).children
        assert "zeppelin" in memory.node(segment.node_id).render().lower()
        week = memory.node("toc:week:2025-W01").node
        assert list(week.parents) == ["toc:month:2024-12", "toc:month:2025-01"]
    finally:
        memory.close()


def test_a_straddling_week_lies_in_both_months_and_each_month_summarises_its_own_days(
    tmp_path: Path,
) -> None:
    memory, _ = memory_at(tmp_path, ms(2022, 10, 1))
    records = [
        *session("a", ms(2022, 8, 31, 9), ["Tuned the gravel bike gearing", "Noted."]),
        *session("b", ms(2022, 9, 2, 9), ["Wrote the quarterly harpsichord report", "Noted."]),
    ]
    memory.ingest_records(records, project="p")
    memory.process()
    aug, sep = memory.node("toc:month:2022-08"), memory.node("toc:month:2022-09")
    assert [c.node_id for c in aug.children] == ["toc:week:2022-W35"]  # 31 August stays in August
    assert [c.node_id for c in sep.children] == ["toc:week:2022-W35"]
    assert "harpsichord" not in own_text(aug.node) and "gravel" in own_text(aug.node)
    assert "gravel" not in own_text(sep.node) and "harpsichord" in own_text(sep.node)
    # Timeline (overlap) and drill (windows) agree: the week overlaps both months.
    weeks = memory.timeline(ms(2022, 8, 1, 0), ms(2022, 9, 1, 0), level="week", project="p").nodes
    assert [w.node_id for w in weeks] == ["toc:week:2022-W35"]
    # A week with days in one month only is a child of that month only.
    memory.ingest_records(session("c", ms(2022, 9, 20, 9), ["Bought oat milk", "Ok."]), project="p")
    memory.process()
    assert [c.node_id for c in memory.node("toc:month:2022-09").children] == [
        "toc:week:2022-W35",
        "toc:week:2022-W38",
    ]
    assert list(memory.node("toc:week:2022-W38").node.parents) == ["toc:month:2022-09"]


def test_stores_of_the_older_scheme_are_rebuilt_once(tmp_path: Path) -> None:
    memory, _ = memory_at(tmp_path, ms(2022, 10, 1))
    memory.ingest_records(session("a", ms(2022, 8, 31, 9), ["gearing", "ok"]), project="p")
    memory.process()
    assert memory.store.get_checkpoint("rollup:scheme") == 2
    memory.store.set_checkpoint("rollup:scheme", 1)
    report = memory.rollup()
    assert report.rolled["week"] == 1 and report.rolled["month"] == 1
    assert memory.store.get_checkpoint("rollup:scheme") == 2
    assert memory.rollup().rolled == {"day": 0, "week": 0, "month": 0, "year": 0}


def test_hints_of_an_empty_toc_say_what_to_run(tmp_path: Path) -> None:
    memory, _ = memory_at(tmp_path, ms(2025, 1, 1))
    assert "no events yet" in memory.toc_hint()
    memory.ingest_records(session("s", ms(2024, 12, 31), ["one", "two"]), project="p")
    assert "run `memtoc process`" in memory.toc_hint("p")
    assert "no events recorded for project 'q'" in memory.toc_hint("q")
    memory.process(rollup=False)
    assert "`memtoc rollup`" in memory.toc_hint("p")
    memory.rollup()
    assert [n.node_id for n in memory.toc("p")] == ["toc:year:2024"]


def test_cli_toc_after_the_first_process_shows_the_current_year(tmp_path: Path) -> None:
    """The same acceptance through the CLI with the real clock: history up to 10 minutes ago,
    in a time zone where it is about noon (so the last 40 minutes never straddle midnight)."""
    now = int(time.time() * 1000)
    offset = datetime.fromtimestamp(now / 1000, tz=UTC).hour - 12  # local = UTC - offset
    zone = f"Etc/GMT+{offset}" if offset >= 0 else f"Etc/GMT-{-offset}"
    tz = ZoneInfo(zone)
    path = tmp_path / "t.jsonl"
    rows = session("s", now - 40 * 60_000, ["The yak shaver needs a new blade", "Ordered one."])
    rows += session("s", now - 11 * 60_000, ["Blade arrived", "Installed it."])
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = str(tmp_path / "cli.db")
    env = {"MEMTOC_TIMEZONE": zone}
    assert runner.invoke(app, ["--db", db, "ingest", str(path)], env=env).exit_code == 0
    empty = runner.invoke(app, ["--db", db, "toc", "-p", "default"], env=env)
    assert empty.exit_code == 0 and "run `memtoc process`" in empty.output
    assert runner.invoke(app, ["--db", db, "process"], env=env).exit_code == 0
    out = runner.invoke(app, ["--db", db, "toc", "-p", "default", "--json"], env=env)
    assert out.exit_code == 0, out.output
    year = datetime.fromtimestamp(now / 1000, tz=tz).year
    roots = json.loads(out.output)["roots"]
    assert [r["node"]["node_id"] for r in roots] == [f"toc:year:{year}"]
    assert roots[0]["provisional"] is True
    today = datetime.fromtimestamp(now / 1000, tz=tz).date().isoformat()
    day = runner.invoke(
        app, ["--db", db, "toc", f"toc:day:{today}", "-p", "default", "--json"], env=env
    )
    assert day.exit_code == 0, day.output
    assert [c["level"] for c in json.loads(day.output)["children"]] == ["segment"]


@pytest.mark.parametrize("processed", [False, True])
def test_http_toc_gives_the_hint_when_empty(tmp_path: Path, processed: bool) -> None:
    memory, _ = memory_at(tmp_path, ms(2025, 1, 1))
    memory.ingest_records(session("s", ms(2024, 12, 31), ["one", "two"]), project="p")
    if processed:
        memory.process()
    client = TestClient(
        create_app(lambda: memory, token=None, web=False), base_url="http://127.0.0.1"
    )
    data = client.get("/v1/toc", params={"project": "p"}).json()
    if processed:
        assert [n["node_id"] for n in data["nodes"]] == ["toc:year:2024"]
        assert "hint" not in data
    else:
        assert data["nodes"] == [] and "memtoc process" in data["hint"]
