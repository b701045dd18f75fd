"""The pipeline's embedding step: vectors for new events and for changed node/grip/bookmark docs.

Run by the worker after segments are built (so after their FTS rows are written) and after
rollups. Incremental and idempotent:

- **Events** are immutable, so a checkpoint per embedder (``embed:<name>`` → last ``seq``
  embedded) says where to resume; a new embedder starts at 0 and back-fills everything.
- **Docs** (the search documents of nodes, grips and bookmarks) change in place when a node gets a
  new version, so the store records what each doc's vector was computed from (SQLite: the text in
  ``doc_vectors``; PostgreSQL: its MD5); a doc whose text differs (or that has none) is re-embedded,
  and vectors of docs that no longer exist are deleted.
- A store whose vectors came from another version of the same embedder (``stale_embedder``) is
  re-embedded from scratch (``rebuild``), as ``memtoc rebuild --vectors`` does on demand.

Each batch's vectors, doc records and checkpoint commit in one transaction, so a crash loses at
most the batch in flight. Vectors are computed from the original text (``original_text`` strips the
identifier forms the FTS index adds), truncated to ``max_chars`` (static models average token
embeddings; the head of a long tool output carries its topic). After writing, the meta key
``vectors_gen:<name>`` is bumped so searchers know to reload their in-memory index.

One step for both stores, typed against ``VectorStore`` (``store/capabilities.py``): the SQL of
vector upkeep is each store's (``store/sqlite/vectors.py``, ``store/postgres/vectors.py``). A store
that keeps an approximate index of its own (``AnnIndexed``: PostgreSQL's IVFFlat) has it built, or
rebuilt when outgrown, after a run that changed something, once the embedder has ``ann_min_rows``
vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.model import JsonValue
from memtoc.store.capabilities import AnnIndexed, VectorKey, VectorStore, embed_job, generation_key
from memtoc.text.embed import Embedder
from memtoc.text.fts_text import original_text

DEFAULT_BATCH = 2_048
DEFAULT_MAX_CHARS = 2_000


@dataclass(slots=True)
class EmbedReport:
    """What one embedding run did."""

    events: int = 0
    docs: int = 0
    removed: int = 0
    rebuilt: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.events or self.docs or self.removed)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "events": self.events,
            "docs": self.docs,
            "removed": self.removed,
            "rebuilt": self.rebuilt,
        }


class EmbedStep:
    """Keeps one embedder's vectors in step with the store's events and docs."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        batch: int = DEFAULT_BATCH,
        max_chars: int = DEFAULT_MAX_CHARS,
        ann_min_rows: int | None = None,
    ) -> None:
        """``ann_min_rows``: vectors before an ``AnnIndexed`` store builds its index (None: the
        store's setting)."""
        self.store = store
        self.embedder = embedder
        self.batch = batch
        self.max_chars = max_chars
        self.ann_min_rows = ann_min_rows
        self._job = embed_job(embedder.name)

    def __call__(self) -> EmbedReport:
        return self.run()

    def run(self) -> EmbedReport:
        """Embed whatever is new or changed since the last run."""
        if self.store.stale_embedder(self.embedder):
            return self.rebuild()
        report = EmbedReport()
        self._events(report)
        self._docs(report)
        if report.changed:
            self._bump()
            self._index()
        return report

    def rebuild(self) -> EmbedReport:
        """Drop this embedder's vectors and embed everything again."""
        self.store.reset_vectors(self.embedder.name)
        report = EmbedReport(rebuilt=True)
        self._events(report)
        self._docs(report)
        self._bump()
        self._index()
        return report

    # -- steps ------------------------------------------------------------------------------------
    def _texts(self, texts: list[str]) -> list[str]:
        return [t[: self.max_chars] for t in texts]

    def _events(self, report: EmbedReport) -> None:
        last = self.store.get_checkpoint(self._job)
        after = int(last) if isinstance(last, int) else 0
        while rows := self.store.events_after(after, self.batch):
            matrix = self.embedder.embed(self._texts([r[3] for r in rows]))
            keys = [VectorKey("event", r[2], r[1]) for r in rows]
            after = rows[-1][0]
            with self.store.transaction():
                self.store.put_item_vectors(self.embedder, keys, matrix)
                self.store.set_checkpoint(self._job, after)
            report.events += len(rows)

    def _docs(self, report: EmbedReport) -> None:
        name = self.embedder.name
        while rows := self.store.docs_to_embed(name, self.batch):
            matrix = self.embedder.embed(self._texts([original_text(r[3]) for r in rows]))
            keys = [VectorKey(r[0], r[1], r[2]) for r in rows]
            self.store.put_item_vectors(self.embedder, keys, matrix, [r[4] for r in rows])
            report.docs += len(rows)
        report.removed += self.store.drop_orphan_doc_vectors(name)

    def _bump(self) -> None:
        key = generation_key(self.embedder.name)
        current = self.store.get_meta(key)
        self.store.set_meta(key, str(int(current or 0) + 1))

    def _index(self) -> None:
        """Build (or, outgrown, rebuild) the store's approximate index when it keeps one."""
        if isinstance(self.store, AnnIndexed):
            self.store.ensure_vector_index(
                self.embedder.name, int(self.embedder.dim), min_rows=self.ann_min_rows
            )
