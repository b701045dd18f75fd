"""The Porter stem FTS5's ``porter`` tokenizer gives a token, for code that must match text the
way the full-text index does: the team store's lexemes (``store/postgres/lexemes.py``) and
recall's choice of an event's passages (``retrieval/recall_passages.py``), where a question's
"promotional" has to find the plan titled "Promotion" that search found by the same stem.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import snowballstemmer

_PORTER = snowballstemmer.stemmer("porter")
PORTER_MIN, PORTER_MAX = 3, 64
"""FTS5's ``porter`` stems tokens of 3 to 64 bytes; shorter and longer ones pass unchanged."""


@lru_cache(maxsize=200_000)
def stem(token: str) -> str:
    """The lexeme FTS5's ``porter`` tokenizer makes of one lowercased token."""
    if not PORTER_MIN <= len(token.encode("utf-8")) <= PORTER_MAX:
        return token
    return str(_PORTER.stemWord(token))


def stem_terms(terms: Iterable[str]) -> set[str]:
    """Key terms (``keyphrases.key_terms``) as the index would match them: each word by its
    Porter stem, an identifier (``claude.md``, ``run_impact``) whole."""
    return {stem(t) if t.isalpha() else t for t in terms}
