"""BM25 statistics of the PostgreSQL store's text indexes: rows, average length, document
frequencies — what ``postgres/search`` needs before it can rank, read cheaply at any size.

- **Rows and average length** in tokens (``index_stats``; a row's ``dl``, ``postgres/lexemes``)
  per index, cached ``STATS_TTL_S`` per store: exact (``COUNT``, ``AVG(dl)``) below ``SAMPLE_ABOVE`` rows; above, the row count is the
  server's own estimate (``pg_class.reltuples`` / ``pg_stat_user_tables.n_live_tup``, whichever is
  larger) and the average length comes from a sample of about ``SAMPLE_ROWS`` rows (``TABLESAMPLE
  SYSTEM … REPEATABLE``): exact statistics of a large store cost a search too much, even once a
  minute (docs/benchmarks.md, "Figures behind design choices").
- **Document frequencies** (``terms``, at most one statement with the query's lexemes): counted
  exactly through the GIN index (up to ``DF_CAP``, then "more") unless ``ANALYZE``'s
  most-common-elements statistics (``pg_stats.most_common_elems``, kept by autovacuum; read once
  per ``STATS_TTL_S``, ``common_lexemes``) put the lexeme above ``ESTIMATE_ABOVE`` rows — then
  ``frequency * rows``. Counting a common lexeme visits every row holding it, and
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
_COMMON = (
    "SELECT e.w, e.f FROM pg_stats s, unnest(s.most_common_elems::text::text[], "
    "s.most_common_elem_freqs) AS e(w, f) WHERE s.schemaname = current_schema() "
    "AND s.attname = 'tsv' AND s.tablename = %s AND e.w IS NOT NULL"
)
"""``ANALYZE``'s most common lexemes of one index's ``tsv``, each with the fraction of rows
holding it (the frequencies array ends with three summary numbers, left out)."""
_COUNT = (
    "SELECT '{t}', i, (SELECT COUNT(*) FROM (SELECT 1 FROM {t} WHERE tsv @@ "
    f"{_QUOTED} LIMIT %s) c) FROM unnest(%s::text[]) WITH ORDINALITY AS l(w, i)"
)
"""Exact document frequencies of the given lexemes in index ``{t}``, each counted up to a cap."""


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


def common_lexemes(store: PgBase, table: str) -> dict[str, float]:
    """The fraction of ``table``'s rows holding each of its most common lexemes, by the server's
    statistics, cached ``STATS_TTL_S`` per store: they change only when ``ANALYZE`` runs, and
    reading them from ``pg_stats`` (a view over the catalogue) cost each search about as much
    server time as counting its rare lexemes."""
    now = time.monotonic()
    cached = store._bm25_common.get(table)
    if cached is not None and now - cached[0] <= STATS_TTL_S:
        return cached[1]
    assert table in TABLES
    freqs = {str(w): float(f) for w, f in store._query(_COMMON, (table,))}
    store._bm25_common[table] = (now, freqs)
    return freqs


def terms(
    store: PgBase, lexemes: Sequence[str], tables: tuple[str, ...]
) -> list[tuple[str, int, int]]:
    """``(lexeme, df in docs, df in event_search)`` of each of ``lexemes`` (``postgres/lexemes``),
    in order; ``-1`` for a table not in ``tables``. At most one statement: none when every
    lexeme is common enough to be estimated."""
    words = list(lexemes)
    dfs = {t: [-1] * len(words) for t in TABLES}
    counted: dict[str, list[int]] = {}  # per table, the words its exact counts are for
    for table in TABLES:
        if table not in tables or not words:
            continue
        rows, _ = index_stats(store, table)
        freqs = common_lexemes(store, table)
        for i, word in enumerate(words):
            f = freqs.get(word)
            if f is not None and f * rows > ESTIMATE_ABOVE:
                dfs[table][i] = round(f * rows)
            else:
                counted.setdefault(table, []).append(i)
    if counted:
        sql = " UNION ALL ".join(f"({_COUNT.format(t=table)})" for table in counted)
        params: list[object] = []
        for indexes in counted.values():
            params += [DF_CAP + 1, [words[i] for i in indexes]]
        for table, ordinal, df in store._query(sql, params):
            dfs[table][counted[table][int(ordinal) - 1]] = int(df)
    return [(w, dfs["docs"][i], dfs["event_search"][i]) for i, w in enumerate(words)]
