"""The crash-loop soak in small: kills land in several kinds of step, nothing acknowledged is
lost, nothing is duplicated, every verify passes, and the TOC converges to the crash-free build.
(``make soak`` / ``memtoc bench soak`` runs the long version: 200 kills.)"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memtoc.eval.soak import SoakConfig, run_soak
from memtoc.surfaces.cli.app import app


def test_small_soak_survives_kills_and_converges(tmp_path: Path) -> None:
    report = run_soak(tmp_path / "soak", SoakConfig(kills=6, lines_per_append=600, seed=3))
    assert report.problems == []
    assert report.kills >= 6
    assert len(report.kills_by_step) >= 2, report.kills_by_step
    assert report.verifies == sum(report.runs_by_step.values()) + 2
    assert report.acknowledged > 0 and report.events >= report.acknowledged
    assert report.toc_equal and report.toc_nodes > 20 and report.rebuilt_equal


def test_soak_detects_a_lost_acknowledged_event(tmp_path: Path) -> None:
    """The checker is not blind: deleting a stored event after the loop is reported."""
    from memtoc.eval import soak

    found: list[str] = []
    original = soak._check_store

    def tamper(db: Path, acknowledged: set[str], written: int, report: soak.SoakReport) -> None:
        if acknowledged and not found:
            with soak.SqliteStore(db) as store:
                victim = sorted(acknowledged)[0]
                found.append(victim)
                store.connection.execute("DELETE FROM events WHERE event_id = ?", (victim,))
        original(db, acknowledged, written, report)

    soak._check_store = tamper  # type: ignore[assignment]
    try:
        report = run_soak(tmp_path / "soak", SoakConfig(kills=1, lines_per_append=200))
    finally:
        soak._check_store = original  # type: ignore[assignment]
    assert found
    assert any("acknowledged events lost" in p for p in report.problems), report.problems
    assert not report.ok


def test_bench_soak_command_reports_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "soak", "--kills", "2", "--lines", "300", "--workdir", str(tmp_path / "w"),
              "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["bench"] == "soak" and out["ok"] is True and out["kills"] >= 2
