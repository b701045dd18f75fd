"""Exact cosine search over an in-memory float32 matrix of the store's vectors.

``VectorIndex`` keeps every vector of one embedder as a row of a growable float32 matrix, with a
project code, kind code and timestamp per row. A query is one matrix-vector product plus
``argpartition``: exact, no training, no extension. Filters (projects, kinds, a time range, an
explicit id set) are boolean masks; a narrow filter gathers only its rows before the product, so
searching one project of a big store costs what that project's size costs.

Removed rows become tombstones (their slot is masked) and are compacted away once they make up a
quarter of the matrix, so slots stay stable for the optional ANN index between compactions.

The product runs in numpy's single-threaded ``einsum`` loop (``cosine_scores``), memory bandwidth
bound, so its cost grows linearly with the rows searched (docs/benchmarks.md, "Figures behind
design choices"). Past ``ann_min_rows`` candidate rows, when
``faiss`` is installed (``pip install 'memtoc[ann]'``), searches go through an IVF index instead
(see ``memtoc.retrieval.vectors_ann``); smaller or narrowly filtered searches stay exact.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from memtoc.errors import QueryError
from memtoc.retrieval.vectors_ann import IvfAnn, faiss_available

if TYPE_CHECKING:
    from memtoc.store.capabilities import (
        EmbedderIdentity,
        LoadableVectors,
        VectorKey,
        VectorStore,
    )

K = TypeVar("K", bound=Hashable)
Mask = npt.NDArray[np.bool_]

DEFAULT_ANN_MIN_ROWS = 300_000
MAX_RUNS = 64
"""A filter selecting more contiguous runs of rows than this gathers them instead."""


def cosine_scores(
    matrix: npt.NDArray[np.float32], q: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``matrix @ q`` in numpy's own single-threaded loop (``einsum``), not BLAS: OpenBLAS
    splits a product this size over every core, and on a busy machine its threads wait for each
    other (docs/benchmarks.md, "Figures behind design choices")."""
    scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, q)
    return scores


