"""Merge one project into another (``memtoc projects merge SOURCE TARGET``).

What a merge is for: memory that belongs together but was filed apart — a session split across
projects because its agent changed directory (memtoc before project identity did that), a
repository moved to a new path, a folder later made part of a repository. After it, the target
holds every event of both, and its table of contents is what the pipeline would have built had
the events been filed there from the start.

How (one transaction, then the ordinary pipeline):

1. the source's events — and the target's events of sessions found in both projects (a split
   session must be segmented as one) — leave their segments: ``segment_events`` and ``events_fts``
   rows are removed (``sqlite_forget.unfile_events``);
2. everything derived from them is retired: the source's segments, nodes of every level (and all
   their versions), grips, search documents, bookmarks, doc vectors, rollup marks and bookmark
   checkpoints; the target's segments of shared sessions, with their nodes and grips, and their
   days marked for a new rollup;
3. the source's events, sessions and event vectors are relabelled to the target (events are
   otherwise immutable; a merge only changes which project they are filed under);
4. ``refile`` outbox entries (2,000 events each) queue them for filing again — the next
   ``memtoc process`` segments, summarises, indexes and rolls them up (the CLI runs it at once);
5. the source's folders move to the target and the source leaves the registry, so later sessions
   in its folders file into the target.

SQLite only for now (``Memory.sqlite_store``); a PostgreSQL store refuses it with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.errors import QueryError
from memtoc.model import JsonValue
from memtoc.pipeline.embed_step import generation_key
from memtoc.store.base import DirtyPeriod
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite_forget import (
    purge_node_versions,
    purge_stale_doc_vectors,
    unfile_events,
    vector_embedders,
)

REFILE_BATCH = 2_000
"""Events per outbox entry queued for filing again."""


@dataclass(slots=True)
class MergeReport:
    """What a merge did (``to_dict`` is the CLI's ``--json``)."""

    source: str
    target: str
    events: int = 0
    """Events relabelled from the source to the target."""
    shared_sessions: int = 0
    """Sessions found in both projects (filed again as one)."""
    refiled: int = 0
    """Events queued for filing again (the source's and the shared sessions')."""
    segments_retired: int = 0
    nodes_retired: int = 0
    bookmarks_removed: int = 0
    roots_moved: int = 0
    outbox_entries: int = 0

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "source": self.source,
            "target": self.target,
            "events": self.events,
            "shared_sessions": self.shared_sessions,
            "refiled": self.refiled,
            "segments_retired": self.segments_retired,
            "nodes_retired": self.nodes_retired,
            "bookmarks_removed": self.bookmarks_removed,
            "roots_moved": self.roots_moved,
            "outbox_entries": self.outbox_entries,
        }


def _ids(store: SqliteStore, sql: str, params: tuple[object, ...]) -> list[str]:
    return [str(r[0]) for r in store._query(sql, params)]


def merge_projects(store: SqliteStore, source: str, target: str) -> MergeReport:
    """Merge project ``source`` into ``target`` (ids); see the module docstring."""
    if source == target:
        raise QueryError(f"cannot merge project {source!r} into itself")
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
        unfile_events(store, seqs)
        # the target's segments of shared sessions: retired, their days rolled up again
        store.write_segments([], shared_segments, target, [], [])
        report.nodes_retired += purge_node_versions(store, target, shared_segments)
        report.segments_retired += len(shared_segments)
        store.mark_dirty([DirtyPeriod(target, day, "day", end, end) for day, end in days])
        # everything derived in the source
        segments = _ids(store, "SELECT node_id FROM segments WHERE project = ?", (source,))
        store.write_segments([], segments, source, [], [])
        report.segments_retired += len(segments)
        nodes = _ids(store, "SELECT node_id FROM toc_nodes WHERE project = ?", (source,))
        for node_id in nodes:
            store.delete_node(source, node_id)
        purge_node_versions(store, source, nodes)
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
        for name in sorted(vector_embedders(store)):  # loaded vector indexes reload
            key = generation_key(name)
            store.set_meta(key, str(int(store.get_meta(key) or 0) + 1))
    purge_stale_doc_vectors(store)
    store.forget_registered(source)
    return report
