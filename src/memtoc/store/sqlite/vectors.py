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

These functions take a ``SqliteStore`` and run inside its lock; writes join the caller's
``store.transaction()`` when there is one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from memtoc.errors import StoreError

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore

_LE_F32 = np.dtype("<f4")


class EmbedderIdentity(Protocol):
    """What the store records about an embedder (any ``memtoc.text.embed.Embedder`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def version(self) -> str: ...


class VectorKey(NamedTuple):
    """Where a vector belongs: the item's kind (``node``, ``grip``, ``event``, ``bookmark``), its
    project, and its id within that kind and project."""

    kind: str
    project: str
    item_id: str


@dataclass(frozen=True, slots=True)
class LoadedVectors:
    """Every vector of one embedder for a set of projects/kinds, in one matrix."""

    keys: list[VectorKey]
    ts_ms: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]


def _meta_key(name: str) -> str:
    return f"embedder:{name}"


def _fail(store: SqliteStore, what: str, exc: sqlite3.Error) -> StoreError:
    return StoreError(f"{store.path}: {what}: {exc}")


def put_vectors(
    store: SqliteStore,
    embedder: EmbedderIdentity,
    keys: Sequence[VectorKey],
    vectors: npt.ArrayLike,
) -> int:
    """Insert or replace one vector per key under ``embedder.name``; records the embedder's
    dimension and version in ``meta``. Returns the number of rows written."""
    matrix = np.asarray(vectors, dtype=_LE_F32)
    if matrix.ndim != 2 or matrix.shape[0] != len(keys):
        raise StoreError(f"put_vectors: {len(keys)} keys but vectors of shape {matrix.shape}")
    if len(keys) and matrix.shape[1] != embedder.dim:
        raise StoreError(
            f"put_vectors: {embedder.name} is {embedder.dim}-d but vectors are {matrix.shape[1]}-d"
        )
    dim = int(embedder.dim)
    rows = [
        (k.kind, k.item_id, k.project, embedder.name, dim, matrix[i].tobytes())
        for i, k in enumerate(keys)
    ]
    with store.transaction():
        try:
            store.connection.executemany(
                "INSERT OR REPLACE INTO vectors(kind, item_id, project, embedder, dim, vec) "
                "VALUES (?,?,?,?,?,?)",
                rows,
            )
            _record(store, embedder)
        except sqlite3.Error as exc:
            raise _fail(store, "cannot write vectors", exc) from exc
    return len(rows)


def delete_vectors(
    store: SqliteStore, keys: Sequence[VectorKey], *, embedder: str | None = None
) -> int:
    """Delete the vectors of ``keys`` (of one embedder, or of every embedder when ``None``)."""
    sql = "DELETE FROM vectors WHERE kind = ? AND project = ? AND item_id = ?"
    params: list[tuple[str, ...]] = [(k.kind, k.project, k.item_id) for k in keys]
    if embedder is not None:
        sql += " AND embedder = ?"
        params = [(*p, embedder) for p in params]
    with store.transaction():
        try:
            cur = store.connection.executemany(sql, params)
        except sqlite3.Error as exc:
            raise _fail(store, "cannot delete vectors", exc) from exc
        return max(cur.rowcount, 0)


def clear_vectors(store: SqliteStore, embedder: str) -> int:
    """Delete every vector of ``embedder`` and its ``meta`` record (before re-embedding)."""
    with store.transaction():
        try:
            cur = store.connection.execute("DELETE FROM vectors WHERE embedder = ?", (embedder,))
            store.connection.execute("DELETE FROM meta WHERE key = ?", (_meta_key(embedder),))
        except sqlite3.Error as exc:
            raise _fail(store, "cannot clear vectors", exc) from exc
        return max(cur.rowcount, 0)


def _in(column: str, values: Collection[str] | None, params: list[Any]) -> str:
    if values is None:
        return ""
    params.extend(sorted(values))
    return f" AND {column} IN ({','.join('?' * len(values))})" if values else " AND 0"


def load_vectors(
    store: SqliteStore,
    embedder: str,
    *,
    projects: Collection[str] | None = None,
    kinds: Collection[str] | None = None,
) -> LoadedVectors:
    """All vectors of ``embedder`` (optionally only some projects/kinds), with one query, in key
    order. Rows whose stored ``dim`` disagrees with the first row's are refused."""
    params: list[Any] = [embedder]
    where = "v.embedder = ?" + _in("v.project", projects, params) + _in("v.kind", kinds, params)
    sql = (
        "SELECT v.kind, v.project, v.item_id, v.dim, v.vec, "
        "COALESCE(d.ts_ms, e.ts_ms, b.created_ms, 0) FROM vectors v "
        "LEFT JOIN docs d ON d.kind = v.kind AND d.project = v.project AND d.doc_id = v.item_id "
        "LEFT JOIN events e ON v.kind = 'event' AND e.event_id = v.item_id "
        "LEFT JOIN bookmarks b ON v.kind = 'bookmark' AND b.bookmark_id = v.item_id "
        f"WHERE {where} ORDER BY v.kind, v.project, v.item_id"
    )
    with store._lock:
        try:
            rows = store.connection.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _fail(store, "cannot read vectors", exc) from exc
    if not rows:
        return LoadedVectors([], np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
    dim = int(rows[0][3])
    bad = next((r for r in rows if int(r[3]) != dim or len(r[4]) != 4 * dim), None)
    if bad is not None:
        raise StoreError(
            f"{store.path}: vectors of {embedder} disagree on dimension "
            f"({bad[0]} {bad[2]} in {bad[1]}: dim {bad[3]}, {len(bad[4])} bytes; expected {dim})"
        )
    matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype=_LE_F32).reshape(len(rows), dim)
    return LoadedVectors(
        keys=[VectorKey(r[0], r[1], r[2]) for r in rows],
        ts_ms=np.fromiter((r[5] for r in rows), dtype=np.int64, count=len(rows)),
        matrix=matrix.astype(np.float32),  # native order, writable copy
    )


