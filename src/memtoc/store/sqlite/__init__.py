"""The embedded store: one SQLite file (``SqliteStore``, ``store/sqlite/store.py``).

The modules mirror ``store/postgres/``, one concept each under the same name: ``store`` (events,
outbox, checkpoints, nodes, bookmarks), ``audit`` and ``derived`` (verify's checks, rebuild's
repairs), ``forget``, ``maintenance``, ``migrations``, ``projects``, ``search`` (FTS5 BM25),
``upkeep`` (``Verifiable``, ``FileBackups``) and ``vectors``.

Only SQLite has: ``checkpoint`` (WAL checkpoints beside a bulk writer), ``merge`` (project merging;
not on PostgreSQL yet), ``scrub`` (rewriting pages and the WAL after a forget; PostgreSQL's
``VACUUM FULL`` lives in ``postgres/forget.py``) and ``sessions`` (finding a session's events
without a session index; PostgreSQL indexes sessions). It lacks PostgreSQL's ``ann`` (the
in-memory index's ANN is ``memtoc.retrieval.vectors_ann``) and ``text_stats`` (FTS5 keeps its own
BM25 statistics).
"""

from memtoc.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
