"""The project registry on SQLite (migration ``0009_projects``): ids, names and root folders.

``projects(project, name, created_ms)`` registers every project id the rows carry, with a readable
name (unique; renaming changes only the name), and ``project_roots(root, project)`` maps the
canonical folders whose sessions file into a project (``memtoc.projects`` decides which). These
functions are the SQL; the rule — which folder is which project, how names are chosen — is
``memtoc.projects``. Writes run in their own short transaction (or join the caller's).

A store opened read-only before the migration ran has no registry: ``list_projects`` then lists
the project ids of its events, each named by its id.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memtoc.errors import StoreError
from memtoc.model import Project

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore


class NameTaken(StoreError):
    """A project name (or id) is already used by another project."""


def has_registry(conn: sqlite3.Connection) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'projects'")
    return found.fetchone() is not None


def list_projects(store: SqliteStore) -> list[Project]:
    """Every registered project with its roots, by name."""
    if not store.has_project_registry:
        rows = store._query("SELECT project, MIN(ts_ms) FROM events GROUP BY project")
        return [Project(p, p, int(ms or 0)) for p, ms in sorted(rows)]
    roots: dict[str, list[str]] = {}
    for root, project in store._query(
        "SELECT root, project FROM project_roots ORDER BY project, added_ms, root"
    ):
        roots.setdefault(project, []).append(root)
    rows = store._query("SELECT project, name, created_ms FROM projects ORDER BY name, project")
    return [Project(p, n, int(ms), tuple(roots.get(p, ()))) for p, n, ms in rows]


def project_of_root(store: SqliteStore, root: str) -> str | None:
    if not store.has_project_registry:
        return None
    rows = store._query("SELECT project FROM project_roots WHERE root = ?", (root,))
    return str(rows[0][0]) if rows else None


def register_project(
    store: SqliteStore, project: str, name: str, root: str | None, now_ms: int
) -> str:
    """Register ``project`` named ``name`` (with ``root``) unless it exists; return the project id
    now holding ``root`` (another process may have registered it first) or ``project``.

    Raises ``NameTaken`` when ``name`` or ``project`` is another project's name or id."""
    with store.transaction():
        if root is not None:
            held = project_of_root(store, root)
            if held is not None:
                return held
        exists = store._query("SELECT 1 FROM projects WHERE project = ?", (project,))
        if not exists:
            clash = store._query(
                "SELECT project FROM projects WHERE name IN (?, ?) OR project = ?",
                (name, project, name),
            )
            if clash:
                raise NameTaken(f"project name {name!r} is taken by project {clash[0][0]!r}")
            store._exec(
                "INSERT INTO projects(project, name, created_ms) VALUES (?, ?, ?)",
                (project, name, now_ms),
            )
        if root is not None:
            store._exec(
                "INSERT INTO project_roots(root, project, added_ms) VALUES (?, ?, ?)",
                (root, project, now_ms),
            )
    return project


def add_root(store: SqliteStore, project: str, root: str, now_ms: int) -> str:
    """Map ``root`` to ``project`` unless it is mapped already; return the project holding it."""
    with store.transaction():
        held = project_of_root(store, root)
        if held is not None:
            return held
        store._exec(
            "INSERT INTO project_roots(root, project, added_ms) VALUES (?, ?, ?)",
            (root, project, now_ms),
        )
    return project


def rename_project(store: SqliteStore, project: str, name: str) -> None:
    with store.transaction():
        clash = store._query(
            "SELECT project FROM projects WHERE (name = ? OR project = ?) AND project != ?",
            (name, name, project),
        )
        if clash:
            raise NameTaken(f"project name {name!r} is taken by project {clash[0][0]!r}")
        cur = store._exec("UPDATE projects SET name = ? WHERE project = ?", (name, project))
        if cur.rowcount == 0:
            raise StoreError(f"no project {project!r}")


def fallback_name(project: str) -> str:
    """A name for a project id whose own spelling is another project's name (rare)."""
    return f"{project}#{hashlib.blake2b(project.encode(), digest_size=3).hexdigest()}"


_ENSURE = (
    "INSERT INTO projects(project, name, created_ms) "
    "SELECT ?1, CASE WHEN EXISTS (SELECT 1 FROM projects WHERE name = ?1) THEN ?2 ELSE ?1 END, ?3 "
    "WHERE NOT EXISTS (SELECT 1 FROM projects WHERE project = ?1)"
)


def ensure_projects(conn: sqlite3.Connection, projects: Iterable[str], now_ms: int) -> None:
    """Register project ids that rows carry but the registry lacks (inside the caller's write:
    events appended directly through the store, not through ``memtoc.projects``)."""
    conn.executemany(_ENSURE, [(p, fallback_name(p), now_ms) for p in projects])
