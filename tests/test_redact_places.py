"""Redaction everywhere an event's text is stored, not just its text: metadata keys, session ids,
projects (and the project registry), agents, file paths (events' source and files' checkpoints),
through every way in — file ingest, records, the HTTP remember route. Before: a secret in any of
these was stored verbatim (all 73 kinds tried)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from memtoc.config import Settings, load_settings
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.ingest.redact import Redactor
from memtoc.ingest.sources.base import EventDraft
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.http.app import create_app

BASE = 1_705_572_000_000
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS = "AKIA" + "J7QX2M4P9RT5VW3Z"
PG = "Sup3rS3cretPw"
SECRETS = (GHP, AWS, PG, "AKIAJ7QX2M4P9RT5VW3Z")


def settings_at(home: Path) -> Settings:
    return load_settings({"home": str(home), "embedder": "none"}, environ={})


def raw(db: Path) -> bytes:
    """The store's bytes on disk (database and WAL)."""
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def leaked(db: Path) -> list[str]:
    data = raw(db)
    return [s for s in SECRETS if s.encode() in data]


def stored(memory: Memory, sql: str) -> list[Any]:
    assert isinstance(memory.store, SqliteStore)
    return memory.store.connection.execute(sql).fetchall()


def test_records_with_secrets_in_every_identifier_and_metadata_key(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "home")
    records = [
        {
            "event_id": "E1",
            "session_id": f"ci run {GHP}",
            "timestamp": BASE,
            "role": "user",
            "text": "deploying now",
            "project": f"postgres://app:{PG}@db:5432/orders",
            "agent": f"bot/{AWS}",
            "metadata": {GHP: True, "nested": {f"AWS_ACCESS_KEY_ID={AWS}": 1}, "ok": "x"},
        }
    ]
    with Memory.open(settings) as memory:
        report = memory.ingest_records(records)
        assert report.ingested == 1 and report.redacted >= 4, report.to_dict()
        event = memory.store.get_event("E1")
        assert event.session_id == "ci run [REDACTED:github_token]"
        assert event.project == "postgres://app:[REDACTED:url_password]@db:5432/orders"
        assert event.agent == "bot/[REDACTED:aws_access_key_id]"
        assert event.metadata == {
            "[REDACTED:github_token]": True,
            "nested": {"AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]": 1},
            "ok": "x",
        }
        names = json.dumps(stored(memory, "SELECT * FROM projects"))
        assert PG not in names and "[REDACTED:url_password]" in names
        # the same record again is a duplicate (its identifiers redact the same way)
        assert memory.ingest_records(records).duplicates == 1
        memory.process()
        db = Path(memory.store.location)
    assert leaked(db) == []


def test_a_file_whose_path_holds_a_secret(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "home")
    folder = tmp_path / "exports" / GHP
    folder.mkdir(parents=True)
    transcript = folder / f"session.{AWS}.jsonl"
    transcript.write_text(
        "".join(
            json.dumps(
                {"session_id": "s1", "timestamp": BASE + i, "role": "user", "text": f"step {i}"}
            )
            + "\n"
            for i in range(3)
        )
    )
    with Memory.open(settings) as memory:
        first = memory.ingest([transcript])
        assert first.ingested == 3 and first.redacted >= 2
        sources = {r[0] for r in stored(memory, "SELECT DISTINCT source FROM events")}
        assert sources == {
            str(tmp_path.resolve() / "exports" / "[REDACTED:github_token]")
            + "/session.[REDACTED:aws_access_key_id].jsonl"
        }
        jobs = stored(memory, "SELECT job, value FROM checkpoints WHERE job LIKE 'ingest:%'")
        assert jobs and GHP not in json.dumps(jobs) and AWS not in json.dumps(jobs)
        # the checkpoint, kept under the redacted path, still resumes the file
        with transcript.open("a") as fh:
            fh.write(json.dumps({"session_id": "s1", "timestamp": BASE + 9, "role": "user",
                                 "text": "step 9"}) + "\n")  # fmt: skip
        again = memory.ingest([transcript])
        assert again.ingested == 1 and again.duplicates == 0 and again.restarted == 0
        db = Path(memory.store.location)
    assert leaked(db) == []


def test_a_session_started_in_a_folder_whose_path_holds_a_secret(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db")
    importer = Importer(store, redactor=Redactor(), options=IngestOptions())
    cwd = str(tmp_path / "checkout" / GHP / "app")
    drafts = [
        (EventDraft("s1", BASE + i, "user_message", "user", f"step {i}", cwd=cwd), f"E{i}")
        for i in range(2)
    ]
    report = importer.ingest_drafts(drafts)
    assert report.ingested == 2
    projects = store.connection.execute("SELECT * FROM projects").fetchall()
    roots = store.connection.execute("SELECT * FROM project_roots").fetchall()
    assert GHP not in repr(projects) + repr(roots)
    assert {store.get_event("E0").project} == {store.get_event("E1").project}
    store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    assert GHP.encode() not in raw(tmp_path / "m.db")


def test_the_http_remember_route_redacts_session_and_project(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "home")
    app = create_app(lambda: Memory.open(settings), token=None, web=False)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        response = client.post(
            "/v1/remember",
            json={
                "text": f"the deploy key is {AWS}",
                "session_id": f"notes/{GHP}",
                "project": f"acme DB_PASSWORD={PG}",
            },
        )
        assert response.status_code == 200, response.text
        event = response.json()["event"]
        assert event["session_id"] == "notes/[REDACTED:github_token]"
        assert event["project"] == "acme DB_PASSWORD=[REDACTED:env_assignment]"
        assert event["text"] == "the deploy key is [REDACTED:aws_access_key_id]"
    with Memory.open(settings) as memory:
        db = Path(memory.store.location)
        assert isinstance(memory.store, SqliteStore)
        memory.store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert leaked(db) == []
