"""The one project rule (memtoc.projects) over real git layouts and real stores; the migration."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from git_support import git, make_repo
from memtoc.clock import ManualClock
from memtoc.errors import QueryError, UnknownProjectError
from memtoc.memory import Memory
from memtoc.model import Event
from memtoc.projects import ProjectRegistry
from memtoc.store.sqlite import SqliteStore, migrations

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
T0 = 1_705_572_000_000


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "m.db", clock=clock) as s:
        yield s


def test_subfolders_and_worktrees_are_one_project_and_same_names_stay_apart(
    store: SqliteStore, tmp_path: Path
) -> None:
    reg = ProjectRegistry(store)
    app = make_repo(tmp_path / "work" / "app")
    wt = tmp_path / "wt" / "app-hotfix"
    git(app, "worktree", "add", "-q", str(wt), "-b", "hotfix")
    first, _ = reg.for_directory(app / "src" / "pkg")
    assert first is not None and (first.project, first.name) == ("app", "app")
    again, _ = reg.for_directory(wt / "src")
    assert again == first
    other = make_repo(tmp_path / "play" / "app")
    second, ws = reg.for_directory(other)
    assert second is not None and second.project != "app"
    assert second.project.startswith("app-") and second.name == "play/app"
    assert second.roots == (ws.root,)
    # a fresh registry over the same store (another process) agrees
    fresh = ProjectRegistry(store)
    assert fresh.for_directory(other / "src", register=False)[0] == second
    assert [p.name for p in fresh.all()] == ["app", "play/app"]


def test_scope_rule(store: SqliteStore, tmp_path: Path) -> None:
    reg = ProjectRegistry(store)
    assert reg.scope().how == "empty" and reg.scope().empty
    a = make_repo(tmp_path / "a")
    b = make_repo(tmp_path / "b")
    pa, _ = reg.for_directory(a)
    assert pa is not None
    only = reg.scope()
    assert (only.projects, only.how) == (("a",), "only")
    pb, _ = reg.for_directory(b)
    assert pb is not None
    with pytest.raises(QueryError, match=r"several projects \(a, b\)"):
        reg.scope()
    assert reg.scope(working_dir=b / "src").projects == ("b",)
    # explicit wins over the working directory, by id or name
    assert reg.scope("a", working_dir=b).projects == ("a",)
    assert reg.scope(all_projects=True).projects is None
    with pytest.raises(
        UnknownProjectError, match=r"unknown project 'nope' \(known projects: a, b\)"
    ):
        reg.scope("nope", working_dir=b)
    # a working directory with no memory yet: nothing, and a note naming the known projects
    c = make_repo(tmp_path / "c")
    empty = reg.scope(working_dir=c)
    assert empty.empty and empty.name == "c"
    assert empty.note is not None and "known projects: a, b" in empty.note
    assert reg.find("c") is None  # reads never register


def test_rename_keeps_the_id_and_unknown_names_fail(store: SqliteStore, tmp_path: Path) -> None:
    reg = ProjectRegistry(store)
    a = make_repo(tmp_path / "a")
    reg.for_directory(a)
    renamed = reg.rename("a", "frontend")
    assert (renamed.project, renamed.name) == ("a", "frontend")
    assert reg.require("frontend").project == "a" and reg.require("a").name == "frontend"
    assert reg.for_directory(a / "src")[0] == renamed
    reg.for_write("notes")
    with pytest.raises(QueryError, match="taken"):
        reg.rename("notes", "frontend")
    with pytest.raises(QueryError, match="taken"):
        reg.rename("notes", "a")  # another project's id is not a free name either
    with pytest.raises(UnknownProjectError):
        reg.rename("ghost", "x")


def test_a_folder_claims_a_project_of_its_name_that_has_no_folder(
    store: SqliteStore, tmp_path: Path
) -> None:
    reg = ProjectRegistry(store)
    assert reg.for_write("webapp") == "webapp"  # e.g. `ingest --project webapp`, or an old store
    repo = make_repo(tmp_path / "webapp")
    found, ws = reg.for_directory(repo / "src")
    assert found is not None and found.project == "webapp" and found.roots == (ws.root,)
    other, _ = reg.for_directory(make_repo(tmp_path / "x" / "webapp"))
    assert other is not None and other.project != "webapp"


def test_paths_recorded_elsewhere_map_to_the_registered_root_containing_them(
    store: SqliteStore,
) -> None:
    reg = ProjectRegistry(store)
    top, _ = reg.for_directory("/home/dev/webapp")
    assert top is not None and top.project == "webapp"
    sub, ws = reg.for_directory("/home/dev/webapp/services/api")
    assert ws.kind == "missing" and sub == top
    apart, _ = reg.for_directory("/home/dev/webapp-old")
    assert apart is not None and apart.project != "webapp"


def test_importer_files_a_session_by_where_it_started(tmp_path: Path) -> None:
    """A Claude Code session that changes directory mid-session (into a subfolder, then into
    another repository) stays one project: the one of the directory it started in."""
    app = make_repo(tmp_path / "app")
    lib = make_repo(tmp_path / "lib")
    cwds = [app, app / "src", app / "src" / "pkg", lib, tmp_path]
    path = tmp_path / "s1.jsonl"
    lines = []
    for i, cwd in enumerate(cwds):
        lines.append(
            {
                "type": "user" if i % 2 == 0 else "assistant",
                "uuid": f"u{i}",
                "sessionId": "s1",
                "cwd": str(cwd),
                "timestamp": f"2024-01-18T10:0{i}:00Z",
                "message": {"role": "user", "content": f"step {i} of the session"}
                if i % 2 == 0
                else {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]},
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with Memory(SqliteStore(tmp_path / "m.db")) as memory:
        report = memory.ingest([path])
        assert report.ingested == 5 and not report.rejections
        assert {e.project for e in memory.events()} == {"app"}
        # each line keeps its own directory in its metadata
        assert [e.metadata["cwd"] for e in memory.events()] == [str(c) for c in cwds]
        # a second session started in the library is the library's
        other = tmp_path / "s2.jsonl"
        lines2 = [dict(lines[3], uuid="v3", sessionId="s2")]
        other.write_text(json.dumps(lines2[0]) + "\n")
        memory.ingest([other])
        assert memory.events(session_id="s2")[0].project == "lib"
        projects = {p.project: p for p in memory.store.list_projects()}
        assert projects["app"].roots == (str(app.resolve()),)
        assert projects["lib"].roots == (str(lib.resolve()),)


REAL_LOG_SAMPLE = (
    Path(__file__).resolve().parent
    / "fixtures" / "claude-code-real" / "-Users-dain-workspace-claude-code-log-sample"
)  # fmt: skip
SUMMARY_ONLY = (
    '{"type":"summary","summary":"TUI Cache Handling: Empty State Fix",'
    '"leafUuid":"844d76d8-de53-4591-8cb6-87af88222929"}\n'
)
"""A real Claude Code file that holds a summary line alone (``4e27c414-….jsonl`` of the shared
claude-code-log-sample project, MIT): it names no directory. Its leaf is made a line of the
folder's ``89488521-….jsonl`` (the real one is not in the shared sample)."""


