"""The redaction prefilter's helper process (memtoc.ingest.redact_worker): same answers as the
in-process gates, and ingest falls back to them when the helper is missing or dies."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from memtoc.ingest import redact_worker
from memtoc.ingest.importer import _CHUNK, Importer, IngestOptions
from memtoc.ingest.redact import Redactor
from memtoc.ingest.redact_gate import batch_blob, batch_suspects, blob_suspects
from memtoc.ingest.sources.base import EventDraft
from memtoc.store.sqlite import SqliteStore

FIXTURES = Path(__file__).parent / "fixtures" / "redaction"
SECRETS = [
    json.loads(line)["text"]
    for line in (FIXTURES / "corpus.jsonl").read_text().splitlines()
    if line
]
CLEAN = (FIXTURES / "clean.txt").read_text().splitlines()


def ready_worker() -> redact_worker.GateWorker:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        w = redact_worker.worker()
        if w is not None:
            return w
        time.sleep(0.05)
    pytest.fail("the redaction worker did not start")


def mixed_batch(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(SECRETS) if rng.random() < 0.1 else rng.choice(CLEAN) for _ in range(n)]


def test_worker_answers_like_the_in_process_gates() -> None:
    w = ready_worker()
    try:
        for seed in range(5):
            texts = [*mixed_batch(seed, 300), "", "é→ naïve İ", "\x00token=1\x00"]
            data, ends = batch_blob(texts)
            ticket = w.submit(data, ends)
            assert w.answered(ticket, 30)
            assert w.result(ticket) == batch_suspects(texts)
            assert blob_suspects(data, ends) == batch_suspects(texts)
    finally:
        w.release()


def test_skipped_answers_are_discarded_by_ticket() -> None:
    w = ready_worker()
    try:
        first = batch_blob(mixed_batch(1, 50))
        second = batch_blob(mixed_batch(2, 50))
        w.submit(first[0], first[1])  # never asked for (an abandoned batch)
        ticket = w.submit(second[0], second[1])
        assert w.result(ticket) == blob_suspects(second[0], second[1])
    finally:
        w.release()


def drafts(n: int) -> list[tuple[EventDraft, str]]:
    texts = mixed_batch(7, n)
    out = []
    for i, text in enumerate(texts):
        meta: dict[str, object] = {"cmd": text} if i % 3 == 0 else {}
        if i % 7 == 0:
            meta["api_key"] = f"k3y-{i:08d}-value"
        draft = EventDraft(
            session_id=f"s{i % 5}", ts_ms=1_700_000_000_000 + i, event_type="", role="user",
            text=text, metadata=meta,  # type: ignore[arg-type]
        )  # fmt: skip
        out.append((draft, f"01HZ{i:022d}"))
    return out


def dump(store: SqliteStore) -> list[tuple[object, ...]]:
    return store.connection.execute(
        "SELECT seq, event_id, text, metadata FROM events ORDER BY seq"
    ).fetchall()


def ingest(
    path: Path, batch: list[tuple[EventDraft, str]], *, helper: bool = True
) -> tuple[list[tuple[object, ...]], int]:
    store = SqliteStore(path)
    try:
        options = IngestOptions(batch_size=len(batch), redact_helper=helper)
        importer = Importer(store, redactor=Redactor(), options=options)
        report = importer.ingest_drafts(batch)
        assert report.ingested == len(batch)
        return dump(store), report.redacted
    finally:
        store.close()


def test_ingest_with_the_worker_stores_what_ingest_without_it_stores(tmp_path: Path) -> None:
    batch = drafts(5 * _CHUNK + 17)
    w = ready_worker()
    w.release()
    answered = w.chunks_answered
    deadline = time.monotonic() + 60
    while w.chunks_answered == answered:  # until the helper has gated chunks of a batch in time
        w._rest = 0  # a loaded machine may have made it rest: this test wants it used
        with_worker = ingest(tmp_path / f"a{w.chunks_sent}.db", batch)
        assert time.monotonic() < deadline, "the helper never answered a chunk in time"
    without = ingest(tmp_path / "b.db", batch, helper=False)
    assert with_worker == without
    assert with_worker[1] > 0
    stored = " ".join(str(r[2]) + str(r[3]) for r in with_worker[0])
    assert "k3y-00000007-value" not in stored and "[REDACTED:" in stored


def test_ingest_survives_the_worker_dying(tmp_path: Path) -> None:
    w = ready_worker()
    w.release()
    batch = drafts(3 * _CHUNK)
    expected = ingest(tmp_path / "ref.db", batch)
    w._proc.kill()  # the helper dies between batches: answers fail, the gates run here
    w._proc.wait()
    try:
        assert ingest(tmp_path / "after.db", batch) == expected
        assert redact_worker.worker() is None  # not used again
    finally:
        redact_worker._WORKER = None  # the next test starts a fresh one


def test_a_batch_sends_at_most_in_flight_chunks_and_gates_the_rest_here(tmp_path: Path) -> None:
    from memtoc.ingest.importer import _IN_FLIGHT

    batch = drafts((_IN_FLIGHT + 2) * _CHUNK)
    w = ready_worker()
    w.release()
    w._rest = 0
    sent = w.chunks_sent
    with_worker = ingest(tmp_path / "a.db", batch)
    assert 0 < w.chunks_sent - sent <= _IN_FLIGHT
    assert with_worker == ingest(tmp_path / "b.db", batch, helper=False)
