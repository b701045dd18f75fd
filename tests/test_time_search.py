"""Time expressions applied through ``Memory.search`` against a real store: a table of expressions
(yesterday, last week, in March, two weeks ago, on 8 May, 2023, before the migration) with the
events each must return, the other filters still applying, boost, the reference time, and the
CLI's ``--at`` and ``time_range`` output."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.hybrid import SearchResult
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli.app import app
from memtoc.surfaces.cli.commands import search_cmds

assert search_cmds  # registers `search` on the app


def ms(y: int, m: int, d: int, h: int = 10) -> int:
    return int(datetime(y, m, d, h, tzinfo=UTC).timestamp() * 1000)


NOW = ms(2024, 5, 15, 12)  # Wednesday 15 May 2024, 12:00 UTC
DAYS: dict[str, int] = {
    "alpha": ms(2024, 5, 14),  # yesterday (this ISO week)
    "bravo": ms(2024, 5, 8),  # last week; 8 May
    "charlie": ms(2024, 5, 1),  # two weeks ago (7 days centred on 1 May)
    "delta": ms(2024, 3, 12),  # in March
    "golf": ms(2024, 1, 20),  # before the migration
    "echo": ms(2023, 7, 4),  # 2023; before the migration
}
MIGRATION = ms(2024, 2, 10)


def _records() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for marker, ts in DAYS.items():
        out.append(
            {
                "session_id": marker,
                "timestamp": ts,
                "role": "user",
                "text": f"parrot feeding notes {marker}",
            }
        )
        out.append(
            {
                "session_id": marker,
                "timestamp": ts + 60_000,
                "role": "assistant",
                "text": f"the parrot eats seeds, noted for {marker}",
            }
        )
    out.append(
        {
            "session_id": "ops",
            "timestamp": MIGRATION,
            "role": "user",
            "text": "we ran the database migration to the new cluster today",
        }
    )
    return out  # fmt: skip


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    path = tmp_path_factory.mktemp("time") / "memtoc.db"
    clock = ManualClock(NOW)
    mem = Memory(SqliteStore(path, clock=clock), clock=clock, tz=UTC)
    assert not mem.ingest_records(_records(), project="p").rejections
    zulu = {"session_id": "z", "timestamp": DAYS["alpha"], "role": "user",
            "text": "parrot feeding notes zulu"}  # fmt: skip
    assert not mem.ingest_records([zulu], project="q").rejections
    mem.process()
    mem.rollup(force=True)
    return mem


def markers(result: SearchResult) -> set[str]:
    """Which marker each returned event belongs to."""
    found = set()
    for item in result.items:
        words = [w for w in item.text.split() if w in (*DAYS, "zulu")]
        found.update(words)
    return found


TABLE: list[tuple[str, str, int, int, set[str]]] = [
    # expression, the words left, window start, window end, markers returned
    ("yesterday", "parrot", ms(2024, 5, 14, 0), ms(2024, 5, 15, 0), {"alpha"}),
    ("last week", "parrot", ms(2024, 5, 6, 0), ms(2024, 5, 13, 0), {"bravo"}),
    ("in March", "parrot", ms(2024, 3, 1, 0), ms(2024, 4, 1, 0), {"delta"}),
    ("two weeks ago", "parrot", ms(2024, 4, 28, 0), ms(2024, 5, 5, 0), {"charlie"}),
    ("on 8 May", "parrot", ms(2024, 5, 8, 0), ms(2024, 5, 9, 0), {"bravo"}),
    ("2023", "parrot", ms(2023, 1, 1, 0), ms(2024, 1, 1, 0), {"echo"}),
    ("before the migration", "parrot", 0, MIGRATION, {"echo", "golf"}),
]


@pytest.mark.parametrize(("expr", "rest", "start", "end", "expected"), TABLE)
def test_time_expressions_filter_search(
    memory: Memory, expr: str, rest: str, start: int, end: int, expected: set[str]
) -> None:
    result = memory.search(
        f"parrot {expr}", project="p", kinds=["event"], mode="bm25", time_mode="filter"
    )
    assert result.time_range is not None
    assert result.time_range["expression"] == expr
    assert (result.time_range["start_ms"], result.time_range["end_ms"]) == (start, end)
    assert result.time_range["applied"] == "filter" and result.query == rest
    assert markers(result) == expected
    assert len(result.items) == 2 * len(expected)  # both turns of each day, nothing else
    # every kind (nodes, grips too) stays inside the window
    everything = memory.search(
        f"parrot {expr}", project="p", mode="bm25", limit=50, time_mode="filter"
    )
    assert everything.items
    for item in everything.items:
        assert item.start_ms < end and item.end_ms >= start, (item.kind, item.id)


def test_anchor_is_reported(memory: Memory) -> None:
    result = memory.search("parrot before the migration", project="p", mode="bm25")
    assert result.time_range is not None
    assert result.time_range["anchor"] == "migration"
    assert result.time_range["anchor_time"] == "2024-02-10T10:00:00.000Z"
    # an anchor nothing matches: searched as written, unfiltered, and said so
    lost = memory.search("parrot before the volcano eruption", project="p", kinds=["event"])
    assert lost.time_range is not None and lost.time_range["applied"] == "unresolved"
    assert lost.time_range["start_time"] is None
    assert markers(lost) == set(DAYS)


def test_other_filters_still_apply(memory: Memory) -> None:
    # role and project filters combine with the window
    result = memory.search(
        "parrot yesterday", project="p", role="assistant", mode="bm25", time_mode="filter"
    )
    assert [i.text for i in result.items] == ["the parrot eats seeds, noted for alpha"]
    both = memory.search("parrot yesterday", kinds=["event"], mode="bm25", time_mode="filter")
    assert markers(both) == {"alpha", "zulu"}
    # an explicit range narrows the window further; one that misses it leaves nothing
    narrowed = memory.search(
        "parrot 2024", project="p", kinds=["event"], since_ms=ms(2024, 5, 1, 0), time_mode="filter"
    )
    assert markers(narrowed) == {"alpha", "bravo", "charlie"}
    missed = memory.search(
        "parrot last week", project="p", until_ms=ms(2024, 5, 1, 0), time_mode="filter"
    )
    assert missed.items == () and missed.time_range is not None


def test_reference_time_and_modes(memory: Memory) -> None:
    # "yesterday" as of 9 May is 8 May
    earlier = memory.search(
        "parrot yesterday", project="p", kinds=["event"], at_ms=ms(2024, 5, 9), time_mode="filter"
    )
    assert markers(earlier) == {"bravo"}
    # off: the words are searched as written and nothing is filtered
    off = memory.search("parrot in March", project="p", kinds=["event"], time_mode="off")
    assert off.time_range is None and markers(off) == set(DAYS)
    # boost (the default): every match comes back, the window's first
    boosted = memory.search("parrot in March", project="p", kinds=["event"], limit=20)
    assert boosted.time_range is not None and boosted.time_range["applied"] == "boost"
    assert markers(boosted) == set(DAYS)
    inside = [ms(2024, 3, 1, 0) <= i.start_ms < ms(2024, 4, 1, 0) for i in boosted.items]
    assert inside[:2] == [True, True] and not any(inside[2:])


def test_cli_at_and_time_range(memory: Memory, tmp_path: Path) -> None:
    db = str(memory.store.location)
    runner = CliRunner()
    args = ["--db", db, "search", "parrot yesterday", "--at", "2024-05-09T12:00Z", "--time"]
    args += ["filter", "--kind", "event", "-p", "p"]
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["time_range"]["start_time"] == "2024-05-08T00:00:00.000Z"
    assert {i["text"].split()[-1] for i in data["items"]} == {"bravo"}
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "'yesterday'" in out.stdout and "2024-05-08T00:00:00.000Z" in out.stdout
    bad = runner.invoke(app, ["--db", db, "search", "parrot", "--time", "sometimes"])
    assert bad.exit_code != 0