def test_a_claude_code_file_naming_no_directory_is_its_folders_project(tmp_path: Path) -> None:
    """It went to the 'default' project (a phantom in every list of known projects); Claude Code
    keeps one folder per working directory, so it is the project of the folder's sessions."""
    folder = tmp_path / "projects" / REAL_LOG_SAMPLE.name
    shutil.copytree(REAL_LOG_SAMPLE, folder)
    (folder / "4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl").write_text(SUMMARY_ONLY)
    loose = tmp_path / "elsewhere" / "4e27c414-a885-46a0-b5c8-d58e1417377e.jsonl"
    loose.parent.mkdir()
    loose.write_text(SUMMARY_ONLY.replace("TUI Cache", "Loose TUI Cache"))
    with Memory(SqliteStore(tmp_path / "m.db")) as memory:
        report = memory.ingest([tmp_path / "projects", loose])
        assert report.rejected == 0
        summary = [e for e in memory.events() if e.metadata.get("kind") == "summary"]
        by_text = {e.text: e for e in summary}
        filed = by_text["TUI Cache Handling: Empty State Fix"]
        assert filed.project == "claude-code-log"
        assert filed.metadata["cwd"] == "/Users/dain/workspace/claude-code-log"
        # outside a Claude Code project folder nothing is guessed: no project, no time
        assert "Loose TUI Cache Handling: Empty State Fix" not in by_text
        assert report.waiting == 1


