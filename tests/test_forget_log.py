"""The forget log survives a restore (memtoc.forget_log, forgetting.reconcile).

Before: restoring a backup taken before a forget brought every forgotten event back and emptied
the forget audit, silently. Now the log beside the store is re-applied when the restored store is
opened: events it holds are forgotten again (purge, re-derivation, scrub), events it never held
become tombstones (a re-import is a duplicate), and the log itself holds no text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memtoc import forget_log, forgetting
from memtoc.config import Settings, load_settings
from memtoc.errors import StoreError
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite import scrub as sqlite_scrub
from memtoc.surfaces.cli import app

BASE = 1_705_572_000_000  # 2024-01-18T10:00:00Z
SECRET = "ovenbirdsecret41"
LATER = "kestrelsecret77"
runner = CliRunner()


def rows(prefix: str, n: int, secret_at: int, secret: str, start: int) -> list[dict[str, Any]]:
    return [
        {
            "event_id": f"{prefix}{i}",
            "session_id": f"{prefix}-session",
            "timestamp": start + i * 60_000,
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"the deploy token is {secret}" if i == secret_at else f"step {i} of {prefix}",
            "metadata": {"note": secret} if i == secret_at else {},
        }
        for i in range(n)
    ]


def settings_at(home: Path) -> Settings:
    return load_settings({"home": str(home), "embedder": "none"}, environ={})


def cli(home: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--db", str(home / "memtoc.db"), *args])
    return result.exit_code, result.output


def raw_hits(db: Path, needle: str) -> int:
    return sum(p.read_bytes().count(needle.encode()) for p in (db, Path(f"{db}-wal")) if p.exists())


def test_restoring_a_pre_forget_backup_forgets_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = settings_at(home)
    db = Path(settings.db)
    backup = tmp_path / "before.db"
    with Memory.open(settings) as memory:
        memory.ingest_records(rows("A", 6, 2, SECRET, BASE))
        memory.process()
        memory.backup(backup)  # taken before any forget: A2 alive, B* not yet ingested
        memory.ingest_records(rows("B", 4, 1, LATER, BASE + 3_600_000))
        memory.process()
        assert memory.forget(event_ids=["A2"]).events == 1
        assert memory.forget(query=LATER).event_ids == ["B1"]
    log = forget_log.log_path(db)
    text = log.read_text()
    assert SECRET not in text and LATER not in text and "deploy" not in text
    assert [e.event_id for e in forget_log.read(log)] == ["A2", "B1"]
    assert backup.read_bytes().count(SECRET.encode()) > 0

    code, out = cli(home, "restore", str(backup), "--force", "--json")
    assert code == 0, out
    restored = json.loads(out)
    assert restored["forget_log"]["reforgotten"] == ["A2"]
    assert restored["forget_log"]["tombstoned"] == 1  # B1: never in the backup

    with Memory.open(settings) as memory:
        assert memory.reconciled is None  # in step now
        ids = [e.event_id for e in memory.events(limit=100)]
        assert "A2" not in ids and ids.count("A0") == 1
        assert not memory.search(SECRET, mode="bm25").items
        assert memory.forget(query=SECRET, dry_run=True).event_ids == []
        audit = memory.forget_audit()
        assert audit[0].selector.get("reapplied_from_log") is True
        assert audit[0].event_ids == ("A2",)
        # the transcript that held B1 is imported again: a duplicate, not a resurrection
        again = memory.ingest_records(rows("B", 4, 1, LATER, BASE + 3_600_000))
        assert again.ingested == 3 and again.duplicates == 1
        memory.process()
        assert "B1" not in [e.event_id for e in memory.events(limit=100)]
        assert memory.verify().ok, memory.verify().problems
        assert isinstance(memory.store, SqliteStore)
        assert sqlite_scrub.pending(memory.store) is None
    assert raw_hits(db, SECRET) == 0 and raw_hits(db, LATER) == 0


def test_a_read_only_open_refuses_a_store_with_forgotten_events_back(tmp_path: Path) -> None:
    from memtoc.store.sqlite import maintenance

    settings = settings_at(tmp_path / "home")
    backup = tmp_path / "before.db"
    with Memory.open(settings) as memory:
        memory.ingest_records(rows("A", 4, 1, SECRET, BASE))
        memory.backup(backup)
        memory.forget(event_ids=["A1"])
    maintenance.restore(backup, Path(settings.db), force=True)  # the bare file copy
    with pytest.raises(StoreError, match=r"1 events recorded as forgotten .* are back"):
        Memory.open(settings, read_only=True)
    with Memory.open(settings) as memory:  # a writable open repairs it
        assert memory.reconciled is not None and memory.reconciled.reforgotten == ["A1"]
    with Memory.open(settings, read_only=True) as memory:
        assert "A1" not in [e.event_id for e in memory.events()]


def test_a_deleted_log_is_rebuilt_from_the_tombstones(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "home")
    with Memory.open(settings) as memory:
        memory.ingest_records(rows("A", 4, 1, SECRET, BASE))
        memory.forget(event_ids=["A1", "A3"])
    log = forget_log.log_path(Path(settings.db))
    log.unlink()
    with Memory.open(settings) as memory:
        assert memory.reconciled is not None and memory.reconciled.appended == 2
    assert sorted(e.event_id for e in forget_log.read(log)) == ["A1", "A3"]
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_crash_after_the_log_line_is_repaired_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_at(tmp_path / "home")
    with Memory.open(settings) as memory:
        memory.ingest_records(rows("A", 4, 1, SECRET, BASE))
        memory.process()

        def crash(*args: object, **kwargs: object) -> None:
            raise RuntimeError("killed before the purge committed")

        with monkeypatch.context() as patch:
            patch.setattr(forgetting, "_purge", crash)
            with pytest.raises(RuntimeError, match="killed"):
                memory.forget(event_ids=["A1"])
        assert "A1" in [e.event_id for e in memory.events()]  # nothing committed
    with Memory.open(settings) as memory:  # the log is ahead: forgotten on the next open
        assert memory.reconciled is not None and memory.reconciled.reforgotten == ["A1"]
        assert "A1" not in [e.event_id for e in memory.events()]


def test_a_torn_last_line_is_skipped_and_a_bad_line_named(tmp_path: Path) -> None:
    log = tmp_path / "x.db-forget.jsonl"
    forget_log.append(log, 1, [forget_log.LoggedEvent("E1", 5, "p", "s")])
    with log.open("a") as fh:
        fh.write('{"forgotten_ms": 2, "events": [["E2", 5,')
    assert [e.event_id for e in forget_log.read(log)] == ["E1"]
    log.write_text('garbage\n{"forgotten_ms": 1, "events": []}\n')
    with pytest.raises(StoreError, match="line 1: not a forget log entry"):
        forget_log.read(log)


def test_postgres_forget_keeps_no_log_file_and_opens_untouched(
    pg_url: str, hermetic_env: Path
) -> None:
    """A PostgreSQL server has no forget log (its backups are the operator's: pg_dump): a forget
    there writes no log file anywhere, opening does no forget-log work, and the audit has it."""
    settings = load_settings({"db": pg_url, "embedder": "none"}, environ={})
    with Memory.open(settings) as memory:
        assert memory.reconciled is None
        memory.ingest_records(rows("A", 3, 1, SECRET, BASE), project="p")
        report = memory.forget(query=SECRET)
        assert report.events == 1 and report.wal_truncated is True
        assert [a.event_ids for a in memory.forget_audit()] == [tuple(report.event_ids)]
        assert memory.store.count_events() == 2
    assert not list(hermetic_env.parent.rglob(f"*{forget_log.SUFFIX}"))
    with Memory.open(settings) as again:
        assert again.reconciled is None
