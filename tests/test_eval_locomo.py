"""The LoCoMo adapter on the real ``locomo10.json`` (counts and quirks as in its README) and one
conversation evaluated end to end through the CLI."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.eval.locomo import Conversation, load_locomo, parse_evidence
from memtoc.surfaces.cli import app

SHARED = Path(__file__).resolve().parents[2] / "shared"
LOCOMO = SHARED / "datasets" / "locomo" / "locomo10.json"
STATIC_MODEL = SHARED / "models" / "minilm-static-256"


def _require(path: Path) -> None:
    if path.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{path} is missing (CI must provide the shared datasets and models)")
    pytest.skip(f"{path} is absent on this machine")


@pytest.fixture(scope="module")
def convs() -> list[Conversation]:
    _require(LOCOMO)
    return load_locomo(LOCOMO)


def _by_id(convs: list[Conversation], sample_id: str) -> Conversation:
    return next(c for c in convs if c.sample_id == sample_id)


def test_counts_match_the_readme(convs: list[Conversation]) -> None:
    assert len(convs) == 10
    assert sum(len(c.sessions) for c in convs) == 272
    assert sum(1 for c in convs for _ in c.turns) == 5_882
    assert sum(1 for c in convs for t in c.turns if t.caption) == 1_226
    asked = [q for c in convs for q in c.questions]
    skipped = [s for c in convs for s in c.skipped_questions]
    assert len(asked) + len(skipped) == 1_986
    assert len(asked) == 1_982
    assert Counter(q.category_name for q in asked) == {
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 92,
        "single-hop": 841,
        "adversarial": 446,
    }
    assert all(reason == "no evidence" for _, reason in skipped)


def test_quirks_are_handled(convs: list[Conversation]) -> None:
    assert len(_by_id(convs, "conv-26").dangling_dates) == 16
    assert parse_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert parse_evidence(["D9:1 D4:4 D4:6"]) == ["D9:1", "D4:4", "D4:6"]
    assert parse_evidence(["D", "D:11:26"]) == []
    assert parse_evidence(["D30:05", "D30:5"]) == ["D30:5"]
    dropped = {(q.qid.split(":")[0], d) for c in convs for q in c.questions for d in q.dropped}
    assert dropped == {("conv-42", "D10:19"), ("conv-47", "D4:36")}
    conv50 = _by_id(convs, "conv-50")
    assert any("D30:5" in q.evidence for q in conv50.questions)
    known = {(c.sample_id, t.dia_id) for c in convs for t in c.turns}
    assert all((c.sample_id, d) in known for c in convs for q in c.questions for d in q.evidence)


def test_timestamps_and_event_records(convs: list[Conversation]) -> None:
    conv = _by_id(convs, "conv-26")
    first = conv.sessions[0]
    assert first.date_time == "1:56 pm on 8 May, 2023"
    assert first.start_ms == int(datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp() * 1000)
    assert [t.ts_ms - first.start_ms for t in first.turns[:3]] == [0, 60_000, 120_000]
    starts = [s.start_ms for s in conv.sessions]
    assert starts == sorted(starts)
    assert conv.ref_ms == max(t.ts_ms for t in conv.turns) + 60_000
    records = list(conv.records())
    assert len(records) == sum(len(s.turns) for s in conv.sessions)
    r0 = records[0]
    assert r0["session_id"] == "conv-26:session_1"
    assert r0["text"] == f"{first.turns[0].speaker}: {first.turns[0].text}"
    assert r0["metadata"] == {"dia_id": "D1:1", "speaker": "Caroline", "session": 1}
    shared = next(t for t in conv.turns if t.caption)
    assert shared.event_text.endswith(f" [image: {shared.caption}]")


def test_one_conversation_end_to_end_through_the_cli(tmp_path: Path) -> None:
    _require(LOCOMO)
    _require(STATIC_MODEL)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "locomo",
            str(LOCOMO),
            "--conversations",
            "1",
            "--modes",
            "bm25,dense",
            "--embedder",
            "static",
            "--embed-model",
            str(STATIC_MODEL),
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["modes"] == ["bm25", "dense"]
    bm25 = data["summary"]["bm25"]["overall"]
    dense = data["summary"]["dense"]["overall"]
    assert bm25["n"] == 197  # conv-26: 199 questions, 2 without evidence
    assert bm25["recall@10"] > 0.3 and dense["recall@10"] > 0.25
    assert bm25["recall@5"] <= bm25["recall@10"] <= bm25["recall@50"]
    assert bm25["budget_recall@500"] <= bm25["budget_recall@2000"]
    assert 0 < bm25["budget_tokens@1000"] <= 1000
    assert set(data["categories"]) == {
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
        "adversarial",
    }
    assert data["latency"]["bm25"]["p95_ms"] >= data["latency"]["bm25"]["p50_ms"] > 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| bm25 |" in report and "| dense |" in report
    assert (out / "recall_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "results.json").read_text())["summary"]["bm25"]["overall"] == bm25
    lines = (out / "questions.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 197


def test_workers_give_the_serial_run_s_scores_in_its_order(tmp_path: Path) -> None:
    """Two conversations in two worker processes: the same scores, in the same order, and the
    modes' tallies (notes) summed over the workers."""
    from memtoc.eval.harness import RunConfig
    from memtoc.eval.locomo_run import run_locomo
    from memtoc.eval.modes import ModeContext, build_modes

    _require(LOCOMO)

    def run(workers: int) -> tuple[list[dict[str, object]], list[str]]:
        ctx = ModeContext.load("none", None)
        modes, _ = build_modes(["bm25", "teleport-time-boost"], ctx)
        cfg = RunConfig(ks=(5, 10), budgets=(1_000,), depth=50)
        report = run_locomo(LOCOMO, modes, ctx, cfg, conversations=2, workers=workers)
        rows = [s.to_dict() for s in report.results.scores]
        for row in rows:
            row.pop("latency_ms")
        return rows, report.notes

    serial, serial_notes = run(1)
    pooled, pooled_notes = run(2)
    assert len(serial) == 2 * 302  # conv-26 and conv-30: 302 questions with evidence, 2 modes
    assert pooled == serial
    tally = [n for n in serial_notes if n.startswith("teleport-time-boost:")]
    assert tally and tally == [n for n in pooled_notes if n.startswith("teleport-time-boost:")]
    assert "of 302 questions" in tally[0]
    assert any("2 worker processes" in n for n in pooled_notes)


