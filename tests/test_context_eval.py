"""``memtoc eval context``: the replay sees only what was written before each session started."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memtoc.eval.context_eval import idf_weights, run_context_eval, score_terms
from memtoc.surfaces.cli import app


def _session(folder: Path, sid: str, day: int, request: str, answer: str) -> None:
    lines = []
    for i, (kind, text) in enumerate([("user", request), ("assistant", answer)]):
        content = text if kind == "user" else [{"type": "text", "text": text}]
        line = {
            "type": kind, "uuid": f"{sid}-{i}", "parentUuid": None, "sessionId": sid,
            "cwd": "/home/dev/shop", "timestamp": f"2026-02-{day:02d}T10:0{i}:00Z",
            "message": {"role": kind, "content": content},
        }  # fmt: skip
        lines.append(line)
    (folder / f"{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _dataset(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "transcripts").mkdir(parents=True)
    (root / "reference").mkdir()
    _session(root / "transcripts", "s1", 10, "Add a basket endpoint", "Added the basket endpoint.")
    _session(
        root / "transcripts", "s2", 11, "Fix the invoice rounding", "Rounding fixed in tax.py."
    )
    _session(root / "transcripts", "s3", 12, "Write the zeppelin report", "Zeppelin report done.")
    refs = [
        {"session_id": "s1", "created_at": "2026-02-10T11:00:00Z",
         "summary": {"intent": "Add a basket endpoint", "outcome": "Basket endpoint added"}},
        {"session_id": "s2", "created_at": "2026-02-11T11:00:00Z",
         "summary": {"intent": "Fix invoice rounding", "outcome": "Rounding fixed in tax.py"}},
        {"session_id": "s3", "created_at": "2026-02-12T11:00:00Z", "summary": None},
    ]  # fmt: skip
    (root / "reference" / "checkpoints.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in refs)
    )
    return root


def test_each_session_is_scored_against_the_previous_sessions_reference(tmp_path: Path) -> None:
    report = run_context_eval(_dataset(tmp_path), budget=400, workdir=tmp_path / "work")
    assert report.sessions == 3
    assert [(s.session_id, s.previous) for s in report.scores] == [("s2", "s1"), ("s3", "s2")]
    for score in report.scores:
        assert 0 < score.tokens <= 400
        assert score.ceiling == 1.0  # every reference term is in the previous session's text
        assert score.recall > 0
    copies = tmp_path / "work" / "transcripts"
    assert sorted(p.name for p in copies.iterdir()) == ["s1.jsonl", "s2.jsonl"]  # s3 unseen


def test_weighted_recall_discounts_terms_every_summary_uses() -> None:
    idf = idf_weights(["fixed the basket", "fixed the invoice", "fixed the tax"])
    recall, weighted, missed = score_terms({"fix", "basket"}, {"fix"}, idf)
    assert recall == 0.5 and weighted == 0.0 and missed == ["basket"]


def test_cli_prints_the_scores(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "context", str(_dataset(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["scored"] == 2 and out["sessions"] == 3 and len(out["per_session"]) == 2
