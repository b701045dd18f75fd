"""The bookmark merge's "same moment restated" lookup (``find_bookmarks`` by type and content) reads
the matching rows through the ``bookmarks_content`` index (migration 0013) on SQLite and
PostgreSQL, not every bookmark of the project: the pipeline asks it for every detected bookmark,
so without the index filing grew with the square of the history."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest

from memtoc.model import Bookmark

STORE_BACKENDS = ("sqlite", "postgres")

T0 = 1_710_000_000_000
TYPES = ("conclusion", "decision", "resolution")


def bookmarks(rng: random.Random) -> list[Bookmark]:
    """1,500 bookmarks over two projects; some contents restated (same text, later), one of them
    9,000 random characters (past a PostgreSQL B-tree entry's limit)."""
    out = []
    long = "".join(rng.choice(string.ascii_letters + " ") for _ in range(9_000))
    for n in range(1_500):
        content = (
            long if n % 500 == 7 else f"moment {n % 700}: {rng.random():.3f} cached the answer"
        )
        if n % 250 == 3:
            content = "Decided: keep the retry budget at eight with jitter"
        out.append(
            Bookmark(
                bookmark_id=f"bm-{n:05d}",
                project="web" if n % 3 else "infra",
                content=content,
                event_ids=(f"ev-{n}",),
                importance=0.5,
                type=TYPES[n % 3] if n % 250 != 3 else "decision",
                created_ms=T0 + n * 60_000,
                last_relevant_ms=T0 + n * 60_000,
            )
        )
    return out


def recorded_reads(store: Any) -> list[tuple[str, Any]]:
    """Wraps ``store._q`` to record the statements it runs (the SQL both engines share)."""
    calls: list[tuple[str, Any]] = []
    inner = store._q

    def _q(sql: str, params: Any = ()) -> Any:
        calls.append((sql, params))
        return inner(sql, params)

    store._q = _q
    return calls


def test_same_content_lookup_reads_the_content_index(store: Any) -> None:
    rng = random.Random(13)
    stored = bookmarks(rng)
    with store.transaction():
        for b in stored:
            store.put_bookmark(b)
    for analyzed, probe in ((False, stored[7]), (False, stored[3]), (True, stored[10]),
                            (True, stored[1_000]), (True, stored[7])):  # fmt: skip
        if analyzed:  # with the engine's statistics as without them
            if hasattr(store, "connection"):
                store.connection.execute("ANALYZE")
            else:
                store._exec("ANALYZE bookmarks")
        want = [
            b
            for b in stored
            if (b.project, b.type, b.content) == (probe.project, probe.type, probe.content)
        ]
        calls = recorded_reads(store)
        got = store.find_bookmarks(probe.project, type=probe.type, content=probe.content)
        del store._q
        assert [b.bookmark_id for b in got] == [b.bookmark_id for b in want]
        assert got == want and probe in got
        (sql, params), *_ = calls
        if hasattr(store, "connection"):
            plan = " | ".join(r[3] for r in store._q(f"EXPLAIN QUERY PLAN {sql}", params))
            assert "USING INDEX bookmarks_content (project=? AND type=? AND content=?)" in plan, (
                plan
            )
        else:
            plan = " | ".join(str(r[0]) for r in store._q(f"EXPLAIN {sql}", params))
            assert "bookmarks_content" in plan, plan
    assert len(stored[7].content) == 9_000
    assert len(store.find_bookmarks("web", type="decision", content="nothing like it")) == 0


@pytest.mark.parametrize("project", ["web", "infra"])
def test_restated_moments_are_found_among_many(store: Any, project: str) -> None:
    stored = bookmarks(random.Random(5))
    with store.transaction():
        for b in stored:
            store.put_bookmark(b)
    restated = "Decided: keep the retry budget at eight with jitter"
    got = store.find_bookmarks(project, type="decision", content=restated)
    want = [b for b in stored if b.project == project and b.content == restated]
    assert got == sorted(want, key=lambda b: (b.created_ms, b.bookmark_id)) and len(want) >= 2
