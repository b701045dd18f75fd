"""Reads whose SQL is the same on both engines: events by id, the outbox's state, TOC nodes,
checkpoints, rollup marks, bookmarks and vector provenance.

Written once with ``?`` placeholders and run through the store's ``_q`` (SQLite runs them as
they are; PostgreSQL's ``_q`` turns ``?`` into ``%s``), so the two backends cannot drift apart on
what a node read returns. Writes stay in each backend's own modules: they differ (upserts, locks,
what text the engine can store).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memtoc.errors import NotFoundError, QueryError
from memtoc.model import Bookmark, Event, JsonValue, OutboxEntry, TocNode
from memtoc.store.base import DirtyPeriod
from memtoc.store.capabilities import (
    BEHIND_CAP,
    EmbedderIdentity,
    VectorProgress,
    embed_job,
    progress_from,
)
from memtoc.store.codecs import (
    OUTBOX_COLS,
    bookmark_from_row,
    embedder_meta_key,
    event_from_row,
    identity_from_json,
    node_from_row,
    outbox_entry_from_row,
)

BOOKMARK_COLS = (
    "bookmark_id, project, content, event_ids, importance, type, created_ms, last_relevant_ms"
)
LATEST = (
    "FROM toc_nodes n JOIN toc_node_versions v "
    "ON v.project = n.project AND v.node_id = n.node_id AND v.version = n.version"
)
"""Nodes joined to their latest version (the ``toc_nodes`` pointer)."""


class SharedReads:
    """The reads both stores run as the same statements (mixed into each store class)."""

    if TYPE_CHECKING:
        EVENT_COLS: str
        """The store's event columns (``codecs.event_from_row``'s order)."""
        _live: str
        """The condition on ``events`` that leaves tombstones out."""
        location: str

        def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    # -- events and the outbox ------------------------------------------------------------------------
    def get_event(self, event_id: str) -> Event:
        rows = self._q(
            f"SELECT {self.EVENT_COLS} FROM events WHERE event_id = ? AND {self._live}", (event_id,)
        )
        if not rows:
            raise NotFoundError("event", event_id)
        return event_from_row(rows[0])

    def max_seq(self) -> int:
        return int(self._q("SELECT COALESCE(MAX(seq), 0) FROM events")[0][0])

    def projects(self) -> list[str]:
        return [r[0] for r in self._q("SELECT DISTINCT project FROM events ORDER BY project")]

    def outbox_counts(self) -> dict[str, int]:
        counts = {"pending": 0, "done": 0, "failed": 0}
        for status, n in self._q("SELECT status, COUNT(*) FROM outbox GROUP BY status"):
            counts[status] = int(n)
        return counts

    def failed_outbox(self, limit: int = 20) -> list[OutboxEntry]:
        rows = self._q(
            f"SELECT {OUTBOX_COLS} FROM outbox WHERE status = 'failed' ORDER BY entry_id LIMIT ?",
            (limit,),
        )
        return [outbox_entry_from_row(r) for r in rows]

    def get_checkpoint(self, job: str) -> JsonValue | None:
        rows = self._q("SELECT value FROM checkpoints WHERE job = ?", (job,))
        value: JsonValue = json.loads(rows[0][0]) if rows else None
        return value

    def get_node(self, project: str, node_id: str, version: int | None = None) -> TocNode:
        if version is None:
            rows = self._q(
                f"SELECT v.version, v.data {LATEST} WHERE n.project = ? AND n.node_id = ?",
                (project, node_id),
            )
        else:
            rows = self._q(
                "SELECT version, data FROM toc_node_versions "
                "WHERE project = ? AND node_id = ? AND version = ?",
                (project, node_id, version),
            )
        if not rows:
            raise NotFoundError("node", f"{node_id} (project {project})")
        return node_from_row(project, node_id, rows[0][0], rows[0][1])

    def find_node(self, node_id: str, project: str | None = None) -> TocNode:
        if project is not None:
            return self.get_node(project, node_id)
        rows = self._q("SELECT project FROM toc_nodes WHERE node_id = ?", (node_id,))
        if not rows:
            raise NotFoundError("node", node_id)
        if len(rows) > 1:
            names = ", ".join(sorted(r[0] for r in rows))
            raise QueryError(f"{node_id} exists in several projects ({names}); name one")
        return self.get_node(rows[0][0], node_id)

    def list_nodes(
        self,
        project: str,
        *,
        level: str | None = None,
        parent_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[TocNode]:
        where, params = _node_filter(project, level, parent_id, since_ms, until_ms)
        rows = self._q(
            f"SELECT n.node_id, v.version, v.data {LATEST} "
            f"WHERE {where} ORDER BY n.start_ms, n.node_id",
            params,
        )
        return [node_from_row(project, r[0], r[1], r[2]) for r in rows]

    def list_node_versions(
        self,
        project: str,
        *,
        level: str | None = None,
        parent_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[tuple[str, int]]:
        """``(node_id, latest version)`` of the nodes ``list_nodes`` returns, in its order,
        without reading their content (a rollup checks that its children did not change)."""
        where, params = _node_filter(project, level, parent_id, since_ms, until_ms)
        rows = self._q(
            f"SELECT n.node_id, v.version {LATEST} WHERE {where} ORDER BY n.start_ms, n.node_id",
            params,
        )
        return [(r[0], int(r[1])) for r in rows]

    def latest_nodes(self, project: str, level: str, limit: int) -> list[TocNode]:
        """The ``limit`` nodes of ``level`` that start last, newest first: a backwards walk of
        the ``(project, level, start_ms)`` index, whose cost does not grow with the store."""
        rows = self._q(
            f"SELECT n.node_id, v.version, v.data {LATEST} WHERE n.project = ? AND n.level = ? "
            "ORDER BY n.start_ms DESC, n.node_id DESC LIMIT ?",
            (project, level, max(0, int(limit))),
        )
        return [node_from_row(project, r[0], r[1], r[2]) for r in rows]

    def node_versions(self, project: str, node_id: str) -> list[int]:
        rows = self._q(
            "SELECT version FROM toc_node_versions WHERE project = ? AND node_id = ? "
            "ORDER BY version",
            (project, node_id),
        )
        return [int(r[0]) for r in rows]

    # -- rollup marks (PipelineStore) ---------------------------------------------------------------
    def dirty_periods(self, level: str) -> list[DirtyPeriod]:
        rows = self._q(
            "SELECT project, node_id, level, activity_ms, marked_ms, seq FROM rollup_dirty "
            "WHERE level = ? ORDER BY project, node_id",
            (level,),
        )
        return [DirtyPeriod(*r) for r in rows]

    def orphan_parent_ids(self, level: str) -> list[tuple[str, str, int]]:
        rows = self._q(
            "SELECT c.project, c.parent_id, MAX(c.end_ms) FROM toc_nodes c "
            "LEFT JOIN toc_nodes p ON p.project = c.project AND p.node_id = c.parent_id "
            "WHERE c.level = ? AND c.parent_id IS NOT NULL AND p.node_id IS NULL "
            "GROUP BY c.project, c.parent_id ORDER BY c.project, c.parent_id",
            (level,),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    # -- bookmarks ----------------------------------------------------------------------------------
    def list_bookmarks(
        self, project: str | None = None, limit: int | None = None
    ) -> list[Bookmark]:
        sql = f"SELECT {BOOKMARK_COLS} FROM bookmarks"
        params: list[Any] = []
        if project is not None:
            sql += " WHERE project = ?"
            params.append(project)
        sql += " ORDER BY importance DESC, created_ms DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [bookmark_from_row(r) for r in self._q(sql, params)]

    def find_bookmarks(
        self,
        project: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        type: str | None = None,  # noqa: A002 - the model's field name
        content: str | None = None,
    ) -> list[Bookmark]:
        """A project's bookmarks created in ``[since, until]`` (inclusive), of ``type`` and with
        exactly ``content`` when given, oldest first."""
        sql = f"SELECT {BOOKMARK_COLS} FROM bookmarks WHERE project = ?"
        params: list[Any] = [project]
        for clause, value in (
            ("created_ms >= ?", since_ms),
            ("created_ms <= ?", until_ms),
            ("type = ?", type),
            ("content = ?", content),
        ):
            if value is not None:
                sql += f" AND {clause}"
                params.append(value)
        sql += " ORDER BY created_ms, bookmark_id"
        return [bookmark_from_row(r) for r in self._q(sql, params)]

    def retired_nodes_overlapping(self, project: str, since_ms: int, until_ms: int) -> list[str]:
        """Nodes with stored versions but no latest pointer (retired) whose span overlaps
        ``[since, until]`` — history that may quote a forgotten event."""
        rows = self._q(
            "SELECT DISTINCT v.node_id FROM toc_node_versions v WHERE v.project = ? "
            "AND v.start_ms <= ? AND v.end_ms > ? AND NOT EXISTS (SELECT 1 FROM toc_nodes n "
            "WHERE n.project = v.project AND n.node_id = v.node_id) ORDER BY 1",
            (project, until_ms, since_ms),
        )
        return [r[0] for r in rows]

    # -- vectors (VectorStore) ------------------------------------------------------------------------
    def recorded_embedder(self, name: str) -> tuple[int, str] | None:
        """``(dim, version)`` recorded for embedder ``name``, or ``None`` when none is."""
        rows = self._q("SELECT value FROM meta WHERE key = ?", (embedder_meta_key(name),))
        return identity_from_json(rows[0][0] if rows else None, self.location, name)

    def stale_embedder(self, embedder: EmbedderIdentity) -> bool:
        """True when vectors stored under ``embedder.name`` came from a different model: the
        recorded dimension or version differs, or vectors exist with no record at all. A store
        holding no vectors of this embedder is not stale (there is nothing to redo)."""
        recorded = self.recorded_embedder(embedder.name)
        if recorded is None:
            return bool(
                self._q("SELECT 1 FROM vectors WHERE embedder = ? LIMIT 1", (embedder.name,))
            )
        return recorded != (int(embedder.dim), embedder.version)

    def vector_progress(self, name: str) -> VectorProgress:
        """How far embedder ``name``'s vectors cover the store (a few indexed lookups: cheap
        enough per search)."""
        row = self._q(
            "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM checkpoints "
            "WHERE job = ?), (SELECT COALESCE(MAX(seq), 0) FROM segment_events)",
            (embedder_meta_key(name), embed_job(name)),
        )[0]
        return progress_from(
            row[0],
            row[1],
            int(row[2]),
            lambda after: self._q(
                "SELECT COUNT(*) FROM (SELECT 1 FROM segment_events WHERE seq > ? LIMIT ?) c",
                (after, BEHIND_CAP),
            )[0][0],
            lambda: [
                str(r[0]).removeprefix("embedder:")
                for r in self._q(
                    "SELECT key FROM meta WHERE key LIKE ? AND key <> ? ORDER BY key",
                    ("embedder:%", embedder_meta_key(name)),
                )
            ],
        )


def _node_filter(
    project: str,
    level: str | None,
    parent_id: str | None,
    since_ms: int | None,
    until_ms: int | None,
) -> tuple[str, list[Any]]:
    """The ``WHERE`` of ``list_nodes`` and ``list_node_versions`` and its parameters."""
    where = ["n.project = ?"]
    params: list[Any] = [project]
    for clause, value in (
        ("n.level = ?", level),
        ("n.parent_id = ?", parent_id),
        ("n.end_ms > ?", since_ms),  # periods overlapping [since, until)
        ("n.start_ms < ?", until_ms),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    return " AND ".join(where), params
