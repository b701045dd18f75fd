"""The CLI through typer's runner: ingest, read, verify, back up and restore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memtoc.surfaces.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def transcript(path: Path, n: int = 12) -> Path:
    rows = [
        {
            "session_id": "s1",
            "timestamp": 1_705_572_000_000 + i * 60_000,
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"step {i}: refactor refresh_token() in src/auth/session.py",
        }
        for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    return path


def test_ingest_events_stats_verify(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    code, out = run("--db", db, "ingest", str(transcript(tmp_path / "t.jsonl")), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["ingested"], report["rejected"], report["duplicates"]) == (12, 1, 0)
    assert report["rejections"][0]["where"].endswith("t.jsonl:13")
    code, out = run("--db", db, "ingest", str(tmp_path / "t.jsonl"), "--rescan", "--json")
    assert json.loads(out)["duplicates"] == 12
    code, out = run("--db", db, "events", "--json", "--since", "2024-01-18T10:05:00Z", "-n", "3")
    events = json.loads(out)["events"]
    assert code == 0 and [e["text"][:6] for e in events] == ["step 5", "step 6", "step 7"]
    assert events[0]["timestamp"] == "2024-01-18T10:05:00.000Z"
    code, out = run("--db", db, "stats", "--json")
    assert json.loads(out)["events"] == 12
    code, out = run("--db", db, "verify")
    assert code == 0 and "✓ event/outbox atomicity" in out


def test_human_ingest_output_names_rejections(tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "m.db"), "ingest", str(transcript(tmp_path / "t.jsonl")))
    assert code == 0
    assert "events ingested" in out and "t.jsonl:13" in out and "invalid JSON" in out


def test_ingest_says_which_links_it_did_not_follow(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "shared").mkdir()
    shared = transcript(tmp_path / "shared" / "t.jsonl")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "t.jsonl").symlink_to(shared)
    db = str(tmp_path / "m.db")
    code, out = run("--db", db, "ingest", str(corpus))
    assert "0" in out and "1 symbolic links lead outside the folder given" in out, out
    assert str(corpus / "t.jsonl") in out.replace("\n", "")
    # the setting it names imports them
    monkeypatch.setenv("MEMTOC_FOLLOW_SYMLINKS", "1")
    code, out = run("--db", db, "ingest", str(corpus), "--json")
    assert code == 0 and json.loads(out)["ingested"] == 12, out


def test_backup_and_restore(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    run("--db", str(db), "ingest", str(transcript(tmp_path / "t.jsonl")))
    code, out = run("--db", str(db), "backup", str(tmp_path / "b.db"))
    assert code == 0, out
    other = tmp_path / "restored.db"
    code, out = run("--db", str(other), "restore", str(tmp_path / "b.db"))
    assert code == 0, out
    code, out = run("--db", str(other), "stats", "--json")
    assert json.loads(out)["events"] == 12
    code, out = run("--db", str(other), "restore", str(tmp_path / "b.db"))
    assert code == 1  # refuses to overwrite without --force
    code, out = run("--db", str(db), "backup", str(tmp_path / "b.db"))
    assert code == 1 and "already exists" in out


def test_restore_refuses_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    code, out = run("--db", str(tmp_path / "x.db"), "restore", str(junk), "--force")
    assert code == 1 and "not a memtoc store" in out


def test_errors_are_clear(tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "m.db"), "ingest", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "missing.jsonl: no such file or directory" in out
    code, out = run("--db", str(tmp_path / "m.db"), "ingest", "--format", "yaml", str(tmp_path))
    assert code == 1 and "--format must be one of" in out
    assert run("--db", str(tmp_path / "m.db"), "init")[0] == 0
    code, out = run("--db", str(tmp_path / "m.db"), "events", "--since", "the other day")
    assert code == 2 and "ISO 8601" in out and "--since" in out


def test_compact(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("--db", db, "ingest", str(transcript(tmp_path / "t.jsonl")))
    code, out = run("--db", db, "compact", "--json")
    assert code == 0 and json.loads(out)["bytes_after"] > 0


def test_version() -> None:
    from memtoc import __version__

    code, out = run("--version")
    assert code == 0 and out.strip() == f"memtoc {__version__}"


def test_ingest_exits_non_zero_when_a_file_yields_nothing_usable(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    good = transcript(tmp_path / "good.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session_id": "s", "text": "no timestamp"}\n{broken\n')
    result = runner.invoke(app, ["--db", db, "ingest", str(good), str(bad), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)  # the report is printed, the error goes to stderr
    assert report["ingested"] == 12 and report["unusable_files"] == [str(bad)]
    assert "1 file yielded nothing usable" in result.stderr and str(bad) in result.stderr
    code, out = run("--db", db, "ingest", str(good))  # nothing new, nothing wrong: exit 0
    assert code == 0, out
    unknown = tmp_path / "notes.json"
    unknown.write_text('{"hello": "world"}')
    code, out = run("--db", db, "ingest", str(unknown))
    assert code == 1 and "events ingested" in out and "unrecognised format" in out


def test_claude_code_sidecar_is_read_not_rejected(tmp_path: Path) -> None:
    folder = tmp_path / "-home-dev-app" / "0b6c1f1e-5d7b-4f0e-9a43-3c1d2f6b8a10" / "subagents"
    folder.mkdir(parents=True)
    line = {
        "type": "user", "uuid": "u1", "parentUuid": None, "isSidechain": True, "agentId": "a1",
        "sessionId": "0b6c1f1e-5d7b-4f0e-9a43-3c1d2f6b8a10", "cwd": "/home/dev/app",
        "timestamp": "2026-03-01T10:00:00Z", "message": {"role": "user", "content": "Map the repo"},
    }  # fmt: skip
    (folder / "agent-a1.jsonl").write_text(json.dumps(line) + "\n")
    (folder / "agent-a1.meta.json").write_text('{"agentType":"Explore","description":"Map"}')
    code, out = run("--db", str(tmp_path / "m.db"), "ingest", str(tmp_path), "--json")
    report = json.loads(out)
    assert code == 0 and report["rejected"] == 0 and report["ingested"] == 1, out
    assert report["files"] == 2 and report["skipped"] == 1
