"""The redaction prefilter: a few C-level passes that decide whether any kind can match a text.

Two gates (see :mod:`memtoc.ingest.redact`, *Speed*, for why each is exact):

* the **token gate**: a run of 16 or more ``[A-Za-z0-9_-]`` holding an uppercase letter or a
  digit (every token format is such a run, or holds one);
* the **keyword gate**: a secret word in an assignment form with a key name that may be secret
  (:data:`~memtoc.ingest.redact_assign.ASSIGNMENT_GATES`: ``key=``, ``"token":``, ``--password
  x``, a JSON key), or one of the fixed needles of the keyword-gated kinds (``://``, ``bearer``,
  ``authorization``, ``-----begin``, ``sig=``).

:func:`text_gates` evaluates them for one text (and returns what the kinds need next).
:func:`batch_suspects` evaluates them for a whole batch at once over one joined, lower-cased
UTF-8 blob (:func:`batch_blob` makes it, :func:`blob_suspects` gates it, in-process or in the
helper of :mod:`memtoc.ingest.redact_worker`): each needle is searched once in C, and Python runs only per *hit*, not per text, so
a batch of clean events costs a few C passes. It is conservative: every text for which
:func:`text_gates` opens a gate is a suspect (a test checks it on random batches).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from operator import add

from memtoc.ingest.redact_assign import (
    ASSIGNMENT_GATES,
    ENV_WORDS,
    assignment_possible,
    gate_hit_bytes,
)
from memtoc.ingest.redact_catalogue import BUILTIN
from memtoc.ingest.redact_kinds import LOWER_RUN_BYTES, RUN_ALPHABET

RUN = b"a" * 16
_RUNS = re.compile(b"a" * 16 + b"a*")
"""A run of 16 or more run characters, in ``data.translate(RUN_TABLE)``."""
RUN_TABLE = bytes(0x61 if chr(i) in RUN_ALPHABET else 0x20 for i in range(256))
"""Maps ``[A-Za-z0-9_-]`` to ``a`` and every other byte (UTF-8 continuations too) to a space."""

RUN_PREFIXES = tuple(a.encode() for k in BUILTIN for a in k.run_anchors)
"""How a token kind's match begins: the start of its run."""
_RUN_STARTS = frozenset(p[:2] for p in RUN_PREFIXES)
"""The first two bytes of every run prefix: one set lookup rejects most runs."""


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
_ANCHORLESS_TOKEN_KIND = any(not k.anchors and not k.lower_anchors for k in _TOKEN_KINDS)
"""A token kind is tried only when one of its anchors occurs: at the start of a qualifying run
(run anchors), anywhere in the text (the others; the batch gate looks for the shortest form,
``dp.`` for Doppler's five). So a batch text whose only qualifying runs are ids and hashes
(``toolu_01…``, git SHAs) is not a suspect."""
_BYTE_WORDS: tuple[re.Pattern[bytes], ...] = tuple(
    re.compile(rx.encode()) for _, rx in ASSIGNMENT_GATES
)
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
    data, ends, folded = batch_blob(texts)
    return folded | blob_suspects(data, ends)


def batch_blob(texts: Sequence[str]) -> tuple[bytes, list[int], set[int]]:
    """The batch as one UTF-8 blob (texts joined by NUL), where each text's bytes end (its
    separator included), and the texts holding a character that case-folds to ASCII (always
    suspects). :func:`blob_suspects` finds the rest, here or in a helper process."""
    blob = _SEP.join(texts)
    data = encode(blob)
    suspects: set[int] = set()
    count = len(texts)
    if len(data) != len(blob):  # non-ASCII somewhere: byte offsets differ from text offsets
        if any(ch in blob for ch in _FOLDING):
            char_ends = list(map(add, accumulate(map(len, texts)), range(1, count + 1)))
            for ch in _FOLDING:
                at = blob.find(ch)
                while at >= 0:
                    k = bisect_right(char_ends, at)
                    suspects.add(k)
                    at = blob.find(ch, char_ends[k]) if k + 1 < count else -1
        parts = data.split(_SEP.encode())
        if len(parts) != count:  # a text holding NUL would shift them
            parts = [encode(t) for t in texts]
    else:
        parts = texts  # type: ignore[assignment]  # ASCII: characters are bytes
    # lengths summed in C
    return data, list(map(add, accumulate(map(len, parts)), range(1, count + 1))), suspects


def _escaped_start(data: bytes, i: int, j: int) -> bool:
    """Whether a run after a backslash starts like a token once a JSON escape is skipped: in a
    metadata probe ``"a\\nsk-…"`` holds a newline, so the token starts after ``\\n`` (after
    ``\\u0000``: five characters on)."""
    return data.startswith(RUN_PREFIXES, i + 1, j) or (
        data[i] == 0x75 and data.startswith(RUN_PREFIXES, i + 5, j)
    )


def blob_suspects(data: bytes, ends: Sequence[int]) -> set[int]:
    """The gates over a :func:`batch_blob`: indices of the texts (``ends`` delimits them) where
    a secret word, keyword needle, token anchor or token-prefixed run occurs. A pure function of
    bytes, so it can run in a helper process (:mod:`memtoc.ingest.redact_worker`)."""
    suspects: set[int] = set()
    if not ends:
        return suspects
    low = data.lower()
    last = len(ends) - 1

    def mark(at: int) -> int:
        """Mark the text holding byte ``at``; return where the next text starts (or -1)."""
        k = bisect_right(ends, at)
        suspects.add(k)
        return ends[k] if k < last else -1

    for rx in _BYTE_WORDS:
        m = rx.search(low)
        while m is not None:  # a hit counts when its key name may be secret
            if gate_hit_bytes(data, m, m["sp"] is not None):
                nxt = mark(m.start())
                m = rx.search(low, nxt) if nxt >= 0 else None
            else:
                m = rx.search(low, m.start() + 1)
    for needle in _BYTE_NEEDLES:
        at = low.find(needle)
        while at >= 0:
            nxt = mark(at)
            at = low.find(needle, nxt) if nxt >= 0 else -1
    for needle, where in (
        *((a, data) for a in _TOKEN_TEXT_ANCHORS),
        *((a, low) for a in _TOKEN_LOWER_ANCHORS),
    ):
        at = where.find(needle)
        while at >= 0:  # conservative: the anchor alone, whether or not a run qualifies
            nxt = mark(at)
            at = where.find(needle, nxt) if nxt >= 0 else -1
    classes = data.translate(RUN_TABLE)
    for run in _RUNS.finditer(classes):
        i, j = run.span()
        if (
            (
                _ANCHORLESS_TOKEN_KIND
                or (data[i : i + 2] in _RUN_STARTS and data.startswith(RUN_PREFIXES, i, j))
                or (i and data[i - 1] == 0x5C and _escaped_start(data, i, j))
            )
            and data[i:j].translate(None, LOWER_RUN_BYTES)
            and mark(i) < 0
        ):
            break
    return suspects
