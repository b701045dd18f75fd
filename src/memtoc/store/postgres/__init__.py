"""The team store: PostgreSQL with pgvector (``PostgresStore``, ``store/postgres/store.py``).

The modules mirror ``store/sqlite/``, one concept each under the same name: ``store`` (events,
outbox, checkpoints, nodes, bookmarks), ``audit`` and ``derived`` (verify's checks, rebuild's
repairs), ``forget``, ``maintenance``, ``migrations``, ``projects``, ``search`` (``tsvector``
BM25), ``upkeep`` (``Verifiable``) and ``vectors``.

Only PostgreSQL has: ``ann`` (pgvector's IVFFlat index) and ``text_stats`` (BM25 statistics read
from the server's own). It lacks SQLite's ``checkpoint`` (the server checkpoints), ``merge``
(project merging is SQLite's only so far), ``scrub`` (``VACUUM FULL`` in ``forget``) and
``sessions`` (sessions are indexed).
"""

from memtoc.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
