"""Shared fixtures. Every test is hermetic: its own data directory, no MEMTOC_* settings leaking in,
and the Hugging Face hub offline."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
    # Rich wraps human output at the terminal width; where a long tmp path makes it wrap must not
    # decide whether a test finds its words (test_cli failed in CI on a shorter tmp path).
    monkeypatch.setenv("COLUMNS", "240")
    return home


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_705_572_000_000)  # 2024-01-18T10:00:00Z


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Any]:
    """A fresh store: SQLite by default; also ``postgres`` in a test module that sets
    ``STORE_BACKENDS = ("sqlite", "postgres")`` (tests/test_store_contract.py)."""
    backend = getattr(request, "param", "sqlite")
    if backend == "postgres":
        from memtoc.store.postgres import PostgresStore

        pg = PostgresStore(request.getfixturevalue("pg_url"), clock=clock, pool_size=2)
        yield pg
        pg.close()
        return
    s = SqliteStore(tmp_path / "store" / "memtoc.db", clock=clock)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, clock: ManualClock) -> Iterator[SqliteStore]:
    """Always SQLite (for tests of SQLite specifics in modules that run ``store`` on both)."""
    s = SqliteStore(tmp_path / "store" / "memtoc.db", clock=clock)
    yield s
    s.close()


def open_backend(backend: str, path: Path, clock: ManualClock) -> tuple[Any, Callable[[], None]]:
    """A fresh store of ``backend`` (``sqlite``: a file at ``path``; ``postgres``: a new database
    on the test server) and what closes (and drops) it — for module-scoped fixtures that build a
    corpus once per backend."""
    if backend == "postgres":
        from memtoc.store.postgres import PostgresStore

        url, drop = create_pg_database()
        pg = PostgresStore(url, clock=clock, pool_size=2)

        def close() -> None:
            pg.close()
            drop()

        return pg, close
    s = SqliteStore(path, clock=clock)
    return s, s.close


def store_at(where: Path | str, clock: ManualClock) -> Any:
    """A store at ``where``: a PostgreSQL URL (``location``'s ``postgres`` param) or a file."""
    if isinstance(where, str) and where.startswith("postgresql://"):
        from memtoc.store.postgres import PostgresStore

        return PostgresStore(where, clock=clock, pool_size=2)
    return SqliteStore(Path(where), clock=clock)


@pytest.fixture
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where a test's store lives (open it with ``store_at``): a SQLite file by default; with
    ``@BOTH_BACKENDS`` also a fresh PostgreSQL database (dropped afterwards)."""
    if getattr(request, "param", "sqlite") == "postgres":
        url, drop = create_pg_database()
        yield url
        drop()
        return
    yield tmp_path / "store" / "memtoc.db"


BOTH_BACKENDS = pytest.mark.parametrize("location", ["sqlite", "postgres"], indirect=True)
"""Run a test taking ``location`` on a SQLite file and on a PostgreSQL database."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``STORE_BACKENDS`` runs each test using ``store`` on every backend."""
    backends = getattr(metafunc.module, "STORE_BACKENDS", None)
    if backends and "store" in metafunc.fixturenames:
        metafunc.parametrize("store", backends, indirect=True)


# -- PostgreSQL (team mode) ---------------------------------------------------------------------------
PG_URL = os.environ.get("MEMTOC_TEST_PG_URL")
"""The server ``make test`` provides (scripts/postgres-ci.sh); read before ``hermetic_env`` runs."""


def pg_unavailable(reason: str) -> None:
    """Skip locally; fail under CI (``CI=true``), where the server must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL required in CI: {reason}")
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def create_pg_database() -> tuple[str, Callable[[], None]]:
    """A new empty database on the test server: its URL and a function that drops it."""
    if not PG_URL:
        pg_unavailable("MEMTOC_TEST_PG_URL is not set (run `make test`, or scripts/postgres-ci.sh)")
    try:
        import psycopg
    except ImportError:
        pg_unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    assert PG_URL is not None
    name = f"memtoc_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f"CREATE DATABASE {name}")
    except psycopg.OperationalError as exc:
        pg_unavailable(f"cannot reach {PG_URL}: {exc}")
    url = PG_URL.rsplit("/", 1)[0] + "/" + name

    def drop() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return url, drop


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (dropped afterwards)."""
    url, drop = create_pg_database()
    yield url
    drop()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Lines a test module left for the end of the run (``config.memtoc_summary``): the fuzz
    figures of tests/test_fuzz.py."""
    lines = getattr(config, "memtoc_summary", None)
    if lines:
        terminalreporter.section("memtoc")
        for line in lines:
            terminalreporter.write_line(line)


# -- the demo store -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The store `memtoc demo` builds (same sample history, same steps), with the static model;
    ``queries.json`` beside it holds the planted facts' questions. Built once per run (a few
    seconds of CPU); tests only read it."""
    import json

    from memtoc.config import load_settings
    from memtoc.eval.synth import SynthConfig, generate_with_facts, write_claude_code
    from memtoc.memory import Memory

    model = SHARED / "models" / "minilm-static-256"
    if not model.is_dir():
        pytest.skip(f"the static embedding model is not at {model}")
    home = tmp_path_factory.mktemp("demo")
    stream, facts = generate_with_facts(SynthConfig(seed=7, events=5_000))
    files = write_claude_code(stream, home / "sample-transcripts")
    assert files
    (home / "queries.json").write_text(json.dumps([f.query for f in facts]))
    settings = load_settings({"home": str(home), "embed_model": str(model)}, environ={})
    with Memory.open(settings) as memory:
        memory.ingest([home / "sample-transcripts"])
        memory.process()
        memory.rollup(force=True)
    yield home
