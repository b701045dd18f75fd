"""Named, recorded schema migrations for the SQLite store.

Each migration has a stable name and runs once, inside a transaction, and is recorded in
``schema_migrations``. A store that records a migration this code does not know was written by a
newer memtoc and is refused (``MigrationError``) rather than half-understood.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memtoc.errors import MigrationError


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_events_outbox",
        """
        CREATE TABLE events (
            seq         INTEGER PRIMARY KEY,
            event_id    TEXT NOT NULL UNIQUE,
            ts_ms       INTEGER NOT NULL,
            project     TEXT NOT NULL,
            session_id  TEXT NOT NULL,
            agent       TEXT NOT NULL,
            event_type  TEXT NOT NULL,
            role        TEXT NOT NULL,
            text        TEXT NOT NULL,
            metadata    TEXT NOT NULL DEFAULT '{}',
            source      TEXT,
            source_pos  TEXT
        );
        CREATE INDEX events_project_time ON events(project, ts_ms);
        CREATE INDEX events_session_time ON events(session_id, ts_ms);
        CREATE TABLE outbox (
            entry_id    INTEGER PRIMARY KEY,
            kind        TEXT NOT NULL,
            payload     TEXT NOT NULL,
            created_ms  INTEGER NOT NULL,
            status      TEXT NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'done', 'failed')),
            attempts    INTEGER NOT NULL DEFAULT 0,
            error       TEXT,
            claimed_by  TEXT,
            claimed_ms  INTEGER,
            done_ms     INTEGER
        );
        CREATE INDEX outbox_status ON outbox(status, entry_id);
        CREATE TABLE checkpoints (
            job         TEXT PRIMARY KEY,
            value       TEXT NOT NULL,
            updated_ms  INTEGER NOT NULL
        );
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    ),
    Migration(
        "0002_toc_grips_bookmarks",
        """
        CREATE TABLE toc_node_versions (
            project     TEXT NOT NULL,
            node_id     TEXT NOT NULL,
            version     INTEGER NOT NULL,
            level       TEXT NOT NULL,
            start_ms    INTEGER NOT NULL,
            end_ms      INTEGER NOT NULL,
            parent_id   TEXT,
            data        TEXT NOT NULL,
            created_ms  INTEGER NOT NULL,
            PRIMARY KEY (project, node_id, version)
        ) WITHOUT ROWID;
        CREATE TABLE toc_nodes (
            project     TEXT NOT NULL,
            node_id     TEXT NOT NULL,
            version     INTEGER NOT NULL,
            level       TEXT NOT NULL,
            start_ms    INTEGER NOT NULL,
            end_ms      INTEGER NOT NULL,
            parent_id   TEXT,
            PRIMARY KEY (project, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX toc_nodes_level_time ON toc_nodes(project, level, start_ms);
        CREATE INDEX toc_nodes_parent ON toc_nodes(project, parent_id);
        CREATE TABLE segments (
            project     TEXT NOT NULL,
            node_id     TEXT NOT NULL,
            session_id  TEXT NOT NULL,
            start_ms    INTEGER NOT NULL,
            end_ms      INTEGER NOT NULL,
            first_seq   INTEGER NOT NULL,
            last_seq    INTEGER NOT NULL,
            event_count INTEGER NOT NULL,
            token_count INTEGER NOT NULL,
            closed      INTEGER NOT NULL DEFAULT 0,
            built       INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (project, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX segments_session ON segments(project, session_id, end_ms);
        CREATE INDEX segments_unbuilt ON segments(built, project);
        CREATE TABLE segment_events (
            seq         INTEGER PRIMARY KEY,
            project     TEXT NOT NULL,
            node_id     TEXT NOT NULL
        );
        CREATE INDEX segment_events_node ON segment_events(project, node_id);
        CREATE TABLE grips (
            grip_id         TEXT PRIMARY KEY,
            project         TEXT NOT NULL,
            toc_node_id     TEXT NOT NULL,
            excerpt         TEXT NOT NULL,
            event_id_start  TEXT NOT NULL,
            event_id_end    TEXT NOT NULL,
            ts_ms           INTEGER NOT NULL,
            source          TEXT NOT NULL,
            session_id      TEXT NOT NULL
        );
        CREATE INDEX grips_node ON grips(project, toc_node_id);
        CREATE TABLE bookmarks (
            bookmark_id      TEXT PRIMARY KEY,
            project          TEXT NOT NULL,
            content          TEXT NOT NULL,
            event_ids        TEXT NOT NULL,
            importance       REAL NOT NULL,
            type             TEXT NOT NULL,
            created_ms       INTEGER NOT NULL,
            last_relevant_ms INTEGER NOT NULL
        );
        CREATE INDEX bookmarks_project ON bookmarks(project, created_ms);
        """,
    ),
    Migration(
        "0003_search_indexes",
        """
        CREATE VIRTUAL TABLE events_fts USING fts5(
            text, content='events', content_rowid='seq', tokenize='porter unicode61'
        );
        CREATE TABLE docs (
            doc_seq   INTEGER PRIMARY KEY,
            kind      TEXT NOT NULL,
            doc_id    TEXT NOT NULL,
            project   TEXT NOT NULL,
            ts_ms     INTEGER NOT NULL,
            text      TEXT NOT NULL,
            UNIQUE (kind, project, doc_id)
        );
        CREATE VIRTUAL TABLE docs_fts USING fts5(
            text, content='docs', content_rowid='doc_seq', tokenize='porter unicode61'
        );
        CREATE TABLE vectors (
            kind      TEXT NOT NULL,
            item_id   TEXT NOT NULL,
            project   TEXT NOT NULL,
            embedder  TEXT NOT NULL,
            dim       INTEGER NOT NULL,
            vec       BLOB NOT NULL,
            PRIMARY KEY (kind, project, item_id, embedder)
        ) WITHOUT ROWID;
        CREATE TABLE tombstones (
            event_id     TEXT PRIMARY KEY,
            forgotten_ms INTEGER NOT NULL,
            reason       TEXT NOT NULL
        );
        """,
    ),
    Migration(
        "0004_pipeline_segments_rollups",
        """
        ALTER TABLE segments ADD COLUMN first_event_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE segments ADD COLUMN last_event_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE segments ADD COLUMN error TEXT;
        CREATE INDEX segments_session_start ON segments(project, session_id, start_ms, first_event_id);
        CREATE TABLE rollup_dirty (
            project      TEXT NOT NULL,
            node_id      TEXT NOT NULL,
            level        TEXT NOT NULL,
            activity_ms  INTEGER NOT NULL,
            marked_ms    INTEGER NOT NULL,
            PRIMARY KEY (project, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX rollup_dirty_level ON rollup_dirty(level, project);
        """,
    ),
    # Code-aware search (memtoc.text.fts_text): contentless FTS tables, because what is
    # indexed is ``search_text(text)`` (the text plus identifier forms), not the stored text; the
    # tokenizer keeps ``_`` inside tokens; porter stemming measured better on LoCoMo. Existing rows
    # are re-indexed from their plain text (``memtoc rebuild --fts`` adds the identifier forms).
    # ``doc_vectors`` records which text each doc's vector was computed from, per embedder.
    Migration(
        "0005_code_aware_fts",
        """
        DROP TABLE events_fts;
        DROP TABLE docs_fts;
        CREATE VIRTUAL TABLE events_fts USING fts5(
            text, content='', tokenize="porter unicode61 remove_diacritics 2 tokenchars '_'"
        );
        CREATE VIRTUAL TABLE docs_fts USING fts5(
            text, content='', tokenize="porter unicode61 remove_diacritics 2 tokenchars '_'"
        );
        INSERT INTO events_fts(rowid, text)
            SELECT e.seq, e.text FROM events e JOIN segment_events s ON s.seq = e.seq;
        INSERT INTO docs_fts(rowid, text) SELECT doc_seq, text FROM docs;
        CREATE TABLE doc_vectors (
            kind      TEXT NOT NULL,
            project   TEXT NOT NULL,
            doc_id    TEXT NOT NULL,
            embedder  TEXT NOT NULL,
            text      TEXT NOT NULL,
            PRIMARY KEY (kind, project, doc_id, embedder)
        ) WITHOUT ROWID;
        """,
    ),
    # Forget (memtoc.forgetting, store/sqlite/forget.py): a forgotten event's row stays as a
    # tombstone (id, time, session, project, seq; text and metadata purged, ``forgotten_ms`` set),
    # so re-importing it is still a duplicate and the outbox still tiles the log. The partial
    # index keeps "live" counts cheap (total minus tombstones). ``forget_audit`` records what
    # was forgotten: ids and counts, never content (nor a query's text).
    Migration(
        "0006_forget",
        """
        ALTER TABLE events ADD COLUMN forgotten_ms INTEGER;
        CREATE INDEX events_tombstones ON events(project, ts_ms) WHERE forgotten_ms IS NOT NULL;
        CREATE TABLE forget_audit (
            audit_id     INTEGER PRIMARY KEY,
            forgotten_ms INTEGER NOT NULL,
            selector     TEXT NOT NULL,
            event_ids    TEXT NOT NULL,
            counts       TEXT NOT NULL
        );
        """,
    ),
    # Session reads without a session index (store/sqlite/sessions.py): the UUID-keyed
    # (session_id, ts_ms) index took each batch's rows at random places and was the costliest
    # part of the insert. Each session's span (first/last ts_ms per project) is kept in
    # ``sessions``, and the time index carries the session id, so a session's events are found
    # within its span inside the index.
    Migration(
        "0007_session_spans",
        """
        CREATE TABLE sessions (
            session_id  TEXT NOT NULL,
            project     TEXT NOT NULL,
            first_ms    INTEGER NOT NULL,
            last_ms     INTEGER NOT NULL,
            PRIMARY KEY (session_id, project)
        ) WITHOUT ROWID;
        INSERT INTO sessions(session_id, project, first_ms, last_ms)
            SELECT session_id, project, MIN(ts_ms), MAX(ts_ms) FROM events
            GROUP BY session_id, project;
        DROP INDEX events_session_time;
        DROP INDEX events_project_time;
        CREATE INDEX events_project_time_session ON events(project, ts_ms, session_id);
        """,
    ),
    # Rollup marks carry a generation (``DirtyPeriod.seq``) from a counter in ``meta`` that only
    # grows: clearing a mark compared clock times, so a period re-marked within the same
    # millisecond (or by a writer whose clock was behind) lost its mark and kept a parent built
    # from stale children.
    Migration(
        "0008_rollup_mark_seq",
        """
        ALTER TABLE rollup_dirty ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
        INSERT OR IGNORE INTO meta(key, value) VALUES ('rollup_mark_seq', '0');
        """,
    ),
    # Project identity (memtoc.projects, store/sqlite/projects.py): every project id the rows
    # carry is registered with a readable name (renamable) and the folders whose sessions file
    # into it (a repository's main worktree top, or a plain folder). Existing projects keep their
    # id, which is also their name; their folders are unknown until a session names one.
    Migration(
        "0009_projects",
        """
        CREATE TABLE projects (
            project     TEXT PRIMARY KEY,
            name        TEXT NOT NULL UNIQUE,
            created_ms  INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE project_roots (
            root        TEXT PRIMARY KEY,
            project     TEXT NOT NULL,
            added_ms    INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX project_roots_project ON project_roots(project);
        INSERT INTO projects(project, name, created_ms)
            SELECT project, project, MIN(first_ms) FROM sessions GROUP BY project;
        """,
    ),
    # File positions (ingest/positions.py): a file's watermark was kept under the hash of its
    # first line alone, so two files sharing a first line resumed at each other's offset. It is
    # now kept under ``ingest:<first line hash>:<path>`` with fingerprints of the bytes read. The
    # old checkpoints move under the path they record, marked ``legacy`` (no fingerprints: they
    # are trusted only for that path and at a line start).
    Migration(
        "0010_file_positions",
        """
        UPDATE checkpoints
            SET job = job || ':' || json_extract(value, '$.path'),
                value = json_set(value, '$.legacy', json('true'))
            WHERE job LIKE 'ingest:%' AND instr(substr(job, 8), ':') = 0
            AND json_valid(value) AND json_type(value, '$.path') = 'text';
        """,
    ),
    # A time index for scans of every project (``scan_events()`` without one: ``memtoc events``,
    # the pipeline bench's scan, a time window across projects). Without it each 2,000-event page
    # sorted the whole table, so a full scan grew with the square of the store. ``(ts_ms)`` ends
    # in the rowid (``seq``), so it is the scan's ``(ts_ms, seq)`` order; PostgreSQL has had
    # ``events_time`` on ``(ts_ms, seq)`` since its first migration.
    Migration(
        "0011_events_time",
        """
        CREATE INDEX events_time ON events(ts_ms);
        """,
    ),
    # ... and dropped again: every append paid for it (bench ingest at 1M fell below issue 2's
    # 0.50 of the baseline). A scan of every project is now each project's scan through
    # ``events_project_time_session``, merged (``store/sqlite/scans.py``). ``IF EXISTS``: a store
    # made now runs 0011 then this; one already at 0011 just drops it.
    Migration(
        "0012_drop_events_time",
        """
        DROP INDEX IF EXISTS events_time;
        """,
    ),
    # Merging a detected bookmark looks up the stored ones with the same type and content
    # (``BookmarkStep._rivals``: a restatement merges): with only ``bookmarks_project`` that read
    # every bookmark of the project, once per candidate, so filing grew with the square of the
    # history (docs/benchmarks.md, "Throughput: memtoc bench process"). ``created_ms`` last: the
    # read's order, without which SQLite keeps ``bookmarks_project`` (its order by time) over it.
    Migration(
        "0013_bookmarks_content",
        """
        CREATE INDEX bookmarks_content ON bookmarks(project, type, content, created_ms);
        """,
    ),
)


def applied(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name TEXT PRIMARY KEY, applied_ms INTEGER NOT NULL)"
    )
    return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]


def migrate(conn: sqlite3.Connection, now_ms: int) -> list[str]:
    """Apply every pending migration in order; return the names applied now."""
    done = applied(conn)
    known = [m.name for m in MIGRATIONS]
    unknown = sorted(set(done) - set(known))
    if unknown:
        raise MigrationError(
            f"store was written by a newer memtoc (unknown migrations: {', '.join(unknown)})"
        )
    ran: list[str] = []
    for migration in MIGRATIONS:
        if migration.name in done:
            continue
        try:
            conn.execute("BEGIN IMMEDIATE")
            if migration.name in applied(conn):  # another process won the race
                conn.execute("ROLLBACK")
                continue
            for statement in _split(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations(name, applied_ms) VALUES (?, ?)",
                (migration.name, now_ms),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise MigrationError(f"migration {migration.name} failed: {exc}") from exc
        ran.append(migration.name)
    return ran


def _split(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]
