"""SQLite FTS5's tokens as PostgreSQL lexemes: what the team store indexes and searches.

The SQLite store ranks with FTS5 (``porter unicode61 remove_diacritics 2 tokenchars '_'``,
``fts_text.FTS_TOKENIZE``). PostgreSQL's own parser and ``english`` configuration cut and weigh
text differently — stop words (``all``, ``above``, ``after``, ``now``…) never indexed or searched,
``refresh_token`` split at ``_``, ``auth.py`` and ``plan-first`` kept whole beside their parts,
Snowball's English stems — and its ``length(tsvector)`` counts distinct lexemes, not tokens. Over
context-evaluator's 174 questions the two stores agreed on the top 10 BM25 hits of 0 questions
(docs/benchmarks.md, "Team mode (PostgreSQL)").

So the team store does not parse: ``index_text`` cuts a text as FTS5's tokenizer does (lowercase,
diacritics removed, runs of letters, digits and ``_``), stems each token with the Porter algorithm
as FTS5's ``porter`` does (tokens shorter than 3 or longer than 64 bytes kept as they are), and
returns the ``tsvector`` literal (each lexeme with positions that encode its term frequency:
``tf_positions``) and the token count — the document length FTS5's ``bm25()`` normalises by. ``query_lexemes`` cuts a query's terms the same
way. PostgreSQL then only stores, indexes (GIN) and matches these lexemes.

Limits PostgreSQL puts on a ``tsvector`` (its ``to_tsvector`` applies the same): a lexeme of
2,048 bytes or more is left out, a term frequency counts up to 16,383, and one text's lexemes and
positions stop short of 1 MB (PostgreSQL refuses a bigger ``tsvector``; its
``to_tsvector`` failed on such a text) — a text past that is still found by its first lexemes and
still weighed by its full length.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from memtoc.text.fts_text import TermGroup
from memtoc.text.porter import stem

_TOKEN = re.compile(r"\w+")
MAX_LEXEME_BYTES = 2_047
MAX_POSITION = 16_383
MAX_POSITIONS = 256
MAX_TSVECTOR_BYTES = 1_000_000


def tokens(text: str) -> list[str]:
    """``text`` cut as FTS5's ``unicode61`` with ``remove_diacritics 2`` and ``tokenchars '_'``
    cuts it: lowercased, diacritics removed, maximal runs of letters, digits and ``_``."""
    low = text.lower()
    if not low.isascii():
        decomposed = unicodedata.normalize("NFD", low)
        if decomposed != low or not unicodedata.is_normalized("NFC", low):  # marks to drop
            low = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _TOKEN.findall(low)


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def index_text(text: str) -> tuple[str, int]:
    """``(tsvector literal, token count)`` of an indexed text (``fts_text.search_text`` of an
    event or a document): each lexeme with its term frequency (``tf_positions``), in the order
    of first use, within PostgreSQL's limits (module doc)."""
    found = tokens(text)
    counts: dict[str, int] = {}
    for token, n in Counter(found).items():
        lexeme = stem(token)
        counts[lexeme] = counts.get(lexeme, 0) + n
    parts: list[str] = []
    size = 0  # as PostgreSQL counts it: each lexeme 2-byte aligned, a count, 2 bytes a position
    for lexeme, tf in counts.items():
        length = len(lexeme.encode("utf-8"))
        cost = length + length % 2 + 2 + 2 * min(tf, MAX_POSITIONS)
        if length > MAX_LEXEME_BYTES or size + cost > MAX_TSVECTOR_BYTES:
            continue
        size += cost
        parts.append(_quoted(lexeme) + ":" + tf_positions(tf))
    return " ".join(parts), len(found)


_SPANS = [",".join(map(str, range(1, k + 1))) for k in range(MAX_POSITIONS + 1)]


def tf_positions(tf: int) -> str:
    """A term frequency as tsvector positions: ``1..tf`` up to 256 (the most a lexeme keeps);
    above, ``1..255`` and then ``tf`` itself (at most 16,383). Positions serve only to count —
    the store runs no phrase queries — so ``postgres/search`` reads a lexeme's frequency back
    as its number of positions, or its 256th position when it has 256 (``TF_SQL``), and a word
    repeated 1,000 times in a log weighs as it does in FTS5, not as 256."""
    if tf < MAX_POSITIONS:
        return _SPANS[tf]
    return _SPANS[MAX_POSITIONS - 1] + "," + str(min(tf, MAX_POSITION))


TF_SQL = (
    f"(CASE WHEN cardinality(u.positions) < {MAX_POSITIONS} THEN cardinality(u.positions) "
    f"ELSE u.positions[{MAX_POSITIONS}] END)"
)
"""The term frequency of an unnested tsvector entry ``u`` (``tf_positions``)."""


def index_rows(texts: Iterable[str]) -> tuple[list[str], list[int]]:
    """``index_text`` of each text: the literals and the token counts, as two lists (the
    ``unnest`` parameters of a batch insert)."""
    literals: list[str] = []
    lengths: list[int] = []
    for text in texts:
        literal, length = index_text(text)
        literals.append(literal)
        lengths.append(length)
    return literals, lengths


def query_lexemes(terms: Iterable[str]) -> list[tuple[str, int]]:
    """The distinct lexemes of a query's terms (``fts_text.build_match``), in order, each with
    how many of the terms hold it: FTS5 scores each term as a phrase of its own, so two terms
    with one stem (``socket``, ``sockets``) weigh it twice."""
    counts: dict[str, int] = {}
    for term in terms:
        for lexeme in dict.fromkeys(stem(t) for t in tokens(term)):
            if len(lexeme.encode("utf-8")) <= MAX_LEXEME_BYTES:
                counts[lexeme] = counts.get(lexeme, 0) + 1
    return list(counts.items())


Option = tuple[str, ...]
"""Lexemes a row must all hold (one form of a query token)."""


def query_groups(groups: Sequence[TermGroup]) -> list[tuple[Option, ...]]:
    """The AND pass's structure (``MatchQuery.all_terms``) in lexemes: per query token, its
    options — each whole form, or all its parts together — any one of which suffices (a row
    saying "refresh token" matches ``refresh_token`` by its parts, as on SQLite)."""
    out: list[tuple[Option, ...]] = []
    for group in groups:
        options = [_lexemes(whole) for whole in group.wholes]
        if group.parts:
            options.append(tuple(dict.fromkeys(x for p in group.parts for x in _lexemes(p))))
        kept = tuple(dict.fromkeys(o for o in options if o))
        if kept:
            out.append(kept)
    return out


def _lexemes(term: str) -> Option:
    return tuple(
        lex
        for lex in dict.fromkeys(stem(t) for t in tokens(term))
        if len(lex.encode("utf-8")) <= MAX_LEXEME_BYTES
    )
