"""The redaction prefilter: a few C-level passes that decide whether any kind can match a text.

Two gates (see :mod:`memtoc.ingest.redact`, *Speed*, for why each is exact):

* the **token gate**: a run of 16 or more ``[A-Za-z0-9_-]`` holding an uppercase letter or a
  digit (every token format is such a run, or holds one);
* the **keyword gate**: a secret word in an assignment form with a key name that may be secret
  (:data:`~memtoc.ingest.redact_assign.ASSIGNMENT_GATES`: ``key=``, ``"token":``, ``--password
  x``, a JSON key), or one of the fixed needles of the keyword-gated kinds (``://``, ``bearer``,
  ``authorization``, ``-----begin``, ``sig=``).

:func:`text_gates` evaluates them for one text (and returns what the kinds need next).
:func:`batch_suspects` evaluates them for a whole batch at once over one joined UTF-8 blob
(:func:`batch_blob` makes it, :func:`blob_suspects` gates it, in-process or in the helper of
:mod:`memtoc.ingest.redact_worker`): every needle and secret word in one Aho-Corasick pass in
compiled code, and Python only per *hit*, not per text, so a batch of clean events costs two
passes (encode, match). It is conservative: every text for which :func:`text_gates` opens a gate
is a suspect (a test checks it on random batches).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, product
from operator import add

from ahocorasick_rs import BytesAhoCorasick, Implementation

from memtoc.ingest.redact_assign import (
    ASSIGNMENT_GATES,
    ENV_WORDS,
    GATE_WORD_FORMS,
    assignment_possible,
    gate_hit_bytes,
)
from memtoc.ingest.redact_catalogue import BUILTIN
from memtoc.ingest.redact_kinds import LOWER_RUN_BYTES, RUN_ALPHABET

RUN = b"a" * 16
"""A run of 16 run characters, in ``data.translate(RUN_TABLE)``."""
RUN_TABLE = bytes(0x61 if chr(i) in RUN_ALPHABET else 0x20 for i in range(256))
"""Maps ``[A-Za-z0-9_-]`` to ``a`` and every other byte (UTF-8 continuations too) to a space."""

RUN_PREFIXES = tuple(a.encode() for k in BUILTIN for a in k.run_anchors)
"""How a token kind's match begins: the start of its run."""


def _minimal(needles: set[str]) -> tuple[str, ...]:
    """The needles no other needle (or assignment word) already finds inside them."""
    return tuple(
        sorted(
            n
            for n in needles
            if not any(o != n and o in n for o in needles) and not assignment_possible(n)
        )
    )


KEYWORD_NEEDLES = _minimal(
    {"://", "bearer", "authorization", "-----begin"}
    | {a.lower() for k in BUILTIN if k.gate == "keyword" for a in (*k.anchors, *k.lower_anchors)}
    - {w for w, _ in ASSIGNMENT_GATES}
)
"""Lower-case needles that open the keyword gate besides the assignment words: the anchors of
every keyword-gated kind (a kind anchored on a secret word is covered by the assignment words)."""

_TOKEN_KINDS = [k for k in BUILTIN if k.gate == "token"]
_TOKEN_LOWER_ANCHORS_STR = _minimal({a.lower() for k in _TOKEN_KINDS for a in k.lower_anchors})
_TOKEN_TEXT_ANCHORS = tuple(
    a.encode()
    for a in _minimal(
        {a[:3] if a.startswith("dp.") else a for k in _TOKEN_KINDS for a in k.text_anchors}
    )
    if not any(low in a.lower() for low in _TOKEN_LOWER_ANCHORS_STR)
)
_TOKEN_LOWER_ANCHORS = tuple(a.encode() for a in _TOKEN_LOWER_ANCHORS_STR)
ANCHORLESS_TOKEN_KINDS = tuple(
    k.name for k in _TOKEN_KINDS if not k.anchors and not k.lower_anchors
)
"""Token kinds without an anchor: none (a test keeps it so). A token kind is tried only when one
of its anchors occurs: at the start of a qualifying run (run anchors), anywhere in the text (the
others; the batch gate looks for the shortest form, ``dp.`` for Doppler's five). So a batch text
whose only qualifying runs are ids and hashes (``toolu_01…``, git SHAs) is not a suspect, and the
batch gate looks for token prefixes rather than for runs."""
_BYTE_WORDS: tuple[re.Pattern[bytes], ...] = tuple(
    re.compile(rx.encode(), re.IGNORECASE) for _, rx in ASSIGNMENT_GATES
)
"""The assignment gates for the blob as it is (a bytes pattern folds ASCII case only, as
``bytes.lower`` does)."""
_BYTE_NEEDLES = tuple(n.encode() for n in KEYWORD_NEEDLES)
_FOLDING = ("\u0130", "\u0131", "\u017f", "\u212a")
"""Characters that lower-case or case-fold to ASCII (capital I with dot, dotless i, long s, Kelvin
sign): a text holding one
may match a case-insensitive secret word that its ASCII-lowered bytes do not show."""
_SEP = "\x00"
"""Joins a batch's texts: in no gate's alphabet, so no run or needle spans two texts."""

