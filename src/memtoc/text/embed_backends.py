"""Local embedding backends: model2vec static models and ONNX sentence-transformers.

Both take a local folder or a Hugging Face hub name. Hub names go through
``huggingface_hub.snapshot_download`` (only if that package is installed; ``HF_HUB_OFFLINE=1``
makes an offline machine fail in well under a second). The ``version`` of either embedder is a
hash of the model folder's files, so replacing the weights under the same name is detected.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memtoc.errors import EmbedderError
from memtoc.text.embed import FloatMatrix, default_model_hint, model_label, normalize_rows

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_CHUNK = 1 << 20


def resolve_model_dir(model: str, *, allow_patterns: list[str] | None = None) -> tuple[Path, bool]:
    """``(folder, is_local)`` for a local folder or a hub name; ``EmbedderError`` otherwise."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve(), True
    if path.exists():
        raise EmbedderError(f"embedding model {model!r} is a file; expected a model folder")
    if not _HUB_ID.fullmatch(model):
        raise EmbedderError(
            f"embedding model {model!r} is neither an existing folder nor a hub name "
            f"(owner/name). {default_model_hint()}"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise EmbedderError(
            f"cannot fetch {model!r}: loading by hub name needs the huggingface_hub package "
            f"(pip install huggingface_hub). {default_model_hint()}"
        ) from None
    try:
        local = snapshot_download(repo_id=model, allow_patterns=allow_patterns, etag_timeout=10)
    except Exception as exc:  # network, offline mode, missing repo: all mean "cannot load"
        raise EmbedderError(
            f"cannot fetch {model!r} from the Hugging Face hub ({type(exc).__name__}: "
            f"{str(exc)[:200]}). {default_model_hint()}"
        ) from exc
    return Path(str(local)), False


def hash_model_dir(folder: Path) -> str:
    """``sha256:<16 hex>`` over the relative paths and contents of the folder's files (hidden files
    and READMEs skipped), in a stable order."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        and not p.name.lower().startswith("readme")
    )
    if not files:
        raise EmbedderError(f"model folder {folder} is empty")
    for file in files:
        digest.update(file.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        with file.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()[:16]


class StaticEmbedder:
    """A model2vec static model: token embeddings averaged, no neural network at query time.

    About 17,000 sentences/s on 2 cores for the 256-d MiniLM distillation, fast enough never to
    hold up ingest. Lexical-leaning: a good default, not a replacement for a transformer.
    """

    def __init__(self, model: str, *, batch_size: int = 1024) -> None:
        try:
            from model2vec import StaticModel
        except ImportError:
            raise EmbedderError(
                "the static embedder needs model2vec (pip install 'memtoc[embed]')"
            ) from None
        folder, local = resolve_model_dir(model)
        try:
            self._model = StaticModel.from_pretrained(str(folder))
        except Exception as exc:
            raise EmbedderError(
                f"cannot load model2vec model from {folder} ({type(exc).__name__}: {exc})"
            ) from exc
        self.name = "static:" + model_label(model, local=local)
        self.dim = int(self._model.dim)
        self.version = hash_model_dir(folder)
        self.path = folder
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            raw = self._model.encode(
                list(texts), batch_size=self._batch_size, use_multiprocessing=False
            )
        except Exception as exc:
            raise EmbedderError(
                f"{self.name}: embedding failed ({type(exc).__name__}: {exc})"
            ) from exc
        return normalize_rows(raw)

    def vocabulary(self) -> tuple[tuple[str, ...], FloatMatrix]:
        """The model's whole-word vocabulary (lower-case alphabetic tokens of 3+ letters) and
        their unit vectors, straight from its embedding table (no encoding; recall's query
        expansion, ``retrieval.recall_expand``, looks for words near the question's)."""
        tokens = self._model.tokens
        rows = [i for i, t in enumerate(tokens) if len(t) >= 3 and t.isascii() and t.isalpha()]
        words = tuple(tokens[i].lower() for i in rows)
        return words, normalize_rows(np.asarray(self._model.embedding)[rows])


_ONNX_PATTERNS = ["*.json", "model.onnx", "onnx/model.onnx", "1_Pooling/*", "vocab.txt"]


class OnnxEmbedder:
    """A sentence-transformers model exported to ONNX, run on the CPU with onnxruntime.

    The folder holds ``model.onnx`` (or ``onnx/model.onnx``, as on the hub) and ``tokenizer.json``.
    Texts are tokenised (truncated at ``max_length`` word pieces), batched by length to keep
    padding small, run through the model, mean-pooled over the attention mask and L2-normalised,
    which is what sentence-transformers does for MiniLM-style models. About 140 sentences/s for
    MiniLM-L6 on 2 cores.
    """

    def __init__(
        self, model: str, *, max_length: int = 256, batch_size: int = 32, threads: int = 2
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise EmbedderError(
                "the onnx embedder needs onnxruntime and tokenizers (pip install 'memtoc[embed]')"
            ) from None
        folder, local = resolve_model_dir(model, allow_patterns=_ONNX_PATTERNS)
        onnx_file = next(
            (p for p in (folder / "model.onnx", folder / "onnx" / "model.onnx") if p.is_file()),
            None,
        )
        if onnx_file is None or not (folder / "tokenizer.json").is_file():
            raise EmbedderError(
                f"{folder} is not an ONNX sentence-transformers folder: it needs model.onnx "
                f"(or onnx/model.onnx) and tokenizer.json"
            )
        try:
            self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            self._session = ort.InferenceSession(
                str(onnx_file), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbedderError(
                f"cannot load ONNX model from {folder} ({type(exc).__name__}: {exc})"
            ) from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=_model_max_length(folder, max_length))
        self._inputs = [i.name for i in self._session.get_inputs()]
        output_shape = self._session.get_outputs()[0].shape
        width = output_shape[-1]
        if not isinstance(width, int):
            width = int(self._run([[0, 0]], [[1, 1]], [[0, 0]]).shape[-1])
        self.name = "onnx:" + model_label(model, local=local)
        self.dim = int(width)
        self.version = hash_model_dir(folder)
        self.path = folder
        self._batch_size = batch_size

    def _run(self, ids: Any, mask: Any, types: Any) -> FloatMatrix:
        arrays = {
            "input_ids": np.asarray(ids, dtype=np.int64),
            "attention_mask": np.asarray(mask, dtype=np.int64),
            "token_type_ids": np.asarray(types, dtype=np.int64),
        }
        feed = {name: arrays[name] for name in self._inputs if name in arrays}
        out = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if out.ndim == 3:  # token embeddings: mean-pool over real tokens
            weights = arrays["attention_mask"].astype(np.float32)[:, :, None]
            summed = (out * weights).sum(axis=1)
            out = summed / np.maximum(weights.sum(axis=1), 1e-9)
        return out

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return result
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            for start in range(0, len(order), self._batch_size):
                rows = order[start : start + self._batch_size]
                width = max(len(encodings[i].ids) for i in rows)
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=np.int64)
                types = np.zeros((len(rows), width), dtype=np.int64)
                for r, i in enumerate(rows):
                    enc = encodings[i]
                    n = len(enc.ids)
                    ids[r, :n] = enc.ids
                    mask[r, :n] = enc.attention_mask
                    types[r, :n] = enc.type_ids
                result[rows] = self._run(ids, mask, types)
        except Exception as exc:
            raise EmbedderError(
                f"{self.name}: embedding failed ({type(exc).__name__}: {exc})"
            ) from exc
        return normalize_rows(result)


def _model_max_length(folder: Path, requested: int) -> int:
    """``requested`` capped at the model's own ``max_seq_length`` when its config states one."""
    config = folder / "sentence_bert_config.json"
    try:
        limit = int(json.loads(config.read_text("utf-8"))["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return requested
    return min(requested, limit) if limit > 0 else requested
