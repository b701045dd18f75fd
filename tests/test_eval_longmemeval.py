"""The LongMemEval adapter on a small fixture in the official format: loading, gold mapping,
abstention handling, and an evaluation through the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.errors import IngestError
from memtoc.eval.longmemeval import load_longmemeval, parse_lme_date
from memtoc.surfaces.cli import app

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "longmemeval" / "mini.json"
STATIC_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "minilm-static-256"


def _ms(year: int, month: int, day: int, hour: int, minute: int) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def test_loads_items_dates_and_gold() -> None:
    items = load_longmemeval(FIXTURE)
    assert [i.question_id for i in items] == [
        "mini_ssu_1",
        "mini_multi_2",
        "mini_temp_3",
        "mini_ssu_4_abs",
    ]
    first = items[0]
    assert first.question_ms == _ms(2023, 5, 30, 23, 40)
    assert [s[1] for s in first.sessions] == [
        _ms(2023, 5, 20, 2, 21),
        _ms(2023, 5, 22, 10, 5),
        _ms(2023, 5, 25, 18, 30),
    ]
    assert [i.scored for i in items] == [True, True, True, False]
    records = list(first.records())
    assert len(records) == 8
    answer = [r for r in records if r["metadata"]["has_answer"]]
    assert len(answer) == 1 and answer[0]["session_id"] == "mini_ssu_1:1:answer_ssu_1"
    assert answer[0]["timestamp"] == _ms(2023, 5, 22, 10, 5)
    assert records[3]["timestamp"] - records[2]["timestamp"] == 60_000


def test_bad_input_names_the_item(tmp_path: Path) -> None:
    raw = json.loads(FIXTURE.read_text())
    raw[1]["haystack_dates"] = raw[1]["haystack_dates"][:2]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(IngestError, match=r"mini_multi_2.*2 dates, 4 sessions"):
        load_longmemeval(bad)
    with pytest.raises(IngestError, match="unreadable date"):
        parse_lme_date("May 5th", where="x")
    assert parse_lme_date("2023/1/2 (Mon) 3:04", where="x") == _ms(2023, 1, 2, 3, 4)


def test_eval_through_the_cli(tmp_path: Path) -> None:
    if not STATIC_MODEL.exists():
        pytest.skip(f"{STATIC_MODEL} is absent on this machine")
    out = tmp_path / "lme"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "longmemeval",
            str(FIXTURE),
            "--modes",
            "bm25,dense",
            "--k",
            "1,3,5",
            "--embedder",
            "static",
            "--embed-model",
            str(STATIC_MODEL),
            "--json",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["projects"] == 3
    assert "mini_ssu_4_abs: not scored (abstention)" in data["notes"]
    assert data["categories"] == ["single-session-user", "multi-session", "temporal-reasoning"]
    dense = data["summary"]["dense"]
    assert dense["overall"]["n"] == 3
    # The answer sessions share the questions' key words: any real embedder ranks one first.
    assert dense["overall"]["recall_any@1"] == 1.0
    for mode in ("bm25", "dense"):
        overall = data["summary"][mode]["overall"]
        # Only the two-answer-session items can miss recall_all@1 while hitting recall_any@1.
        assert overall["recall_all@1"] <= overall["recall_any@1"]
        assert overall["recall_all@5"] == 1.0
        assert 0.0 <= overall["ndcg@1"] <= 1.0 and 0.0 < overall["ndcg@5"] <= 1.0
        assert overall["turn_recall@5"] == 1.0
    multi = data["summary"]["dense"]["multi-session"]
    assert multi["recall_all@1"] == 0.0  # two gold sessions cannot both be in the top 1
    assert (out / "report.md").exists() and (out / "recall_vs_budget.png").exists()
