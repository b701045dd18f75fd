"""``Verifiable`` and ``FileBackups`` for ``SqliteStore`` (a mixin over ``store/sqlite/maintenance.py``,
imported when called: maintenance needs the store class)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from memtoc.store.capabilities import EmbedderIdentity
    from memtoc.store.derived import VerifyReport
    from memtoc.store.sqlite.store import SqliteStore


class SqliteUpkeep:
    def verify_store(self, embedder: EmbedderIdentity | None = None) -> VerifyReport:
        from memtoc.store.sqlite import maintenance

        return maintenance.verify(cast("SqliteStore", self), embedder)

    def backup(self, dest: Path) -> int:
        from memtoc.store.sqlite import maintenance

        return maintenance.backup(cast("SqliteStore", self), Path(dest))

    def compact(self) -> dict[str, int]:
        from memtoc.store.sqlite import maintenance

        return maintenance.compact(cast("SqliteStore", self))
