"""An embedder that fails at run time degrades search to BM25-only; processing goes on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memtoc.errors import EmbedderError
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.text.embed import HashEmbedder


class FailingEmbedder(HashEmbedder):
    """Loads fine, then fails like a remote embedder whose server went away."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderError("embedding server at 127.0.0.1:9 refused the connection")


def test_failing_embedder_degrades_search_and_processing_completes(store: SqliteStore) -> None:
    memory = Memory(store, semantic=SemanticIndex(store, embedder=FailingEmbedder()))
    report = memory.ingest_records(
        [
            {
                "session_id": "s",
                "role": "user",
                "text": f"rotate the jwt signing key {i}",
                "timestamp": 1_705_572_000_000 + i * 60_000,
            }
            for i in range(5)
        ],
        project="p",
    )
    assert report.ingested == 5
    processed = memory.process()
    assert processed.events == 5 and not processed.failed_entries
    result = memory.search("jwt signing key", project="p")
    assert result.items, "BM25 still answers"
    assert result.degraded is not None and "failed while embedding" in result.degraded
    assert "refused" in result.degraded
