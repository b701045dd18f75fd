"""The forget audit, written once for both engines: what ``memtoc forget`` selected and did.

``forget_audit`` keeps ids and counts, never content (``store/sqlite/migrations.py``'s
``0006_forget``, ``store/postgres/migrations.py``'s ``0010_forget``). The statements are the same on
both engines (``?`` placeholders through the store's ``_q``); only the row lock differs: PostgreSQL
locks the row it merges counts into (``FOR UPDATE``), SQLite's one writer needs no lock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memtoc.model import JsonValue
from memtoc.store.capabilities import AuditEntry
from memtoc.store.codecs import json_sorted


class ForgetAudit:
    """``ForgetStore``'s audit rows (mixed into each store class)."""

    ROW_LOCK = ""
    """What a read of the row ``update_audit_counts`` merges into adds (PostgreSQL: FOR UPDATE)."""

    if TYPE_CHECKING:

        def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

        def transaction(self) -> AbstractContextManager[None]: ...

    def write_audit(
        self,
        now_ms: int,
        selector: dict[str, JsonValue],
        event_ids: Sequence[str],
        counts: dict[str, JsonValue],
    ) -> int:
        """Record a forget (ids and counts, never content); return its audit id."""
        with self.transaction():
            rows = self._q(
                "INSERT INTO forget_audit(forgotten_ms, selector, event_ids, counts) "
                "VALUES (?, ?, ?, ?) RETURNING audit_id",
                (now_ms, json_sorted(selector), json_sorted(list(event_ids)), json_sorted(counts)),
            )
        return int(rows[0][0])

    def update_audit_counts(self, audit_id: int, counts: dict[str, JsonValue]) -> None:
        """Merge ``counts`` into an audit row (re-derivation finishes after the purge commits)."""
        with self.transaction():
            rows = self._q(
                f"SELECT counts FROM forget_audit WHERE audit_id = ?{self.ROW_LOCK}", (audit_id,)
            )
            if not rows:
                return
            merged = {**json.loads(rows[0][0]), **counts}
            self._q(
                "UPDATE forget_audit SET counts = ? WHERE audit_id = ? RETURNING audit_id",
                (json_sorted(merged), audit_id),
            )

    def list_audit(self, limit: int = 50) -> list[AuditEntry]:
        """The most recent forgets, newest first."""
        rows = self._q(
            "SELECT audit_id, forgotten_ms, selector, event_ids, counts FROM forget_audit "
            "ORDER BY audit_id DESC LIMIT ?",
            (limit,),
        )
        return [
            AuditEntry(
                int(r[0]), int(r[1]), json.loads(r[2]), tuple(json.loads(r[3])), json.loads(r[4])
            )
            for r in rows
        ]
