"""Optional approximate vector index (faiss IVF-Flat, inner product) for very large stores.

Only used when ``faiss`` is importable (``pip install 'memtoc[ann]'``) and a search covers at least
``VectorIndex.ann_min_rows`` rows. Why IVF and not HNSW: on the 2-core machine HNSW builds take
minutes at 1M vectors, while IVF trains on a sample in seconds, takes incremental adds and removes
by slot id, and filters through a bitmap selector (the measurements: docs/benchmarks.md, "Figures
behind design choices").

Rows are identified by their ``VectorIndex`` slot, so adds and removes map one to one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from memtoc.errors import QueryError


def faiss_available() -> bool:
    """True when the optional faiss package can be imported."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise QueryError("the approximate index needs faiss (pip install 'memtoc[ann]')") from None
    return faiss


class IvfAnn:
    """An IVF-Flat inner-product index over unit vectors, keyed by int64 slot ids."""

    def __init__(self, index: Any, nprobe: int) -> None:
        self._index = index
        self.nprobe = nprobe

    @classmethod
    def build(
        cls,
        matrix: npt.NDArray[np.float32],
        slots: npt.NDArray[np.int64],
        *,
        nlist: int | None = None,
        nprobe: int | None = None,
        train_rows: int = 65_536,
        seed: int = 1234,
    ) -> IvfAnn:
        """Train on a sample of ``matrix`` (``nlist`` ≈ sqrt(n) lists) and add every row."""
        faiss = _faiss()
        n, dim = matrix.shape
        if n == 0:
            raise QueryError("cannot build an approximate index over no vectors")
        nlist = nlist or max(1, min(4096, int(math.sqrt(n))))
        nlist = min(nlist, n)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(seed)
        sample = matrix if n <= train_rows else matrix[rng.choice(n, train_rows, replace=False)]
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        index.add_with_ids(np.ascontiguousarray(matrix, dtype=np.float32), slots)
        return cls(index, nprobe or max(8, nlist // 32))

    def add(self, vectors: npt.NDArray[np.float32], slots: npt.NDArray[np.int64]) -> None:
        self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), slots)

    def remove(self, slots: npt.NDArray[np.int64]) -> None:
        faiss = _faiss()
        self._index.remove_ids(faiss.IDSelectorBatch(np.ascontiguousarray(slots, dtype=np.int64)))

    def search(
        self, query: npt.NDArray[np.float32], k: int, mask: npt.NDArray[np.bool_] | None
    ) -> list[tuple[int, float]]:
        """Up to ``k`` ``(slot, score)`` pairs, best first; with ``mask``, only slots it allows."""
        faiss = _faiss()
        params = faiss.SearchParametersIVF()
        params.nprobe = self.nprobe
        bitmap = None
        if mask is not None:
            bitmap = np.packbits(mask, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
            params.sel = selector
            params.nprobe = min(self._index.nlist, self.nprobe * 2)
        scores, ids = self._index.search(query.reshape(1, -1), k, params=params)
        del bitmap
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
