"""The held-out question sets (``evals/heldout/*/questions.jsonl``): format, and gold in the data.

Every set must load with ``memtoc eval coding``'s own loader and follow the coding corpora's
rules (fields, categories, 25-200-character verbatim quotes, ``multi`` needing every quote, ``at``
not before its evidence). When ``../shared`` is present, every gold quote must occur in the
transcripts the set's README names, checked by the corpora's standard-library ``check_questions.py``
(through ``three-agents/check_questions.py`` for the Codex and Gemini files, and its ``run.sh``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from memtoc.eval.coding import CATEGORIES, load_questions
from memtoc.eval.coding_score import norm

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "evals" / "heldout"
SHARED = next(
    (p for p in (ROOT.parent / "shared", Path("/work/shared")) if (p / "datasets").is_dir()), None
)
CHECKER = Path("datasets/coding/context-evaluator/check_questions.py")
TRANSCRIPTS = Path("datasets/transcripts")
FIELDS = {"id", "question", "category", "at", "gold", "need", "session_id", "timestamp"}
SETS = sorted(p.parent.name for p in HELDOUT.glob("*/questions.jsonl"))
needs_shared = pytest.mark.skipif(
    SHARED is None or not (SHARED / CHECKER).is_file(), reason="../shared datasets not present"
)


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_both_held_out_sets_are_there() -> None:
    assert {"claude-code-log", "three-agents"} <= set(SETS)
    for name in SETS:
        folder = HELDOUT / name
        assert (folder / "README.md").is_file() and (folder / "run.sh").is_file()
        assert os.access(folder / "run.sh", os.X_OK)


@pytest.mark.parametrize("name", SETS)
def test_questions_follow_the_coding_corpora_format(name: str) -> None:
    path = HELDOUT / name / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    assert len(load_questions(path)) == len(rows) >= 50
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        where = f"{name} {r.get('id')}"
        assert set(r) == FIELDS, where
        assert r["category"] in CATEGORIES, where
        assert r["need"] in ("any", "all"), where
        assert r["gold"] and all(25 <= len(norm(g)) <= 200 for g in r["gold"]), where
        if r["category"] == "multi":
            assert r["need"] == "all" and len(r["gold"]) >= 2, where
        evidence = _when(r["timestamp"])
        if r["at"] is not None:
            assert _when(r["at"]) >= evidence, where
    assert {r["category"] for r in rows} == set(CATEGORIES)


def _check(questions: Path, transcripts: Path) -> subprocess.CompletedProcess[str]:
    assert SHARED is not None
    wrapper = HELDOUT / "three-agents" / "check_questions.py"
    args = ["--checker", str(SHARED / CHECKER), "--questions", str(questions)]
    return subprocess.run(
        [sys.executable, str(wrapper), *args, "--transcripts", str(transcripts)],
        capture_output=True,
        text=True,
        check=False,
    )


@needs_shared
def test_three_agents_gold_quotes_are_in_the_linked_transcripts(tmp_path: Path) -> None:
    assert SHARED is not None
    corpus = tmp_path / "three-agents"
    env = {**os.environ, "CHECK_ONLY": "1", "CORPUS": str(corpus), "SHARED": str(SHARED)}
    done = subprocess.run(
        [str(HELDOUT / "three-agents" / "run.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("all checks passed")
    files = sorted((corpus / "transcripts").iterdir())
    assert len(files) == 22 and all(f.is_symlink() for f in files)  # linked, never copied
    assert {f.name.split("-")[0] for f in files} >= {"rollout", "session", "agent"}
    log = (corpus / "check.log").read_text(encoding="utf-8")
    assert "MISSING" not in log and "questions: 69" in log


@needs_shared
def test_the_checker_reads_codex_and_gemini_and_fails_on_a_quote_not_there(
    tmp_path: Path,
) -> None:
    """The wrapper must find quotes only a Codex or Gemini file holds, and report one that none does."""
    assert SHARED is not None
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    codex = SHARED / TRANSCRIPTS / "codex" / "rollout-46-c11fcf0c5c-0.jsonl"
    gemini = SHARED / TRANSCRIPTS / "gemini-cli" / "session-2026-03-18T02-30-29f3682e.json"
    for f in (codex, gemini):
        (transcripts / f.name).symlink_to(f)
    rows = {
        json.loads(line)["id"]: json.loads(line)
        for line in (HELDOUT / "three-agents" / "questions.jsonl").read_text().splitlines()
    }
    picked = [rows["cx-001"], rows["cx-002"], rows["gm-013"]]  # agent text, tool output, Gemini
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in picked), encoding="utf-8")
    done = _check(good, transcripts)
    assert done.returncode == 0, done.stdout
    assert done.stdout.count(" ok: 1 record(s)") == 3

    broken = dict(rows["cx-002"], gold=["❌ Tag v4.40.2 already exists somewhere"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(broken) + "\n", encoding="utf-8")
    done = _check(bad, transcripts)
    assert done.returncode == 1
    assert "cx-002: gold[0] not found" in done.stdout


@needs_shared
def test_claude_code_log_gold_quotes_are_in_its_transcripts(tmp_path: Path) -> None:
    assert SHARED is not None
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    projects = SHARED / TRANSCRIPTS / "claude-code" / "real_projects"
    for project in ("claude-code-log-sample", "coderabbit-review-helper"):
        for f in (projects / f"-Users-dain-workspace-{project}").glob("*.jsonl"):
            (transcripts / f.name).symlink_to(f)
    questions = HELDOUT / "claude-code-log" / "questions.jsonl"
    done = subprocess.run(
        [sys.executable, str(SHARED / CHECKER), "--questions", str(questions),
         "--transcripts", str(transcripts)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert done.stdout.strip().endswith("all checks passed")
