"""Merge one project into another (``memtoc projects merge SOURCE TARGET``).

What a merge is for: memory that belongs together but was filed apart — a session split across
projects because its agent changed directory (memtoc before project identity did that), a
repository moved to a new path, a folder later made part of a repository. After it, the target
holds every event of both, and its table of contents is what the pipeline would have built had
the events been filed there from the start.

How (one transaction, then the ordinary pipeline):

1. the source's events — and the target's events of sessions found in both projects (a split
   session must be segmented as one) — leave their segments: ``segment_events`` and ``events_fts``
   rows are removed (``sqlite/forget.unfile_events``);
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

The SQL is the store's (``ProjectMerging``: ``store/sqlite/merge.py``); a PostgreSQL store has no
merge yet and ``Memory.merge_projects`` says so.
"""

from __future__ import annotations

from memtoc.errors import QueryError
from memtoc.store.capabilities import MergeReport, ProjectMerging

__all__ = ["MergeReport", "merge_projects"]


def merge_projects(store: ProjectMerging, source: str, target: str) -> MergeReport:
    """Merge project ``source`` into ``target`` (ids); see the module docstring."""
    if source == target:
        raise QueryError(f"cannot merge project {source!r} into itself")
    return store.merge_projects(source, target)
