"""A file's resume position cannot be another file's (issue #16 part 1): watermarks are kept per
path with fingerprints of the bytes read, verified before resuming; a moved file is recognised;
a changed one is read again from the start; checkpoints of older stores migrate."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memtoc.ingest.positions import first_line_hash
from memtoc.ingest.redact import Redactor
from memtoc.memory import Memory
from memtoc.store.sqlite import SqliteStore

BOTH_STORES = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)
SUMMARY = {"type": "summary", "summary": "Fixing the login flow", "leafUuid": "leaf-1"}


def claude_lines(session: str, n: int, words: str) -> list[dict[str, Any]]:
    """A Claude Code transcript after the shared summary line: ``n`` user/assistant messages."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        content: Any = f"{words} message {i}"
        if role == "assistant":
            content = [{"type": "text", "text": content}]
        out.append(
            {
                "type": role,
                "uuid": f"{session}-{i}",
                "parentUuid": f"{session}-{i - 1}" if i else None,
                "sessionId": session,
                "timestamp": f"2025-03-0{1 + len(session) % 5}T10:{i:02d}:00.000Z",
                "cwd": "/work/app",
                "message": {"role": role, "content": content},
            }
        )
    return out


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def jsonl(i: int, session: str = "s1", text: str = "line") -> dict[str, Any]:
    return {
        "session_id": session,
        "timestamp": f"2024-01-18T10:{i // 60:02d}:{i % 60:02d}Z",
        "role": "user",
        "text": f"{text} {i}",
    }


@pytest.fixture
def memory(store: Any) -> Memory:
    return Memory(store, redactor=Redactor())


def texts(memory: Memory, session: str) -> list[str]:
    return sorted(e.text for e in memory.events(session_id=session))


@BOTH_STORES
def test_two_transcripts_that_share_a_first_line_are_both_kept_whole(
    memory: Memory, tmp_path: Path
) -> None:
    """Both open with the same summary record: the second used to resume at the first one's
    offset, keeping 6 of its 10 messages with "rejected 0"."""
    a = write(tmp_path / "a.jsonl", [SUMMARY, *claude_lines("aaaa", 4, "short")])
    b = write(tmp_path / "b.jsonl", [SUMMARY, *claude_lines("bbbbbb", 10, "another session")])
    assert first_line_hash(a) == first_line_hash(b)
    assert memory.ingest([a]).ingested == 5  # the summary is an event too
    report = memory.ingest([b])
    assert (report.ingested, report.rejected, report.restarted) == (11, 0, 0)
    assert len(texts(memory, "bbbbbb")) == 11  # its summary and 10 messages
    # each keeps its own watermark: both grow, both resume where they stopped
    with a.open("a") as fh:
        fh.write(json.dumps(claude_lines("aaaa", 6, "short")[5]) + "\n")
    with b.open("a") as fh:
        fh.write(json.dumps(claude_lines("bbbbbb", 11, "another session")[10]) + "\n")
    again = memory.ingest([a, b])
    assert (again.ingested, again.duplicates, again.read) == (2, 0, 2)


def test_a_resume_offset_inside_the_other_files_line_is_never_used(
    memory: Memory, tmp_path: Path
) -> None:
    """The old shared position landed mid-line in the second file, which was then rejected
    whole. Generic JSONL with the same header and ids of its own."""
    header = {"session_id": "h", "timestamp": 0, "role": "system", "text": "export v1"}
    a = write(tmp_path / "a.jsonl", [header, *(jsonl(i, "a") for i in range(3))])
    b = write(tmp_path / "b.jsonl", [header, *({**jsonl(i, "b", "x" * 7), "event_id": f"b{i}"}
                                               for i in range(8))])  # fmt: skip
    memory.ingest([a])
    report = memory.ingest([b])
    assert (report.rejected, report.ingested) == (0, 8)  # the header is a's, already stored
    assert len(texts(memory, "b")) == 8


