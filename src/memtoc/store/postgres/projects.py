"""The project registry on PostgreSQL (migration ``0008_projects``): SQLite's, in PostgreSQL SQL.

See ``store/sqlite/projects.py`` for the tables and ``memtoc.projects`` for the rule. Concurrent
registrations of one folder serialise on a transaction-scoped advisory lock on the folder, so two
processes that meet a new repository at once agree on one project.
"""

from __future__ import annotations

from collections.abc import Iterable

from memtoc.errors import StoreError
from memtoc.model import Project
from memtoc.store.postgres.base import PgBase
from memtoc.store.sqlite.projects import NameTaken, fallback_name

_REGISTRY_LOCK = "memtoc:projects"


class PgProjects(PgBase):
    """The PostgreSQL store's project registry."""

    def list_projects(self) -> list[Project]:
        roots: dict[str, list[str]] = {}
        for root, project in self._query(
            "SELECT root, project FROM project_roots ORDER BY project, added_ms, root"
        ):
            roots.setdefault(str(project), []).append(str(root))
        rows = self._query("SELECT project, name, created_ms FROM projects ORDER BY name, project")
        return [Project(str(p), str(n), int(ms), tuple(roots.get(str(p), ()))) for p, n, ms in rows]

    def _root_project(self, root: str) -> str | None:
        rows = self._query("SELECT project FROM project_roots WHERE root = %s", (root,))
        return str(rows[0][0]) if rows else None

    def register_project(self, project: str, name: str, root: str | None = None) -> str:
        now = self.clock.now_ms()
        with self.transaction():
            self._lock_key(_REGISTRY_LOCK)
            if root is not None:
                held = self._root_project(root)
                if held is not None:
                    return held
            if not self._query("SELECT 1 FROM projects WHERE project = %s", (project,)):
                clash = self._query(
                    "SELECT project FROM projects WHERE name IN (%s, %s) OR project = %s",
                    (name, project, name),
                )
                if clash:
                    raise NameTaken(f"project name {name!r} is taken by project {clash[0][0]!r}")
                self._exec(
                    "INSERT INTO projects(project, name, created_ms) VALUES (%s, %s, %s)",
                    (project, name, now),
                )
            if root is not None:
                self._exec(
                    "INSERT INTO project_roots(root, project, added_ms) VALUES (%s, %s, %s)",
                    (root, project, now),
                )
        return project

    def add_project_root(self, project: str, root: str) -> str:
        with self.transaction():
            self._lock_key(_REGISTRY_LOCK)
            held = self._root_project(root)
            if held is not None:
                return held
            self._exec(
                "INSERT INTO project_roots(root, project, added_ms) VALUES (%s, %s, %s)",
                (root, project, self.clock.now_ms()),
            )
        return project

    def rename_project(self, project: str, name: str) -> None:
        with self.transaction():
            self._lock_key(_REGISTRY_LOCK)
            clash = self._query(
                "SELECT project FROM projects WHERE (name = %s OR project = %s) AND project != %s",
                (name, name, project),
            )
            if clash:
                raise NameTaken(f"project name {name!r} is taken by project {clash[0][0]!r}")
            if not self._exec("UPDATE projects SET name = %s WHERE project = %s", (name, project)):
                raise StoreError(f"no project {project!r}")

    def _ensure_projects(self, projects: Iterable[str]) -> None:
        """Register project ids that appended rows carry but the registry lacks (inside the
        append's transaction)."""
        now = self.clock.now_ms()
        self._many(
            "INSERT INTO projects(project, name, created_ms) "
            "SELECT %s, CASE WHEN EXISTS (SELECT 1 FROM projects WHERE name = %s) "
            "THEN %s ELSE %s END, %s "
            "ON CONFLICT DO NOTHING",
            [(p, p, fallback_name(p), p, now) for p in projects],
        )
