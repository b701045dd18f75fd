"""Embedders: turn texts into L2-normalised float32 vectors, behind one narrow protocol.

Backends (each ``name`` is ``<kind>:<model>``; ``version`` identifies the exact weights):

- ``static``: a model2vec static model (``StaticEmbedder``), the default; about 17k sentences/s
  on 2 cores, so it never holds up ingest. Version: hash of the model files.
- ``onnx``: a sentence-transformers model exported to ONNX (``OnnxEmbedder``). Version: hash of
  the model files.
- ``openai``: an OpenAI-compatible ``/embeddings`` API (``OpenAIEmbedder``). Version: model id.
- ``ollama``: Ollama's ``/api/embed`` (``OllamaEmbedder``). Version: model id.
- ``hash``: ``HashEmbedder``, a deterministic fake for tests only, chosen explicitly or not at all.
- ``none``: no vectors; search runs BM25-only.

Local models are accepted as a folder path or, for users with a network, a Hugging Face hub name
(resolved through ``huggingface_hub`` when it is installed; ``HF_HUB_OFFLINE=1`` is respected, so
an offline machine fails at once instead of hanging). Every failure to load or run is an
``EmbedderError`` that says what to do; the caller then runs search BM25-only and reports that it
is degraded. Nothing here falls back silently to another embedder.

The store records the embedder's name with every vector and its dimension and version in ``meta``
(see ``memtoc.store.sqlite.vectors``), so a changed model is detected and ``memtoc rebuild
--vectors`` re-embeds.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memtoc.errors import EmbedderError

FloatMatrix = npt.NDArray[np.float32]

KINDS = ("static", "onnx", "openai", "ollama", "hash", "none")
DEFAULT_STATIC_MODEL = "minishlab/potion-base-8M"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_OLLAMA_MODEL = "nomic-embed-text"
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


@runtime_checkable
class Embedder(Protocol):
    """Anything that embeds texts into unit-length float32 rows.

    ``name`` is what vectors are stored under (``static:minilm-static-256``); ``dim`` is the row
    length; ``version`` changes whenever the same name would produce different vectors (a hash of
    the model files, or the remote model id).
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def version(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Shape ``(len(texts), dim)``, float32, each row of L2 norm 1 (or all zeros for a text
        with nothing to embed). An empty input gives shape ``(0, dim)``."""
        ...


def normalize_rows(matrix: npt.ArrayLike) -> FloatMatrix:
    """``matrix`` as C-contiguous float32 with unit-length rows; all-zero rows stay zero."""
    out = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if out.ndim != 2:
        raise EmbedderError(f"expected a 2-d embedding matrix, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def model_label(model: str, *, local: bool) -> str:
    """The model part of an embedder's ``name``: a hub id as given, a local folder by its last
    path component (so moving the folder does not orphan its vectors)."""
    stripped = model.rstrip("/\\")
    return re.split(r"[/\\]", stripped)[-1] if local else stripped


def default_model_hint() -> str:
    """Advice for error messages when no embedding model can be loaded."""
    return (
        "Offline machines cannot download models by hub name: set MEMTOC_EMBED_MODEL to a local "
        "model folder (a model2vec folder for MEMTOC_EMBEDDER=static, or a folder with model.onnx "
        "and tokenizer.json for MEMTOC_EMBEDDER=onnx), or set MEMTOC_EMBEDDER=none to run search "
        "BM25-only."
    )


_TOKEN = re.compile(r"[a-z0-9_]+")


class HashEmbedder:
    """A deterministic fake embedder for tests of other layers — not a semantic model.

    Each lowercase word token (and each token bigram, at half weight) is hashed (blake2b) to a
    dimension and a sign; a text's vector is the normalised sum. Texts that share words get similar
    vectors, so ranking tests behave sensibly, and no model files or network are needed. It is
    shipped so users can test their own integrations; memtoc never substitutes it for a real
    embedder that failed to load.
    """

    version = "hash-v1"

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise EmbedderError(f"hash embedder dimension must be at least 2, got {dim}")
        self.dim = dim
        self.name = f"hash:{dim}"

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _TOKEN.findall(text.lower())
            for token in tokens:
                slot, sign = self._slot(token)
                out[row, slot] += sign
            for left, right in itertools.pairwise(tokens):
                slot, sign = self._slot(f"{left} {right}")
                out[row, slot] += 0.5 * sign
        return normalize_rows(out)


def load_embedder(
    kind: str,
    model: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Embedder | None:
    """Build the embedder a setting names; ``None`` when ``kind`` is ``"none"`` (BM25-only).

    ``model`` is a local folder or a hub name (``static``, ``onnx``) or the remote model id
    (``openai``, ``ollama``); ``None`` picks the kind's default. Remote embedders are probed once
    here so an unreachable server fails now, with its URL in the message, and ``dim`` is known.
    Raises ``EmbedderError`` with advice when the embedder cannot be loaded.
    """
    from memtoc.text.embed_backends import OnnxEmbedder, StaticEmbedder
    from memtoc.text.embed_remote import OllamaEmbedder, OpenAIEmbedder

    kind = kind.strip().lower()
    embedder: Embedder
    if kind == "none":
        return None
    if kind == "static":
        embedder = StaticEmbedder(model or DEFAULT_STATIC_MODEL)
    elif kind == "onnx":
        if not model:
            raise EmbedderError(
                "the onnx embedder needs a model folder or hub name. " + default_model_hint()
            )
        embedder = OnnxEmbedder(model)
    elif kind == "openai":
        embedder = OpenAIEmbedder(
            base_url or DEFAULT_OPENAI_URL, model or DEFAULT_OPENAI_MODEL, api_key=api_key
        )
        _ = embedder.dim  # probe now
    elif kind == "ollama":
        embedder = OllamaEmbedder(base_url or DEFAULT_OLLAMA_URL, model or DEFAULT_OLLAMA_MODEL)
        _ = embedder.dim
    elif kind == "hash":
        embedder = HashEmbedder(int(model) if model and model.isdigit() else 64)
    else:
        raise EmbedderError(f"unknown embedder kind {kind!r} (expected one of: {', '.join(KINDS)})")
    return embedder