def test_a_moved_file_is_recognised_and_not_read_again(memory: Memory, tmp_path: Path) -> None:
    f = write(tmp_path / "live.jsonl", [jsonl(i) for i in range(30)])
    assert memory.ingest([f]).ingested == 30
    moved = tmp_path / "archive" / "renamed.jsonl"
    moved.parent.mkdir()
    os.rename(f, moved)
    report = memory.ingest([moved])
    assert (report.read, report.ingested, report.duplicates) == (0, 0, 0)
    with moved.open("a") as fh:
        fh.write(json.dumps(jsonl(30)) + "\n")
    grown = memory.ingest([moved])
    assert (grown.read, grown.ingested) == (1, 1)
    # a copy is recognised too (its bytes were read already)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(moved.read_bytes())
    assert memory.ingest([copy]).read == 0
    assert memory.store.count_events() == 31


@BOTH_STORES
def test_ids_from_positions_do_not_collide_between_files_with_one_first_line(
    memory: Memory, tmp_path: Path
) -> None:
    """Events without ids of their own take ids from the file's first line and their offset:
    two files with one header and lines of one length used to give the second file's events
    the first one's ids (stored as duplicates of events they are not)."""
    header = {"session_id": "h", "timestamp": 0, "role": "system", "text": "export v1"}
    a = write(tmp_path / "a.jsonl", [header, *(jsonl(i, "a") for i in range(5))])
    b = write(tmp_path / "b.jsonl", [header, *(jsonl(i, "b") for i in range(5))])
    memory.ingest([a])
    report = memory.ingest([b])
    assert (report.ingested, report.duplicates, report.rejected) == (5, 1, 0)  # 1: the header
    assert texts(memory, "b") == texts(memory, "a")  # same texts, other session
    again = memory.ingest([a, b], rescan=True)  # read again: nothing new, nothing lost
    assert (again.ingested, again.duplicates, again.rejected) == (0, 12, 0)
    assert memory.store.count_events() == 11


def with_ids(lines: list[dict[str, Any]], given: bool = True) -> list[dict[str, Any]]:
    return [{**line, "event_id": line["text"]} if given else line for line in lines]


@BOTH_STORES
@pytest.mark.parametrize("given", [True, False], ids=["given-ids", "ids-from-positions"])
def test_a_file_changed_before_its_position_is_read_again_from_the_start(
    memory: Memory, tmp_path: Path, given: bool
) -> None:
    f = write(tmp_path / "t.jsonl", with_ids([jsonl(i) for i in range(10)], given))
    memory.ingest([f])
    # rewritten with other content of the same first line and length: the old offset would
    # land on a line start, but the bytes before it changed
    lines = [jsonl(i) for i in range(10)]
    lines[5] = {**lines[5], "text": "edit 5"}
    lines.append(jsonl(10))
    write(f, with_ids(lines, given))
    report = memory.ingest([f])
    assert report.restarted == 1 and report.rejected == 0
    assert report.read == 11 and report.ingested == 2 and report.duplicates == 9
    assert "edit 5" in texts(memory, "s1")
    # truncated below the old position: read from the start too
    write(f, with_ids([jsonl(i) for i in range(3)], given))
    truncated = memory.ingest([f])
    assert (truncated.restarted, truncated.read, truncated.duplicates) == (1, 3, 3)


