"""LoCoMo summary figures and the pipeline benchmark, on small inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtoc.eval.bench_process import measure_process, run_process_bench
from memtoc.eval.summary_quality import (
    key_term_recall,
    parse_session_time,
    rouge1_recall,
    run_summary_quality,
)

LOCOMO = Path("/work/shared/datasets/locomo/locomo10.json")


def test_rouge1_and_key_term_recall() -> None:
    ref = "Caroline attended an LGBTQ support group and the support group helped."
    assert rouge1_recall(ref, ref) == 1.0
    assert rouge1_recall(ref, "") == 0.0
    # Clipped: "support group" twice among the 8 reference unigrams, once in the candidate.
    assert rouge1_recall(ref, "support group") == pytest.approx(2 / 8)
    assert key_term_recall("painting lakes rivers", "She painted a lake") == pytest.approx(2 / 3)
    assert parse_session_time("1:56 pm on 8 May, 2023") == 1683554160000


def test_locomo_one_conversation_has_sane_figures(tmp_path: Path) -> None:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo dataset not found at {LOCOMO}")
    q = run_summary_quality(LOCOMO, conversations=1, workdir=tmp_path)
    d = q.to_dict()["mean"]
    assert isinstance(d, dict)
    assert d["sessions"] == 19  # conv-26 has 19 summarised sessions
    assert 0.18 < float(d["key_term_recall"]) < 0.9  # type: ignore[arg-type]
    assert 0.15 < float(d["rouge1_recall"]) < 0.9  # type: ignore[arg-type]
    assert 60 <= float(d["l0_tokens"]) <= 140  # type: ignore[arg-type]
    assert float(d["l0_tokens"]) < float(d["l1_tokens"]) <= 2000  # type: ignore[arg-type]
    assert all(s.segments >= 1 and s.bullets >= 3 for s in q.sessions)


def test_process_bench_counts_and_times(tmp_path: Path) -> None:
    r = measure_process(600, workdir=tmp_path).to_dict()
    assert r["events"] == 600
    assert int(r["segments"]) > 0 and int(r["grips"]) >= 3 * int(r["segments"])  # type: ignore[call-overload]
    assert int(r["nodes"]) > int(r["segments"])  # type: ignore[call-overload]  # periods too
    assert int(r["bookmarks"]) > 0  # type: ignore[call-overload]  # the detector ran on them
    assert float(r["pipeline_s"]) > float(r["scan_s"]) > 0  # type: ignore[arg-type]
    assert float(r["peak_rss_mb"]) > 10  # type: ignore[arg-type]
    assert float(r["cpu_s"]) > 0 and float(r["cpu_us_per_event"]) > 0  # type: ignore[arg-type]


def test_process_bench_runs_in_a_child(tmp_path: Path) -> None:
    seen: list[str] = []
    r = run_process_bench(300, workdir=tmp_path, progress=lambda stage, n: seen.append(stage))
    assert r["events"] == 300 and "ingest" in seen and "process" in seen
