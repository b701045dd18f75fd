"""Code-aware full-text indexing and query building for the FTS5 indexes.

SQLite's FTS5 cannot run a Python tokenizer, so code awareness is done on both sides of the index
with plain text:

- **Index side** — ``search_text(text)`` is what the pipeline writes into ``events_fts`` and
  ``docs_fts``: the text itself, then (after a ``\\x1f`` marker line) extra tokens for every code
  identifier in it. The FTS tokenizer (``FTS_TOKENIZE``: ``unicode61`` with ``_`` as a token
  character) keeps ``refresh_token`` and ``__init__`` whole; the extras add the split parts
  (``refresh``, ``token``), a separator-free form shared by every spelling (``refreshtoken``, also
  what ``refreshToken`` tokenises to) and, for dotted names and paths, a ``_``-joined whole
  (``auth_py``, ``src_app_auth_py``).
- **Query side** — ``build_match(query)`` turns any user text into a safe FTS5 expression: every
  term is a double-quoted string (quotes doubled), so no operator, column filter or syntax error
  can come from user input. A code token contributes its whole form, its separator-free form and its
  parts; each form is a separate BM25 phrase, so an exact spelling outranks a mere part match.

Stemming: the tokenizer here is the better of porter and none on LoCoMo's evidence recall@10 over
turns (docs/benchmarks.md, "Figures behind design choices").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memtoc.text.keyphrases import distinct_words, is_code_token, iter_words

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 tokenchars '_'"
"""The FTS5 tokenizer of ``events_fts`` and ``docs_fts`` (migration ``0005_code_aware_fts``)."""

EXTRAS_MARK = "\x1f"
"""Separates the original text from the added identifier forms in an indexed text."""

_SEPARATORS = re.compile(r"[^\w]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+")
_PATH_SPLIT = re.compile(r"[/\\]+")

STOPWORDS: frozenset[str] = frozenset(
    """
    a an and are as at be been being but by can could did do does doing for from had has have having
    he her hers him his how i if in into is it its me my no nor not of on or our ours she so than
    that the their theirs them then there these they this those to too us was we were what when
    where which while who whom whose why will with would you your yours am any some just about
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Dropped from queries (unless a query has nothing else): they cost postings, add no ranking."""


def _parts(token: str) -> list[str]:
    """Lowercased sub-words of an identifier: split on separators, then on camelCase humps."""
    out: list[str] = []
    for chunk in _SEPARATORS.split(token):
        if not chunk:
            continue
        for piece in chunk.split("_"):
            out.extend(p.lower() for p in (_CAMEL.findall(piece) or [piece]) if p)
    return out


def _snake(token: str) -> str:
    """The identifier with every run of separators turned into ``_`` (kept whole by the index)."""
    return "_".join(p for p in _SEPARATORS.split(token.lower().removesuffix("()")) if p)


@lru_cache(maxsize=65_536)
def _forms(token: str) -> tuple[str, ...]:
    return tuple(identifier_forms(token))


def identifier_forms(token: str) -> list[str]:
    """Index/query forms of one code token, most specific first, without duplicates.

    ``src/app/auth.py`` → ``src_app_auth_py``, ``srcappauthpy``, ``auth_py``, ``authpy``, ``src``,
    ``app``, ``auth``, ``py``.
    """
    token = token.strip().removesuffix("()").strip(".")
    parts = _parts(token)
    forms = [_snake(token), "".join(parts)]
    components = [c for c in _PATH_SPLIT.split(token) if c]
    if len(components) > 1:
        for comp in components:
            comp_parts = _parts(comp)
            if len(comp_parts) > 1:
                forms += [_snake(comp), "".join(comp_parts)]
    forms += parts
    return [f for f in dict.fromkeys(forms) if f]


def _code_tokens(text: str) -> list[str]:
    """The distinct code tokens of ``text``, in the order they first occur (each token of a long
    output is classified once, however often it recurs)."""
    return [token for token in distinct_words(text) if is_code_token(token)]


def search_text(text: str) -> str:
    """The text to index for ``text``: itself plus the forms of its code identifiers.

    The pipeline writes this (not the raw text) into ``events_fts`` and ``docs_fts``;
    ``original_text`` recovers the first part.
    """
    clean = text.replace(EXTRAS_MARK, " ")
    extras: dict[str, None] = {}
    for token in _code_tokens(clean):
        for form in _forms(token):  # identifiers recur across events: computed once each
            extras[form] = None
    if not extras:
        return clean
    return f"{clean}\n{EXTRAS_MARK} {' '.join(extras)}"


def original_text(indexed: str) -> str:
    """The original text of a ``search_text`` result (what an embedder should see)."""
    return indexed.split(f"\n{EXTRAS_MARK}", 1)[0]


def quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class TermGroup:
    """One query token: whole forms (any one suffices) and parts (all needed together)."""

    wholes: tuple[str, ...]
    parts: tuple[str, ...] = ()

    @property
    def forms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.wholes, *self.parts)))

    def all_expression(self) -> str:
        options = [quote(w) for w in self.wholes]
        if self.parts:
            options.append("(" + " AND ".join(quote(p) for p in self.parts) + ")")
        return options[0] if len(options) == 1 else "(" + " OR ".join(options) + ")"


@dataclass(frozen=True, slots=True)
class MatchQuery:
    """A user query as FTS5 expressions.

    ``groups`` holds one ``TermGroup`` per query token. ``any_terms`` matches a row holding any
    form (the BM25 candidate set); ``all_terms`` needs every group — a code token counts when the
    row holds one of its whole forms or all of its parts.
    """

    groups: tuple[TermGroup, ...]

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for g in self.groups for f in g.forms))

    @property
    def any_terms(self) -> str:
        return " OR ".join(quote(f) for f in self.terms)

    @property
    def all_terms(self) -> str:
        return " AND ".join(g.all_expression() for g in self.groups)


MAX_QUERY_TERMS = 64
"""At most this many distinct terms of a query are searched: without a cap a pasted document as a
query takes seconds (docs/benchmarks.md, "Figures behind design choices")."""


def build_match(query: str) -> MatchQuery | None:
    """The FTS5 match for any user text, or ``None`` when it has no searchable term.

    Never raises on odd input: FTS operators (``AND OR NOT NEAR * ^ : ( ) -``), quotes and
    unicode all end up inside quoted strings, which FTS5 only tokenizes.
    """
    groups: list[TermGroup] = []
    stop: list[TermGroup] = []
    for m in iter_words(query.replace(EXTRAS_MARK, " ")):
        token = m.group()
        if is_code_token(token):
            forms = identifier_forms(token)
            parts = tuple(dict.fromkeys(_parts(token.strip().removesuffix("()").strip("."))))
            wholes = tuple(f for f in forms if f not in parts)
            if wholes or parts:
                groups.append(TermGroup(wholes or parts[:1], parts if len(parts) > 1 else ()))
            continue
        words = [w for w in _SEPARATORS.split(token.lower()) if w]
        for word in words:
            (stop if word in STOPWORDS else groups).append(TermGroup((word,)))
    chosen = groups or stop
    # The first MAX_QUERY_TERMS distinct terms: a pasted 10k-word text stays a bounded query.
    unique = tuple(dict.fromkeys(chosen))[:MAX_QUERY_TERMS]
    return MatchQuery(unique) if unique else None
