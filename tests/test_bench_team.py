"""``memtoc bench team``: concurrent writers and shared workers on PostgreSQL, measured end to end
on a small history (the figures themselves are in docs/benchmarks.md)."""

from __future__ import annotations

import psycopg
import pytest

from memtoc.errors import StoreError
from memtoc.eval.bench_team import DB_PREFIX, measure_team, run_team_bench
from memtoc.store.postgres import ann as postgres_ann
from search_support import STATIC_MODEL


def test_team_bench_stores_everything_once_and_answers(pg_url: str) -> None:
    result = measure_team(pg_url, 400, writers=3, workers=2, queries=10, batch=25)
    assert result["stored"] == 400  # every event appended once across the writers
    assert result["outbox_entries"] == sum(result["entries_per_worker"])  # type: ignore[arg-type]
    assert isinstance(result["outbox_entries"], int) and result["outbox_entries"] >= 15
    assert result["queries"] == 10 and result["hit_at_10"] is not None
    assert float(result["hit_at_10"]) >= 0.5  # type: ignore[arg-type]
    assert 0 < float(result["query_p50_ms"]) <= float(result["query_p95_ms"])  # type: ignore[arg-type]
    nodes = result["nodes"]
    assert isinstance(nodes, dict) and {"segment", "day", "year"} <= set(nodes)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the bench database is gone
        left = conn.execute(
            "SELECT COUNT(*) FROM pg_database WHERE datname = %s", (f"{DB_PREFIX}400",)
        ).fetchone()
    assert left == (0,)


def test_team_bench_needs_a_postgres_url() -> None:
    with pytest.raises(StoreError, match="postgresql://"):
        run_team_bench("/tmp/memtoc.db", [10])


def test_team_bench_with_vectors_times_hybrid_through_the_index(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not STATIC_MODEL.exists():
        pytest.skip(f"no local model at {STATIC_MODEL}")
    monkeypatch.setattr(postgres_ann, "ANN_MIN_ROWS", 100)  # an index even for 300 events
    result = measure_team(pg_url, 300, writers=2, workers=1, queries=6, batch=50,
                          embedder=("static", str(STATIC_MODEL)))  # fmt: skip
    assert isinstance(result["vectors"], int) and result["vectors"] > 300  # events + docs
    assert result["embedder"] == "static:minilm-static-256"
    hybrid, exact = result["hybrid"], result["hybrid_exact"]
    assert isinstance(hybrid, dict) and hybrid["queries"] == 6
    assert isinstance(exact, dict) and exact["queries"] == 6
    assert isinstance(hybrid["hit_at_10"], float) and hybrid["hit_at_10"] >= 0.5
    indexes = result["ann_indexes"]
    assert isinstance(indexes, list) and len(indexes) == 1 and isinstance(indexes[0], dict)
    assert indexes[0]["valid"] is True and result["ann_build_s"] is not None