def test_rescan_still_rereads_everything(memory: Memory, tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", [jsonl(i) for i in range(5)])
    memory.ingest([f])
    report = memory.ingest([f], rescan=True)
    assert (report.read, report.duplicates, report.restarted) == (5, 5, 0)


# -- migration -----------------------------------------------------------------------------------
def _as_before_0009(path: Path, checkpoints: dict[str, Any]) -> None:
    """Make the store at ``path`` look as a store written before ``0010_file_positions``."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM checkpoints WHERE job LIKE 'ingest:%'")
        for job, value in checkpoints.items():
            conn.execute(
                "INSERT INTO checkpoints(job, value, updated_ms) VALUES (?, ?, 0)",
                (job, json.dumps(value)),
            )
        conn.execute("DELETE FROM schema_migrations WHERE name = '0010_file_positions'")
    conn.close()


def test_older_checkpoints_migrate_and_are_trusted_only_for_their_own_path(
    tmp_path: Path,
) -> None:
    header = {"session_id": "h", "timestamp": 0, "role": "system", "text": "export v1"}
    a = write(tmp_path / "a.jsonl", [header, *(jsonl(i, "a") for i in range(4))])
    b = write(tmp_path / "b.jsonl", [header, *({**jsonl(i, "b", "yy"), "event_id": f"b{i}"}
                                               for i in range(9))])  # fmt: skip
    db = tmp_path / "m.db"
    with SqliteStore(db) as store:
        Memory(store, redactor=Redactor()).ingest([a])
    first = first_line_hash(a)
    mid_line = len(a.read_bytes()) - 7  # a's watermark as b would have used it: inside a line
    _as_before_0009(
        db,
        {
            f"ingest:{first}": {"offset": a.stat().st_size, "path": str(a), "format": "jsonl"},
            "ingest:ffffffffffffffffffffffff": {"offset": mid_line, "path": "gone.jsonl"},
        },
    )
    with SqliteStore(db) as store:
        jobs = store.list_checkpoints("ingest:")
        assert jobs == {
            f"ingest:{first}:{a}": {
                "offset": a.stat().st_size,
                "path": str(a),
                "format": "jsonl",
                "legacy": True,
            },
            "ingest:ffffffffffffffffffffffff:gone.jsonl": {
                "offset": mid_line,
                "path": "gone.jsonl",
                "legacy": True,
            },
        }
        memory = Memory(store, redactor=Redactor())
        resumed = memory.ingest([a])  # its own legacy checkpoint: resumed, nothing re-read
        assert resumed.read == 0
        other = memory.ingest([b])  # the same first line, another path: read whole
        assert (other.rejected, other.ingested, other.read) == (0, 9, 10)
        # a legacy offset that is not at a line start is not trusted
        store.set_checkpoint(f"ingest:{first}:{a}", {"offset": mid_line, "legacy": True})
        reread = memory.ingest([a])
        assert (reread.restarted, reread.rejected, reread.duplicates) == (1, 0, 5)


def test_older_checkpoints_migrate_on_postgres(pg_url: str) -> None:
    import psycopg

    from memtoc.store.postgres import PostgresStore

    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO checkpoints(job, value, updated_ms) VALUES "
            '(\'ingest:abc\', \'{"offset": 12, "path": "/t/a.jsonl"}\', 0), '
            "('rollup:day', '{\"x\": 1}', 0)"
        )
        conn.execute("DELETE FROM schema_migrations WHERE name = '0009_file_positions'")
    store = PostgresStore(pg_url)
    try:
        assert store.list_checkpoints() == {
            "ingest:abc:/t/a.jsonl": {"offset": 12, "path": "/t/a.jsonl", "legacy": True},
            "rollup:day": {"x": 1},
        }
    finally:
        store.close()


def test_a_rewritten_chat_document_without_times_stores_nothing_twice(
    memory: Memory, tmp_path: Path
) -> None:
    """OpenAI chat documents carry no time: messages were placed to end at the file's mtime, and
    the document's one line was its identity, so every rewrite stored every message again."""
    doc = tmp_path / "chat.json"
    messages = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}]
    doc.write_text(json.dumps(messages))
    os.utime(doc, (1_705_572_000, 1_705_572_000))
    assert memory.ingest([doc]).ingested == 2
    messages.append({"role": "user", "content": "another question"})
    doc.write_text(json.dumps(messages))
    os.utime(doc, (1_705_572_600, 1_705_572_600))
    grown = memory.ingest([doc])
    assert (grown.ingested, grown.duplicates) == (1, 2)
    events = memory.events()
    assert [e.text for e in events] == ["hello there", "hi", "another question"]
    assert [e.ts_ms for e in events] == [1_705_571_999_999, 1_705_572_000_000, 1_705_572_000_001]
    assert memory.ingest([doc], rescan=True).duplicates == 3
