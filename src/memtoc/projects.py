"""Which project: memtoc's one rule, used by every surface (CLI, hooks, importers, MCP, HTTP).

A **project** is a repository — the top level of its main worktree, so every subfolder and every
linked worktree of one repository is one project (``memtoc.workspace`` finds it without spawning
git) — or, outside any repository, the folder itself. Each has a stable id (what every stored row
carries; it never changes) and a readable name (unique, renamable: ``memtoc projects rename``).
Two repositories with the same folder name stay two projects: the second gets the id
``<name>-<hash of its path>`` and a name widened by its parent folders (``work/app``).

**Which project a call is about** (``ProjectRegistry.scope``), in this order:

1. an explicit project — an argument, ``--project``, the ``project`` setting — always wins (over
   ``all_projects`` too); it names a project by id or name, and an unknown one is an error
   naming the known projects (writes create it instead: ``ingest --project new``);
2. ``all_projects`` asks for every project (search, recall, bookmarks);
3. the working directory's project, when the surface has one: the MCP client's first root (else
   the server's working directory), the hook's ``cwd``, the shell's directory for the CLI, the
   session's starting directory for importers. A working project the store has no memory of yet
   is still the answer — reads return nothing and say so, naming the known projects — never
   another project's memory;
4. without a working directory (the HTTP API, library calls): the store's only project; with
   several, an error naming them.

**Writes** from a working directory register its project on first use
(``ProjectRegistry.for_directory``). A folder's first session claims a project of the same name
that has no folder yet (a store from before project identity, or a project first named
explicitly), so existing memory continues. A path that does not exist on this machine (a
transcript recorded elsewhere) maps to the registered root containing it, else to a project keyed
by the path as given. A session keeps the project of the directory it started in: importers pass
the session's first working directory (``EventDraft.cwd``), so an agent that changes directory
mid-session stays in one project.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from memtoc.clock import Clock
from memtoc.errors import QueryError, StoreError, UnknownProjectError
from memtoc.model import JsonValue, Project
from memtoc.store.base import ProjectStore
from memtoc.store.sqlite.projects import NameTaken
from memtoc.workspace import Workspace, find_workspace

__all__ = ["ProjectRegistry", "Scope", "UnknownProjectError"]

_RETRIES = 4


@dataclass(frozen=True, slots=True)
class Scope:
    """Which project(s) a call reads, and why (``ProjectRegistry.scope``)."""

    projects: tuple[str, ...] | None
    """Project ids; ``None`` = every project; ``()`` = a working project with no memory yet."""
    how: str
    """``explicit``, ``all``, ``working-directory``, ``only`` or ``empty``."""
    name: str | None = None
    """The project's readable name (one project), for messages and headers."""
    root: str | None = None
    """The working directory's workspace root (``working-directory``)."""
    note: str | None = None
    """What the caller should be told (no memory yet for this folder, the store is empty)."""

    @property
    def project(self) -> str | None:
        """The one project id, when the scope is exactly one project."""
        return self.projects[0] if self.projects is not None and len(self.projects) == 1 else None

    @property
    def empty(self) -> bool:
        """True when the scope holds no project: every read returns nothing (``note`` says why)."""
        return self.projects == ()

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "projects": list(self.projects) if self.projects is not None else None,
            "how": self.how,
            "name": self.name,
            "root": self.root,
            "note": self.note,
        }


def _short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=3).hexdigest()


