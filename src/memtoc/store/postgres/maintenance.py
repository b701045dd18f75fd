"""Maintenance of the PostgreSQL store: ``verify`` checks memtoc's invariants in SQL.

Backup and compaction belong to the database server, not to memtoc: ``backup`` and ``compact``
raise a ``StoreError`` naming the tool to use (``pg_dump`` / ``pg_restore``; autovacuum or
``VACUUM (ANALYZE)``), so a team never gets a half-consistent copy from a client.
"""

from __future__ import annotations

from collections.abc import Callable

from memtoc.model import EVENT_TYPES, ROLES
from memtoc.store.capabilities import EmbedderIdentity
from memtoc.store.derived import VerifyReport
from memtoc.store.event_checks import OUT_OF_RANGE_SQL, out_of_range_problem
from memtoc.store.postgres.audit import PgAudit
from memtoc.store.postgres.migrations import MIGRATIONS
from memtoc.store.postgres.store import PostgresStore


def verify(store: PostgresStore, embedder: EmbedderIdentity | None = None) -> VerifyReport:
    """The SQLite store's invariants, checked in SQL, and the audit of the derived data against
    the events (``PgDerived.audit``; ``embedder``: the configured one); every problem is listed."""
    report = VerifyReport()

    def one(sql: str, params: tuple[object, ...] = ()) -> int:
        return int(store._query(sql, params)[0][0])

    names = {r[0] for r in store._query("SELECT name FROM schema_migrations")}
    report.check(
        "migrations",
        None if names == {m.name for m in MIGRATIONS} else "schema is not at the current version",
    )
    bad_roles = one("SELECT COUNT(*) FROM events WHERE NOT (role = ANY(%s))", (list(ROLES),))
    report.check("event roles", f"{bad_roles} events with an unknown role" if bad_roles else None)
    bad_types = one(
        "SELECT COUNT(*) FROM events WHERE NOT (event_type = ANY(%s))", (list(EVENT_TYPES),)
    )
    report.check("event types", f"{bad_types} events with an unknown type" if bad_types else None)
    far = one(f"SELECT COUNT(*) FROM events WHERE {OUT_OF_RANGE_SQL}")
    shown = store._query(f"SELECT event_id, ts_ms FROM events WHERE {OUT_OF_RANGE_SQL} LIMIT 3")
    report.check("event times", out_of_range_problem(far, [(r[0], int(r[1])) for r in shown]))
    # Every event is announced by exactly one outbox entry: ranges never overlap, and together
    # they cover every stored event (holes are seqs burnt by rolled-back or conflicting inserts).
    overlaps = one(
        "SELECT COUNT(*) FROM (SELECT first_seq, MAX(last_seq) OVER (ORDER BY first_seq, entry_id "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end FROM outbox "
        "WHERE kind = 'events') r WHERE first_seq <= prev_end"
    )
    covered = one(
        "SELECT COALESCE(SUM((SELECT COUNT(*) FROM events e "
        "WHERE e.seq BETWEEN o.first_seq AND o.last_seq)), 0) FROM outbox o WHERE kind = 'events'"
    )
    total = one("SELECT COUNT(*) FROM events")  # tombstones included: they keep their seq
    problem = None
    if overlaps:
        problem = f"{overlaps} outbox ranges overlap an earlier one"
    elif covered != total:
        problem = f"outbox announces {covered} events but the log holds {total}"
    report.check("event/outbox atomicity", problem)
    _check_tombstones(report, one)
    report.add(PgAudit(store).audit(embedder))
    return report


def _check_tombstones(report: VerifyReport, one: Callable[..., int]) -> None:
    """Forgotten events keep no text or metadata, and no search row, vector or bookmark cites
    them (as SQLite's ``maintenance._check_tombstones``)."""
    unpurged = one(
        "SELECT COUNT(*) FROM events WHERE forgotten_ms IS NOT NULL "
        "AND (text <> '' OR text_exact IS NOT NULL OR metadata <> '{}')"
    )
    indexed = one(
        "SELECT COUNT(*) FROM event_search s JOIN events e ON e.seq = s.seq "
        "WHERE e.forgotten_ms IS NOT NULL"
    )
    vectors = one(
        "SELECT COUNT(*) FROM vectors v JOIN events e ON v.kind = 'event' "
        "AND e.event_id = v.item_id WHERE e.forgotten_ms IS NOT NULL"
    )
    cited = one(
        "SELECT COUNT(DISTINCT b.bookmark_id) FROM bookmarks b "
        "CROSS JOIN jsonb_array_elements_text(b.event_ids::jsonb) j(id) "
        "JOIN events e ON e.event_id = j.id WHERE e.forgotten_ms IS NOT NULL"
    )
    problems = [
        f"{unpurged} forgotten events still hold text or metadata" if unpurged else "",
        f"{indexed} forgotten events still in the search index" if indexed else "",
        f"{vectors} vectors of forgotten events" if vectors else "",
        f"{cited} bookmarks cite forgotten events" if cited else "",
    ]
    report.check("tombstones purged", "; ".join(p for p in problems if p) or None)
