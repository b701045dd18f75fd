"""Writing the PostgreSQL store's two text indexes: ``event_search`` (filed events) and ``docs``
(nodes, grips, bookmarks), each row's ``tsv`` and ``dl`` (its length in tokens) computed by
``postgres/lexemes`` from the text FTS5 would index (``fts_text.search_text``).

Every writer goes through here: the pipeline (events as they are filed, documents as they are
built), ``rebuild --fts``, the migration that introduced ``dl`` and the copy from SQLite.
``inline_tsv`` rewrites rows stored compressed (migration ``0012_tsv_uncompressed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memtoc.store.postgres.lexemes import index_rows
from memtoc.text.fts_text import search_text

EVENT_UPSERT = (
    "INSERT INTO event_search(seq, project, tsv, dl) "
    "SELECT s, p, v::tsvector, n FROM unnest(%s::int8[], %s::text[], %s::text[], %s::int4[]) "
    "AS u(s, p, v, n) ON CONFLICT (seq) DO UPDATE SET project = excluded.project, "
    "tsv = excluded.tsv, dl = excluded.dl"
)
"""Parameters: seqs, projects, tsvector literals, token counts."""

BATCH = 2_000


def event_params(seqs: Sequence[int], projects: Sequence[str], texts: Sequence[str]) -> list[Any]:
    """``EVENT_UPSERT``'s parameters for events whose indexed text (``search_text``) is
    ``texts``."""
    literals, lengths = index_rows(texts)
    return [list(seqs), list(projects), literals, lengths]


def doc_row(text: str) -> tuple[str, int]:
    """``(tsv literal, dl)`` of a document's stored text (already ``search_text``)."""
    literals, lengths = index_rows([text])
    return literals[0], lengths[0]


Conn = psycopg.Connection[Any]


def reindex_events(
    conn: Conn, *, source: str = "event_search", where: str = "TRUE", batch: int = BATCH
) -> int:
    """Write ``tsv`` and ``dl`` of the ``event_search`` row of every event that ``source`` (a
    table with a ``seq`` column: the index itself, or ``segment_events`` for a rebuild) lists,
    from its event's text (``where``: a condition on ``events e``); returns the rows written."""
    after = done = 0
    while rows := conn.execute(
        f"SELECT x.seq, e.project, e.text FROM {source} x JOIN events e ON e.seq = x.seq "
        f"WHERE x.seq > %s AND {where} ORDER BY x.seq LIMIT %s",
        (after, batch),
    ).fetchall():
        conn.execute(
            EVENT_UPSERT,
            event_params([r[0] for r in rows], [r[1] for r in rows],
                         [search_text(r[2]) for r in rows]),
        )  # fmt: skip
        after = int(rows[-1][0])
        done += len(rows)
    return done


def reindex_docs(conn: Conn, *, batch: int = BATCH) -> int:
    """Recompute ``tsv`` and ``dl`` of every document from its stored text; returns the rows."""
    after = done = 0
    while rows := conn.execute(
        "SELECT doc_seq, text FROM docs WHERE doc_seq > %s ORDER BY doc_seq LIMIT %s",
        (after, batch),
    ).fetchall():
        literals, lengths = index_rows([r[1] for r in rows])
        conn.execute(
            "UPDATE docs d SET tsv = u.v::tsvector, dl = u.n FROM unnest(%s::int8[], %s::text[], "
            "%s::int4[]) AS u(s, v, n) WHERE d.doc_seq = u.s",
            ([r[0] for r in rows], literals, lengths),
        )
        after = int(rows[-1][0])
        done += len(rows)
    return done


def inline_tsv(conn: Conn, *, batch: int = BATCH) -> int:
    """Rewrite the rows of both text indexes whose ``tsv`` is stored compressed, so that (under
    ``toast_tuple_target`` = 8160, migration ``0012``) a row that fits in 8 kB is stored plain
    and ranking reads it without decompressing; returns the rows rewritten. The value is the
    same (``tsv || ''``: a fresh copy, which the server then stores by the table's new rule).
    ``pg_column_compression`` needs PostgreSQL 14: on an older server nothing is rewritten (rows
    written from now on are stored plain; the old ones only rank a little slower)."""
    version = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    if version is None or int(version[0]) < 140_000:
        return 0
    done = 0
    for table, key in (("docs", "doc_seq"), ("event_search", "seq")):
        after = 0
        while rows := conn.execute(
            f"SELECT {key} FROM {table} WHERE {key} > %s AND pg_column_compression(tsv) IS NOT "
            f"NULL ORDER BY {key} LIMIT %s",
            (after, batch),
        ).fetchall():
            keys = [r[0] for r in rows]
            conn.execute(
                f"UPDATE {table} SET tsv = tsv || ''::tsvector WHERE {key} = ANY(%s)", (keys,)
            )
            after = int(keys[-1])
            done += len(keys)
    return done
