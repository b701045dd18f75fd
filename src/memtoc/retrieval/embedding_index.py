"""The semantic side of search: the configured embedder, loaded lazily, and its vectors in memory.

``SemanticIndex`` is what the ``Memory`` facade holds. It loads the embedder on first use (so
commands that never search or process pay nothing for the model), and remembers why it could not
(``degraded``: ``"no embedder: <reason>"``), which every search result then reports — search runs
BM25-only, never with a silent substitute.

Vectors are searched exactly (``VectorIndex``) from a matrix loaded from the store on the first
search and reloaded when the embedding step has written since (``vectors_gen:<name>`` in
``meta``). On a PostgreSQL store the server searches them (pgvector, ``PostgresStore.nearest``)
and ``PgEmbedStep`` keeps them current: nothing is loaded into memory.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from memtoc.errors import EmbedderError
from memtoc.store.sqlite import SqliteStore

if TYPE_CHECKING:  # numpy-backed modules load on first use: plain commands stay quick to start
    from memtoc.pipeline.embed_step import EmbedStep
    from memtoc.pipeline.embed_step_pg import PgEmbedStep
    from memtoc.retrieval.vectors import VectorIndex
    from memtoc.store.postgres import PostgresStore
    from memtoc.store.sqlite_vectors import VectorKey
    from memtoc.text.embed import Embedder


class SemanticIndex:
    """An embedder (or the reason there is none) and an in-memory index of its vectors."""

    def __init__(
        self,
        store: SqliteStore | PostgresStore,
        *,
        embedder: Embedder | None = None,
        kind: str | None = None,
        model: str | None = None,
    ) -> None:
        """Give an ``embedder``, or a ``kind``/``model`` to load on first use (``None``/``"none"``:
        no vectors)."""
        self.store = store
        self._embedder = embedder
        self._spec = (kind, model)
        self._loaded = embedder is not None
        self._error: str | None = None
        self._index: VectorIndex[VectorKey] | None = None
        self._generation: str | None = None

    @property
    def embedder(self) -> Embedder | None:
        if not self._loaded:
            self._loaded = True
            from memtoc.text.embed import KINDS, load_embedder

            kind, model = self._spec
            if kind is None or kind.strip().lower() == "none":
                self._error = "none configured (embedder=none)"
            else:
                if kind.strip().lower() not in KINDS:  # a model path or name given as the kind
                    kind, model = "static", kind
                try:
                    self._embedder = load_embedder(kind, model)
                except EmbedderError as exc:
                    self._error = str(exc)
        return self._embedder

    def mark_failed(self, reason: str) -> None:
        """Stop using the embedder after it failed at run time: search degrades to BM25-only and
        says why, instead of the failure stopping the pipeline."""
        self._embedder = None
        self._loaded = True
        self._error = reason
        self._index = None

    @property
    def degraded(self) -> str | None:
        """``"no embedder: <reason>"`` when search must run BM25-only, else ``None``."""
        if self.embedder is None:
            return f"no embedder: {self._error or 'none configured'}"
        return None

    def embed_step(self) -> EmbedStep | PgEmbedStep | None:
        """The pipeline step that keeps this embedder's vectors current (None without one)."""
        embedder = self.embedder
        if embedder is None:
            return None
        if not isinstance(self.store, SqliteStore):
            from memtoc.pipeline.embed_step_pg import PgEmbedStep

            return PgEmbedStep(self.store, embedder)
        from memtoc.pipeline.embed_step import EmbedStep

        return EmbedStep(self.store, embedder)

    def _current_index(self, store: SqliteStore, embedder: Embedder) -> VectorIndex[VectorKey]:
        from memtoc.pipeline.embed_step import generation_key
        from memtoc.retrieval.vectors import VectorIndex

        generation = store.get_meta(generation_key(embedder.name))
        if self._index is None or generation != self._generation:
            self._index = VectorIndex.from_store(store, embedder)
            self._generation = generation
        return self._index

    def search(
        self,
        query: str,
        k: int,
        *,
        projects: Collection[str] | None = None,
        kinds: Collection[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> list[tuple[VectorKey, float]]:
        """The ``k`` nearest items to ``query`` by cosine, best first ([] without an embedder)."""
        embedder = self.embedder
        if embedder is None or k <= 0 or not query.strip():
            return []
        if not isinstance(self.store, SqliteStore):
            return self.store.nearest(
                embedder.name,
                embedder.embed([query])[0],
                k,
                projects=projects,
                kinds=kinds,
                since_ms=since_ms,
                until_ms=until_ms,
            )
        index = self._current_index(self.store, embedder)
        if len(index) == 0:
            return []
        vec = embedder.embed([query])[0]
        return index.search(
            vec, k, projects=projects, kinds=kinds, since_ms=since_ms, until_ms=until_ms
        )
