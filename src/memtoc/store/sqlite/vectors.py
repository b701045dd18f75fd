"""Vector rows in the SQLite store: write, delete, bulk-load, and embedder provenance.

Table (migration ``0003_search_indexes``)::

    vectors(kind, item_id, project, embedder, dim, vec BLOB,
            PRIMARY KEY (kind, project, item_id, embedder))

``vec`` is the row's float32 values, little-endian (``ndarray.astype('<f4').tobytes()``). Each
vector carries the embedder's ``name``; the embedder's dimension and version are kept once in
``meta`` under ``embedder:<name>`` (JSON ``{"dim": …, "version": …}``), so a model swapped under
the same name is detected (``stale_embedder``) and ``memtoc rebuild --vectors`` can re-embed.

The table has no timestamp of its own: ``load_vectors`` takes each item's time from ``docs``
(nodes, grips), ``events`` (kind ``event``) or ``bookmarks`` (kind ``bookmark``) in the same query,
0 when none is found.

``doc_vectors(kind, project, doc_id, embedder, text)`` records the text each doc's vector was
computed from, so a doc whose text changed (a node's new version) is re-embedded (PostgreSQL keeps
an MD5 in ``vectors.source_md5``). The embed step (``memtoc.pipeline.embed_step``) drives both
through the ``VectorStore`` protocol (``store/capabilities.py``); writes join the caller's
``transaction()`` when there is one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from memtoc.errors import StoreError
from memtoc.store.capabilities import (
    EmbedderIdentity,
    LoadedVectors,
    VectorKey,
    embed_job,
)
from memtoc.store.codecs import embedder_meta_key, identity_json
from memtoc.store.sqlite.base import SqliteBase

if TYPE_CHECKING:
    import numpy.typing as npt

_LE_F32 = "<f4"
"""Stored vectors: float32, little-endian (numpy is imported by the methods that need it, so
opening a store for ``memtoc context`` or a hook does not load it)."""


def _in(column: str, values: Collection[str] | None, params: list[Any]) -> str:
    if values is None:
        return ""
    params.extend(sorted(values))
    return f" AND {column} IN ({','.join('?' * len(values))})" if values else " AND 0"


class SqliteVectors(SqliteBase):
    """The SQLite store's vector rows (``VectorStore``, ``LoadableVectors``)."""

    def _fail(self, what: str, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"{self.path}: {what}: {exc}")

    # -- provenance ---------------------------------------------------------------------------------
    def _record(self, embedder: EmbedderIdentity) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            (embedder_meta_key(embedder.name), identity_json(embedder)),
        )

    def record_embedder(self, embedder: EmbedderIdentity) -> None:
        """Record ``embedder``'s dimension and version as the ones its stored vectors came from."""
        with self.transaction():
            try:
                self._record(embedder)
            except sqlite3.Error as exc:
                raise self._fail("cannot record embedder", exc) from exc

    def count_vectors(self) -> dict[str, int]:
        """Number of stored vectors per embedder name."""
        rows = self._query(
            "SELECT embedder, COUNT(*) FROM vectors GROUP BY embedder ORDER BY embedder"
        )
        return {str(r[0]): int(r[1]) for r in rows}

    # -- writes -------------------------------------------------------------------------------------
    def put_item_vectors(
        self,
        embedder: EmbedderIdentity,
        keys: Sequence[VectorKey],
        vectors: npt.ArrayLike,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Insert or replace one vector per key under ``embedder.name`` (as given: the in-memory
        index normalises), with the doc text each came from when ``sources`` is given; records
        the embedder's dimension and version in ``meta``. Returns the number of rows written."""
        import numpy as np

        matrix = np.asarray(vectors, dtype=_LE_F32)
        if matrix.ndim != 2 or matrix.shape[0] != len(keys):
            raise StoreError(f"put_vectors: {len(keys)} keys but vectors of shape {matrix.shape}")
        if len(keys) and matrix.shape[1] != embedder.dim:
            raise StoreError(
                f"put_vectors: {embedder.name} is {embedder.dim}-d but vectors are "
                f"{matrix.shape[1]}-d"
            )
        dim = int(embedder.dim)
        rows = [
            (k.kind, k.item_id, k.project, embedder.name, dim, matrix[i].tobytes())
            for i, k in enumerate(keys)
        ]
        with self.transaction():
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors(kind, item_id, project, embedder, dim, vec) "
                    "VALUES (?,?,?,?,?,?)",
                    rows,
                )
                self._record(embedder)
                if sources is not None:
                    self._conn.executemany(
                        "INSERT OR REPLACE INTO doc_vectors(kind, project, doc_id, embedder, "
                        "text) VALUES (?,?,?,?,?)",
                        [(k.kind, k.project, k.item_id, embedder.name, t)
                         for k, t in zip(keys, sources, strict=True)],
                    )  # fmt: skip
            except sqlite3.Error as exc:
                raise self._fail("cannot write vectors", exc) from exc
        return len(rows)

    def delete_vectors(self, keys: Sequence[VectorKey], *, embedder: str | None = None) -> int:
        """Delete the vectors of ``keys`` (of one embedder, or of every embedder when ``None``)."""
        sql = "DELETE FROM vectors WHERE kind = ? AND project = ? AND item_id = ?"
        params: list[tuple[str, ...]] = [(k.kind, k.project, k.item_id) for k in keys]
        if embedder is not None:
            sql += " AND embedder = ?"
            params = [(*p, embedder) for p in params]
        with self.transaction():
            try:
                cur = self._conn.executemany(sql, params)
            except sqlite3.Error as exc:
                raise self._fail("cannot delete vectors", exc) from exc
            return max(cur.rowcount, 0)

    def clear_vectors(self, name: str) -> int:
        """Delete every vector of embedder ``name`` and its ``meta`` record."""
        with self.transaction():
            try:
                cur = self._conn.execute("DELETE FROM vectors WHERE embedder = ?", (name,))
                self._conn.execute("DELETE FROM meta WHERE key = ?", (embedder_meta_key(name),))
            except sqlite3.Error as exc:
                raise self._fail("cannot clear vectors", exc) from exc
            return max(cur.rowcount, 0)

    def reset_vectors(self, name: str) -> None:
        """Drop ``name``'s vectors, their record, the doc texts they came from and the embed
        checkpoint: the embedder starts over (``EmbedStep.rebuild``)."""
        with self.transaction():
            self.clear_vectors(name)
            self._exec("DELETE FROM doc_vectors WHERE embedder = ?", (name,))
            self._exec("DELETE FROM checkpoints WHERE job = ?", (embed_job(name),))

    # -- what needs embedding -------------------------------------------------------------------------
    def events_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """``(seq, event_id, project, text)`` of events after ``seq``, in seq order."""
        rows = self._query(
            "SELECT seq, event_id, project, text FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit),
        )
        return [(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def docs_to_embed(self, name: str, limit: int) -> list[tuple[str, str, str, str, str]]:
        """``(kind, project, doc_id, text, source)`` of docs with no vector of ``name`` or one
        computed from other text (``source``: what ``put_item_vectors`` records)."""
        rows = self._query(
            "SELECT d.kind, d.project, d.doc_id, d.text FROM docs d LEFT JOIN doc_vectors v "
            "ON v.kind = d.kind AND v.project = d.project AND v.doc_id = d.doc_id "
            "AND v.embedder = ? WHERE v.text IS NULL OR v.text != d.text "
            "ORDER BY d.doc_seq LIMIT ?",
            (name, limit),
        )
        return [(r[0], r[1], r[2], r[3], r[3]) for r in rows]

    def drop_orphan_doc_vectors(self, name: str) -> int:
        """Delete vectors (and their doc records) of docs that no longer exist; how many."""
        gone = self._query(
            "SELECT v.kind, v.project, v.doc_id FROM doc_vectors v WHERE v.embedder = ? AND "
            "NOT EXISTS (SELECT 1 FROM docs d WHERE d.kind = v.kind AND d.project = v.project "
            "AND d.doc_id = v.doc_id)",
            (name,),
        )
        if not gone:
            return 0
        keys = [VectorKey(r[0], r[1], r[2]) for r in gone]
        with self.transaction():
            self.delete_vectors(keys, embedder=name)
            self._conn.executemany(
                "DELETE FROM doc_vectors WHERE kind = ? AND project = ? AND doc_id = ? "
                "AND embedder = ?",
                [(*k, name) for k in keys],
            )
        return len(keys)

    # -- reads ----------------------------------------------------------------------------------------
    def load_vectors(
        self,
        name: str,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
    ) -> LoadedVectors:
        """All vectors of embedder ``name`` (optionally only some projects/kinds), with one query,
        in key order. Rows whose stored ``dim`` disagrees with the first row's are refused."""
        params: list[Any] = [name]
        where = "v.embedder = ?" + _in("v.project", projects, params) + _in("v.kind", kinds, params)
        sql = (
            "SELECT v.kind, v.project, v.item_id, v.dim, v.vec, "
            "COALESCE(d.ts_ms, e.ts_ms, b.created_ms, 0) FROM vectors v "
            "LEFT JOIN docs d ON d.kind = v.kind AND d.project = v.project AND d.doc_id = v.item_id "
            "LEFT JOIN events e ON v.kind = 'event' AND e.event_id = v.item_id "
            "LEFT JOIN bookmarks b ON v.kind = 'bookmark' AND b.bookmark_id = v.item_id "
            f"WHERE {where} ORDER BY v.kind, v.project, v.item_id"
        )
        import numpy as np

        with self._lock:
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._fail("cannot read vectors", exc) from exc
        if not rows:
            return LoadedVectors(
                [], np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
            )
        dim = int(rows[0][3])
        bad = next((r for r in rows if int(r[3]) != dim or len(r[4]) != 4 * dim), None)
        if bad is not None:
            raise StoreError(
                f"{self.path}: vectors of {name} disagree on dimension ({bad[0]} {bad[2]} in "
                f"{bad[1]}: dim {bad[3]}, {len(bad[4])} bytes; expected {dim})"
            )
        matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype=_LE_F32).reshape(len(rows), dim)
        return LoadedVectors(
            keys=[VectorKey(r[0], r[1], r[2]) for r in rows],
            ts_ms=np.fromiter((r[5] for r in rows), dtype=np.int64, count=len(rows)),
            matrix=matrix.astype(np.float32),  # native order, writable copy
        )
