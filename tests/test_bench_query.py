"""``memtoc bench query`` end to end: a small store in a spawned child, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from memtoc.eval.bench_query import measure_query, query_terms, read_through, scan_top
from memtoc.model import Event
from memtoc.surfaces.cli import app


def _event(i: int, text: str) -> Event:
    return Event(
        event_id=f"e{i}",
        ts_ms=1_000 + i,
        project="p",
        session_id="s",
        agent="a",
        event_type="user_message",
        role="user",
        text=text,
        metadata={},
        source="t",
        source_pos=str(i),
    )


def test_query_terms_drop_stopwords_and_single_letters() -> None:
    assert query_terms("what's the upload limit on tax-calculator?") == [
        "upload",
        "limit",
        "tax-calculator",
    ]


def test_scan_top_ranks_by_distinct_terms_then_earliest() -> None:
    events = [
        _event(0, "nothing relevant"),
        _event(1, "the upload went fine"),
        _event(2, "upload limit is 50 MB on tax-calculator"),
        _event(3, "another upload"),
    ]
    found = scan_top(iter(events), ["upload", "limit", "tax-calculator"], k=2)
    assert [e.event_id for e in found] == ["e2", "e1"]


def test_bench_query_cli_json_and_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMTOC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")  # hermetic and fast: hybrid is skipped, named
    out = tmp_path / "bench"
    result = CliRunner().invoke(
        app,
        ["bench", "query", "--events", "2000", "--queries", "20", "--json", "--out", str(out),
         "--workdir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["bench"] == "query"
    (r,) = data["results"]
    assert r["events"] == 2000 and r["queries"] == 20 and r["facts"] > 0
    assert r["db_bytes"] > 0 and r["peak_rss_mb"] > 0 and r["setup_s"] > 0
    assert r["warm_read_s"] >= 0  # the store read once before the timed queries
    assert r["embedder"] is None and "teleport-hybrid" in r["skipped"]
    assert set(r["modes"]) == {
        "teleport-bm25", "nav-context", "nav-year", "recall", "scan-baseline"
    }  # fmt: skip
    for mode, m in r["modes"].items():
        assert 0 < m["p50_ms"] <= m["p95_ms"], mode
        assert 0 <= m["cpu_p50_ms"] <= m["cpu_p95_ms"], mode
        assert m["qps"] > 0, mode
    assert r["modes"]["teleport-bm25"]["hit_rate_at_10"] > 0.5
    assert r["modes"]["recall"]["hit_rate_at_10"] > 0.5  # the fact's event inside the context
    assert 0 <= r["modes"]["scan-baseline"]["hit_rate_at_10"] <= 1
    assert r["modes"]["nav-context"]["hit_rate_at_10"] is None
    assert r["modes"]["recall"]["server_cpu_p50_ms"] is None  # SQLite: no server
    chart = Path(data["chart"])
    assert chart == out / "query_latency.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_query_store_dir_builds_once_then_reuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMTOC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")
    keep = tmp_path / "stores"
    args = ["bench", "query", "--events", "1500", "--queries", "10", "--json",
            "--out", str(tmp_path / "bench"), "--store-dir", str(keep)]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    (built,) = json.loads(first.output)["results"]
    assert built["store_reused"] is False
    assert (keep / "query-1500-seed7.db").exists() and (keep / "query-1500-seed7.ready").exists()
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    (reused,) = json.loads(second.output)["results"]
    assert reused["store_reused"] is True and reused["setup_s"] < built["setup_s"]
    # the reused store answers the same planted facts as well as the fresh one
    for mode in ("teleport-bm25", "scan-baseline"):
        assert reused["modes"][mode]["hit_rate_at_10"] == built["modes"][mode]["hit_rate_at_10"]


def test_read_through_reads_the_store_and_its_log(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    db.write_bytes(b"x" * 100_000)
    Path(f"{db}-wal").write_bytes(b"y" * 10)
    assert read_through(db, chunk=4096) >= 0
    assert read_through(tmp_path / "missing.db") >= 0  # nothing to read is not an error


def test_bench_query_on_postgres_keeps_and_reuses_its_database(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("MEMTOC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTOC_EMBEDDER", "none")
    server = pg_url.rsplit("/", 1)[0] + "/postgres"
    name = "memtoc_bench_query_600_seed7"
    try:
        # through the CLI, without --keep-db: a fresh database, dropped after the run
        result = CliRunner().invoke(
            app,
            ["bench", "query", "--events", "600", "--queries", "5", "--json", "--db", server,
             "--out", str(tmp_path / "bench"), "--mode", "teleport-bm25", "--mode", "recall"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        (fresh,) = json.loads(result.output)["results"]
        assert fresh["backend"] == "postgresql" and fresh["store_reused"] is False
        assert set(fresh["modes"]) == {"teleport-bm25", "recall"}  # only the modes asked
        assert fresh["modes"]["teleport-bm25"]["hit_rate_at_10"] > 0.5
        assert fresh["modes"]["recall"]["hit_rate_at_10"] > 0.5
        assert fresh["db_bytes"] > 0 and len(fresh["load_avg_1m"]) == 2
        if urlsplit(server).hostname in ("127.0.0.1", "localhost"):  # the server's own CPU time
            assert fresh["modes"]["teleport-bm25"]["server_cpu_p50_ms"] > 0
        with psycopg.connect(server, autocommit=True) as admin:
            left = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            assert left.fetchall() == []
        # kept: built once, then reused as it is
        kept = {"queries": 5, "pg_url": server, "keep_db": True, "modes": ["recall"]}
        built = measure_query(600, **kept)  # type: ignore[arg-type]
        reused = measure_query(600, **kept)  # type: ignore[arg-type]
        assert built["store_reused"] is False and reused["store_reused"] is True
        assert isinstance(reused["modes"], dict) and set(reused["modes"]) == {"recall"}
        assert reused["facts"] == built["facts"] == fresh["facts"]
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_bench_query_refuses_unknown_modes_and_keep_db_without_db(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "bench"), "--events", "100"]
    result = CliRunner().invoke(app, ["bench", "query", *out, "--keep-db"])
    assert result.exit_code != 0 and "--keep-db needs --db" in result.output
    result = CliRunner().invoke(app, ["bench", "query", *out, "--mode", "teleport-bm52", "--json"])
    assert result.exit_code != 0
    assert "teleport-bm52" in str(result.exception) + result.output
