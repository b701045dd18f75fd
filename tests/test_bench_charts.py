"""``memtoc bench ingest|process`` through the CLI: JSON figures plus a throughput chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.eval.bench_charts import line_chart
from memtoc.surfaces.cli import app

PNG = b"\x89PNG\r\n\x1a\n"


def _run(args: list[str]) -> dict[str, object]:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert isinstance(data, dict)
    return data


def test_bench_ingest_charts_memtoc_beside_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMTOC_HOME", str(tmp_path / "home"))
    out = tmp_path / "charts"
    data = _run(["bench", "ingest", "-n", "1000", "-n", "3000", "--json", "--out", str(out),
                 "--workdir", str(tmp_path)])  # fmt: skip
    results = data["results"]
    assert isinstance(results, list) and [r["events"] for r in results] == [1000, 3000]
    for r in results:
        assert r["memtoc"]["events_per_s"] > 0 and r["baseline"]["events_per_s"] > 0
    assert Path(str(data["chart"])) == out / "ingest_throughput.png"
    assert (out / "ingest_throughput.png").read_bytes()[:8] == PNG


def test_bench_process_charts_pipeline_beside_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMTOC_HOME", str(tmp_path / "home"))
    out = tmp_path / "charts"
    data = _run(["bench", "process", "-n", "1500", "--json", "--out", str(out),
                 "--workdir", str(tmp_path)])  # fmt: skip
    (r,) = data["results"]  # type: ignore[misc]
    assert r["events"] == 1500 and r["events_per_s"] > 0 and r["scan_events_per_s"] > 0
    assert (out / "process_throughput.png").read_bytes()[:8] == PNG


def test_line_chart_draws_unsorted_points_and_skips_empty_series(tmp_path: Path) -> None:
    path = line_chart(
        tmp_path / "c.png",
        {"a": [(10_000, 3.0), (1_000, 1.0)], "empty": []},
        title="t",
        ylabel="y",
        log_y=True,
    )
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 1_000
