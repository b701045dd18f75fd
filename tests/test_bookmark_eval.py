"""``memtoc eval bookmarks``: the labelled set of real moments, the scoring, the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.errors import ConfigError
from memtoc.eval.bookmark_eval import LabelledWindow, evaluate, load_windows
from memtoc.retrieval.bookmarks import ExtractiveDetector
from memtoc.surfaces.cli import app

FIXTURE = Path(__file__).parent / "fixtures" / "bookmarks" / "moments.jsonl"
runner = CliRunner()


def window(
    wid: str, label: str, turns: list[tuple[str, str]], focus: int, moment: list[int]
) -> str:
    return json.dumps(
        {
            "id": wid,
            "corpus": "toy",
            "source": f"toy.md:{wid}",
            "label": label,
            "focus": focus,
            "moment": moment,
            "turns": [{"role": r, "text": t} for r, t in turns],
        }
    )


def test_the_labelled_set_is_what_its_readme_says() -> None:
    windows = load_windows(FIXTURE)
    assert len(windows) >= 300
    moments = [w for w in windows if w.label != "none"]
    assert len(moments) >= 150
    assert {w.corpus for w in moments} == {"context-evaluator", "getspecstory"}
    assert len({w.id for w in windows}) == len(windows)
    for w in windows:  # quotes are short
        assert all(len(text) <= 800 for _, text in w.turns), w.id


def test_scoring_counts_moments_and_false_bookmarks(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(
        "\n".join(
            [
                # a confirmed explanation: a moment the detector should find
                window(
                    "w1",
                    "validated",
                    [
                        (
                            "assistant",
                            "The cache key ignores the tenant id, so two tenants share entries.",
                        ),
                        ("user", "Yes, exactly, that's right."),
                    ],
                    1,
                    [0, 1],
                ),
                # chatter: no moment
                window("w2", "none", [("user", "thanks, see you tomorrow")], 0, []),
                # a moment it cannot know about
                window("w3", "foundational", [("user", "lunch is at noon")], 0, [0]),
            ]
        )
        + "\n"
    )
    report = evaluate(load_windows(path), ExtractiveDetector())
    c = report.overall
    assert (c.windows, c.moments, c.tp, c.fp, c.fn) == (3, 2, 1, 0, 1)
    assert c.precision == 1.0 and c.recall == 0.5
    assert c.f1 == pytest.approx(2 / 3)
    assert c.by_label == {"validated": [1, 1], "foundational": [0, 1]}
    assert [o.error for o in report.outcomes] == [None, None, "missed"]


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        window("ok", "none", [("user", "hi")], 0, [])
        + "\n"
        + window("bad", "decision", [("user", "hi")], 0, [0])
        + "\n"
    )
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: unknown label 'decision'"):
        load_windows(path)
    path.write_text(window("x", "conclusion", [("user", "use X")], 0, []) + "\n")
    with pytest.raises(ConfigError, match=r":1: a moment needs its turns"):
        load_windows(path)


def test_window_events_are_one_session_in_order() -> None:
    w = LabelledWindow("w", "c", "s", "none", 1, (), (("assistant", "a"), ("user", "b")))
    events = w.events()
    assert [e.role for e in events] == ["assistant", "user"]
    assert [e.event_type for e in events] == ["assistant_message", "user_message"]
    assert len({e.session_id for e in events}) == 1
    assert events[0].ts_ms < events[1].ts_ms


def test_command_reports_both_corpora() -> None:
    result = runner.invoke(app, ["eval", "bookmarks", str(FIXTURE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    transcripts = {"claude-code-transcripts", "codex-transcripts", "gemini-transcripts"}
    assert set(data["corpora"]) == {"context-evaluator", "getspecstory", *transcripts}
    overall = data["overall"]
    assert overall["moments"] == sum(c["moments"] for c in data["corpora"].values())
    assert 0.0 <= overall["precision"] <= 1.0 and 0.0 <= overall["recall"] <= 1.0
    text = runner.invoke(app, ["eval", "bookmarks", str(FIXTURE), "--corpus", "getspecstory"])
    assert text.exit_code == 0 and "getspecstory" in text.output
    assert "context-evaluator" not in text.output