def test_a_context_built_by_hand_runs_serially_and_says_why(tmp_path: Path) -> None:
    from memtoc.eval.harness import RunConfig
    from memtoc.eval.locomo_run import run_locomo
    from memtoc.eval.modes import ModeContext, build_modes
    from memtoc.text.tokens import default_counter

    _require(LOCOMO)
    ctx = ModeContext(counter=default_counter())
    modes, _ = build_modes(["bm25"], ctx)
    cfg = RunConfig(ks=(10,), budgets=(1_000,), depth=20)
    report = run_locomo(LOCOMO, modes, ctx, cfg, conversations=2, workers=2)
    assert len(report.results.scores) == 302
    assert any(n.startswith("evaluated serially: the mode context") for n in report.notes)


def test_a_rebuilt_project_gets_the_same_event_ids(tmp_path: Path) -> None:
    """Ids break ranking ties, so the harness mints them from a generator seeded by the project:
    two builds of one project have the same ids (and two projects different ones)."""
    from memtoc.eval.harness import build_memory, ingest_and_process
    from memtoc.eval.modes import ModeContext

    ctx = ModeContext.load("none", None)
    t0 = 1_683_554_160_000
    records = [
        {"session_id": "c:1", "timestamp": t0 + n * 60_000, "role": "user", "text": f"turn {n}"}
        for n in range(5)
    ]

    def ids(folder: str, stem: str) -> list[str]:
        (tmp_path / folder).mkdir(exist_ok=True)
        memory = build_memory(tmp_path / folder / f"{stem}.db", t0 + 3_600_000, ctx)
        try:
            ingest_and_process(memory, records, "c")
            return [e.event_id for e in memory.events(project="c")]
        finally:
            memory.close()

    first = ids("a", "conv-1")
    assert ids("b", "conv-1") == first
    assert ids("c", "conv-2") != first
