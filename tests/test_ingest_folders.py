"""A folder given to ``memtoc ingest`` may hold files that are no transcripts: they are left alone.

User trial 4: ``memtoc ingest ~/.codex`` imported every session, then printed "rejected" in red for
``auth.json``, ``history.jsonl`` and ``version.json`` and exited 1 ("3 files yielded nothing
usable"); ``~/.claude`` did the same over ``settings.json`` and ``todos/*.json``. Files found by
walking a folder that are of no transcript format are named in a note and do not fail the
command; the same file named on its own is still rejected, and a folder with no transcript at all
is an error. On a copy of the real Codex fixture (cut from the shared transcripts, MIT) laid out
as Codex keeps it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.cli import app

ROLLOUTS = Path(__file__).parent / "fixtures" / "codex-real"
SIDE_FILES = {  # what Codex keeps beside its sessions (shapes as Codex writes them)
    "auth.json": '{"OPENAI_API_KEY": null, "tokens": null}\n',
    "history.jsonl": '{"session_id":"0199a7b2-1111","ts":1750000000,"text":"fix the build"}\n',
    "version.json": '{"latest_version":"0.40.0","last_checked_at":"2026-01-01T00:00:00Z"}\n',
}


def _codex_home(tmp_path: Path) -> Path:
    home = tmp_path / ".codex"
    sessions = home / "sessions" / "2026" / "06" / "22"
    sessions.mkdir(parents=True)
    for rollout in ROLLOUTS.glob("rollout-*.jsonl"):
        shutil.copy(rollout, sessions / rollout.name)
    for name, text in SIDE_FILES.items():
        (home / name).write_text(text)
    return home


def test_side_files_in_a_folder_are_left_alone(tmp_path: Path) -> None:
    home = _codex_home(tmp_path)
    settings = load_settings({"home": str(tmp_path / "m"), "embedder": "none"}, environ={})
    with Memory.open(settings) as memory:
        report = memory.ingest([home])
        assert report.ingested > 10 and report.rejected == 0 and report.unusable == []
        assert sorted(Path(p).name for p in report.not_transcripts) == sorted(SIDE_FILES)
        assert report.files == 1  # the rollout
        named = memory.ingest([home / "auth.json"])  # named on its own: still rejected
        assert named.not_transcripts == [] and named.unusable == [str(home / "auth.json")]
        assert "unrecognised format" in named.rejections[0].reason


def test_the_cli_notes_them_and_exits_zero(tmp_path: Path) -> None:
    home = _codex_home(tmp_path)
    runner = CliRunner(env={"MEMTOC_EMBEDDER": "none"})
    db = ["--home", str(tmp_path / "m")]
    result = runner.invoke(app, [*db, "ingest", str(home)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "note: 3 files in the folders given are not transcripts and were left alone" in flat
    assert "rejected" not in flat.replace("rejected │ 0", "")
    data = json.loads(runner.invoke(app, [*db, "ingest", str(home), "--json"]).stdout)
    assert len(data["not_transcripts"]) == 3 and data["unusable_files"] == []
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "settings.json").write_text('{"theme": "dark"}')
    empty = runner.invoke(app, [*db, "ingest", str(tmp_path / "notes")])
    assert empty.exit_code == 1 and "no transcript found under" in " ".join(empty.output.split())
