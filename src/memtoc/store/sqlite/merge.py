"""Merging projects in the SQLite store (``ProjectMerging``, ``store/capabilities.py``): the SQL
of ``memtoc.merging``'s steps, in one transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from memtoc.store.base import DirtyPeriod
from memtoc.store.capabilities import MergeReport, generation_key

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore

REFILE_BATCH = 2_000
"""Events per outbox entry queued for filing again."""


def _ids(store: SqliteStore, sql: str, params: tuple[object, ...]) -> list[str]:
    return [str(r[0]) for r in store._query(sql, params)]


def merge_projects(store: SqliteStore, source: str, target: str) -> MergeReport:
    """Merge project ``source`` into ``target`` (ids): ``memtoc.merging``'s steps 1-5."""
    report = MergeReport(source, target)
    with store.transaction():
        shared = sorted(
            set(_ids(store, "SELECT session_id FROM sessions WHERE project = ?", (source,)))
            & set(_ids(store, "SELECT session_id FROM sessions WHERE project = ?", (target,)))
        )
        report.shared_sessions = len(shared)
        seqs = [int(r[0]) for r in store._query(
            "SELECT seq FROM events WHERE project = ? AND forgotten_ms IS NULL", (source,)
        )]  # fmt: skip
        marks = ",".join("?" * len(shared))
        shared_segments: list[str] = []
        days: list[tuple[str, int]] = []
        if shared:
            seqs += [int(r[0]) for r in store._query(
                f"SELECT seq FROM events WHERE project = ? AND session_id IN ({marks}) "
                "AND forgotten_ms IS NULL", (target, *shared)
            )]  # fmt: skip
            shared_segments = _ids(
                store,
                f"SELECT node_id FROM segments WHERE project = ? AND session_id IN ({marks})",
                (target, *shared),
            )
            for node_id in shared_segments:
                days += [(str(r[0]), int(r[1])) for r in store._query(
                    "SELECT parent_id, end_ms FROM toc_nodes WHERE project = ? AND node_id = ? "
                    "AND parent_id IS NOT NULL", (target, node_id)
                )]  # fmt: skip
        seqs.sort()
        report.refiled = len(seqs)
        store.unfile_events(seqs)
        # the target's segments of shared sessions: retired, their days rolled up again
        store.write_segments([], shared_segments, target, [], [])
        report.nodes_retired += store.purge_node_versions(target, shared_segments)
        report.segments_retired += len(shared_segments)
        store.mark_dirty([DirtyPeriod(target, day, "day", end, end) for day, end in days])
        # everything derived in the source
        segments = _ids(store, "SELECT node_id FROM segments WHERE project = ?", (source,))
        store.write_segments([], segments, source, [], [])
        report.segments_retired += len(segments)
        nodes = _ids(store, "SELECT node_id FROM toc_nodes WHERE project = ?", (source,))
        for node_id in nodes:
            store.delete_node(source, node_id)
        store.purge_node_versions(source, nodes)
        report.nodes_retired += len(nodes) + len(segments)
        bookmarks = _ids(store, "SELECT bookmark_id FROM bookmarks WHERE project = ?", (source,))
        store._delete_docs("bookmark", source, bookmarks)
        report.bookmarks_removed = store.delete_bookmarks(bookmarks)
        for sql in (
            "DELETE FROM vectors WHERE project = ? AND kind != 'event'",
            "DELETE FROM doc_vectors WHERE project = ?",
            "DELETE FROM rollup_dirty WHERE project = ?",
            "DELETE FROM toc_node_versions WHERE project = ?",
        ):
            store._exec(sql, (source,))
        prefix = f"bookmarks:{source}:"
        store._exec("DELETE FROM checkpoints WHERE substr(job, 1, ?) = ?", (len(prefix), prefix))
        for sid in shared:  # a shared session's bookmarks are detected again, as one
            store._exec("DELETE FROM checkpoints WHERE job = ?", (f"bookmarks:{target}:{sid}",))
        # relabel what is the source's own: events, sessions, event vectors
        report.events = store._exec(
            "UPDATE events SET project = ? WHERE project = ?", (target, source)
        ).rowcount
        store._exec(
            "INSERT INTO sessions(session_id, project, first_ms, last_ms) "
            "SELECT session_id, ?, first_ms, last_ms FROM sessions WHERE project = ? "
            "ON CONFLICT(session_id, project) DO UPDATE SET "
            "first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms)",
            (target, source),
        )
        store._exec("DELETE FROM sessions WHERE project = ?", (source,))
        store._exec(
            "UPDATE vectors SET project = ? WHERE project = ? AND kind = 'event'", (target, source)
        )
        # queue them for filing again
        for i in range(0, len(seqs), REFILE_BATCH):
            chunk = seqs[i : i + REFILE_BATCH]
            store._add_outbox("refile", {"first_seq": chunk[0], "last_seq": chunk[-1]})
            report.outbox_entries += 1
        # the registry: the source's folders now file into the target
        report.roots_moved = store._exec(
            "UPDATE project_roots SET project = ? WHERE project = ?", (target, source)
        ).rowcount
        store._exec("DELETE FROM projects WHERE project = ?", (source,))
        for name in sorted(store.vector_embedders()):  # loaded vector indexes reload
            key = generation_key(name)
            store.set_meta(key, str(int(store.get_meta(key) or 0) + 1))
    store.purge_stale_doc_vectors()
    store.forget_registered(source)
    return report


class SqliteMerge:
    """``ProjectMerging`` for ``SqliteStore`` (a mixin)."""

    def merge_projects(self, source: str, target: str) -> MergeReport:
        return merge_projects(cast("SqliteStore", self), source, target)
