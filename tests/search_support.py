"""A small search corpus shared by the teleport, tiers and hybrid tests: two projects, three
sessions on three days, every role, code identifiers and paths — processed into a real TOC."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex

DAY = 86_400_000
BASE = 1_705_312_800_000  # 2024-01-15T10:00:00Z
MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
STATIC_MODEL = MODELS / "minilm-static-256"

CORPUS: list[dict[str, object]] = [
    # project alpha, session s1, day 1
    {"session_id": "s1", "ts": BASE, "role": "user",
     "text": "The refresh_token expires too early in src/app/auth.py", "metadata": {"n": 1}},
    {"session_id": "s1", "ts": BASE + 60_000, "role": "assistant",
     "text": "I will refresh the page and check the cookie settings"},
    {"session_id": "s1", "ts": BASE + 120_000, "role": "assistant",
     "text": "refreshToken handling in the JS client looks fine"},
    {"session_id": "s1", "ts": BASE + 180_000, "role": "tool",
     "text": "pytest tests/test_auth.py passed 12 tests"},
    # project alpha, session s2, day 2
    {"session_id": "s2", "ts": BASE + DAY, "role": "user",
     "text": "Postgres migration is slow, the vacuum takes forever"},
    {"session_id": "s2", "ts": BASE + DAY + 60_000, "role": "assistant",
     "text": "Run VACUUM ANALYZE after the migration and add an index on user_id"},
    # project beta, session s3, day 3
    {"session_id": "s3", "ts": BASE + 2 * DAY, "role": "user", "project": "beta",
     "text": "The vacuum cleaner robot docs need a new diagram"},
    {"session_id": "s3", "ts": BASE + 2 * DAY + 60_000, "role": "assistant", "project": "beta",
     "text": "I drew the diagram with mermaid in docs/robot.md"},
]  # fmt: skip


def require_model() -> Path:
    """The static model folder; skip (or, under CI, fail) when it is absent."""
    if STATIC_MODEL.is_dir():
        return STATIC_MODEL
    if os.environ.get("CI") == "true":
        pytest.fail(f"static model missing at {STATIC_MODEL} (required under CI)")
    pytest.skip(f"static model not found at {STATIC_MODEL}")


def build_memory(
    path: Path | str, semantic_kind: str | None = None, model: str | None = None
) -> Memory:
    """A Memory over a fresh store holding ``CORPUS``, processed and rolled up (``path``: a
    SQLite file, or a PostgreSQL URL: see ``conftest.location``)."""
    from conftest import store_at

    clock = ManualClock(BASE + 10 * DAY)
    store = store_at(path, clock)
    semantic = SemanticIndex(store, kind=semantic_kind, model=model)
    memory = Memory(store, clock=clock, tz=ZoneInfo("UTC"), semantic=semantic)
    for project in ("alpha", "beta"):
        records = [
            {**{k: v for k, v in r.items() if k not in ("ts", "project")}, "timestamp": r["ts"]}
            for r in CORPUS
            if r.get("project", "alpha") == project
        ]
        report = memory.ingest_records(records, project=project)
        assert report.ingested == len(records), report.to_dict()
    memory.process()
    memory.rollup(force=True)
    return memory


def file_records(memory: Memory, records: list[dict[str, Any]], project: str = "p") -> Memory:
    """Ingest ``records`` into ``project`` (every one accepted), process and roll up."""
    report = memory.ingest_records(records, project=project)
    assert report.ingested == len(records), report.to_dict()
    memory.process()
    memory.rollup(force=True)
    return memory


def rank_scope(memory: Memory, project: str) -> dict[str, Any]:
    """``rank_only``'s keyword arguments for one project of a test memory, asked at its clock's
    now, in its time zone, with its semantic index."""
    return {
        "projects": (project,),
        "at_ms": memory.clock.now_ms(),
        "tz": memory.tz,
        "semantic": memory.semantic,
    }