def count_vectors(store: SqliteStore) -> dict[str, int]:
    """Number of stored vectors per embedder name."""
    with store._lock:
        try:
            rows = store.connection.execute(
                "SELECT embedder, COUNT(*) FROM vectors GROUP BY embedder ORDER BY embedder"
            ).fetchall()
        except sqlite3.Error as exc:
            raise _fail(store, "cannot count vectors", exc) from exc
    return {str(r[0]): int(r[1]) for r in rows}


def _record(store: SqliteStore, embedder: EmbedderIdentity) -> None:
    value = json.dumps({"dim": int(embedder.dim), "version": embedder.version}, sort_keys=True)
    store.connection.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_meta_key(embedder.name), value)
    )


def record_embedder(store: SqliteStore, embedder: EmbedderIdentity) -> None:
    """Record ``embedder``'s dimension and version as the ones its stored vectors came from."""
    with store.transaction():
        try:
            _record(store, embedder)
        except sqlite3.Error as exc:
            raise _fail(store, "cannot record embedder", exc) from exc


def recorded_embedder(store: SqliteStore, name: str) -> tuple[int, str] | None:
    """``(dim, version)`` recorded for embedder ``name``, or ``None`` when none is."""
    raw = store.get_meta(_meta_key(name))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return int(data["dim"]), str(data["version"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{store.path}: meta {_meta_key(name)} is unreadable: {raw!r}") from exc


def stale_embedder(store: SqliteStore, embedder: EmbedderIdentity) -> bool:
    """True when vectors stored under ``embedder.name`` came from a different model: the recorded
    dimension or version differs, or vectors exist with no record at all. A store holding no
    vectors of this embedder is not stale (there is nothing to redo)."""
    recorded = recorded_embedder(store, embedder.name)
    if recorded is None:
        with store._lock:
            try:
                row = store.connection.execute(
                    "SELECT 1 FROM vectors WHERE embedder = ? LIMIT 1", (embedder.name,)
                ).fetchone()
            except sqlite3.Error as exc:
                raise _fail(store, "cannot read vectors", exc) from exc
        return row is not None
    return recorded != (int(embedder.dim), embedder.version)


BEHIND_CAP = 100_000
"""``VectorProgress.behind`` counts up to this many events (a store with none embedded yet need
not be counted in full on every search)."""


@dataclass(frozen=True, slots=True)
class VectorProgress:
    """How far one embedder's vectors cover the store: what ``SemanticIndex.state`` reports."""

    recorded: tuple[int, str] | None
    """``(dim, version)`` of the model its stored vectors came from (None: none recorded)."""
    checkpoint: int
    """The last event seq it has embedded (0: none)."""
    filed_max: int
    """The last seq filed into a segment (searchable by BM25)."""
    behind: int
    """Filed events after the checkpoint (up to ``BEHIND_CAP``)."""
    others: tuple[str, ...]
    """Other embedders with recorded vectors."""


def progress_from(
    raw_meta: str | None,
    raw_checkpoint: str | None,
    filed_max: int,
    count_behind: Any,
    other_names: Any,
) -> VectorProgress:
    """A ``VectorProgress`` from the values both stores read (callables count and list lazily)."""
    recorded = None
    if raw_meta is not None:
        try:
            data = json.loads(raw_meta)
            recorded = (int(data["dim"]), str(data["version"]))
        except (ValueError, KeyError, TypeError):
            recorded = (-1, "unreadable")
    try:
        checkpoint = int(json.loads(raw_checkpoint)) if raw_checkpoint is not None else 0
    except (ValueError, TypeError):
        checkpoint = 0
    behind = count_behind(checkpoint) if checkpoint < filed_max else 0
    others = tuple(other_names()) if recorded is None else ()
    return VectorProgress(recorded, checkpoint, int(filed_max), int(behind), others)


def vector_progress(store: SqliteStore, name: str) -> VectorProgress:
    """``VectorProgress`` of embedder ``name`` (a few indexed lookups: cheap enough per search)."""
    row = store._query(
        "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM checkpoints "
        "WHERE job = ?), (SELECT COALESCE(MAX(seq), 0) FROM segment_events)",
        (_meta_key(name), f"embed:{name}"),
    )[0]
    return progress_from(
        row[0],
        row[1],
        int(row[2]),
        lambda after: store._query(
            "SELECT COUNT(*) FROM (SELECT 1 FROM segment_events WHERE seq > ? LIMIT ?)",
            (after, BEHIND_CAP),
        )[0][0],
        lambda: [
            str(r[0]).removeprefix("embedder:")
            for r in store._query(
                "SELECT key FROM meta WHERE key LIKE 'embedder:%' AND key != ? ORDER BY key",
                (_meta_key(name),),
            )
        ],
    )
