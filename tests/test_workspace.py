"""The path half of the project rule: real git layouts (made with git itself) → one workspace."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from git_support import git, make_repo
from memtoc.workspace import find_workspace, path_name

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_subfolders_and_linked_worktrees_map_to_the_main_worktree_top(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "app")
    wt = tmp_path / "elsewhere" / "app-feature"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "feature")
    (wt / "src" / "pkg").mkdir(parents=True, exist_ok=True)
    top = str(repo.resolve())
    for where in (repo, repo / "src", repo / "src" / "pkg", repo / "src/pkg/a.py", wt, wt / "src"):
        ws = find_workspace(where)
        assert (ws.root, ws.name, ws.kind) == (top, "app", "git"), where
    assert git(wt, "rev-parse", "--path-format=absolute", "--git-common-dir") == str(
        repo.resolve() / ".git"
    )


def test_two_repositories_with_one_folder_name_stay_apart(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "one" / "app")
    b = make_repo(tmp_path / "two" / "app")
    wa, wb = find_workspace(a / "src"), find_workspace(b / "src")
    assert wa.name == wb.name == "app"
    assert wa.root != wb.root


def test_submodule_is_its_own_repository_and_its_worktrees_join_it(tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "upstream" / "lib")
    sup = make_repo(tmp_path / "super")
    git(sup, "submodule", "add", "-q", str(lib), "vendor/lib")
    sub = sup / "vendor" / "lib"
    assert (sub / ".git").is_file()
    ws = find_workspace(sub / "src" / "pkg")
    assert (ws.root, ws.name) == (str(sub.resolve()), "lib")
    assert find_workspace(sup / "vendor").root == str(sup.resolve())
    wt = tmp_path / "lib-wt"
    git(sub, "worktree", "add", "-q", str(wt), "-b", "side")
    assert find_workspace(wt).root == str(sub.resolve())


def test_bare_repository_with_worktrees_beside_it(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")
    proj = tmp_path / "proj"
    proj.mkdir()
    git(proj, "clone", "-q", "--bare", str(origin), ".bare")
    (proj / ".git").write_text("gitdir: ./.bare\n")
    git(proj, "worktree", "add", "-q", "main", "main")
    git(proj, "worktree", "add", "-q", "feature", "-b", "feature")
    want = str(proj.resolve())
    for where in (proj, proj / "main", proj / "main" / "src", proj / "feature" / "src" / "pkg"):
        ws = find_workspace(where)
        assert (ws.root, ws.name, ws.kind) == (want, "proj", "git"), where


def test_plain_bare_repository_and_its_worktrees(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")
    git(tmp_path, "clone", "-q", "--bare", str(origin), "tool.git")
    bare = tmp_path / "tool.git"
    git(bare, "worktree", "add", "-q", str(tmp_path / "tool-main"), "main")
    ws = find_workspace(tmp_path / "tool-main" / "src")
    assert (ws.root, ws.name) == (str(bare.resolve()), "tool")


def test_separate_git_dir_and_its_worktree_agree(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (tmp_path / "store").mkdir()
    git(checkout, "init", "-q", "--separate-git-dir", str(tmp_path / "store" / "site.git"))
    (checkout / "f").write_text("x")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "x")
    git(checkout, "worktree", "add", "-q", str(tmp_path / "site-wt"), "-b", "b")
    one, two = find_workspace(checkout), find_workspace(tmp_path / "site-wt")
    assert one.root == two.root
    assert one.kind == "git"


def test_folders_without_a_repository_and_paths_not_on_this_machine(tmp_path: Path) -> None:
    plain = tmp_path / "notes" / "drafts"
    plain.mkdir(parents=True)
    ws = find_workspace(plain)
    assert (ws.root, ws.name, ws.kind) == (str(plain.resolve()), "drafts", "folder")
    gone = find_workspace("/home/someone-else/projects/webapp/")
    assert (gone.root, gone.name, gone.kind) == (
        "/home/someone-else/projects/webapp",
        "webapp",
        "missing",
    )
    win = find_workspace("C:\\Users\\dev\\api")
    assert (win.name, win.kind) == ("api", "missing")
    assert find_workspace("relative/dir").kind == "missing"


def test_a_broken_gitfile_is_not_a_repository(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / ".git").write_text("not a gitdir line\n")
    assert find_workspace(folder).kind == "folder"
    (folder / ".git").write_text("gitdir: /nowhere/at/all\n")
    assert find_workspace(folder).kind == "folder"


def test_path_name() -> None:
    assert path_name("/a/b/app.git") == "app"
    assert path_name("/") == "root"
    assert path_name("C:\\x\\y\\") == "y"
