"""Where a working directory belongs: the repository's main worktree top, else the folder.

``find_workspace(path)`` is the path half of memtoc's one project rule (``memtoc.projects``): a
directory inside a git repository belongs to the repository's *main worktree top level* — every
subfolder and every linked worktree (``git worktree add``) of one repository is one workspace —
and any other directory is its own workspace. It runs inside hooks, so it never spawns ``git``: it
walks up from the directory looking for ``.git`` and reads git's own files.

- ``.git`` a directory: this is the top of a (main) worktree;
- ``.git`` a file (``gitdir: <path>``): a linked worktree (its git dir holds ``commondir``, the
  repository's shared git dir), a submodule (``<super>/.git/modules/<name>``, whose ``config``
  names its checkout in ``core.worktree``) or a separate git dir;
- from the shared git dir: ``core.worktree`` when set, else the folder holding it when it is
  called ``.git``; a bare repository (``core.bare``) has no main worktree, so its identity is the
  folder around a ``.bare``/``.git`` git dir (the "bare repo + worktrees" layout) or the bare
  directory itself.

A path that does not exist here (a transcript recorded on another machine, a deleted checkout) is
kept as given (``kind="missing"``): the project registry maps it to the registered root that
contains it, if any.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Workspace", "find_workspace", "path_name"]

_MAX_GITFILE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Workspace:
    """A working directory's workspace: its canonical root, a readable name and how it was found."""

    root: str
    """Absolute path: the main worktree's top level (``git``), the folder (``folder``), or the
    path as given, normalised (``missing``)."""
    name: str
    """The root's last component (a repository's name; ``.git`` suffix dropped)."""
    kind: str
    """``git``, ``folder`` or ``missing``."""


def path_name(path: str) -> str:
    """The last component of a POSIX or Windows path, ``.git`` suffix dropped ("root" for ``/``)."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if name.endswith(".git") and len(name) > 4:
        name = name[:-4]
    return name or "root"


def _normalised(path: str) -> str:
    """A path that is not on this machine, as a stable key: separators and dots tidied."""
    if "\\" in path and "/" not in path:  # a Windows path recorded elsewhere
        return path.rstrip("\\") or path
    return os.path.normpath(path) if path.startswith("/") else path.rstrip("/") or path


def find_workspace(path: str | os.PathLike[str]) -> Workspace:
    """The workspace holding ``path`` (a directory, or a file inside one); see the module doc."""
    raw = os.fspath(path)
    expanded = os.path.expanduser(raw)
    if not os.path.isabs(expanded) or not os.path.exists(expanded):
        key = _normalised(raw)
        return Workspace(key, path_name(key), "missing")
    here = os.path.realpath(expanded)
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    for folder in _ancestors(here):
        top = _repository_top(folder)
        if top is not None:
            return Workspace(top, path_name(top), "git")
    return Workspace(here, path_name(here), "folder")


def _ancestors(path: str) -> list[str]:
    out = [path]
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def _repository_top(folder: str) -> str | None:
    """The repository's identity when ``folder`` holds a usable ``.git``, else None."""
    dotgit = os.path.join(folder, ".git")
    if os.path.isdir(dotgit):
        return _top_from_gitdir(dotgit) if _is_gitdir(dotgit) else None
    if not os.path.isfile(dotgit):
        return None
    gitdir = _read_gitfile(dotgit)
    if gitdir is None:
        return None
    gitdir = os.path.realpath(os.path.join(folder, gitdir))
    if not _is_gitdir(gitdir):
        return None
    return _top_from_gitdir(gitdir)


def _is_gitdir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "HEAD"))


def _read_gitfile(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(_MAX_GITFILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    line = head.splitlines()[0] if head else ""
    if not line.startswith("gitdir:"):
        return None
    target = line[len("gitdir:") :].strip()
    return target or None


def _top_from_gitdir(gitdir: str) -> str:
    """The main worktree top (or a bare repository's identity) of the checkout using ``gitdir``."""
    common = gitdir
    commondir = _read_small(os.path.join(gitdir, "commondir"))
    if commondir and commondir.strip():
        common = os.path.realpath(os.path.join(gitdir, commondir.strip()))
    core = _core_config(os.path.join(common, "config"))
    worktree = core.get("worktree")
    if worktree:
        return os.path.realpath(os.path.join(common, worktree))
    name = os.path.basename(common)
    if core.get("bare", "").lower() in ("true", "yes", "on", "1"):
        return os.path.dirname(common) if name.startswith(".") else common
    if name.startswith("."):  # ``.git``, or a hidden git dir beside the checkouts (``.bare``)
        return os.path.dirname(common)
    # a git dir kept elsewhere (``git init --separate-git-dir``): git records no main worktree,
    # so the shared git dir is the one identity the checkout and its worktrees agree on
    return common


def _read_small(path: str, limit: int = _MAX_GITFILE_BYTES) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _core_config(path: str) -> dict[str, str]:
    """``core.*`` values of a git config file (only what the layout needs: bare, worktree)."""
    text = _read_small(path, 256 * 1024) or ""
    values: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line[1:].split("]", 1)[0].strip().lower()
            continue
        if section != "core" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        for mark in (" #", " ;"):
            if mark in value and not value.startswith('"'):
                value = value.split(mark, 1)[0].rstrip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        values[key.strip().lower()] = value
    return values
