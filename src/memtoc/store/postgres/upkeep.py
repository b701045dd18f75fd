"""``Verifiable`` for ``PostgresStore`` (a mixin over ``store/postgres/maintenance.py``, imported
when called: it needs the store class). No ``FileBackups``: a server is backed up with
``pg_dump`` and compacts itself (autovacuum)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from memtoc.store.capabilities import EmbedderIdentity
    from memtoc.store.derived import VerifyReport
    from memtoc.store.postgres.store import PostgresStore


class PgUpkeep:
    def verify_store(self, embedder: EmbedderIdentity | None = None) -> VerifyReport:
        from memtoc.store.postgres import maintenance as postgres_maintenance

        return postgres_maintenance.verify(cast("PostgresStore", self), embedder)
