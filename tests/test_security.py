"""Security checks: private files, symlinks that leave the import root, and hostile values that
must stay values (parameterised SQL everywhere) — project names, queries, sessions and metadata
with quotes, LIKE wildcards, FTS operators, SQL fragments, unicode and length up to the limit (NUL
and longer identifiers are refused with a reason)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.errors import MemtocError
from memtoc.memory import Memory
from memtoc.store.sqlite.maintenance import verify
from memtoc.surfaces.cli.app import app

HOSTILE = [
    "it's",
    'say "hi"',
    "100%",
    "a_b",
    "%",
    "_",
    "x' OR '1'='1",
    "'; DROP TABLE events; --",
    "NEAR(auth token)",
    "auth* OR NOT token",
    "col:umn ^start",
    "日本語のプロジェクト",
    "emoji 🧪 test",
    "\u202eright-to-left",
    "back\\slash",
    "x" * 1_024,  # the longest identifier accepted (model.MAX_ID_CHARS)
]
REFUSED = {
    "nul\x00byte": "contains a NUL character",  # PostgreSQL text cannot hold it
    "y" * 5_000: "is longer than 1024 characters (5000)",  # nor index it (B-tree entries ~2.7 kB)
}
T0 = 1_705_572_000_000


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)  # the most permissive umask: memtoc must not rely on the user's
    try:
        yield
    finally:
        os.umask(old)


def test_data_directory_database_wal_backup_and_token_are_private(
    hermetic_env: Path, tmp_path: Path, loose_umask: None
) -> None:
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        memory.ingest_records([{"session_id": "s", "role": "user", "text": "hello"}])
        db = Path(memory.store.location)
        assert _mode(db.parent) == 0o700
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            assert path.exists() and _mode(path) == 0o600, (path, oct(_mode(path)))
        backup = tmp_path / "b" / "copy.db"
        memory.backup(backup)
        assert _mode(backup) == 0o600
    from memtoc.surfaces.http.auth import token_path, write_token

    write_token(hermetic_env)
    assert _mode(token_path(hermetic_env)) == 0o600


def test_cli_init_creates_private_files(hermetic_env: Path, loose_umask: None) -> None:
    result = CliRunner().invoke(app, ["--home", str(hermetic_env), "init"])
    assert result.exit_code == 0, result.output
    files = [p for p in hermetic_env.rglob("*") if p.is_file()]
    assert files
    assert _mode(hermetic_env) == 0o700
    assert {p.name: oct(_mode(p)) for p in files} == {p.name: "0o600" for p in files}


def _line(session: str) -> str:
    return json.dumps({"session_id": session, "timestamp": T0, "role": "user", "text": session})


def test_symlinks_leaving_the_root_are_skipped_unless_asked(
    hermetic_env: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(_line("secret-file") + "\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.jsonl").write_text(_line("secret-dir") + "\n")
    root = tmp_path / "root"
    (root / "inner").mkdir(parents=True)
    (root / "inner" / "ok.jsonl").write_text(_line("inside") + "\n")
    (root / "file-link.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "dir-link").symlink_to(outside / "sub", target_is_directory=True)
    (root / "inner-link.jsonl").symlink_to(root / "inner" / "ok.jsonl")  # stays inside
    (root / "loop").symlink_to(root, target_is_directory=True)  # a cycle must not hang

    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        memory.ingest([root])
        assert {e.session_id for e in memory.events()} == {"inside"}

    followed = load_settings({"home": str(tmp_path / "home2"), "follow_symlinks": True})
    with Memory.open(followed) as memory:
        memory.ingest([root])
        assert {e.session_id for e in memory.events()} == {"inside", "secret-file", "secret-dir"}


@pytest.fixture
def memory(hermetic_env: Path) -> Iterator[Memory]:
    """Redaction off: these checks are about storage (a key named "auth…" would be redacted)."""
    with Memory.open(
        load_settings({"home": str(hermetic_env), "embedder": "none", "redact": False})
    ) as mem:
        yield mem


def test_hostile_values_are_stored_verbatim_and_match_only_themselves(memory: Memory) -> None:
    records = [
        {
            "session_id": value,
            "project": value,
            "timestamp": T0 + i * 60_000,
            "role": "user",
            "text": f"marker{i} {value}",
            "metadata": {value: value, "nested": [value, {"k": value}]},
        }
        for i, value in enumerate(HOSTILE)
    ]
    records.append({"session_id": "plain", "project": "plain", "timestamp": T0, "role": "user",
                    "text": "marker plain auth token"})  # fmt: skip
    refused = [
        {"session_id": "s", "project": "p", "timestamp": T0, "role": "user", "text": "t", key: v}
        for v in REFUSED
        for key in ("session_id", "project")
    ]
    report = memory.ingest_records(records + refused)
    assert report.ingested == len(records)
    assert [r.line for r in report.rejections] == list(range(len(records) + 1, len(records) + 5))
    assert [r.reason for r in report.rejections] == [
        f"{key} {why}" for why in REFUSED.values() for key in ("session_id", "project")
    ]
    memory.process()
    memory.rollup(force=True)

    assert set(memory.store.projects()) == {*HOSTILE, "plain"}
    for i, value in enumerate(HOSTILE):
        events = memory.events(project=value)
        assert [e.text for e in events] == [f"marker{i} {value}"], value[:40]
        assert events[0].session_id == value
        assert events[0].metadata == {value: value, "nested": [value, {"k": value}]}
        assert len(memory.events(session_id=value)) == 1
        assert memory.store.count_events(project=value) == 1  # "%" and "_" are not wildcards
        hits = memory.search(f"marker{i}", project=value, kinds=["event"], limit=5)
        assert {item.events[0].event_id for item in hits.items} == {events[0].event_id}
        # the value as a query: any text is a query, and it stays inside its project filter
        found = memory.search(value, project="plain", limit=5)
        assert all("plain" in item.text or "marker" in item.text for item in found.items)
        assert [n.project for n in memory.toc(value)] == [value]
    assert verify(memory.store).ok
    assert memory.store.count_events() == len(records)


@pytest.mark.parametrize(
    "query",
    ["' OR 1=1 --", "events; DELETE FROM events", '") OR ("', "* NOT x", "%", "_%_", "\x00"],
)
def test_hostile_queries_cannot_change_the_store(memory: Memory, query: str) -> None:
    memory.ingest_records(
        [{"session_id": "s", "project": "p", "timestamp": T0, "role": "user", "text": "auth token"}]
    )
    memory.process()
    before = memory.store.count_events()
    try:
        memory.search(query, limit=5)
        memory.search(query, project=query, level="day", limit=5)
    except MemtocError as exc:  # a clear error is fine; a write or a crash is not
        assert str(exc).strip()
    assert memory.store.count_events() == before
    assert verify(memory.store).ok


def test_hostile_node_and_grip_ids_are_not_found_not_injected(memory: Memory) -> None:
    for ident in ["toc:day:' OR '1'='1", "grip:%", "x\x00y", "toc:year:2024; DROP TABLE events"]:
        with pytest.raises(MemtocError) as info:
            memory.node(ident)
        assert "not found" in str(info.value) or "node" in str(info.value)
        with pytest.raises(MemtocError):
            memory.expand(ident)
