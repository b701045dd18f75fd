"""Maintenance of the PostgreSQL store: ``verify`` checks memtoc's invariants in SQL.

Backup and compaction belong to the database server, not to memtoc: ``backup`` and ``compact``
raise a ``StoreError`` naming the tool to use (``pg_dump`` / ``pg_restore``; autovacuum or
``VACUUM (ANALYZE)``), so a team never gets a half-consistent copy from a client.
"""

from __future__ import annotations

from memtoc.errors import StoreError
from memtoc.model import EVENT_TYPES, ROLES
from memtoc.store.maintenance import VerifyReport
from memtoc.store.postgres import PostgresStore
from memtoc.store.postgres_migrations import MIGRATIONS


def backup(store: PostgresStore) -> int:
    raise StoreError(
        f"{store.location}: back up a PostgreSQL store with the server's tools, e.g. "
        "`pg_dump --format=custom --file=memtoc.dump <url>` (restore with pg_restore)"
    )


def compact(store: PostgresStore) -> dict[str, int]:
    raise StoreError(
        f"{store.location}: PostgreSQL compacts itself (autovacuum); run `VACUUM (ANALYZE)` "
        "as the database owner to force it"
    )


def verify(store: PostgresStore) -> VerifyReport:
    """The SQLite store's invariants, checked in SQL; every problem is listed."""
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
    total = store.count_events()
    problem = None
    if overlaps:
        problem = f"{overlaps} outbox ranges overlap an earlier one"
    elif covered != total:
        problem = f"outbox announces {covered} events but the log holds {total}"
    report.check("event/outbox atomicity", problem)
    dangling = one(
        "SELECT COUNT(*) FROM toc_nodes n LEFT JOIN toc_node_versions v ON v.project = n.project "
        "AND v.node_id = n.node_id AND v.version = n.version WHERE v.node_id IS NULL"
    )
    report.check("node latest pointers", f"{dangling} dangling" if dangling else None)
    orphans = one(
        "SELECT COUNT(*) FROM segment_events s LEFT JOIN events e ON e.seq = s.seq "
        "WHERE e.seq IS NULL OR e.project <> s.project"
    )
    report.check("segment membership", f"{orphans} members with no event" if orphans else None)
    unsegmented = one(
        "SELECT COUNT(*) FROM segment_events s LEFT JOIN segments g "
        "ON g.project = s.project AND g.node_id = s.node_id WHERE g.node_id IS NULL"
    )
    report.check(
        "segments exist", f"{unsegmented} members of a missing segment" if unsegmented else None
    )
    bad_grips = one(
        "SELECT COUNT(*) FROM grips g WHERE NOT EXISTS (SELECT 1 FROM events e "
        "WHERE e.event_id = g.event_id_start AND e.project = g.project) OR NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.event_id = g.event_id_end AND e.project = g.project)"
    )
    report.check(
        "grips resolve", f"{bad_grips} grips point at missing events" if bad_grips else None
    )
    stale_docs = one(
        "SELECT COUNT(*) FROM docs d WHERE (d.kind = 'node' AND NOT EXISTS (SELECT 1 FROM "
        "toc_nodes n WHERE n.project = d.project AND n.node_id = d.doc_id)) OR (d.kind = 'grip' "
        "AND NOT EXISTS (SELECT 1 FROM grips g WHERE g.project = d.project "
        "AND g.grip_id = d.doc_id))"
    )
    report.check(
        "search documents", f"{stale_docs} documents of missing items" if stale_docs else None
    )
    unindexed = one(
        "SELECT COUNT(*) FROM segment_events s LEFT JOIN event_search x ON x.seq = s.seq "
        "WHERE x.seq IS NULL"
    )
    report.check("event search index", f"{unindexed} filed events unindexed" if unindexed else None)
    return report
