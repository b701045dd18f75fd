"""Vectors on PostgreSQL (pgvector): write with provenance, find what needs embedding, search.

Rows live in ``vectors(kind, item_id, project, embedder, dim, vec, source_md5)``: one unit-length
vector per item and embedder, ``dim`` its dimension and, for docs (nodes, grips, bookmarks),
``source_md5`` the MD5 of the doc text it was computed from — a doc whose text changed (a node's
new version) is re-embedded, the job SQLite's ``doc_vectors`` does. The embedder's dimension and
version are recorded in ``meta`` under ``embedder:<name>`` exactly as on SQLite (and copied over by
``memtoc migrate-store``), so a model swapped under the same name is detected (``stale_embedder``).

Search (``nearest``) is exact — ``ORDER BY vec <=> q`` over one embedder's rows, filtered by
project and kind (and by time for events) — or, once the embedder has its IVFFlat index
(``postgres/ann``), approximate through it: the same filters, the index's order re-sorted by
(distance, item id); a search the index answers with fewer than k rows (a selective filter) is run
exactly. ``explain_nearest`` shows the server's plan.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from memtoc.errors import StoreError
from memtoc.store.capabilities import (
    EmbedderIdentity,
    VectorKey,
    embed_job,
)
from memtoc.store.codecs import embedder_meta_key, identity_json
from memtoc.store.postgres.ann import PgAnn, ann_index_name
from memtoc.store.postgres.base import LIVE


def _unit(matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    return out


class PgVectors(PgAnn):
    """The PostgreSQL store's vector rows."""

    # -- provenance ---------------------------------------------------------------------------------
    def record_embedder(self, embedder: EmbedderIdentity) -> None:
        self.set_meta(embedder_meta_key(embedder.name), identity_json(embedder))

    def clear_vectors(self, name: str) -> int:
        return self._exec("DELETE FROM vectors WHERE embedder = %s", (name,))

    def reset_vectors(self, name: str) -> None:
        """Drop ``name``'s vectors (with their sources' MD5) and its embed checkpoint: the
        embedder starts over (``EmbedStep.rebuild``)."""
        with self.transaction():
            self.clear_vectors(name)
            self._exec("DELETE FROM checkpoints WHERE job = %s", (embed_job(name),))

    def count_vectors(self) -> dict[str, int]:
        """Number of stored vectors per embedder name."""
        rows = self._query("SELECT embedder, COUNT(*) FROM vectors GROUP BY embedder ORDER BY 1")
        return {str(r[0]): int(r[1]) for r in rows}

    # -- writes -------------------------------------------------------------------------------------
    def put_item_vectors(
        self,
        embedder: EmbedderIdentity,
        keys: Sequence[VectorKey],
        vectors: npt.ArrayLike,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Insert or replace one vector per key (normalised to unit length) under
        ``embedder.name``, with the MD5 of each doc's source text (``sources``, as
        ``docs_to_embed`` gives it); records the embedder."""
        m = _unit(vectors)
        if m.ndim != 2 or m.shape[0] != len(keys):
            raise StoreError(f"put_item_vectors: {len(keys)} keys but vectors of shape {m.shape}")
        if keys and m.shape[1] != embedder.dim:
            raise StoreError(f"{embedder.name} is {embedder.dim}-d but vectors are {m.shape[1]}-d")
        md5s: list[str | None] = list(sources) if sources is not None else [None] * len(keys)
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
            f"SELECT seq, event_id, project, text FROM events WHERE seq > %s AND {LIVE} "
            "ORDER BY seq LIMIT %s",
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
        Through the embedder's IVFFlat index when it has one (approximate; exact when the index
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
        """``(sql, params, planner settings)`` to try in order: the approximate index's when the
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
        usable, lists = (
            self.ann_index(ann_index_name(name, dim)) if k > 0 and self.use_ann else (False, 0)
        )
        if usable:
            settings = self.ann_settings(lists)
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
