"""The semantic side of search: the configured embedder, loaded lazily, and its vectors in memory.

``SemanticIndex`` is what the ``Memory`` facade holds. It loads the embedder on first use (so
commands that never search or process pay nothing for the model), and remembers why it could not
(``degraded``: ``"no embedder: <reason>"``), which every search result then reports — search runs
BM25-only, never with a silent substitute.

Before vectors are used, ``state()`` checks that they fit the configured model and cover the store
(``VectorState``): vectors computed by another version of the model (``stale``) or none at all by
this embedder while events are filed (``missing``) are not used — search runs BM25-only and
``degraded`` says why and what to run; filed events not embedded yet (``behind``) leave vectors in
use and ``partial`` says how many are missing. Every change of state is logged once. The state is
read from the store (three indexed lookups) at most every ``STATE_TTL_S`` seconds.

A store that searches its vectors itself (``NearestVectors``: PostgreSQL's pgvector) is asked;
from any other (``LoadableVectors``: SQLite) they are loaded into a matrix on the first search,
searched exactly (``VectorIndex``) and reloaded when the embedding step has written since
(``vectors_gen:<name>`` in ``meta``). ``EmbedStep`` keeps them current on both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memtoc.errors import EmbedderError, StoreError
from memtoc.model import JsonValue
from memtoc.store.capabilities import LoadableVectors, NearestVectors, VectorProgress, VectorStore

if TYPE_CHECKING:  # numpy-backed modules load on first use: plain commands stay quick to start
    from memtoc.pipeline.embed_step import EmbedStep
    from memtoc.retrieval.vectors import VectorIndex
    from memtoc.store.capabilities import VectorKey
    from memtoc.text.embed import Embedder

log = logging.getLogger("memtoc")

STATE_TTL_S = 2.0
"""How long a read ``VectorState`` is trusted (another process may embed meanwhile)."""
REBUILD_HINT = "`memtoc rebuild --vectors` (or `memtoc process`) computes them"


@dataclass(frozen=True, slots=True)
class VectorState:
    """Whether the configured embedder's vectors can be used, and why not (status, search)."""

    embedder: str | None
    state: str
    """``current``, ``behind`` (usable, some filed events not embedded yet), ``stale`` (another
    model version), ``missing`` (none by this embedder), or ``none`` (no embedder)."""
    detail: str | None
    checkpoint: int = 0
    filed: int = 0
    behind: int = 0

    @property
    def usable(self) -> bool:
        return self.state in ("current", "behind")

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "embedder": self.embedder,
            "state": self.state,
            "usable": self.usable,
            "detail": self.detail,
            "embedded_through_seq": self.checkpoint,
            "filed_through_seq": self.filed,
            "filed_not_embedded": self.behind,
        }


def classify(name: str, dim: int, version: str, p: VectorProgress) -> VectorState:
    """The ``VectorState`` of embedder ``name`` (model ``dim``/``version``) given its progress."""
    seen = (p.checkpoint, p.filed_max, p.behind)
    if p.recorded is not None and p.recorded != (dim, version):
        was = f"version {p.recorded[1]}, {p.recorded[0]}-d"
        detail = (
            f"vectors stale: the stored vectors of {name} came from another model ({was}; "
            f"configured: version {version}, {dim}-d), so search runs BM25-only until "
            f"{REBUILD_HINT}"
        )
        return VectorState(name, "stale", detail, *seen)
    if p.filed_max and not p.checkpoint:
        source = f" (the store's vectors are from {', '.join(p.others)})" if p.others else ""
        detail = (
            f"vectors missing: no event is embedded by {name} yet{source}, so search runs "
            f"BM25-only until {REBUILD_HINT}"
        )
        return VectorState(name, "missing", detail, *seen)
    if p.behind:
        more = "+" if p.behind >= 100_000 else ""
        detail = (
            f"vectors behind: {p.behind:,}{more} filed events are not embedded by {name} yet "
            f"(found by BM25 only until {REBUILD_HINT})"
        )
        return VectorState(name, "behind", detail, *seen)
    return VectorState(name, "current", None, *seen)


class SemanticIndex:
    """An embedder (or the reason there is none) and an in-memory index of its vectors."""

    def __init__(
        self,
        store: VectorStore,
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
        self._state: tuple[float, VectorState] | None = None
        self._logged: str | None = None
        self._warmed = False

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
        self._state = None

    def invalidate(self) -> None:
        """Forget the cached ``state()`` (after this process embedded or rebuilt vectors)."""
        self._state = None

    def state(self) -> VectorState:
        """Whether the configured embedder's vectors fit the model and cover the store."""
        embedder = self.embedder
        if embedder is None:
            return VectorState(None, "none", f"no embedder: {self._error or 'none configured'}")
        now = time.monotonic()
        if self._state is not None and now - self._state[0] <= STATE_TTL_S:
            return self._state[1]
        progress = self.store.vector_progress(embedder.name)
        found = classify(embedder.name, int(embedder.dim), embedder.version, progress)
        self._state = (now, found)
        if found.state != self._logged:
            if found.detail:
                log.warning("%s", found.detail)
            elif self._logged is not None:
                log.info("vectors of %s are current again", embedder.name)
            self._logged = found.state
        return found

    @property
    def degraded(self) -> str | None:
        """Why search must run BM25-only (``no embedder: …``, ``vectors stale: …``, ``vectors
        missing: …``), else ``None``."""
        found = self.state()
        return None if found.usable else found.detail

    @property
    def partial(self) -> str | None:
        """``vectors behind: …`` when vectors are used but some filed events have none yet."""
        found = self.state()
        return found.detail if found.state == "behind" else None

    def warm(self, *, vocabulary: bool = False) -> None:
        """Load now what a query would load on first use — the embedder (and one embedding, which
        initialises its tokenizer), the store's vectors and, for recall's query expansion, the
        embedder's vocabulary — so a query's time limit is spent on the query (``Memory.warm``).
        Cheap once loaded (the index is reloaded only when the embed step changed it)."""
        embedder = self.embedder
        if embedder is None:
            return
        if not self._warmed:
            embedder.embed(["warm up"])
            self._warmed = True
        if not isinstance(self.store, NearestVectors) and isinstance(self.store, LoadableVectors):
            self._current_index(self.store, embedder)
        if vocabulary:
            from memtoc.retrieval.recall_expand import load_vocabulary

            load_vocabulary(embedder)

    def embed_step(self) -> EmbedStep | None:
        """The pipeline step that keeps this embedder's vectors current (None without one)."""
        embedder = self.embedder
        if embedder is None:
            return None
        from memtoc.pipeline.embed_step import EmbedStep

        return EmbedStep(self.store, embedder)

    def _current_index(self, store: LoadableVectors, embedder: Embedder) -> VectorIndex[VectorKey]:
        from memtoc.retrieval.vectors import VectorIndex
        from memtoc.store.capabilities import generation_key

        generation = self.store.get_meta(generation_key(embedder.name))
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
        if isinstance(self.store, NearestVectors):
            return self.store.nearest(
                embedder.name,
                embedder.embed([query])[0],
                k,
                projects=projects,
                kinds=kinds,
                since_ms=since_ms,
                until_ms=until_ms,
            )
        if not isinstance(self.store, LoadableVectors):
            raise StoreError(
                f"{self.store.location}: its vectors can be neither searched nor loaded"
            )
        index = self._current_index(self.store, embedder)
        if len(index) == 0:
            return []
        vec = embedder.embed([query])[0]
        return index.search(
            vec, k, projects=projects, kinds=kinds, since_ms=since_ms, until_ms=until_ms
        )
