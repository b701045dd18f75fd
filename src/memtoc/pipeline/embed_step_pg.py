"""The embedding step on a PostgreSQL store: ``EmbedStep``'s contract with pgvector rows.

Same behaviour as ``embed_step.EmbedStep`` (incremental, idempotent, one transaction per batch):
events by a per-embedder checkpoint (``embed:<name>`` → last seq), docs by the MD5 of the text
their vector came from (``vectors.source_md5``), vectors of vanished docs deleted, a stale embedder
(``embedder:<name>`` in meta differs) re-embedded from scratch, ``vectors_gen:<name>`` bumped after
a change. Texts are the original text (``original_text``), truncated to ``max_chars``.

Once the embedder has ``ann_min_rows`` vectors, a run that changed something builds its IVFFlat
index (``PostgresStore.ensure_vector_index``, ``store/postgres/ann.py``: concurrently; rebuilt when
the rows have outgrown it; searches use it from then on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtoc.pipeline.embed_step import DEFAULT_BATCH, DEFAULT_MAX_CHARS, EmbedReport
from memtoc.store.capabilities import generation_key
from memtoc.store.sqlite.vectors import VectorKey
from memtoc.text.embed import Embedder
from memtoc.text.fts_text import original_text

if TYPE_CHECKING:
    from memtoc.store.postgres import PostgresStore


class PgEmbedStep:
    """Keeps one embedder's vectors current in a PostgreSQL store."""

    def __init__(
        self,
        store: PostgresStore,
        embedder: Embedder,
        *,
        batch: int = DEFAULT_BATCH,
        max_chars: int = DEFAULT_MAX_CHARS,
        ann_min_rows: int | None = None,
    ) -> None:
        from memtoc.store.postgres.ann import ANN_MIN_ROWS

        self.store = store
        self.embedder = embedder
        self.batch = batch
        self.max_chars = max_chars
        configured = ann_min_rows if ann_min_rows is not None else store.ann_min_rows
        self.ann_min_rows = ANN_MIN_ROWS if configured is None else configured
        self._job = f"embed:{embedder.name}"

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
        with self.store.transaction():
            self.store.clear_vectors(self.embedder.name)
            self.store._exec("DELETE FROM checkpoints WHERE job = %s", (self._job,))
        report = EmbedReport(rebuilt=True)
        self._events(report)
        self._docs(report)
        self._bump()
        self._index()
        return report

    def _index(self) -> None:
        """Build (or, outgrown, rebuild) the embedder's approximate index when it has enough vectors."""
        self.store.ensure_vector_index(
            self.embedder.name, int(self.embedder.dim), min_rows=self.ann_min_rows
        )

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
        while rows := self.store.docs_to_embed(self.embedder.name, self.batch):
            matrix = self.embedder.embed(self._texts([original_text(r[3]) for r in rows]))
            keys = [VectorKey(r[0], r[1], r[2]) for r in rows]
            self.store.put_item_vectors(self.embedder, keys, matrix, [r[4] for r in rows])
            report.docs += len(rows)
        report.removed += self.store.drop_orphan_doc_vectors(self.embedder.name)

    def _bump(self) -> None:
        key = generation_key(self.embedder.name)
        current = self.store.get_meta(key)
        self.store.set_meta(key, str(int(current or 0) + 1))
