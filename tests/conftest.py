"""Shared fixtures. Every test is hermetic: its own data directory, no MEMTOC_* settings leaking in,
and the Hugging Face hub offline."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memtoc.clock import ManualClock
from memtoc.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SHARED = ROOT.parent / "shared"


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("MEMTOC_"):
            monkeypatch.delenv(key)
    home = tmp_path / "memtoc-home"
    monkeypatch.setenv("MEMTOC_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_705_572_000_000)  # 2024-01-18T10:00:00Z


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "store" / "memtoc.db", clock=clock)
    yield s
    s.close()
