"""Vectors on PostgreSQL (pgvector): write with provenance, find what needs embedding, search.

Rows live in ``vectors(kind, item_id, project, embedder, dim, vec, source_md5)``: one unit-length
vector per item and embedder, ``dim`` its dimension and, for docs (nodes, grips, bookmarks),
``source_md5`` the MD5 of the doc text it was computed from — a doc whose text changed (a node's
new version) is re-embedded, the job SQLite's ``doc_vectors`` does. The embedder's dimension and
version are recorded in ``meta`` under ``embedder:<name>`` exactly as on SQLite (and copied over by
``memtoc migrate-store``), so a model swapped under the same name is detected (``stale_embedder``).

Search (``nearest``) is exact — ``ORDER BY vec <=> q`` over one embedder's rows, filtered by
project and kind (and by time for events) — until an embedder has ``ANN_MIN_ROWS`` vectors: then
``ensure_vector_index`` (called by the embed step) builds an HNSW index for it, a partial
expression index per (embedder, dimension) — ``(vec::vector(dim)) vector_cosine_ops WHERE embedder
= … AND dim = …`` — since one column holds every embedder's vectors, and ``nearest`` asks it with
the same expression (``hnsw.ef_search`` at least twice k; pgvector ≥ 0.8 scans on until the
filters leave k rows, ``hnsw.iterative_scan = relaxed_order``, re-sorted after). A search the index
answers with fewer than k rows (a selective filter) is run exactly. Where it pays (measured at 1M
events, docs/benchmarks.md "Team mode"): exact p50 384 ms, HNSW … ms.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from memtoc.errors import StoreError
from memtoc.model import JsonValue
from memtoc.store.postgres_base import PgBase
from memtoc.store.sqlite_vectors import EmbedderIdentity, VectorKey

ANN_MIN_ROWS = 100_000
"""Vectors of one embedder from which the embed step builds its HNSW index."""
ANN_BUILD_MB = (64, 4_096)
"""Bounds of the ``maintenance_work_mem`` (MB) of the session building an index: the graph is
built in memory when it fits (about 1,300 bytes per 256-d vector), many times slower when not."""
ANN_CACHE_S = 60.0
EF_SEARCH_MIN = 40


_INDEX_STATE = (
    "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
    "WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace"
)


def _build_mb(conn: Any, name: str, dim: int) -> int:
    """Memory (MB) to build the index of ``name``'s vectors in memory, within ``ANN_BUILD_MB``."""
    row = conn.execute(
        "SELECT COUNT(*) FROM vectors WHERE embedder = %s AND dim = %s", (name, dim)
    ).fetchone()
    need = int(row[0] if row else 0) * (4 * dim + 256) * 1.25 / 2**20
    return int(min(ANN_BUILD_MB[1], max(ANN_BUILD_MB[0], need)))


def ann_index_name(name: str, dim: int) -> str:
    """The HNSW index of embedder ``name`` at ``dim`` dimensions."""
    return "vectors_hnsw_" + hashlib.md5(f"{name}\x1f{dim}".encode()).hexdigest()[:16]


def _meta_key(name: str) -> str:
    return f"embedder:{name}"


