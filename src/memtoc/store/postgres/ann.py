"""The approximate vector index on PostgreSQL: pgvector IVFFlat, one per (embedder, dimension).

Vector search is exact (``postgres/vectors.nearest``) until an embedder has ``ANN_MIN_ROWS``
vectors; then the embed step calls ``ensure_vector_index``, which builds a partial expression
index — ``USING ivfflat ((vec::vector(dim)) vector_cosine_ops) WITH (lists = L) WHERE embedder =
… AND dim = …`` (one ``vector`` column holds every embedder's rows, so the index needs a fixed
dimension and a predicate) — ``CONCURRENTLY`` (writers go on), one builder at a time (advisory
lock). ``nearest`` then asks it with the same expression, probing ``probes(L)`` lists.

Why IVFFlat and not HNSW (docs/benchmarks.md, "Figures behind design choices"): a history that repeats text makes HNSW's graph fall
apart — each vector's neighbour list fills up with its copies, and the exact top 10 mostly does
not come back — while IVF partitions and keeps nearly all of it, builds faster and with less
memory. SQLite's optional index (``retrieval/vectors_ann.py``, faiss) is IVF for the same kind of
reasons.

IVF's centroids are trained on the rows present at build time, so the index is rebuilt (under a
new name, swapped in) when the embedder's rows call for at least twice its lists: ``L`` is rows /
1,000 up to 1M rows, √rows above (pgvector's advice), at least ``MIN_LISTS``.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import psycopg
from psycopg import sql

from memtoc.errors import StoreError
from memtoc.model import JsonValue
from memtoc.store.postgres.base import PgBase

ANN_MIN_ROWS = 100_000
"""Vectors of one embedder from which the embed step builds its index."""
MIN_LISTS = 10
BUILD_MB = (64, 2_048)
"""Bounds of the build session's ``maintenance_work_mem`` (MB); ``build_mb`` sizes it, and the
lists are reduced when even the upper bound is too small."""
CACHE_S = 60.0
_STATE = (
    "SELECT i.indisvalid, c.reloptions FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
    "WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace"
)


def ann_index_name(name: str, dim: int) -> str:
    """The IVFFlat index of embedder ``name`` at ``dim`` dimensions."""
    return "vectors_ivf_" + hashlib.md5(f"{name}\x1f{dim}".encode()).hexdigest()[:16]


def lists_for(rows: int) -> int:
    """IVF lists for ``rows`` vectors (pgvector's advice: rows / 1,000, √rows above 1M)."""
    return max(MIN_LISTS, rows // 1_000 if rows <= 1_000_000 else math.isqrt(rows))


def build_mb(lists: int, dim: int) -> int:
    """Memory pgvector's IVFFlat build needs (MB): k-means (Elkan) over 50 sampled rows per list
    keeps the samples, a lower bound per sample and centre, and the centre-to-centre distances
    (the formula below matches what pgvector asked for). Twenty percent more, at least the lower
    bound."""
    samples = 50 * lists
    need = samples * (4 * dim + 8) + samples * lists * 4 + lists * lists * 4 + lists * 8 * dim
    return max(BUILD_MB[0], math.ceil(need * 1.2 / 2**20))


def probes_for(lists: int) -> int:
    """Lists probed per search: 2√lists (the recall it keeps: docs/benchmarks.md, "Figures behind design choices")."""
    return max(1, min(lists, round(2 * math.sqrt(lists))))


class PgAnn(PgBase):
    """Builds, describes and looks up the approximate vector indexes."""

    def ensure_vector_index(self, name: str, dim: int, *, min_rows: int | None = None) -> bool:
        """Build (or, grown, rebuild) the index of ``name`` at ``dim`` once it has ``min_rows``
        vectors (None: the store's ``ann_min_rows``, else ``ANN_MIN_ROWS``); True when one is
        usable afterwards. Not inside a transaction (``CONCURRENTLY``)."""
        if min_rows is None:
            min_rows = ANN_MIN_ROWS if self.ann_min_rows is None else self.ann_min_rows
        index = ann_index_name(name, dim)
        valid, lists = self.ann_index(index, fresh=True)
        est = self._query("SELECT reltuples FROM pg_class WHERE oid = 'vectors'::regclass")
        rows = int(est[0][0]) if est else -1
        if rows < 0 or not valid:  # never analysed, or no index yet: count (at most min_rows)
            rows = int(self._query(
                "SELECT COUNT(*) FROM (SELECT 1 FROM vectors WHERE embedder = %s AND dim = %s "
                "LIMIT %s) c", (name, dim, max(min_rows, 1)))[0][0])  # fmt: skip
        if valid and lists_for(rows) < 2 * lists:
            return True
        if rows < min_rows or self._tx.conn is not None:
            return valid
        error_key = f"ann_error:{index}"
        try:
            self._build(index, name, dim)
        except StoreError as exc:  # searches stay as they were (exact, or the old index)
            self.set_meta(error_key, str(exc))
            return self.ann_index(index, fresh=True)[0]
        if self.get_meta(error_key) is not None:
            self._exec("DELETE FROM meta WHERE key = %s", (error_key,))
        return self.ann_index(index, fresh=True)[0]

    def _build(self, index: str, name: str, dim: int) -> None:
        """Build ``index`` anew under a temporary name, then swap it in (one builder at a time)."""
        key, nxt = f"ann:{index}", index + "_next"
        try:
            with self._pool.connection() as conn:
                got = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,))
                locked = got.fetchone()
                if not locked or not locked[0]:
                    return  # another process is building it
                try:
                    rows = conn.execute(
                        "SELECT COUNT(*) FROM vectors WHERE embedder = %s AND dim = %s", (name, dim)
                    ).fetchone()
                    count = int(rows[0]) if rows else 0
                    current = conn.execute(_STATE, (index,)).fetchone()
                    lists = lists_for(count)
                    if current is not None and current[0] and lists < 2 * _lists(current[1]):
                        return  # built meanwhile by another process
                    while lists > MIN_LISTS and build_mb(lists, dim) > BUILD_MB[1]:
                        lists = max(MIN_LISTS, lists * 9 // 10)
                    mb = min(BUILD_MB[1], build_mb(lists, dim))
                    conn.execute(f"SET maintenance_work_mem = '{mb}MB'")
                    drop_next = sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(nxt))  # fmt: skip
                    conn.execute(drop_next)  # a crashed build's leftover
                    try:
                        conn.execute(
                            sql.SQL(
                                "CREATE INDEX CONCURRENTLY {} ON vectors USING ivfflat "
                                "((vec::vector({})) vector_cosine_ops) WITH (lists = {}) "
                                "WHERE embedder = {} AND dim = {}"
                            ).format(
                                sql.Identifier(nxt),
                                sql.SQL(str(int(dim))),
                                sql.SQL(str(int(lists))),
                                sql.Literal(name),
                                sql.SQL(str(int(dim))),
                            )
                        )
                    except psycopg.Error:
                        conn.execute(drop_next)  # a failed concurrent build leaves it invalid
                        raise
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(index)))  # fmt: skip
                    conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        sql.Identifier(nxt), sql.Identifier(index)))  # fmt: skip
                finally:
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: building {index}: {exc}") from exc

    def ann_index(self, index: str, *, fresh: bool = False) -> tuple[bool, int]:
        """``(usable, lists)`` of ``index`` (``(False, 0)``: none, or left invalid by a failed
        build); cached ``CACHE_S``."""
        now = time.monotonic()
        cached = self._ann_cache.get(index)
        if cached is not None and not fresh and now - cached[0] <= CACHE_S:
            return cached[1], cached[2]
        rows = self._query(_STATE, (index,))
        state = (bool(rows[0][0]), _lists(rows[0][1])) if rows else (False, 0)
        self._ann_cache[index] = (now, *state)
        return state

    def vector_indexes(self) -> list[dict[str, JsonValue]]:
        """The approximate indexes on ``vectors`` (name, usable, lists, bytes) and the last failed
        build of each that has one (``error``; recorded in ``meta``, cleared by a good build)."""
        rows = self._query(
            "SELECT c.relname, i.indisvalid, c.reloptions, pg_relation_size(c.oid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'vectors'::regclass "
            "AND c.relname LIKE 'vectors_ivf_%%' ORDER BY c.relname"
        )
        errors = {r[0].removeprefix("ann_error:"): str(r[1])
                  for r in self._query("SELECT key, value FROM meta WHERE key LIKE 'ann_error:%%'")}  # fmt: skip
        out: list[dict[str, JsonValue]] = [
            {"index": r[0], "valid": bool(r[1]), "lists": _lists(r[2]), "bytes": int(r[3]),
             **({"error": errors.pop(r[0])} if r[0] in errors else {})}
            for r in rows
        ]  # fmt: skip
        out += [{"index": i, "valid": False, "lists": 0, "bytes": 0, "error": e}
                for i, e in sorted(errors.items())]  # fmt: skip
        return out

    def ann_settings(self, lists: int) -> list[tuple[str, str]]:
        """Planner settings of a search through an index of ``lists`` lists."""
        out = [("ivfflat.probes", str(probes_for(lists))), ("enable_seqscan", "off"),
               ("jit", "off")]  # fmt: skip
        if self._pgvector_version() >= (0, 8):  # scan on while filters leave fewer than k
            out.append(("ivfflat.iterative_scan", "relaxed_order"))
        return out

    def _pgvector_version(self) -> tuple[int, ...]:
        if self._pgvector is None:
            rows = self._query("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            parts = str(rows[0][0]).split(".") if rows else ["0"]
            self._pgvector = tuple(int(p) for p in parts if p.isdigit())
        return self._pgvector


def _lists(options: Any) -> int:
    """``lists`` from an index's ``reloptions`` (``['lists=1000']``)."""
    for opt in options or ():
        key, _, value = str(opt).partition("=")
        if key == "lists" and value.isdigit():
            return int(value)
    return 0
