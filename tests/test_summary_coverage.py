"""``memtoc eval summaries``: key-term coverage of node texts against reference summaries (plain,
IDF-weighted, ceiling), checkpoint references, junk keywords, node health, and a run through the
CLI on a corpus made of the SpecStory fixtures (real excerpts, Apache-2.0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.errors import ConfigError
from memtoc.eval.summary_coverage import (
    Unit,
    checkpoint_references,
    is_junk_keyword,
    score_units,
    summarise_scores,
)
from memtoc.surfaces.cli import app
from memtoc.text.tokens import default_counter

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "specstory" / "getspecstory"
COUNTER = default_counter()


def test_recall_weighted_and_ceiling() -> None:
    units = [
        Unit("c", "session", "a", "Cache moved to SQLite; tests added.", "SQLite cache", "all "
             "about the sqlite cache and the tests"),
        Unit("c", "session", "b", "Retry logic with jitter; tests added.", "tests", ""),
    ]  # fmt: skip
    a, b = score_units(units, COUNTER)
    # a: terms cache, mov(e), sqlite, test, ad(d) -> cache and sqlite found
    assert a.recall == pytest.approx(2 / 5)
    # "test" and "add" are in both references: weight ln(2/2) = 0; the rest weigh ln 2 each
    assert a.weighted == pytest.approx(2 / 3)
    assert a.ceiling == pytest.approx(2 / 3)  # "move" is nowhere in the source
    assert a.missed[0] == "mov"  # the heaviest term missed (stemmed as key_terms does)
    assert b.recall == pytest.approx(1 / 5) and b.weighted == 0.0 and b.ceiling is None
    summary = summarise_scores([a, b])["c"]
    assert isinstance(summary, dict)
    assert summary["session"]["units"] == 2  # type: ignore[index]
    assert summary["session"]["recall"] == pytest.approx(0.3)  # type: ignore[index]


def test_checkpoint_references(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    rows = [
        {"session_id": "s1", "summary": {"intent": "Fix the diff viewer.", "outcome": "Grid.",
         "learnings": {"repo": ["Uses Biome"], "code": [{"path": "x", "finding": "Grid rows"}],
                       "workflow": ["Rebuild CSS"]}, "friction": ["ignored"]}},
        {"session_id": "s1", "summary": {"intent": "Second checkpoint."}},
        {"session_id": "s2"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    refs = checkpoint_references(path)
    assert set(refs) == {"s1"}
    assert refs["s1"].split("\n") == [
        "Fix the diff viewer.", "Grid.", "Uses Biome", "Rebuild CSS", "Grid rows",
        "Second checkpoint.",
    ]  # fmt: skip
    path.write_text('{"session_id": "s1"}\nnot json\n')
    with pytest.raises(ConfigError, match="line 2: not JSON"):
        checkpoint_references(path)


@pytest.mark.parametrize(
    ("keyword", "junk"),
    [("--tail", True), ("http", True), ("https://x.io/a", True), ("REDACTED", True),
     ("gh api REDACTED", True), ("<local-command-caveat>", True), ("/Users/me/code", True),
     ("f2635a5", True), ("impact evaluation", False), ("src/api/jobs.ts", False),
     ("useEvaluationApi", False), ("SQLite", False)],
)  # fmt: skip
def test_junk_keywords(keyword: str, junk: bool) -> None:
    assert is_junk_keyword(keyword) is junk


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "fixture-corpus"
    shutil.copytree(FIXTURES / ".specstory" / "history", root / "history")
    (root / "questions.jsonl").write_text(
        '{"id": "q", "question": "?", "category": "fix", "gold": ["x"], "need": "any"}\n'
    )
    return root


def test_coding_corpus_through_the_cli(corpus: Path, tmp_path: Path, hermetic_env: Path) -> None:
    runner = CliRunner()
    store = tmp_path / "stores"
    args = ["eval", "summaries", str(corpus), "--store", str(store), "--embedder", "none"]
    first = runner.invoke(app, [*args, "--json"])
    assert first.exit_code == 0, first.output
    result = json.loads(first.output)
    assert result["coverage"] == {}  # no reference summaries: health only
    assert "no reference/checkpoints.jsonl" in " ".join(result["notes"])
    health = result["health"]
    assert next(iter(health)) == "segment" and "day" in health
    for h in health.values():
        assert h["nodes"] > 0 and 0.0 <= h["l0_in_range"] <= 1.0
    # a reference for the Claude Code session of 2026-01-16: session and period units
    (corpus / "reference").mkdir()
    ref = {"session_id": "3e14b6e6-2330-496e-9c76-3eb7934bc3fd", "summary": {
        "intent": "Find out why a cloud sync left an empty markdown file.",
        "outcome": "Traced the Read of the history directory to an EISDIR error."}}  # fmt: skip
    (corpus / "reference" / "checkpoints.jsonl").write_text(json.dumps(ref) + "\n")
    out = tmp_path / "out"
    second = runner.invoke(app, [*args, "--out", str(out)])
    assert second.exit_code == 0, second.output
    assert "node text vs. reference summaries" in second.output
    saved = json.loads((out / "summaries.json").read_text())
    levels = saved["coverage"]["fixture-corpus"]
    assert levels["session"]["units"] == 1 and levels["day"]["units"] == 1
    for level in levels.values():
        assert 0.0 < level["recall"] <= 1.0 and level["tokens"] > 0
        assert level["weighted"] is None  # one reference per level: no term is distinctive
    assert {u["level"] for u in saved["units"]} >= {"session", "day", "week", "month"}
    assert any(n.startswith("store reused from") for n in saved["notes"])
