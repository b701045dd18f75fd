"""The ingest path end to end: files → importer → SQLite, exactly once, redacted, with a report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memtoc.ingest.importer import Importer, IngestOptions, cap_text
from memtoc.ingest.redact import Redactor
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore


def line(i: int, session: str = "s1", **extra: object) -> str:
    rec = {
        "session_id": session,
        "timestamp": f"2024-01-18T10:{i // 60:02d}:{i % 60:02d}Z",
        "role": "user" if i % 2 == 0 else "assistant",
        "text": f"message {i} about the auth refresh flow",
    }
    rec.update(extra)
    return json.dumps(rec)


def write(path: Path, lines: list[str], *, newline_at_end: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + ("\n" if newline_at_end else ""), encoding="utf-8")
    return path


@pytest.fixture
def memory(store: SqliteStore) -> Memory:
    return Memory(store, redactor=Redactor())


def test_ingest_then_reingest_stores_nothing_twice(memory: Memory, tmp_path: Path) -> None:
    f = write(tmp_path / "a.jsonl", [line(i) for i in range(20)])
    first = memory.ingest([f])
    assert (first.ingested, first.duplicates, first.rejected) == (20, 0, 0)
    second = memory.ingest([f])
    assert (second.ingested, second.read) == (0, 0)  # the watermark: nothing re-read
    rescan = memory.ingest([f], rescan=True)
    assert (rescan.ingested, rescan.duplicates) == (0, 20)  # re-read: all reported as duplicates
    moved = tmp_path / "elsewhere" / "renamed.jsonl"
    moved.parent.mkdir()
    os.rename(f, moved)
    assert memory.ingest([moved], rescan=True).duplicates == 20  # identity survives a move
    assert memory.store.count_events() == 20


def test_growing_file_is_read_incrementally(memory: Memory, tmp_path: Path) -> None:
    f = write(tmp_path / "live.jsonl", [line(i) for i in range(5)])
    assert memory.ingest([f]).ingested == 5
    with f.open("a", encoding="utf-8") as fh:
        fh.write(line(5) + "\n" + line(6)[:25])  # the last line is still being written
    grown = memory.ingest([f])
    assert grown.ingested == 1 and grown.rejected == 1
    with f.open("a", encoding="utf-8") as fh:
        fh.write(line(6)[25:] + "\n")
    done = memory.ingest([f])
    assert (done.ingested, done.rejected) == (1, 0)
    assert memory.store.count_events() == 7


def test_malformed_input_reports_each_line_and_keeps_the_good_ones(
    memory: Memory, tmp_path: Path
) -> None:
    good = [line(i) for i in range(4)]
    raw = (
        good[0].encode() + b"\n"
        + b"{not json\n"
        + json.dumps({"session_id": "s1", "role": "user", "text": "no time"}).encode() + b"\n"
        + good[1].encode() + b"\n"
        + line(9, timestamp="yesterday-ish").encode() + b"\n"
        + b'{"session_id": "s1", "timestamp": 1705572000000, "role": "user", "text": "caf\xe9"}\n'
        + good[2].encode() + b"\n"
        + json.dumps({"session_id": "s1", "timestamp": 1, "role": "wizard", "text": "x"}).encode()
        + b"\n"
        + good[3].encode() + b"\n"
        + b'{"session_id": "s1", "timestamp": 17055'
    )  # fmt: skip
    f = tmp_path / "bad.jsonl"
    f.write_bytes(raw)
    report = memory.ingest([f])
    assert report.ingested == 4
    lines = sorted((r.line, r.reason) for r in report.rejections)
    assert [n for n, _ in lines] == [2, 3, 5, 6, 8, 10]
    reasons = dict(lines)
    assert "JSON" in reasons[2]
    assert "timestamp" in reasons[3]
    assert "timestamp" in reasons[5]
    assert "UTF-8" in reasons[6]
    assert "role" in reasons[8]
    assert all(r.source == str(f) for r in report.rejections)
    assert all(str(r).startswith(f"{f}:{r.line}: ") for r in report.rejections)


def test_empty_and_binary_files(memory: Memory, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 40)
    report = memory.ingest([empty, binary])
    assert report.ingested == 0
    assert [r.source for r in report.rejections] == [str(binary)]
    assert "unrecognised format" in report.rejections[0].reason


def test_binary_file_with_explicit_format_gives_line_errors(memory: Memory, tmp_path: Path) -> None:
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\x00\x01\x02garbage\n\xff\xfe\n" + line(1).encode() + b"\n")
    report = memory.ingest([binary], fmt="jsonl")
    assert report.ingested == 1 and report.rejected == 2


def test_project_override_and_default(memory: Memory, tmp_path: Path) -> None:
    f = write(tmp_path / "p.jsonl", [line(0), line(1, project="named")])
    memory.ingest([f])
    assert {e.project for e in memory.events()} == {"default", "named"}
    g = write(tmp_path / "q.jsonl", [line(0, session="s2")])
    memory.ingest([g], project="forced")
    assert memory.events(session_id="s2")[0].project == "forced"


def test_secrets_never_reach_the_database_bytes(memory: Memory, tmp_path: Path) -> None:
    secrets = {
        "openai": "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3",
        "aws": "AKIA" + "QWERTYUIOPASDFGH",
        "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "url_password": "hunter2-very-secret",
    }
    texts = [
        f"export OPENAI_API_KEY={secrets['openai']}",
        f"aws_access_key_id = {secrets['aws']}",
        f"git remote set-url origin https://x:{secrets['github']}@github.com/acme/app.git",
        f"DATABASE_URL=postgres://app:{secrets['url_password']}@db.internal:5432/app",
    ]
    f = write(
        tmp_path / "s.jsonl",
        [line(i, text=t, metadata={"cmd": t}) for i, t in enumerate(texts)],
    )
    report = memory.ingest([f])
    assert report.ingested == 4 and report.redacted >= 4
    stored = " ".join(e.text + json.dumps(dict(e.metadata)) for e in memory.events())
    assert "[REDACTED:" in stored
    memory.store.connection.execute("PRAGMA wal_checkpoint(FULL)")
    blobs = b"".join(
        p.read_bytes() for p in (memory.store.path, Path(f"{memory.store.path}-wal")) if p.exists()
    )
    for secret in secrets.values():
        assert secret.encode() not in blobs, secret


def test_every_planted_secret_of_the_corpus_is_absent_from_the_database_bytes(
    memory: Memory, tmp_path: Path
) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "redaction"
    corpus = [
        json.loads(raw)
        for name in ("corpus.jsonl", "services.jsonl")
        for raw in (fixtures / name).read_text().splitlines()
        if raw
    ]
    assert len(corpus) >= 100
    f = write(
        tmp_path / "corpus.jsonl",
        [
            line(i, text=row["text"], metadata={"output": row["text"]})
            for i, row in enumerate(corpus)
        ],
    )
    report = memory.ingest([f])
    assert report.ingested == len(corpus) and report.rejected == 0
    assert report.redacted >= len(corpus)
    memory.store.connection.execute("PRAGMA wal_checkpoint(FULL)")
    blobs = b"".join(
        p.read_bytes() for p in (memory.store.path, Path(f"{memory.store.path}-wal")) if p.exists()
    )
    leaked = [row["kind"] for row in corpus if row["secret"].encode() in blobs]
    assert leaked == []


def test_huge_event_is_truncated_with_marker(store: SqliteStore, tmp_path: Path) -> None:
    memory = Memory(store, redactor=Redactor())
    importer_opts = IngestOptions(max_event_bytes=10_000)
    big = "x" * 3_000_000
    f = write(tmp_path / "big.jsonl", [line(0, text=big), line(1)])
    report = Importer(store, redactor=memory.redactor, options=importer_opts).ingest_paths([f])
    assert report.ingested == 2 and report.truncated == 1
    (e, _) = memory.events()
    assert len(e.text.encode()) < 10_200
    assert "truncated by memtoc: 3000000 bytes" in e.text
    assert e.metadata["truncated_from_bytes"] == 3_000_000


def test_cap_text_cuts_on_character_boundaries() -> None:
    text, size = cap_text("é" * 100, 51)
    assert size == 200 and text.startswith("é" * 25) and "truncated" in text
    assert cap_text("short", 100) == ("short", None)


def test_symlinks_out_of_the_root_are_not_followed(memory: Memory, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.jsonl", [line(0, session="outside")])
    root = tmp_path / "root"
    write(root / "inside.jsonl", [line(0, session="inside")])
    (root / "link.jsonl").symlink_to(outside)
    report = memory.ingest([root])
    assert report.ingested == 1
    assert {e.session_id for e in memory.events()} == {"inside"}
    # not followed, but said: a folder of links to transcripts elsewhere imported nothing silently
    assert report.links_skipped == [str(root / "link.jsonl")]
    assert report.to_dict()["links_skipped"] == [str(root / "link.jsonl")]


def test_ingest_records_api_rejects_bad_records_and_keeps_the_rest(memory: Memory) -> None:
    report = memory.ingest_records(
        [
            {
                "session_id": "s",
                "role": "user",
                "text": "hello",
                "timestamp": "2024-01-18T10:00:00Z",
            },
            {"session_id": "s", "role": "user"},
            {"session_id": "s", "role": "assistant", "text": "hi"},
        ]
    )
    assert report.ingested == 2
    assert [(r.line, "text" in r.reason) for r in report.rejections] == [(2, True)]


def test_remember_records_a_redacted_event(memory: Memory) -> None:
    token = "ghp_" + "Zx9Qw2Er7Ty4Ui1Op8As5Df3Gh6Jk0Lz2Xc7"
    event = memory.remember(f"Decision: rotate {token} weekly", project="webapp")
    assert token not in event.text
    assert event.project == "webapp" and "[REDACTED:" in event.text
    assert memory.store.get_event(event.event_id) == event


def test_append_rows_takes_an_iterator_and_counts_duplicates(store: SqliteStore) -> None:
    from memtoc.model import Event

    events = [
        Event(f"01HZ{i:022d}", "s1", "p", "a", 1_000 + i, "user_message", "user", f"t{i}", {"i": i})
        for i in range(6)
    ]
    first = store.append_events(events[:3])
    rows = (r for r in [(e.event_id, e.ts_ms, e.project, e.session_id, e.agent, e.event_type,
                          e.role, e.text, e.source, e.source_pos, json.dumps(dict(e.metadata),
                          separators=(",", ":"))) for e in events])  # fmt: skip
    again = store.append_rows(rows, {"job": {"offset": 1}}, count=6)
    assert (first.inserted, again.inserted, again.duplicates) == (3, 3, 3)
    assert again.outbox_entry_id is not None and store.get_checkpoint("job") == {"offset": 1}
    assert [e.metadata for e in store.get_events([e.event_id for e in events])] == [
        {"i": i} for i in range(6)
    ]


def test_metadata_json_is_the_stores_json_and_none_for_values_that_are_not_json() -> None:
    from types import MappingProxyType

    from memtoc.ingest.importer import metadata_json

    values: list[Any] = [{}, {"b": 1, "a": ["é", None, 1.5]}, MappingProxyType({"k": "v"})]
    want = ["{}", '{"b":1,"a":["é",null,1.5]}', '{"k":"v"}']
    assert metadata_json(values) == want
    assert metadata_json([*values, {"x": {1, 2}}, {"n": 2}]) == [*want, None, '{"n":2}']