def _old_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store as memtoc wrote it before project identity (migrations up to 0008)."""
    names = [m.name for m in migrations.MIGRATIONS]
    cut = names.index("0009_projects")
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:cut])
        with SqliteStore(path) as old:
            assert not old.has_project_registry
            projects = ["webapp", "webapp", "api", "webapp", "api"]
            old.append_events(
                [
                    Event(f"e{i}", f"s{i % 3}", p, "cc", T0 + i * 1000, "user_message", "user", "t")
                    for i, p in enumerate(projects)
                ]
            )


def test_an_old_store_migrates_its_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    _old_store(path, monkeypatch)
    with SqliteStore(path, read_only=True) as ro:  # not migrated yet: projects from events
        assert [(p.project, p.name) for p in ro.list_projects()] == [
            ("api", "api"),
            ("webapp", "webapp"),
        ]
    with SqliteStore(path) as store:
        applied = [r[0] for r in store._query("SELECT name FROM schema_migrations")]
        assert "0009_projects" in applied
        cols = {r[1]: r[2] for r in store._query("PRAGMA table_info(projects)")}
        assert cols == {"project": "TEXT", "name": "TEXT", "created_ms": "INTEGER"}
        roots = {r[1] for r in store._query("PRAGMA table_info(project_roots)")}
        assert roots == {"root", "project", "added_ms"}
        listed = store.list_projects()
        assert [(p.project, p.name, p.created_ms, p.roots) for p in listed] == [
            ("api", "api", T0 + 2000, ()),
            ("webapp", "webapp", T0, ()),
        ]
        # the old memory continues: a session in a folder named webapp files into it
        reg = ProjectRegistry(store)
        found, _ = reg.for_directory("/home/dev/webapp")
        assert found is not None and found.project == "webapp"
        assert store.count_events("webapp") == 3


def test_appends_register_projects_the_registry_lacks(store: SqliteStore) -> None:
    store.append_events([Event("e1", "s", "direct", "a", T0, "user_message", "user", "x")])
    assert [(p.project, p.name) for p in store.list_projects()] == [("direct", "direct")]
    store.rename_project("direct", "renamed")
    store.append_events([Event("e2", "s", "renamed", "a", T0, "user_message", "user", "y")])
    names = sorted((p.project, p.name) for p in store.list_projects())
    assert names[0] == ("direct", "renamed")
    assert names[1][0] == "renamed" and names[1][1].startswith("renamed#")


def test_an_old_postgres_store_migrates_its_projects(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memtoc.store.postgres import PostgresStore
    from memtoc.store.postgres import migrations as postgres_migrations

    names = [m.name for m in postgres_migrations.MIGRATIONS]
    cut = names.index("0008_projects")
    with monkeypatch.context() as m:
        m.setattr(postgres_migrations, "MIGRATIONS", postgres_migrations.MIGRATIONS[:cut])
        old = PostgresStore(pg_url)
        try:
            old._exec(
                "INSERT INTO events(event_id, ts_ms, project, session_id, agent, event_type, "
                "role, text) VALUES ('e1', %s, 'webapp', 's', 'a', 'user_message', 'user', 'x'),"
                " ('e2', %s, 'api', 's2', 'a', 'user_message', 'user', 'y')",
                (T0 + 5, T0),
            )
        finally:
            old.close()
    store = PostgresStore(pg_url)
    try:
        applied = [r[0] for r in store._query("SELECT name FROM schema_migrations")]
        assert "0008_projects" in applied
        cols = {
            r[0]: r[1]
            for r in store._query(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'projects'"
            )
        }
        assert cols == {"project": "text", "name": "text", "created_ms": "bigint"}
        assert [(p.project, p.name, p.created_ms) for p in store.list_projects()] == [
            ("api", "api", T0),
            ("webapp", "webapp", T0 + 5),
        ]
        reg = ProjectRegistry(store)
        found, _ = reg.for_directory("/srv/checkouts/webapp")
        assert found is not None and found.project == "webapp"
        assert found.roots == ("/srv/checkouts/webapp",)
        assert reg.rename("api", "backend").name == "backend"
        store.append_events([Event("e3", "s3", "fresh", "a", T0, "user_message", "user", "z")])
        assert reg.require("fresh").name == "fresh"
    finally:
        store.close()


def _split_history(project_of: dict[str, str]) -> list[Event]:
    """Three sessions; ``s2`` was split across projects by an older memtoc (its agent changed
    directory half-way); ``project_of`` says where each part was filed."""
    from pipeline_support import make_events

    events = make_events(seed=7, sessions=3, per_session=(30, 40), start_ms=T0, projects=("x",))
    out = []
    for e in events:
        sid = e.session_id
        part = f"{sid}#2" if sid.endswith("0001") and e.event_id > events[45].event_id else sid
        out.append(replace(e, project=project_of.get(part, project_of.get(sid, "x"))))
    return out


def _built(path: Path, events: list[Event]) -> Memory:
    from zoneinfo import ZoneInfo

    clock = ManualClock(T0 + 90 * 86_400_000)
    memory = Memory(SqliteStore(path, clock=clock), clock=clock, tz=ZoneInfo("UTC"))
    memory.store.append_events(events)
    memory.process()
    memory.rollup(force=True)
    return memory


def test_merge_files_the_source_as_if_it_had_always_been_the_targets(tmp_path: Path) -> None:
    from pipeline_support import check_consistency, toc_snapshot

    sids = sorted({e.session_id for e in _split_history({})})
    split = {sids[0]: "x", sids[1]: "x", f"{sids[1]}#2": "y", sids[2]: "y"}
    merged = _built(tmp_path / "merged.db", _split_history(split))
    alone = _built(tmp_path / "alone.db", _split_history({}))  # never split: all in x
    try:
        assert set(merged.store.projects()) == {"x", "y"}
        merged.registry.for_directory("/srv/y")  # y's folder, to see it move
        report = merged.merge_projects("y", "x", process=False)
        assert report.shared_sessions == 1 and report.events > 0 and report.outbox_entries >= 1
        merged.process()
        merged.rollup(force=True)
        assert merged.store.projects() == ["x"]
        assert toc_snapshot(merged.store) == toc_snapshot(alone.store)
        check_consistency(merged.store, merged.counter)
        assert not merged.verify().problems
        hits = merged.search("postgres migration", project="x", mode="bm25", limit=5)
        want = alone.search("postgres migration", project="x", mode="bm25", limit=5)
        assert [i.id for i in hits.items] == [i.id for i in want.items]
        # the registry: y is gone, its folder files into x
        assert [p.project for p in merged.registry.all(fresh=True)] == ["x"]
        assert merged.registry.for_directory("/srv/y", register=False)[0].project == "x"  # type: ignore[union-attr]
        with pytest.raises(UnknownProjectError, match="known projects: x"):
            merged.merge_projects("y", "x")
        with pytest.raises(QueryError, match="into itself"):
            merged.merge_projects("x", "x")
    finally:
        merged.close()
        alone.close()


def test_projects_cli_list_rename_merge(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from memtoc.config import load_settings
    from memtoc.surfaces.cli import app

    repo = make_repo(tmp_path / "shop")
    with Memory.open(load_settings({"home": str(hermetic_env)})) as memory:
        here = memory.project_for_write(working_dir=repo / "src")
        memory.remember("We keep prices in cents.", project=here)
        memory.remember("Old notes from the prototype.", project="proto")
        memory.process()
    runner = CliRunner()
    monkeypatch.chdir(repo / "src")
    listed = runner.invoke(app, ["projects", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.stdout)
    assert [(p["name"], p["events"]) for p in data["projects"]] == [("proto", 1), ("shop", 1)]
    assert data["current"]["project"] == "shop"
    human = runner.invoke(app, ["projects", "list"])
    assert "shop" in human.stdout and str(repo.resolve()) in human.stdout
    renamed = runner.invoke(app, ["projects", "rename", "shop", "storefront", "--json"])
    assert renamed.exit_code == 0 and json.loads(renamed.stdout)["name"] == "storefront"
    clash = runner.invoke(app, ["projects", "rename", "proto", "storefront"])
    assert clash.exit_code == 1 and "taken" in clash.output
    refused = runner.invoke(app, ["projects", "merge", "proto", "storefront"], input="n\n")
    assert refused.exit_code != 0
    merged = runner.invoke(app, ["projects", "merge", "proto", "storefront", "--yes", "--json"])
    assert merged.exit_code == 0, merged.output
    assert json.loads(merged.stdout)["events"] == 1
    after = json.loads(runner.invoke(app, ["projects", "list", "--json"]).stdout)
    assert [(p["project"], p["name"], p["events"]) for p in after["projects"]] == [
        ("shop", "storefront", 2)
    ]
    unknown = runner.invoke(app, ["search", "prices", "-p", "nope"])
    assert unknown.exit_code == 1
    assert "unknown project 'nope' (known projects: storefront)" in " ".join(unknown.output.split())
    found = runner.invoke(app, ["search", "prototype notes", "--json"])  # this folder's project
    assert found.exit_code == 0 and "prototype" in found.stdout