def _unit(matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    return out


class PgVectors(PgBase):
    """The PostgreSQL store's vector rows."""

    # -- provenance ---------------------------------------------------------------------------------
    def record_embedder(self, embedder: EmbedderIdentity) -> None:
        value = json.dumps({"dim": int(embedder.dim), "version": embedder.version}, sort_keys=True)
        self.set_meta(_meta_key(embedder.name), value)

    def recorded_embedder(self, name: str) -> tuple[int, str] | None:
        raw = self.get_meta(_meta_key(name))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return int(data["dim"]), str(data["version"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.location}: meta {_meta_key(name)} unreadable: {raw!r}"
            ) from exc

    def stale_embedder(self, embedder: EmbedderIdentity) -> bool:
        """Vectors of ``embedder.name`` came from another model (dimension or version differ, or
        vectors exist without a record)."""
        recorded = self.recorded_embedder(embedder.name)
        if recorded is None:
            return bool(self._query("SELECT 1 FROM vectors WHERE embedder = %s LIMIT 1",
                                    (embedder.name,)))  # fmt: skip
        return recorded != (int(embedder.dim), embedder.version)

    def clear_vectors(self, name: str) -> int:
        return self._exec("DELETE FROM vectors WHERE embedder = %s", (name,))

    # -- writes -------------------------------------------------------------------------------------
    def put_item_vectors(
        self,
        embedder: EmbedderIdentity,
        keys: Sequence[VectorKey],
        matrix: npt.ArrayLike,
        source_md5: Sequence[str | None] | None = None,
    ) -> int:
        """Insert or replace one vector per key (normalised to unit length) under
        ``embedder.name``, with the source text's MD5 for docs; records the embedder."""
        m = _unit(matrix)
        if m.ndim != 2 or m.shape[0] != len(keys):
            raise StoreError(f"put_item_vectors: {len(keys)} keys but vectors of shape {m.shape}")
        if keys and m.shape[1] != embedder.dim:
            raise StoreError(f"{embedder.name} is {embedder.dim}-d but vectors are {m.shape[1]}-d")
        md5s = list(source_md5) if source_md5 is not None else [None] * len(keys)
        rows = [(k.kind, k.item_id, k.project, embedder.name, int(embedder.dim), m[i], md5s[i])
                for i, k in enumerate(keys)]  # fmt: skip
        with self.transaction():
            n = self._many(
                "INSERT INTO vectors(kind, item_id, project, embedder, dim, vec, source_md5) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (kind, project, item_id, embedder) "
                "DO UPDATE SET dim = excluded.dim, vec = excluded.vec, "
                "source_md5 = excluded.source_md5",
                rows,
            )
            self.record_embedder(embedder)
        return n

    # -- what needs embedding -------------------------------------------------------------------------
    def events_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """``(seq, event_id, project, text)`` of events after ``seq``, in seq order."""
        rows = self._query(
            "SELECT seq, event_id, project, text FROM events WHERE seq > %s ORDER BY seq LIMIT %s",
            (seq, limit),
        )
        return [(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def docs_to_embed(self, name: str, limit: int) -> list[tuple[str, str, str, str, str]]:
        """``(kind, project, doc_id, text, md5)`` of docs with no vector of ``name`` or one
        computed from other text."""
        return [
            (r[0], r[1], r[2], r[3], r[4])
            for r in self._query(
                "SELECT d.kind, d.project, d.doc_id, d.text, md5(d.text) FROM docs d "
                "LEFT JOIN vectors v ON v.kind = d.kind AND v.project = d.project "
                "AND v.item_id = d.doc_id AND v.embedder = %s "
                "WHERE v.source_md5 IS DISTINCT FROM md5(d.text) ORDER BY d.doc_seq LIMIT %s",
                (name, limit),
            )
        ]

    def drop_orphan_doc_vectors(self, name: str) -> int:
        """Delete vectors of docs (nodes, grips, bookmarks) that no longer exist."""
        return self._exec(
            "DELETE FROM vectors v WHERE v.embedder = %s AND v.kind <> 'event' AND NOT EXISTS "
            "(SELECT 1 FROM docs d WHERE d.kind = v.kind AND d.project = v.project "
            "AND d.doc_id = v.item_id)",
            (name,),
        )

    # -- approximate index ------------------------------------------------------------------------
    def ensure_vector_index(self, name: str, dim: int, *, min_rows: int = ANN_MIN_ROWS) -> bool:
        """Build the HNSW index of ``name`` at ``dim`` once it has ``min_rows`` vectors (``CREATE
        INDEX CONCURRENTLY``: writers go on; one builder at a time, under an advisory lock; an
        index left invalid by a failed build is dropped and built again). True when it exists."""
        index = ann_index_name(name, dim)
        state = self._ann_state(index, fresh=True)
        if state == "valid":
            return True
        total = self._query("SELECT reltuples FROM pg_class WHERE oid = 'vectors'::regclass")
        if total and 0 <= float(total[0][0]) < min_rows:  # the server's estimate: no need to count
            return False
        many = self._query(
            "SELECT 1 FROM vectors WHERE embedder = %s AND dim = %s OFFSET %s LIMIT 1",
            (name, dim, max(0, min_rows - 1)),
        )
        if not many or self._tx.conn is not None:
            return False
        key = f"ann:{index}"
        try:
            with self._pool.connection() as conn:
                locked = conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)
                ).fetchone()
                if not locked or not locked[0]:
                    return False  # another process is building it
                try:
                    found = conn.execute(_INDEX_STATE, (index,)).fetchone()
                    if found is not None and found[0]:
                        return True  # built meanwhile by another process
                    if found is not None:  # left invalid by a failed build
                        conn.execute(
                            sql.SQL("DROP INDEX CONCURRENTLY {}").format(sql.Identifier(index))
                        )
                    conn.execute(f"SET maintenance_work_mem = '{_build_mb(conn, name, dim)}MB'")
                    conn.execute(
                        sql.SQL(
                            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON vectors USING hnsw "
                            "((vec::vector({})) vector_cosine_ops) WHERE embedder = {} AND dim = {}"
                        ).format(
                            sql.Identifier(index),
                            sql.SQL(str(int(dim))),
                            sql.Literal(name),
                            sql.SQL(str(int(dim))),
                        )
                    )
                finally:
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: building {index}: {exc}") from exc
        return self._ann_state(index, fresh=True) == "valid"

    def vector_indexes(self) -> list[dict[str, JsonValue]]:
        """The HNSW indexes on ``vectors``: name, whether usable (valid), size in bytes."""
        rows = self._query(
            "SELECT c.relname, i.indisvalid, pg_relation_size(c.oid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'vectors'::regclass "
            "AND c.relname LIKE 'vectors_hnsw_%%' ORDER BY c.relname"
        )
        return [{"index": r[0], "valid": bool(r[1]), "bytes": int(r[2])} for r in rows]

    def _ann_state(self, index: str, *, fresh: bool = False) -> str:
        """``valid``, ``invalid`` (a failed concurrent build) or ``none``; cached ``ANN_CACHE_S``."""
        now = time.monotonic()
        cached = self._ann_cache.get(index)
        if cached is not None and not fresh and now - cached[0] <= ANN_CACHE_S:
            return cached[1]
        rows = self._query(_INDEX_STATE, (index,))
        state = "none" if not rows else ("valid" if rows[0][0] else "invalid")
        self._ann_cache[index] = (now, state)
        return state

    def _iterative_scan(self) -> bool:
        """Whether the server's pgvector has iterative index scans (0.8 and later)."""
        if self._pgvector is None:
            rows = self._query("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            parts = str(rows[0][0]).split(".") if rows else ["0"]
            self._pgvector = tuple(int(p) for p in parts if p.isdigit())
        return self._pgvector >= (0, 8)

    # -- search ---------------------------------------------------------------------------------------
    def nearest(
        self,
        name: str,
        query: npt.NDArray[np.float32],
        k: int,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[tuple[VectorKey, float]]:
        """The ``k`` items nearest ``query`` by cosine, best first; ``since``/``until`` restrict
        events by their instant (other kinds have none here and are left out when a time is set).
        Through the embedder's HNSW index when it has one (approximate; exact when the index
        leaves fewer than ``k`` rows), else exact."""
        plans = self._vector_plans(name, query, k, projects, kinds, since_ms, until_ms)
        rows: list[Any] = []
        for text, params, settings in plans:
            rows = self._query_planned(text, params, settings) if settings else (
                self._query(text, params))  # fmt: skip
            if len(rows) >= k:
                break
        return [(VectorKey(r[0], r[1], r[2]), float(r[3])) for r in rows]

    def explain_nearest(self, name: str, query: npt.NDArray[np.float32], k: int) -> str:
        """The server's plan (``EXPLAIN``) of the first statement ``nearest`` runs."""
        text, params, settings = self._vector_plans(name, query, k, None, None, None, None)[0]
        rows = self._query_planned("EXPLAIN " + text, params, settings or [("jit", "off")])
        return "\n".join(str(r[0]) for r in rows)

    def _vector_plans(
        self,
        name: str,
        query: npt.NDArray[np.float32],
        k: int,
        projects: Collection[str] | None,
        kinds: Collection[str] | None,
        since_ms: int | None,
        until_ms: int | None,
    ) -> list[tuple[str, list[Any], list[tuple[str, str]]]]:
        """``(sql, params, planner settings)`` to try in order: the HNSW index's when the
        embedder has one, then the exact scan."""
        q = np.asarray(query, dtype=np.float32)
        dim = int(q.shape[0])
        params: list[Any] = []
        where = ""
        join = ""
        if projects is not None:
            where += " AND v.project = ANY(%s)"
            params.append(list(projects))
        if kinds is not None:
            where += " AND v.kind = ANY(%s)"
            params.append(list(kinds))
        if since_ms is not None or until_ms is not None:
            join = "JOIN events e ON e.event_id = v.item_id AND v.kind = 'event'"
            if since_ms is not None:
                where += " AND e.ts_ms >= %s"
                params.append(since_ms)
            if until_ms is not None:
                where += " AND e.ts_ms < %s"
                params.append(until_ms)
        exact = (
            f"SELECT v.kind, v.project, v.item_id, 1 - (v.vec <=> %s) FROM vectors v {join} "
            f"WHERE v.embedder = %s AND v.dim = %s{where} ORDER BY v.vec <=> %s, v.item_id "
            "LIMIT %s"
        )
        plans: list[tuple[str, list[Any], list[tuple[str, str]]]] = [
            (exact, [q, name, dim, *params, q, k], [])
        ]
        if k > 0 and self._ann_state(ann_index_name(name, dim)) == "valid":
            # the index was built because the exact scan is slow: no sequential scan instead
            settings = [("hnsw.ef_search", str(max(EF_SEARCH_MIN, 2 * k))),
                        ("enable_seqscan", "off"), ("jit", "off")]  # fmt: skip
            if self._iterative_scan():
                settings.append(("hnsw.iterative_scan", "relaxed_order"))
            # the index is partial: its predicate is written as literals (a generic plan of a
            # prepared statement could not prove it), the order by its expression
            scope = f"v.embedder = {sql.Literal(name).as_string(None)} AND v.dim = {dim}"
            expr = f"v.vec::vector({dim})"
            ann = (
                f"WITH r AS MATERIALIZED (SELECT v.kind, v.project, v.item_id, {expr} <=> "
                f"%s::vector({dim}) AS d FROM vectors v {join} WHERE {scope}{where} ORDER BY "
                f"{expr} <=> %s::vector({dim}) LIMIT %s) SELECT kind, project, item_id, 1 - d "
                "FROM r ORDER BY d, item_id"
            )
            plans.insert(0, (ann, [q, *params, q, k], settings))
        return plans