def _frozen(values: Collection[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


class VectorIndex(Generic[K]):
    """Vectors keyed by ``K`` (a ``VectorKey`` when loaded from the store), searched by cosine."""

    def __init__(
        self, dim: int, *, embedder: str | None = None, ann_min_rows: int | None = None
    ) -> None:
        """``ann_min_rows``: use an approximate index (faiss) for searches over at least this many
        rows; ``None`` means ``DEFAULT_ANN_MIN_ROWS`` if faiss is installed, ``0`` disables it."""
        if dim <= 0:
            raise QueryError(f"vector dimension must be positive, got {dim}")
        self.dim = dim
        self.embedder = embedder
        self._mat = np.zeros((0, dim), dtype=np.float32)
        self._proj = np.zeros(0, dtype=np.int32)
        self._kind = np.zeros(0, dtype=np.int32)
        self._ts = np.zeros(0, dtype=np.int64)
        self._alive = np.zeros(0, dtype=np.bool_)
        self._keys: list[K | None] = []
        self._slot: dict[K, int] = {}
        self._n = 0  # slots in use (alive or tombstoned)
        self._dead = 0
        self._codes: dict[str, dict[str, int]] = {"project": {}, "kind": {}}
        self._masks: dict[tuple[str, int], Mask] = {}
        self._run_cache: dict[
            tuple[frozenset[str] | None, frozenset[str] | None],
            tuple[list[tuple[int, int]] | None, npt.NDArray[np.intp]],
        ] = {}
        if ann_min_rows is None:
            ann_min_rows = DEFAULT_ANN_MIN_ROWS if faiss_available() else 0
        self.ann_min_rows = ann_min_rows
        self._ann: IvfAnn | None = None

    def __len__(self) -> int:
        return self._n - self._dead

    def __contains__(self, key: object) -> bool:
        return key in self._slot

    @property
    def ann_active(self) -> bool:
        """True when an approximate index is built and kept in step with the matrix."""
        return self._ann is not None

    # -- writes -----------------------------------------------------------------------------------
    def _code(self, field: str, value: str) -> int:
        table = self._codes[field]
        return table.setdefault(value, len(table))

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need <= self._mat.shape[0]:
            return
        cap = max(need, 2 * self._mat.shape[0], 1024)
        grown = np.zeros((cap, self.dim), dtype=np.float32)
        grown[: self._n] = self._mat[: self._n]
        self._mat = grown
        for name in ("_proj", "_kind", "_ts", "_alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def add(
        self,
        ids: Sequence[K],
        vectors: npt.ArrayLike,
        *,
        projects: Sequence[str],
        kinds: Sequence[str],
        ts_ms: Sequence[int] | npt.NDArray[np.int64],
    ) -> None:
        """Add or replace rows. Vectors are normalised here, so cosine = dot product."""
        mat = np.array(vectors, dtype=np.float32, ndmin=2)
        n = len(ids)
        if mat.shape != (n, self.dim) or not (len(projects) == len(kinds) == len(ts_ms) == n):
            raise QueryError(
                f"add: {n} ids, vectors {mat.shape} (expected ({n}, {self.dim})), "
                f"{len(projects)} projects, {len(kinds)} kinds, {len(ts_ms)} timestamps"
            )
        if len(set(ids)) != n:
            raise QueryError("add: duplicate ids in one call")
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        np.divide(mat, norms, out=mat, where=norms > 0)
        existing = [self._slot[k] for k in ids if k in self._slot]
        if existing:
            self.remove([k for k in ids if k in self._slot])
        self._reserve(n)
        start, stop = self._n, self._n + n
        self._mat[start:stop] = mat
        self._proj[start:stop] = [self._code("project", p) for p in projects]
        self._kind[start:stop] = [self._code("kind", k) for k in kinds]
        self._ts[start:stop] = np.asarray(ts_ms, dtype=np.int64)
        self._alive[start:stop] = True
        for i, key in enumerate(ids):
            self._keys.append(key)
            self._slot[key] = start + i
        self._n = stop
        self._masks.clear()
        self._run_cache.clear()
        if self._ann is not None:
            self._ann.add(mat, np.arange(start, stop, dtype=np.int64))

    def remove(self, ids: Collection[K]) -> int:
        """Remove the given ids (unknown ids are ignored); returns how many were present."""
        slots = [self._slot.pop(k) for k in ids if k in self._slot]
        if not slots:
            return 0
        where = np.asarray(slots, dtype=np.int64)
        self._alive[where] = False
        for s in slots:
            self._keys[s] = None
        self._dead += len(slots)
        self._masks.clear()
        self._run_cache.clear()
        if self._ann is not None:
            self._ann.remove(where)
        if self._dead > 1024 and self._dead * 4 > self._n:
            self._compact()
        return len(slots)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        m = len(keep)
        self._mat[:m] = self._mat[keep]
        for name in ("_proj", "_kind", "_ts"):
            arr = getattr(self, name)
            arr[:m] = arr[keep]
        self._alive[:m] = True
        self._alive[m:] = False
        self._keys = [self._keys[i] for i in keep]
        self._slot = {k: i for i, k in enumerate(self._keys) if k is not None}
        self._n, self._dead = m, 0
        self._masks.clear()
        self._run_cache.clear()
        self._ann = None  # slots moved; rebuilt on the next big search

    # -- search -----------------------------------------------------------------------------------
    def _field_mask(self, field: str, values: Collection[str]) -> Mask:
        codes = self._codes[field]
        column = self._proj if field == "project" else self._kind
        mask = np.zeros(self._n, dtype=np.bool_)
        for value in values:
            code = codes.get(value)
            if code is None:
                continue
            cached = self._masks.get((field, code))
            if cached is None:
                cached = column[: self._n] == code
                self._masks[(field, code)] = cached
            mask |= cached
        return mask

    def _candidates(
        self,
        projects: Collection[str] | None,
        kinds: Collection[str] | None,
        since_ms: int | None,
        until_ms: int | None,
        allowed_ids: Collection[K] | None,
    ) -> Mask | None:
        """Boolean mask of eligible slots, or ``None`` when every slot is eligible."""
        mask: Mask | None = self._alive[: self._n].copy() if self._dead else None

        def both(extra: Mask) -> Mask:
            return extra if mask is None else mask & extra

        if allowed_ids is not None:
            allowed = np.zeros(self._n, dtype=np.bool_)
            allowed[[self._slot[k] for k in allowed_ids if k in self._slot]] = True
            mask = both(allowed)
        # a filter naming every project (kind) present restricts nothing: no mask, so the
        # search stays one plain product (and the ANN index needs no selector)
        if projects is not None and not self._codes["project"].keys() <= set(projects):
            mask = both(self._field_mask("project", projects))
        if kinds is not None and not self._codes["kind"].keys() <= set(kinds):
            mask = both(self._field_mask("kind", kinds))
        if since_ms is not None:
            mask = both(self._ts[: self._n] >= since_ms)
        if until_ms is not None:
            mask = both(self._ts[: self._n] < until_ms)
        return mask

    def search(
        self,
        query_vec: npt.ArrayLike,
        k: int,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        allowed_ids: Collection[K] | None = None,
    ) -> list[tuple[K, float]]:
        """The ``k`` best ``(id, cosine)`` pairs, best first (ties by insertion order).

        Filters combine with AND: ``projects`` / ``kinds`` (any of), ``since_ms <= ts <
        until_ms``, and ``allowed_ids``. ``None`` means no filter; an empty set matches nothing.
        """
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise QueryError(f"query vector is {q.shape[0]}-d, index is {self.dim}-d")
        norm = float(np.linalg.norm(q))
        if k <= 0 or self._n == 0 or norm == 0.0 or not np.isfinite(norm):
            return []
        q = q / norm
        mask = self._candidates(projects, kinds, since_ms, until_ms, allowed_ids)
        count = self._n if mask is None else int(np.count_nonzero(mask))
        if count == 0:
            return []
        if self.ann_min_rows and count >= self.ann_min_rows:
            hits = self._search_ann(q, k, mask, count)
            if hits is not None:
                return hits
        if mask is None:
            return self._top(cosine_scores(self._mat[: self._n], q), None, k)
        if count * 2 < self._n:
            # rows load grouped by kind then project (``load_vectors``' order), so a kind or
            # project filter selects a few contiguous runs: multiply those views in place
            # rather than copying the selected rows out (at a million rows, hundreds of MB)
            plain = since_ms is None and until_ms is None and allowed_ids is None
            key = (_frozen(projects), _frozen(kinds)) if plain else None
            runs, slots = self._runs(key, mask)
            if runs is None:
                return self._top(cosine_scores(self._mat[slots], q), slots, k)
            scores = np.concatenate([cosine_scores(self._mat[a:b], q) for a, b in runs])
            return self._top(scores, slots, k)
        scores = cosine_scores(self._mat[: self._n], q)
        scores[~mask] = -np.inf
        return self._top(scores, None, k, limit=count)

    def _runs(
        self, key: tuple[frozenset[str] | None, frozenset[str] | None] | None, mask: Mask
    ) -> tuple[list[tuple[int, int]] | None, npt.NDArray[np.intp]]:
        """The selected slots and, when they form at most ``MAX_RUNS`` contiguous runs, the runs
        (``[start, stop)``); remembered per project/kind filter until the index changes."""
        cached = self._run_cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        slots = np.flatnonzero(mask)
        breaks = np.flatnonzero(np.diff(slots) != 1)
        runs: list[tuple[int, int]] | None = None
        if len(breaks) < MAX_RUNS:
            starts = slots[np.concatenate(([0], breaks + 1))]
            stops = slots[np.concatenate((breaks, [len(slots) - 1]))] + 1
            runs = [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)]
        if key is not None:
            if len(self._run_cache) >= 16:
                self._run_cache.clear()
            self._run_cache[key] = (runs, slots)
        return runs, slots

    def _top(
        self,
        scores: npt.NDArray[np.float32],
        slots: npt.NDArray[np.intp] | None,
        k: int,
        *,
        limit: int | None = None,
    ) -> list[tuple[K, float]]:
        k = min(k, len(scores) if limit is None else limit)
        if k < len(scores):
            part = np.argpartition(scores, len(scores) - k)[len(scores) - k :]
        else:
            part = np.arange(len(scores))
        order = part[np.lexsort((part, -scores[part]))]
        where = order if slots is None else slots[order]
        return [(self._key(int(s)), float(scores[i])) for s, i in zip(where, order, strict=True)]

    def _key(self, slot: int) -> K:
        key = self._keys[slot]
        assert key is not None, "a removed slot was returned"
        return key

    def build_ann(self) -> bool:
        """Build the approximate index now (it is otherwise built by the first search that needs
        it; about 25 s at 1M rows on 2 cores). Returns False when faiss is not installed."""
        if not faiss_available() or len(self) == 0:
            return False
        live = np.flatnonzero(self._alive[: self._n]).astype(np.int64)
        self._ann = IvfAnn.build(self._mat[live], live)
        return True

    def _search_ann(
        self, q: npt.NDArray[np.float32], k: int, mask: Mask | None, count: int
    ) -> list[tuple[K, float]] | None:
        if self._ann is None and not self.build_ann():
            return None
        assert self._ann is not None
        found = self._ann.search(q, min(k, count), mask)
        if len(found) < min(k, count):
            return None  # a narrow filter starved the probed lists: answer exactly instead
        return [(self._key(slot), score) for slot, score in found]

    # -- persistence ------------------------------------------------------------------------------
    @classmethod
    def from_store(
        cls,
        store: LoadableVectors,
        embedder: EmbedderIdentity,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        ann_min_rows: int | None = None,
    ) -> VectorIndex[VectorKey]:
        """Load every vector of ``embedder`` (for some projects/kinds) from the store."""
        loaded = store.load_vectors(embedder.name, projects=projects, kinds=kinds)
        index: VectorIndex[VectorKey] = VectorIndex(
            embedder.dim, embedder=embedder.name, ann_min_rows=ann_min_rows
        )
        if loaded.keys:
            index.add(
                loaded.keys,
                loaded.matrix,
                projects=[key.project for key in loaded.keys],
                kinds=[key.kind for key in loaded.keys],
                ts_ms=loaded.ts_ms,
            )
        return index

    def to_store(
        self: VectorIndex[VectorKey], store: VectorStore, embedder: EmbedderIdentity
    ) -> int:
        """Write every row to the store under ``embedder`` (insert or replace); returns the count."""
        if embedder.dim != self.dim:
            raise QueryError(f"{embedder.name} is {embedder.dim}-d, index is {self.dim}-d")
        slots = np.flatnonzero(self._alive[: self._n])
        keys = [self._key(int(s)) for s in slots]
        return store.put_item_vectors(embedder, keys, self._mat[slots])
