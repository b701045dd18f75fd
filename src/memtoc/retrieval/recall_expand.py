"""Query expansion for recall: words near the question's own, from the embedder's vocabulary.

A question and the turn that answers it often share no word: "What martial arts has John done?"
against "I'm off to do some taekwondo!", "What European countries has Maria been to?" against "this
pic in Spain". A whole-turn vector dilutes the one word that matters among twenty others, but a
single word's vector is sharp: the static model's embedding table puts "taekwondo" next to
"martial" and "spain" next to "european". So recall embeds the question's *content words* (plain
lower-case words of 3+ letters, stopwords out — ``text.keyphrases.STOPWORDS``; names, numbers and
code identifiers are never expanded) and takes, for each, the ``per_word`` nearest vocabulary
words with cosine ≥ ``min_cosine`` that are not the word itself in another form (same first four
letters) nor already in the question. The ranking searches them by BM25 as one more list
(``recall_rank``): a turn holding "taekwondo" is found however long it is.

The vocabulary is the embedder's own (``VocabularyEmbedder``: the static model's whole-word
tokens, about 21,000 for the MiniLM distillation, read from its embedding table — nothing is
encoded). Embedders without one (ONNX, remote APIs) get no expansion; recall says so in its stages
(``expand`` is then absent), it is not a degraded mode. Words that do not occur in the store cost
one FTS lookup and match nothing.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from itertools import zip_longest
from typing import Protocol, runtime_checkable

import numpy as np

from memtoc.text.embed import Embedder, FloatMatrix
from memtoc.text.keyphrases import STOPWORDS

_WORD = re.compile(r"(?<![\w'-])[a-z]{3,}(?![\w'-])")
"""A plain lower-case word as written (capitalised names and code identifiers do not match)."""
MAX_WORDS = 12
"""Content words expanded per question (the first ones)."""


@runtime_checkable
class VocabularyEmbedder(Protocol):
    """The ability to list the model's words with their vectors (``StaticEmbedder`` has it)."""

    def vocabulary(self) -> tuple[tuple[str, ...], FloatMatrix]: ...


@dataclass(frozen=True, slots=True)
class ExpandConfig:
    per_word: int = 5
    min_cosine: float = 0.45
    max_terms: int = 30
    """Expansion terms searched in all (each word's nearest first, then its second, …): the
    BM25 search costs more with every term."""


class _Vocabulary:
    """An embedder's expandable words and vectors, and the expansions found so far per word
    (a word's neighbours do not depend on the question, and a product with the whole vocabulary
    costs about a millisecond per word)."""

    MEMO_MAX = 50_000

    def __init__(self, words: tuple[str, ...], matrix: FloatMatrix) -> None:
        self.words = words
        self.matrix = matrix
        self.memo: dict[tuple[str, ExpandConfig], tuple[str, ...]] = {}

    def nearest(self, embedder: Embedder, words: list[str], cfg: ExpandConfig) -> None:
        """Compute and memoise the expansions of ``words``."""
        if len(self.memo) + len(words) > self.MEMO_MAX:
            self.memo.clear()
        vectors = embedder.embed(words)
        take = min(cfg.per_word + 4, len(self.words))  # a few more: some are forms of the word
        for col, word in enumerate(words):
            # numpy's single-threaded einsum, one word at a time: on 2 busy cores BLAS threads
            # wait on each other (a (vocabulary x 3 words) product 4.9 ms CPU; BLAS matrix-vector
            # 1-10 ms a word, erratic; einsum 0.6-1.3 ms a word)
            column = np.einsum("ij,j->i", self.matrix, vectors[col])
            best = np.argpartition(column, -take)[-take:]
            found: list[str] = []
            for i in best[np.argsort(-column[best])]:
                if column[i] < cfg.min_cosine or len(found) >= cfg.per_word:
                    break
                if not _same_word(self.words[i], word):
                    found.append(self.words[i])
            self.memo[(word, cfg)] = tuple(found)


_CACHE: weakref.WeakKeyDictionary[object, _Vocabulary] = weakref.WeakKeyDictionary()


def _vocabulary(embedder: VocabularyEmbedder) -> _Vocabulary:
    vocab = _CACHE.get(embedder)
    if vocab is None:
        words, matrix = embedder.vocabulary()
        keep = [i for i, w in enumerate(words) if w not in STOPWORDS]
        vocab = _CACHE[embedder] = _Vocabulary(
            tuple(words[i] for i in keep), np.ascontiguousarray(matrix[keep])
        )
    return vocab


def load_vocabulary(embedder: Embedder) -> None:
    """Load the embedder's vocabulary now (a query would on first use), if it has one."""
    if isinstance(embedder, VocabularyEmbedder):
        _vocabulary(embedder)


def content_words(query: str) -> list[str]:
    """The question's words worth expanding: plain lower-case words, stopwords out, in order."""
    found = [w for w in _WORD.findall(query) if w not in STOPWORDS]
    return list(dict.fromkeys(found))[:MAX_WORDS]


def _same_word(a: str, b: str) -> bool:
    """Two forms of one word, roughly ("paint", "painting", "painted"): the stemmer sees those."""
    return a[:4] == b[:4]


def expansion_terms(
    query: str, embedder: Embedder | None, config: ExpandConfig | None = None
) -> list[str]:
    """Vocabulary words near the question's content words (module docstring); ``[]`` when the
    embedder has no vocabulary or the question no content word."""
    cfg = config or ExpandConfig()
    if not isinstance(embedder, VocabularyEmbedder):
        return []
    words = content_words(query)
    if not words:
        return []
    vocab = _vocabulary(embedder)
    if not vocab.words:
        return []
    missing = [w for w in words if (w, cfg) not in vocab.memo]
    if missing:
        vocab.nearest(embedder, missing, cfg)
    in_query = set(_WORD.findall(query.lower()))
    per_word = [[t for t in vocab.memo.get((w, cfg), ()) if t not in in_query] for w in words]
    rounds = zip_longest(*per_word)  # every word's nearest, then every word's second, …
    out = [t for row in rounds for t in row if t is not None]
    return list(dict.fromkeys(out))[: cfg.max_terms]