class ProjectRegistry:
    """The project rule over one store's registry (see the module docstring)."""

    def __init__(self, store: ProjectStore, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock
        self._cache: list[Project] | None = None

    # -- reading the registry -----------------------------------------------------------------------
    def all(self, *, fresh: bool = False) -> list[Project]:
        """Every project, by name (cached; ``fresh`` re-reads the store)."""
        if self._cache is None or fresh:
            self._cache = self.store.list_projects()
        return self._cache

    def find(self, ref: str) -> Project | None:
        """The project whose id, else whose name, is ``ref`` (re-read once when not cached)."""
        for fresh in (False, True):
            projects = self.all(fresh=fresh)
            for p in projects:
                if p.project == ref:
                    return p
            for p in projects:
                if p.name == ref:
                    return p
        return None

    def require(self, ref: str) -> Project:
        """``find`` or ``UnknownProjectError`` naming the known projects."""
        found = self.find(ref)
        if found is None:
            raise UnknownProjectError(ref, self.names())
        return found

    def names(self) -> list[str]:
        return [p.name for p in self.all()]

    def name_of(self, project_id: str) -> str:
        """A project id's readable name (the id itself when unregistered)."""
        for p in self.all():
            if p.project == project_id:
                return p.name
        return project_id

    # -- the rule -----------------------------------------------------------------------------------
    def scope(
        self,
        project: str | None = None,
        *,
        all_projects: bool = False,
        working_dir: str | os.PathLike[str] | None = None,
    ) -> Scope:
        """Which project(s) a read is about — memtoc's one rule (the module docstring)."""
        if project:  # an explicit project always wins (over all_projects too)
            found = self.require(project)
            return Scope((found.project,), "explicit", found.name)
        if all_projects:
            return Scope(None, "all")
        if working_dir is not None:
            covering, ws = self.for_directory(working_dir, register=False)
            if covering is not None:
                return Scope((covering.project,), "working-directory", covering.name, ws.root)
            known = self.names()
            listed = ", ".join(known) if known else "none yet"
            note = (
                f"no memory yet for project {ws.name!r} ({ws.root}); known projects: {listed}"
                " — name one, or ask for all projects"
            )
            return Scope((), "working-directory", ws.name, ws.root, note)
        projects = self.all(fresh=True)
        if len(projects) == 1:
            return Scope((projects[0].project,), "only", projects[0].name)
        if not projects:
            return Scope((), "empty", note="the memory is empty: nothing has been recorded yet")
        raise QueryError(
            f"several projects ({', '.join(self.names())}): name one, or ask for all projects"
        )

    def for_write(self, ref: str) -> str:
        """The id of the project named ``ref`` (id or name), registered when new (id = name)."""
        found = self.find(ref)
        if found is not None:
            return found.project
        self._register(ref, ref, None)
        return ref

    def for_directory(
        self, path: str | os.PathLike[str], *, register: bool = True
    ) -> tuple[Project | None, Workspace]:
        """The project of a working directory (registered when new, unless ``register`` is
        False: then None for a folder no project covers yet) and the directory's workspace."""
        ws = find_workspace(path)
        for _ in range(_RETRIES):
            found = self._covering(ws)
            if found is not None:
                return found, ws
            claim = self.find(ws.name)
            if not register:  # a read: the project a write would claim, else none
                return (claim if claim is not None and not claim.roots else None), ws
            try:
                if claim is not None and not claim.roots:  # a project with no folder yet
                    holder = self.store.add_project_root(claim.project, ws.root)
                else:
                    project, name = self._new_identity(ws)
                    holder = self.store.register_project(project, name, ws.root)
            except NameTaken:  # another process registered meanwhile: read again
                self.all(fresh=True)
                continue
            self.all(fresh=True)
            registered = self.find(holder)
            if registered is not None:
                return registered, ws
        raise StoreError(f"cannot register a project for {ws.root}: the registry keeps changing")

    def _covering(self, ws: Workspace) -> Project | None:
        """The registered project holding ``ws.root`` (or, for a path not on this machine, the
        longest registered root containing it)."""
        for fresh in (False, True):
            best: tuple[int, Project] | None = None
            for p in self.all(fresh=fresh):
                for root in p.roots:
                    if root == ws.root:
                        return p
                    longer = best is None or len(root) > best[0]
                    if ws.kind == "missing" and longer and _contains(root, ws.root):
                        best = (len(root), p)
            if best is not None:
                return best[1]
        return None

    def _new_identity(self, ws: Workspace) -> tuple[str, str]:
        """A fresh id and name for a new folder: the folder's name when free, else the name
        widened by parent folders (``work/app``) and an id with a hash of the path."""
        taken = {p.project for p in self.all()} | {p.name for p in self.all()}
        base = ws.name
        project = base if base not in taken else f"{base}-{_short_hash(ws.root)}"
        if project in taken:  # a hash collision with an older path: hash more of it
            project = f"{base}-{hashlib.sha256(ws.root.encode()).hexdigest()[:12]}"
        name = project
        for candidate in _widened_names(ws.root, base):
            if candidate not in taken:
                name = candidate
                break
        return project, name

    def _register(self, project: str, name: str, root: str | None) -> None:
        try:
            self.store.register_project(project, name, root)
        except NameTaken as exc:  # someone else took it meanwhile: then it exists
            if self.find(project) is None:
                raise QueryError(str(exc)) from exc
        self.all(fresh=True)

    # -- renames and merges -------------------------------------------------------------------------
    def rename(self, ref: str, name: str) -> Project:
        """Give a project a new readable name (its id, and so every stored row, is unchanged)."""
        name = name.strip()
        if not name:
            raise QueryError("a project name cannot be empty")
        found = self.require(ref)
        try:
            self.store.rename_project(found.project, name)
        except NameTaken as exc:
            raise QueryError(str(exc)) from exc
        self.all(fresh=True)
        return self.require(found.project)


def _contains(root: str, path: str) -> bool:
    sep = "\\" if "\\" in root and "/" not in root else "/"
    return path.startswith(root.rstrip(sep) + sep)


def _widened_names(root: str, base: str) -> Sequence[str]:
    """``app``, ``work/app``, ``home/work/app``, … for a root ``/home/work/app``."""
    parts = [p for p in root.replace("\\", "/").split("/") if p]
    if parts and parts[-1] != base:  # e.g. ``tool.git`` named ``tool``
        parts[-1] = base
    return ["/".join(parts[-n:]) for n in range(1, len(parts) + 1)] or [base]
