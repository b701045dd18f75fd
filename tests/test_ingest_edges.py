"""Inputs bounded and validated at the edge (issue #16 part 2): every rejection names the file,
line and reason, the rest of the batch goes in, and nothing that could poison the store or crash
a later read gets in — through files, records, ``remember`` or the store itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memtoc.errors import IngestError
from memtoc.ingest.importer import METADATA_MARKER_KEY, TRUNCATION_MARKER
from memtoc.ingest.redact import Redactor
from memtoc.ingest.sources import SOURCES
from memtoc.ingest.sources.base import RawRecord, SourceOptions
from memtoc.memory import Memory
from memtoc.model import MAX_TS_MS, MIN_TS_MS, iso_ms
from memtoc.store.sqlite import SqliteStore

BOTH_STORES = pytest.mark.parametrize("store", ["sqlite", "postgres"], indirect=True)
GOOD_TS = "2024-01-18T10:00:00Z"


def rec(text: str, ts: object = GOOD_TS, **extra: object) -> dict[str, Any]:
    return {"session_id": "s1", "timestamp": ts, "role": "user", "text": text, **extra}


def write_jsonl(path: Path, records: list[dict[str, Any] | bytes]) -> Path:
    with path.open("wb") as fh:
        for r in records:
            fh.write((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n")
    return path


@pytest.fixture
def memory(store: Any) -> Memory:
    return Memory(store, redactor=Redactor())


def reasons(report: Any) -> dict[int | None, str]:
    return {r.line: r.reason for r in report.rejections}


# -- timestamps ------------------------------------------------------------------------------
@BOTH_STORES
def test_timestamps_past_9999_are_rejected_and_the_batch_is_filed(
    memory: Memory, tmp_path: Path
) -> None:
    """The 10889 timestamp (the largest a ULID holds) and 9999-12-31T23:59:59Z used to be stored,
    then block their whole batch in the pipeline and crash every read."""
    f = write_jsonl(
        tmp_path / "t.jsonl",
        [
            rec("before the poison"),
            rec("year 10889", (1 << 48) - 1),
            rec("the last second of 9999", "9999-12-31T23:59:59Z"),
            rec("a digit string past 9999", str(10**15)),
            rec("after the poison", "2024-01-18T10:01:00Z"),
        ],
    )
    report = memory.ingest([f])
    assert report.ingested == 2
    why = reasons(report)
    assert set(why) == {2, 3, 4}
    assert all("timestamp out of range" in r and "9999-12-30" in r for r in why.values())
    assert all(r.source == str(f) for r in report.rejections)
    processed = memory.process()
    assert processed.events == 2 and not processed.failed_entries
    assert [e.text for e in memory.events()] == ["before the poison", "after the poison"]
    assert memory.search("poison").items
    assert memory.recall("poison", budget=500).items


@BOTH_STORES
def test_the_edges_of_the_range_are_stored_filed_and_read(memory: Memory, tmp_path: Path) -> None:
    """1970-01-01T00:00:00Z and 9999-12-30T23:59:59.999Z go in and through every step: the
    periods at the end of year 9999 end in year 10000, which ``datetime`` cannot show."""
    f = write_jsonl(
        tmp_path / "edges.jsonl",
        [
            rec("the first instant zebra", MIN_TS_MS, session_id="a"),
            rec("the last instant zebra", iso_ms(MAX_TS_MS), session_id="b"),
        ],
    )
    assert memory.ingest([f]).ingested == 2
    assert not memory.process().failed_entries
    memory.rollup(force=True)
    years = [n.title for n in memory.toc()]
    assert len(years) == 2
    assert [e.ts_ms for e in memory.events()] == [MIN_TS_MS, MAX_TS_MS]
    assert len(memory.search("zebra", depth="L2").items) >= 2
    assert memory.recall("zebra", budget=400).items
    memory.context(budget=400)
    assert memory.verify().ok


@pytest.mark.parametrize(
    ("ts", "why"),
    [
        (int("9" * 400), "timestamp out of range"),  # used to raise OverflowError
        ("9" * 400, "timestamp out of range"),
        (1e400, "unparseable timestamp inf"),  # decoded as infinity
        ("١٧٠٥٥٧٢٠٠٠٠٠٠", "only ASCII digits"),  # Arabic-Indic digits: used to read as 1970
        ("\u0660", "only ASCII digits"),  # ARABIC-INDIC DIGIT ZERO
        ("²", "only ASCII digits"),
        (-1, "timestamp out of range"),
        ("1969-12-31T23:59:59Z", "timestamp out of range"),
        (True, "unparseable timestamp"),
    ],
)
def test_bad_timestamps_are_named(memory: Memory, tmp_path: Path, ts: object, why: str) -> None:
    line = json.dumps(rec("bad", 0)).replace('"timestamp": 0', f'"timestamp": {json.dumps(ts)}')
    if ts == 1e400:
        line = line.replace("Infinity", "1e400")
    f = write_jsonl(tmp_path / "t.jsonl", [rec("good"), line.encode(), rec("good too")])
    report = memory.ingest([f])
    assert report.ingested == 2
    assert len(report.rejections) == 1
    assert report.rejections[0].line == 2 and why in report.rejections[0].reason


# -- shape and size --------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["jsonl", "claude-code", "codex"])
def test_a_line_nested_990_deep_is_rejected_not_a_crash(
    memory: Memory, tmp_path: Path, fmt: str
) -> None:
    """Used to raise RecursionError out of ingest, store nothing of the file, and again on every
    later ingest of it."""
    deep = b'{"session_id":"s1","timestamp":"' + GOOD_TS.encode() + b'","role":"user",'
    deep += b'"text":"x","metadata":{"a":' + b"[" * 990 + b"]" * 990 + b"}}"
    good = [rec("first"), deep, rec("last", "2024-01-18T10:01:00Z")]
    f = write_jsonl(tmp_path / "deep.jsonl", good)
    report = memory.ingest([f], fmt=fmt)
    assert reasons(report)[2] == "invalid JSON: nested deeper than 100 levels"
    if fmt == "jsonl":
        assert report.ingested == 2
    again = memory.ingest([f], fmt=fmt)  # the watermark moved past it: nothing to re-read
    assert again.rejections == [] and again.read == 0


def test_nesting_inside_tool_arguments_is_kept_as_text(memory: Memory, tmp_path: Path) -> None:
    """Codex tool arguments are JSON inside a string: deep ones are kept verbatim, no crash."""
    args = "[" * 5000 + "]" * 5000
    line = {
        "timestamp": GOOD_TS,
        "type": "response_item",
        "payload": {"type": "function_call", "name": "shell", "arguments": args, "call_id": "c"},
    }
    meta = {"timestamp": GOOD_TS, "type": "session_meta", "payload": {"id": "s", "cwd": "/p"}}
    f = write_jsonl(tmp_path / "rollout.jsonl", [meta, line])
    report = memory.ingest([f], fmt="codex")
    assert report.rejections == []
    calls = [e for e in memory.events() if e.event_type == "tool_call"]
    assert len(calls) == 1 and calls[0].text.endswith(args[-40:])


def test_fifty_megabyte_metadata_is_capped_with_a_marker(memory: Memory, tmp_path: Path) -> None:
    """Text was capped at 1 MB; metadata was stored whole."""
    blob = b"x" * 50_000_000
    line = (
        b'{"session_id":"s1","timestamp":"2024-01-18T10:00:00Z","role":"user","text":"t",'
        b'"metadata":{"tool":"grep","output":"' + blob + b'","after":1}}'
    )
    f = write_jsonl(tmp_path / "big.jsonl", [line, rec("small", "2024-01-18T10:01:00Z")])
    del blob, line
    report = memory.ingest([f])
    assert report.ingested == 2 and report.truncated == 1
    big = memory.events()[0]
    stored = json.dumps(big.metadata, ensure_ascii=False).encode()
    assert 900_000 < len(stored) <= 1_000_000
    assert big.metadata["tool"] == "grep"
    assert big.metadata[METADATA_MARKER_KEY] > 50_000_000
    assert big.metadata["output"].endswith(TRUNCATION_MARKER.format(size=50_000_000))
    assert "after" not in big.metadata


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("session_id", "a\x00b", "session_id contains a NUL character"),
        ("project", "p" * 2000, "project is longer than 1024 characters"),
        ("event_id", "e\x00", "event_id contains a NUL character"),
        ("agent", "a" * 1025, "agent is longer than 1024 characters"),
    ],
)
def test_identifiers_are_bounded(
    memory: Memory, tmp_path: Path, field: str, value: str, why: str
) -> None:
    f = write_jsonl(tmp_path / "ids.jsonl", [rec("good"), rec("bad", **{field: value})])
    report = memory.ingest([f])
    assert report.ingested == 1 and why in reasons(report)[2]


# -- every path into the store ---------------------------------------------------------------
@BOTH_STORES
def test_records_and_remember_are_validated_like_files(memory: Memory) -> None:
    deep: Any = []
    for _ in range(2000):
        deep = [deep]
    report = memory.ingest_records(
        [
            rec("ok"),
            rec("poison", (1 << 48) - 1),
            rec("deep", metadata={"a": deep}),
            rec("not json", metadata={"a": object()}),
            rec("ok too", "2024-01-18T10:00:01Z"),
        ]
    )
    assert report.ingested == 2
    why = reasons(report)
    assert "timestamp out of range" in why[2]
    assert "nested deeper than 100 levels" in why[3]
    assert "metadata is not JSON" in why[4]
    with pytest.raises(IngestError, match="nested deeper"):
        memory.remember("note", project="p", metadata={"a": deep})
    with pytest.raises(IngestError, match="session_id contains a NUL"):
        memory.remember("note", project="p", session_id="x\x00")
    huge = memory.remember("note", project="p", metadata={"blob": "y" * 3_000_000})
    assert huge.metadata[METADATA_MARKER_KEY] == len('{"blob":""}') + 3_000_000


# -- a reader that fails -----------------------------------------------------------------------
class _Fragile:
    """The JSONL reader, but it raises (as a reader bug would) on lines that say "boom"."""

    name = "fragile"
    agent = "jsonl"
    incremental = True

    def sniff(self, path: Path, head: bytes) -> bool:
        return False

    def read(self, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
        for record in SOURCES["jsonl"].read(path, start, options):
            if record.drafts and record.drafts[0].text == "boom":
                raise TypeError("unhashable type: 'dict'")
            yield record

    def session_hint(self, path: Path) -> dict[str, str]:
        return {}


def test_a_reader_bug_costs_its_line_not_the_file(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SOURCES, "fragile", _Fragile())
    f = write_jsonl(
        tmp_path / "t.jsonl",
        [rec("one"), rec("boom"), rec("three", "2024-01-18T10:00:03Z"), rec("boom")],
    )
    report = memory.ingest([f], fmt="fragile")
    assert report.ingested == 2
    assert [(r.line, r.reason) for r in report.rejections] == [
        (2, "reader error: TypeError: unhashable type: 'dict'"),
        (4, "reader error: TypeError: unhashable type: 'dict'"),
    ]
    assert memory.ingest([f], fmt="fragile").read == 0  # the watermark is past both


# -- one id, other content -----------------------------------------------------------------------
@BOTH_STORES
def test_a_duplicate_event_id_with_other_content_is_reported(
    memory: Memory, tmp_path: Path
) -> None:
    """It used to be dropped without a word (counted as a duplicate)."""
    f = write_jsonl(
        tmp_path / "t.jsonl",
        [
            rec("the original", event_id="X1"),
            rec("the original", event_id="X1"),  # a true duplicate
            rec("another text", event_id="X1"),
            rec("the original", "2024-01-18T11:00:00Z", event_id="X1"),
            rec("fine", "2024-01-18T10:00:05Z", event_id="X2"),
        ],
    )
    report = memory.ingest([f])
    assert (report.ingested, report.duplicates) == (2, 1)
    assert reasons(report) == {
        3: "event_id 'X1' is stored already with another text; the stored event is kept",
        4: "event_id 'X1' is stored already with another timestamp; the stored event is kept",
    }
    later = memory.ingest_records([rec("changed", event_id="X2")])
    assert [r.reason for r in later.rejections] == [
        "event_id 'X2' is stored already with another timestamp, text; the stored event is kept"
    ]
    assert memory.store.get_event("X1").text == "the original"


@BOTH_STORES
def test_the_store_refuses_what_the_importer_would(store: Any) -> None:
    """``append_events`` called directly (a library user) cannot store a poison either."""
    from memtoc.model import Event

    def ev(event_id: str, ts: int, **kw: Any) -> Event:
        base = dict(session_id="s", project="p", agent="a", ts_ms=ts, event_type="user_message",
                    role="user", text=f"text {event_id}")  # fmt: skip
        return Event(event_id=event_id, **{**base, **kw})

    t0 = 1_705_572_000_000
    result = store.append_events(
        [
            ev("ok1", t0),
            ev("far", (1 << 48) - 1),
            ev("neg", -5),
            ev("role", t0, role="robot"),
            ev("nul", t0, session_id="a\x00b"),
            ev("ok1", t0, text="other"),
            ev("ok2", t0 + 1),
        ],
        {"job": {"offset": 7}},
    )
    assert result.inserted == 2 and result.duplicates == 0
    assert [i for i, _ in result.refused] == [1, 2, 3, 4]
    assert "outside the supported range" in result.refused[0][1]
    assert result.refused[2][1] == "invalid role 'robot'"
    assert result.refused[3][1] == "session_id contains a NUL character"
    assert result.conflicts == [(5, ("text",))]
    assert store.count_events() == 2 and store.get_checkpoint("job") == {"offset": 7}
    again = store.append_events([ev("ok1", t0)])
    assert (again.inserted, again.duplicates, again.conflicts) == (0, 1, [])
    if isinstance(store, SqliteStore):  # the importer's own path re-checks the instant
        row = ("far2", (1 << 48) - 1, "p", "s", "a", "user_message", "user", "t", None, None, "{}")
        ok = ("ok3", t0 + 2, "p", "s", "a", "user_message", "user", "t", None, None, "{}")
        taken = store.append_rows([row, ok])
        assert taken.inserted == 1 and [i for i, _ in taken.refused] == [0]
        assert store.count_events() == 3 and store.stats()["events_out_of_range"] == 0


# -- a store written by an older memtoc ------------------------------------------------------------
def _plant(store: SqliteStore, rows: list[tuple[str, int, str]]) -> None:
    """Append events as memtoc did before the store had an edge: no check of the instant."""
    conn = store.connection
    with store.transaction():
        before = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
        for event_id, ts, text in rows:
            conn.execute(
                "INSERT INTO events(event_id, ts_ms, project, session_id, agent, event_type, role, "
                "text, metadata) VALUES (?, ?, 'p', 's1', 'a', 'user_message', 'user', ?, '{}')",
                (event_id, ts, text),
            )
            conn.execute(
                "INSERT INTO sessions(session_id, project, first_ms, last_ms) VALUES ('s1', 'p', ?, ?) "
                "ON CONFLICT DO UPDATE SET first_ms = min(first_ms, excluded.first_ms), "
                "last_ms = max(last_ms, excluded.last_ms)",
                (ts, ts),
            )
        after = conn.execute("SELECT MAX(seq) FROM events").fetchone()[0]
        conn.execute(
            "INSERT INTO outbox(kind, payload, created_ms) VALUES ('events', ?, 0)",
            (json.dumps({"first_seq": before + 1, "last_seq": after}),),
        )


def test_poison_in_an_older_store_blocks_nothing_and_is_reported(sqlite_store: SqliteStore) -> None:
    """An older memtoc stored instants past 9999; its batch was then never filed and every read
    crashed. Now the pipeline files the rest, reads work, and status and verify name them."""
    memory = Memory(sqlite_store, redactor=Redactor())
    t0 = 1_705_572_000_000
    _plant(
        sqlite_store,
        [
            ("good1", t0, "the zebra migration plan"),
            ("far", (1 << 48) - 1, "poison from year 10889"),
            ("edge", 253_402_300_799_000, "poison at 9999-12-31T23:59:59Z"),
            ("good2", t0 + 60_000, "the zebra migration done"),
        ],
    )
    processed = memory.process()
    assert processed.events == 2 and not processed.failed_entries
    assert memory.store.outbox_counts().get("pending", 0) == 0
    memory.rollup(force=True)
    assert [e.event_id for e in memory.events()] == ["good1", "good2", "edge", "far"]
    assert [e.to_dict()["timestamp"] for e in memory.events()][2:] == [
        "9999-12-31T23:59:59.000Z",
        "+10889-08-02T05:31:50.655Z",
    ]
    assert memory.search("zebra").items
    for item in memory.search("poison", depth="L2").items:  # never filed, never found
        assert not {"far", "edge"} & {*item.cites, *(e.event_id for e in item.events)}
    assert memory.recall("zebra migration", budget=500).items
    memory.context(budget=500)
    assert memory.status()["events_out_of_range"] == 2
    report = memory.verify()
    assert not report.ok
    (problem,) = [p for p in report.problems if p.startswith("event times")]
    assert "2 events" in problem and "far" in problem and "memtoc forget" in problem
    forgotten = memory.forget(event_ids=["far", "edge"])
    assert sorted(forgotten.event_ids) == ["edge", "far"]
    assert memory.status()["events_out_of_range"] == 0 and memory.verify().ok


def test_poison_in_an_older_postgres_store_blocks_nothing(pg_url: str) -> None:
    from memtoc.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        memory = Memory(store, redactor=Redactor())
        with store.transaction():
            rows = store._query(
                "INSERT INTO events(event_id, ts_ms, project, session_id, agent, event_type, role, "
                "text) VALUES ('good', 1705572000000, 'p', 's1', 'a', 'user_message', 'user', "
                "'the zebra plan'), ('far', %s, 'p', 's1', 'a', 'user_message', 'user', 'poison') "
                "RETURNING seq",
                ((1 << 48) - 1,),
            )
            seqs = [int(r[0]) for r in rows]
            store._query(
                "INSERT INTO outbox(kind, payload, first_seq, last_seq, sessions, created_ms) "
                "VALUES ('events', %s, %s, %s, %s, 0) RETURNING entry_id",
                (json.dumps({"first_seq": min(seqs), "last_seq": max(seqs)}), min(seqs),
                 max(seqs), ["p\x1fs1"]),
            )  # fmt: skip
        processed = memory.process()
        assert processed.events == 1 and not processed.failed_entries
        assert [e.event_id for e in memory.events()] == ["good", "far"]
        assert memory.status()["events_out_of_range"] == 1
        problems = memory.verify().problems
        assert [p for p in problems if p.startswith("event times") and "far at +10889" in p]
    finally:
        store.close()


# -- backup ------------------------------------------------------------------------------------------
def test_backup_to_a_path_it_cannot_write_is_a_clear_error(tmp_path: Path) -> None:
    """It printed a raw traceback (``FileNotFoundError`` out of ``os.open``)."""
    from typer.testing import CliRunner

    from memtoc.surfaces.cli import app

    db = str(tmp_path / "m.db")
    f = write_jsonl(tmp_path / "t.jsonl", [rec("something to back up")])
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "ingest", str(f)]).exit_code == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for dest, why in [
        ("/proc/memtoc-backup.db", "No such file or directory"),  # a filesystem that refuses it
        (str(blocker / "b.db"), f"{blocker} is not a directory"),
    ]:
        result = runner.invoke(app, ["--db", db, "backup", dest])
        assert result.exit_code == 1
        assert result.exception is None or isinstance(result.exception, SystemExit)
        out = result.output.replace("\n", " ")
        assert f"error: cannot write the backup to {dest}: {why}" in out, out
        assert "Traceback" not in out
