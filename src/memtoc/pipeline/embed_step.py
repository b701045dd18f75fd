"""The pipeline's embedding step: vectors for new events and for changed node/grip/bookmark docs.

Run by the worker after segments are built (so after their FTS rows are written) and after
rollups. Incremental and idempotent:

- **Events** are immutable, so a checkpoint per embedder (``embed:<name>`` → last ``seq``
  embedded) says where to resume; a new embedder starts at 0 and back-fills everything.
- **Docs** (the search documents of nodes, grips and bookmarks) change in place when a node gets a
  new version, so ``doc_vectors`` records the text each doc's vector was computed from; a doc whose
  text differs (or that has none) is re-embedded, and vectors of docs that no longer exist are
  deleted.
- A store whose vectors came from another version of the same embedder (``stale_embedder``) is
  re-embedded from scratch (``rebuild``), as ``memtoc rebuild --vectors`` does on demand.

Each batch's vectors, doc records and checkpoint commit in one transaction, so a crash loses at
most the batch in flight. Vectors are computed from the original text (``original_text`` strips the
identifier forms the FTS index adds), truncated to ``max_chars`` (static models average token
embeddings; the head of a long tool output carries its topic). After writing, the meta key
``vectors_gen:<name>`` is bumped so searchers know to reload their in-memory index.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.model import JsonValue
from memtoc.store.capabilities import generation_key
from memtoc.store.sqlite import SqliteStore
from memtoc.store.sqlite.vectors import (
    VectorKey,
    clear_vectors,
    delete_vectors,
    put_vectors,
    stale_embedder,
)
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
        store: SqliteStore,
        embedder: Embedder,
        *,
        batch: int = DEFAULT_BATCH,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.batch = batch
        self.max_chars = max_chars
        self._job = f"embed:{embedder.name}"

    def __call__(self) -> EmbedReport:
        return self.run()

    def run(self) -> EmbedReport:
        """Embed whatever is new or changed since the last run."""
        if stale_embedder(self.store, self.embedder):
            return self.rebuild()
        report = EmbedReport()
        self._events(report)
        self._docs(report)
        if report.changed:
            self._bump()
        return report

    def rebuild(self) -> EmbedReport:
        """Drop this embedder's vectors and embed everything again."""
        name = self.embedder.name
        with self.store.transaction():
            clear_vectors(self.store, name)
            self.store._exec("DELETE FROM doc_vectors WHERE embedder = ?", (name,))
            self.store._exec("DELETE FROM checkpoints WHERE job = ?", (self._job,))
        report = EmbedReport(rebuilt=True)
        self._events(report)
        self._docs(report)
        self._bump()
        return report

    # -- steps ------------------------------------------------------------------------------------
    def _texts(self, texts: list[str]) -> list[str]:
        return [t[: self.max_chars] for t in texts]

    def _events(self, report: EmbedReport) -> None:
        last = self.store.get_checkpoint(self._job)
        after = int(last) if isinstance(last, int) else 0
        while True:
            rows = self.store._query(
                "SELECT seq, event_id, project, text FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, self.batch),
            )
            if not rows:
                return
            matrix = self.embedder.embed(self._texts([r[3] for r in rows]))
            keys = [VectorKey("event", r[2], r[1]) for r in rows]
            after = int(rows[-1][0])
            with self.store.transaction():
                put_vectors(self.store, self.embedder, keys, matrix)
                self.store.set_checkpoint(self._job, after)
            report.events += len(rows)

    def _docs(self, report: EmbedReport) -> None:
        name = self.embedder.name
        while True:
            rows = self.store._query(
                "SELECT d.kind, d.project, d.doc_id, d.text FROM docs d LEFT JOIN doc_vectors v "
                "ON v.kind = d.kind AND v.project = d.project AND v.doc_id = d.doc_id "
                "AND v.embedder = ? WHERE v.text IS NULL OR v.text != d.text "
                "ORDER BY d.doc_seq LIMIT ?",
                (name, self.batch),
            )
            if not rows:
                break
            matrix = self.embedder.embed(self._texts([original_text(r[3]) for r in rows]))
            keys = [VectorKey(r[0], r[1], r[2]) for r in rows]
            with self.store.transaction():
                put_vectors(self.store, self.embedder, keys, matrix)
                self.store.connection.executemany(
                    "INSERT OR REPLACE INTO doc_vectors(kind, project, doc_id, embedder, text) "
                    "VALUES (?,?,?,?,?)",
                    [(r[0], r[1], r[2], name, r[3]) for r in rows],
                )
            report.docs += len(rows)
        gone = self.store._query(
            "SELECT v.kind, v.project, v.doc_id FROM doc_vectors v WHERE v.embedder = ? AND "
            "NOT EXISTS (SELECT 1 FROM docs d WHERE d.kind = v.kind AND d.project = v.project "
            "AND d.doc_id = v.doc_id)",
            (name,),
        )
        if gone:
            keys = [VectorKey(r[0], r[1], r[2]) for r in gone]
            with self.store.transaction():
                delete_vectors(self.store, keys, embedder=name)
                self.store.connection.executemany(
                    "DELETE FROM doc_vectors WHERE kind = ? AND project = ? AND doc_id = ? "
                    "AND embedder = ?",
                    [(*k, name) for k in keys],
                )
            report.removed += len(keys)

    def _bump(self) -> None:
        key = generation_key(self.embedder.name)
        current = self.store.get_meta(key)
        self.store.set_meta(key, str(int(current or 0) + 1))