Gates = tuple[str, bool, bool, str]
"""(lower-cased text, keyword gate open, token gate open, token-like runs joined)."""


def encode(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates
        return text.encode("utf-8", "surrogatepass")


def long_runs(data: bytes, classes: bytes) -> tuple[bool, str]:
    """Whether the text holds a *qualifying* run, and those that start like a token, joined.

    A qualifying run is 16+ ``[A-Za-z0-9_-]`` holding an uppercase letter or a digit. Every
    token format is such a run from its first character on, or holds one: each token kind's regex
    refuses a preceding ``[A-Za-z0-9_-]`` and its ``check`` insists on the uppercase letter or
    digit. So all-lowercase runs (``snake_case_identifiers``, ``--kebab-flags``) close no gate,
    and ids and hashes (``toolu_01…``, git SHAs) open the token gate but bring no anchor.
    """
    qualified = False
    parts: list[str] = []
    i = classes.find(RUN)
    while i >= 0:
        j = classes.find(b" ", i)
        if j < 0:
            j = len(classes)
        run = data[i:j]
        if run.translate(None, LOWER_RUN_BYTES):
            qualified = True
            if run.startswith(RUN_PREFIXES):
                parts.append(run.decode("ascii"))
        i = classes.find(RUN, j)
    return qualified, " ".join(parts)


def text_gates(text: str, always: bool) -> Gates | None:
    """What the prefilter found in one text, or None when no kind can match it."""
    low = text.lower()
    same = len(low) == len(text)
    keyword = assignment_possible(low, text if same else None) or any(
        n in low for n in KEYWORD_NEEDLES
    )
    if not keyword and not same:  # positions shifted: the words alone decide
        keyword = any(word in low for word, _ in ENV_WORDS)
    data = encode(text)
    classes = data.translate(RUN_TABLE)
    qualified, runs = long_runs(data, classes) if RUN in classes else (False, "")
    if keyword or qualified or always:
        return low, keyword, qualified, runs
    return None


def batch_suspects(texts: Sequence[str]) -> set[int]:
    """Indices of the texts that may hold a secret; every other text is left unchanged by
    redaction (a superset of the texts :func:`text_gates` opens a gate for)."""
    if not texts:
        return set()
    return blob_suspects(*batch_blob(texts))


def batch_blob(texts: Sequence[str]) -> tuple[bytes, list[int]]:
    """The batch as one UTF-8 blob (texts joined by NUL) and where each text's bytes end (its
    separator included); :func:`blob_suspects` gates it, here or in a helper process."""
    try:
        parts = list(map(str.encode, texts))
    except UnicodeEncodeError:  # lone surrogates
        parts = [encode(t) for t in texts]
    # lengths summed in C
    ends = list(map(add, accumulate(map(len, parts)), range(1, len(parts) + 1)))
    return b"\x00".join(parts), ends


_RUN_BYTES = frozenset(ord(c) for c in RUN_ALPHABET)
_RUN_REST = re.compile(b"[A-Za-z0-9_-]*")


def _token_run_at(data: bytes, at: int) -> bool:
    """Whether the token prefix found at ``at`` starts a *qualifying* run (:func:`long_runs`:
    16+ ``[A-Za-z0-9_-]`` with an uppercase letter or a digit) — directly, or after a JSON
    escape: in a metadata probe ``"a\\nsk-…"`` holds a newline, so the token starts after
    ``\\n`` (after ``\\u0000``: five characters on), inside the run ``nsk-…``."""
    start = at
    if at and data[at - 1] in _RUN_BYTES:  # inside a run: only after an escape
        if at >= 2 and data[at - 2] == 0x5C:
            start = at - 1
        elif at >= 6 and data[at - 6] == 0x5C and data[at - 5] == 0x75:
            if not _RUN_BYTES.issuperset(data[at - 4 : at]):
                return False
            start = at - 5
        else:
            return False
    end = _RUN_REST.match(data, at).end()  # type: ignore[union-attr]  # always matches
    return end - start >= 16 and bool(data[start:end].translate(None, LOWER_RUN_BYTES))


_CASED_LETTERS = 8
"""How many letters of a case-insensitive needle are spelled in every case (2**8 spellings)."""


def spellings(needle: bytes) -> list[bytes]:
    """Every ASCII-case spelling of ``needle`` (lower-case), cut after its eighth letter: a text
    holding the needle in any case holds one of them (``authoriz`` for ``authorization``: the
    cut finds a superset, ``authorized`` too, and keeps the automaton small)."""
    cut, letters = len(needle), 0
    for i, c in enumerate(needle):
        letters += chr(c).isalpha()
        if letters > _CASED_LETTERS:
            cut = i
            break
    cases = [(c, c ^ 0x20) if chr(c).isalpha() else (c,) for c in needle[:cut]]
    return [bytes(p) for p in product(*cases)]


_PREFIXES = tuple(dict.fromkeys(RUN_PREFIXES))
_FLAG = -1
_PREFIX = -2
_CUT = 64
_roles: dict[bytes, int] = {p: _PREFIX for p in _PREFIXES}
for _needle in (
    *_TOKEN_TEXT_ANCHORS,
    *(ch.encode() for ch in _FOLDING),
    *(s for n in (*_BYTE_NEEDLES, *_TOKEN_LOWER_ANCHORS) for s in spellings(n)),
):
    _roles.setdefault(_needle, _FLAG)
for _index, (_word, _) in enumerate(ASSIGNMENT_GATES):
    for _form in GATE_WORD_FORMS[_word]:
        for _spelling in spellings(_form.encode()):  # a cut form is asked without a follower
            _roles.setdefault(_spelling, _index + (_CUT if len(_spelling) < len(_form) else 0))
_NEEDLES = tuple(_roles)
"""Searched in the blob, all at once: the token prefixes (a hit counts when it starts a
qualifying run), the token kinds' other anchors and the characters that fold to ASCII (a hit
counts), every spelling of the keyword needles and of the token kinds' lower-case anchors (a hit
counts), and every spelling of the assignment words (a hit is asked of its word's gate regex)."""
_ROLES = tuple(_roles.values())
"""Per needle: :data:`_FLAG`, :data:`_PREFIX`, or the index of its assignment word's regex in
:data:`_BYTE_WORDS` (plus :data:`_CUT` for a cut spelling, whose follower is not seen)."""
_MATCHER = BytesAhoCorasick(list(_NEEDLES), implementation=Implementation.DFA)
_FOLLOWS = bytes(
    0 if (chr(c).isascii() and chr(c).isalnum()) or c in (0x0A, 0x00) else 1 for c in range(256)
)
"""Bytes that may follow a secret word in an assignment gate match:
an operator, a quote, a blank, a backslash, or any other character of a JSON key, but no letter
or digit (``keys``, ``tokenizer``), newline or separator. The same bytes may come second: a JSON
key's rest (:data:`~memtoc.ingest.redact_assign.GATE_JSON_KEY`) goes on with another such
character, its closing quote or an escape."""
_OPENS = bytes(1 if chr(c) in "\\\"'` \t:=" else 0 for c in range(256))
"""Bytes after a secret word that can start the operator or ``--flag`` forms (a quote, a
backslash, a blank, ``:`` or ``=``); after any other byte only a JSON key's rest can match."""


def blob_suspects(data: bytes, ends: Sequence[int]) -> set[int]:
    """The gates over a :func:`batch_blob`: indices of the texts (``ends`` delimits them) where
    a secret word, keyword needle, token anchor, token-prefixed qualifying run or a character
    that folds to ASCII occurs. A pure function of bytes, so it can run in a helper process
    (:mod:`memtoc.ingest.redact_worker`).

    Every needle is found by one Aho-Corasick pass in compiled code (``ahocorasick_rs``), the
    case-insensitive ones spelled in every case; Python runs per hit. An assignment word's hit
    is dropped when a letter or digit follows it (``keys``, ``tokenizer``), or when only a JSON
    key's rest could follow and the next byte ends it; else its gate regex is matched there
    (``re.match``, case-insensitive: the word's every start is tried, as the former pass of
    ``re.search`` per word over the lower-cased blob did).
    """
    suspects: set[int] = set()
    if not ends:
        return suspects
    words, roles, follows, opens, last = _BYTE_WORDS, _ROLES, _FOLLOWS, _OPENS, len(data) - 1
    add = suspects.add
    for needle, at, end in _MATCHER.find_matches_as_indexes(data, overlapping=True):
        role = roles[needle]
        if role < 0:
            if role == _FLAG or _token_run_at(data, at):
                add(bisect_right(ends, at))
            continue
        if role < _CUT:  # what follows the word can start an assignment gate's match?
            if end > last or not follows[data[end]]:
                continue  # a word in a longer word (``keys``, ``tokenizer``)
            if not opens[data[end]] and (end == last or not follows[data[end + 1]]):
                continue  # only a JSON key's rest could follow, and it ends here: ``get(key)\n``
        k = bisect_right(ends, at)
        if k in suspects:
            continue
        m = words[role % _CUT].match(data, at)
        if m is not None and gate_hit_bytes(data, m, m["sp"] is not None):
            add(k)
    return suspects
