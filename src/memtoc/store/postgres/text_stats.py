"""BM25 statistics of the PostgreSQL store's text indexes: rows, average length, document
frequencies — what ``postgres/search`` needs before it can rank, read cheaply at any size.

- **Rows and average length** in tokens (``index_stats``; a row's ``dl``, ``postgres/lexemes``)
  per index, cached ``STATS_TTL_S`` per store: exact (``COUNT``, ``AVG(dl)``) below ``SAMPLE_ABOVE`` rows; above, the row count is the
  server's own estimate (``pg_class.reltuples`` / ``pg_stat_user_tables.n_live_tup``, whichever is
  larger) and the average length comes from a sample of about ``SAMPLE_ROWS`` rows (``TABLESAMPLE
  SYSTEM … REPEATABLE``): exact statistics of a large store cost a search too much, even once a
  minute (docs/benchmarks.md, "Figures behind design choices").
- **Document frequencies** (``terms``, one statement with the query's lexemes): counted exactly
  through the GIN index (up to ``DF_CAP``, then "more") unless ``ANALYZE``'s most-common-elements statistics
  (``pg_stats.most_common_elems``, kept by autovacuum) put the lexeme above ``ESTIMATE_ABOVE``
  rows — then ``frequency * rows``. Counting a common lexeme visits every row holding it, and
  exact counts made the statistics statement most of a search's time at 1M events; the
  estimate's error moves a common lexeme's IDF very little (docs/benchmarks.md, "Figures behind design choices"), and rare lexemes, which
  decide the ranking and the OR pass (``SCAN_CAP``), are always counted exactly. Before, every
  count stopped at 50,000, so a lexeme in 200,000 of 1M rows was weighted as if it were in 50,000.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from memtoc.store.postgres.base import PgBase

STATS_TTL_S = 60.0
SAMPLE_ABOVE = 200_000
SAMPLE_ROWS = 20_000
DF_CAP = 10_000
"""Most rows a document frequency is counted up to: a lexeme the statistics do not know (none yet:
a freshly loaded store before autovacuum's first ``ANALYZE``) costs at most this many row visits.
A count that reaches it is returned as ``DF_CAP + 1`` ("more"): weighted as that many rows, and
``postgres/search`` plans its passes as unbounded. (A cap of 50,000 made a store queried right
after its bulk load, before ``ANALYZE``, several times slower: docs/benchmarks.md, "Figures behind design choices".)"""
ESTIMATE_ABOVE = 5_000
"""Lexemes the statistics put above this many rows get the estimate instead of a count."""
TABLES = ("docs", "event_search")

_QUOTED = (
    "CAST(chr(39) || replace(replace(w, chr(92), chr(92) || chr(92)), chr(39), chr(39) || chr(39)) "
    "|| chr(39) AS tsquery)"
)
"""A lexeme ``w`` as a tsquery, quoted as ``postgres/search.tsquery_text`` quotes it."""
_DF = (
    "COALESCE((SELECT round(m.f * %s)::bigint FROM m WHERE m.t = '{t}' AND m.w = q.w AND "
    "m.f * %s > %s), (SELECT COUNT(*) FROM (SELECT 1 FROM {t} WHERE tsv @@ q.t LIMIT %s) c))"
)
_TERMS = (
    "WITH m AS (SELECT s.tablename::text AS t, e.w, e.f::float8 AS f FROM pg_stats s, "
    "unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(w, f) "
    "WHERE s.schemaname = current_schema() AND s.attname = 'tsv' AND s.tablename = ANY(%s)), "
    f"q AS (SELECT w, i, {_QUOTED} AS t FROM unnest(%s::text[]) WITH ORDINALITY AS l(w, i)) "
    "SELECT w, {docs}, {events} FROM q ORDER BY i"
)
"""The given lexemes in order, with their document frequency in ``docs`` and in
``event_search`` (``-1`` for an index not asked)."""


def index_stats(store: PgBase, table: str) -> tuple[int, float]:
    """``(rows, average length in tokens)`` of ``table`` (see the module doc)."""
    now = time.monotonic()
    cached = store._bm25_stats.get(table)
    if cached is not None and now - cached[0] <= STATS_TTL_S:
        return cached[1], cached[2]
    assert table in TABLES
    est = store._query(
        "SELECT GREATEST(c.reltuples, COALESCE(s.n_live_tup, 0), 0) FROM pg_class c "
        "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = %s::regclass",
        (table,),
    )
    rows = int(est[0][0]) if est else 0
    if rows < SAMPLE_ABOVE:
        row = store._query(f"SELECT COUNT(*), COALESCE(AVG(dl), 1) FROM {table}")[0]
        rows, avgdl = int(row[0]), float(row[1])
    else:
        pct = min(100.0, 100.0 * SAMPLE_ROWS / rows)
        row = store._query(
            f"SELECT AVG(dl) FROM {table} TABLESAMPLE SYSTEM (%s) REPEATABLE (0)",
            (pct,),
        )[0]
        avgdl = float(row[0]) if row[0] is not None else 1.0
    store._bm25_stats[table] = (now, rows, max(1.0, avgdl))
    return rows, max(1.0, avgdl)


def terms(
    store: PgBase, lexemes: Sequence[str], tables: tuple[str, ...]
) -> list[tuple[str, int, int]]:
    """``(lexeme, df in docs, df in event_search)`` of each of ``lexemes`` (``postgres/lexemes``),
    in order; ``-1`` for a table not in ``tables``. One statement."""
    if not lexemes:
        return []
    params: list[object] = [list(tables), list(lexemes)]
    parts: dict[str, str] = {}
    for table in TABLES:
        if table in tables:
            rows, _ = index_stats(store, table)
            parts[table] = _DF.format(t=table)
            params += [rows, rows, ESTIMATE_ABOVE, DF_CAP + 1]
        else:
            parts[table] = "-1"
    sql = _TERMS.format(docs=parts["docs"], events=parts["event_search"])
    return [(str(r[0]), int(r[1]), int(r[2])) for r in store._query(sql, params)]
