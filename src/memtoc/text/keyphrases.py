"""Code-aware keyphrases and key terms.

Words are tokenised so that code stays whole: paths (``src/app/auth.py``), dotted names
(``os.path.join``), snake_case and camelCase identifiers, CLI flags (``--until-idle``) and error
names (``TypeError``) are single tokens. On top of that:

- ``key_terms(text)``: the set of normalised content terms (lowercased, light suffix stripping so
  ``tests`` and ``test`` match; an identifier contributes itself and its parts). Grips and the
  extractive summariser score overlap with it.
- ``extract_keyphrases(texts, k)``: the ``k`` best keyphrases of a segment. Candidates are runs of
  one to three plain words between stopwords and punctuation (RAKE-style), plus every code token on
  its own. A candidate scores by how often it occurs, how frequent its words are across the texts
  (with a RAKE-like degree bonus for words that recur inside phrases), how early it first appears,
  and a bonus for code identifiers, paths, error names and proper nouns. Deterministic: ties break
  on the text.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

_PATH_REST = r"[\w@+-]*+/(?:[\w@+-]++/)*[\w@+.-]*\w"
"""A path after its first character (``rc/app/auth.py`` of ``src/app/auth.py``)."""
_PATH = rf"[\w@+-]{_PATH_REST}"
_WORD = re.compile(
    rf"""
    [\w@+~./-]                                    # every token's first character (see below)
    (?:
      (?<=[^\W\d])\w*+(?![\w@+/'\u2019(-]|\.[^\W\d])  # a plain word no alternative below extends
    | (?<=~)/{_PATH} | (?<=~){_PATH} | (?<=\.)\./{_PATH} | (?<=\.)\.{_PATH}
    | (?<=\.)/{_PATH} | (?<=\.){_PATH} | (?<=/){_PATH}  # paths after ~/, ~, ../, .., ./, ., /
    | (?<=[\w@+-]){_PATH_REST}                      # paths: src/app/auth.py, a+b/c
    | (?<=-)-[A-Za-z][\w-]*\w                       # CLI flags: --until-idle
    | (?<=[^\W\d])[\w-]*+(?:\.[^\W\d]\w*+)+(?:\(\))?  # dotted names: os.path.join, a-b.yml, f()
    | (?<=[^\W\d])\w*+(?:['\u2019-][^\W\d_]\w*+)*(?:\(\))?  # words, snake_case, camelCase, don't
    | (?<=\d)\d*(?:[.:]\d+)*%?                      # numbers (kept for phrases' boundaries only)
    )
    """,
    re.VERBOSE,
)
"""Word and code tokens: paths, CLI flags, dotted names, words, numbers — the leftmost alternative
that matches, in that order. Written for the regex engine's speed, with the same tokens as those
five alternatives alone (``tests/test_keyphrases.py`` checks): the pattern opens with the one
character class every token starts with, so the engine skips the positions that cannot start a
token (spaces, most punctuation) without trying any alternative; each alternative then checks that
first character by a one-character lookbehind. The first alternative takes a plain word in one
pass when the character after it can extend no other alternative (no ``/``, ``.`` + letter, ``-``,
``'``, ``(``, ``@``, ``+``), instead of reading it as a path, a dotted name and a word in turn.
Runs are possessive (``*+``, ``++``) where the character after a run can never be one of its own
(a ``/`` after a path part, a ``.`` after a word), so a failing alternative does not retry every
shorter run."""
SPEAKER_LABEL = re.compile(r"^([A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?): (?=\S)")
"""A ``Name: `` label opening a turn (group 1: the name), as chat transcripts write the speaker."""
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT_PARTS = re.compile(r"[_./\\@+:()'\u2019-]+")
_ERROR_NAME = re.compile(r"[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)$")
_SENTENCE_GAP = re.compile(r"[.!?:\n]")
_CODE, _STOP, _PLAIN = 0, 1, 2

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all almost also am among an and any are aren't around as at
    be because been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't down during each either else even ever every few for from
    further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its
    itself just let let's may me might more most much must mustn't my myself no nor not now of off
    on once only or other ought our ours ourselves out over own per quite rather same shan't she
    she'd she'll she's should shouldn't since so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those though
    through thus to too under until up upon us very via was wasn't we we'd we'll we're we've were
    weren't what what's when when's where where's whether which while who who's whom whose why
    why's will with within without won't would wouldn't yet you you'd you'll you're you've your
    yours yourself yourselves
    ok okay oh ah hey hi hello thanks thank thx yeah yep yes yup sure great cool nice awesome wow
    lol haha please really actually basically maybe perhaps probably anyway well like just kind
    sort stuff thing things something anything everything nothing someone anyone everyone lot lots
    bit get got getting gets go going goes gone went make made makes making know knew think
    thought want wanted need needs needed see seen saw say said says tell told look looks looking
    take took use used using try tried trying let's sounds sound glad definitely totally pretty
    good right new one two also still back way many able done doing yes no sorry hope feel felt
    time times day days today really gonna wanna i'd i'll i'm i've you'll you're we're it's that's
    here's there's what's let me us thats im ive dont cant wont didnt isnt
    first second third last next another other others else etc e.g i.e
    yesterday tomorrow tonight lately recently
    amazing fun happy excited exciting incredible wonderful fantastic lovely special thankful
    grateful super cute big little lots people stuff guess mean means
    self none true false def return import class pass null undefined var const elif
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""English stopwords plus chat filler and a few code keywords that carry no topic."""

_WEAK_WORDS: frozenset[str] = frozenset(
    """
    instead run runs ran running pass passes passed passing fail fails failed failing hold holds
    held work works worked check checks checked add adds added fix fixes fixed fixing call calls
    called show shows showed find finds found start starts started keep keeps kept put puts set
    sets seem seems seemed help helps helped give gives gave come comes came turn turns turned
    happen happens happened change changes changed ask asks asked occur occurs occurred longer
    stay stays stayed grow grows grew leave leaves left remain remains remained stick sticks stuck
    cover covers covered confirm confirms confirmed explain explains explained matter matters
    depend depends depended want wants include includes included unchanged behind across
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Common verbs: content terms for overlap, but never part of a keyphrase (they break phrases)."""

GENERIC_WORDS: frozenset[str] = frozenset(
    """
    test tests testing suite file files code command commands description error errors result
    results output outputs line lines issue issues problem problems bug bugs function functions
    method methods value values case cases part place step steps name names data type types list
    version option options session sessions message messages question questions answer answers src
    point points idea ideas full whole entire same different current old new last edge fresh eye
    look diff call site sites path paths entry snippet approach option plan work progress rest
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Words too generic to be a keyphrase on their own; a phrase made only of them is dropped too."""

_ACTIVITY = """
    lint linter linting commit commits git typecheck changelog update updates build builds branch
    main master push merge rebase stash diff status log logs checkout bun npm npx pnpm yarn pip uv
    cargo pytest jest vitest ruff mypy eslint biome prettier tsc docker sudo echo grep sed rg head
    tail eof todo repo repository
"""
_JUNK_TOKENS = frozenset("http https www redacted eof null nil undefined".split())  # noqa: SIM905
_HEX = re.compile(r"(?=[0-9a-f]*\d)[0-9a-f]{7,40}")
_CLOCK = re.compile(r"t\d\d|\d+:\d+(?::\d+)*(?:\.\d+)?")
"""The pieces of a logged instant (``2026-06-18T04:45:19.2430321Z`` tokenises to ``T04`` and
``45:19.2430321``): never a keyphrase (a Codex history's day was keyed ``45:19.2430321``)."""

_TRAILING_FILLER: frozenset[str] = frozenset(
    "suite test file code command step part site snippet description output result line case".split()  # noqa: SIM905
)
"""A phrase ending in one of these ("flaky CI suite") gives way to the phrase without it."""


@lru_cache(maxsize=65_536)
def normalize_term(word: str) -> str:
    """Lowercase and strip common English suffixes lightly (``tests`` → ``test``)."""
    w = word.lower()
    n = len(w)
    if n <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and n > 4:
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("ing") and n > 5:
        w = w[:-3]
    elif w.endswith("ed") and n > 4:
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    else:
        return w
    if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    return w


ACTIVITY_WORDS: frozenset[str] = frozenset(normalize_term(w) for w in _ACTIVITY.split())
"""Normalised words of the software workflow itself (lint, commit, git, build, the tools):
every coding session has them, so alone they name no topic — never a keyphrase on their own."""


def iter_words(text: str) -> Iterable[re.Match[str]]:
    """Word and code tokens of ``text`` (regex matches, so callers also get positions)."""
    return _WORD.finditer(text)


def words(text: str) -> list[str]:
    """Word and code tokens of ``text``, in order."""
    return _WORD.findall(text)


@lru_cache(maxsize=65_536)
def is_code_token(token: str) -> bool:
    """Paths, dotted names, snake_case, camelCase, CLI flags and error names."""
    if "_" in token.strip("_") or "/" in token or token.startswith("-") or token.endswith("()"):
        return True
    if "." in token:
        return True
    if _ERROR_NAME.match(token):
        return True
    # camelCase / PascalCase with an inner capital after a lowercase letter (not "iPhone"-style only)
    return any(a.islower() and b.isupper() for a, b in itertools.pairwise(token[1:]))


@lru_cache(maxsize=65_536)
def token_terms(token: str) -> tuple[str, ...]:
    """The key terms one token contributes: the whole identifier plus its parts (normalised)."""
    low = token.lower().rstrip(".")
    if low in STOPWORDS or low.isdigit():
        return ()
    if not is_code_token(token):
        if "-" in token or "'" in token or "\u2019" in token:
            parts = [p for p in _SPLIT_PARTS.split(low) if len(p) > 1 and p not in STOPWORDS]
            return tuple(dict.fromkeys([low, *map(normalize_term, parts)]))
        return (normalize_term(token),) if len(low) > 1 else ()
    terms = [low.removesuffix("()")]
    for chunk in _SPLIT_PARTS.split(token):
        for part in _CAMEL.findall(chunk) or [chunk]:
            p = part.lower()
            if len(p) > 1 and p not in STOPWORDS and not p.isdigit():
                terms.append(normalize_term(p))
    return tuple(dict.fromkeys(terms))


_MEMO_CHARS = 2_000
"""Texts up to this long (a sentence, a bullet, a title) have their terms memoised: the
summariser and the grips read the same facts' terms several times per segment."""


def key_terms(text: str) -> set[str]:
    """Lowercased, normalised content terms of ``text`` (identifiers whole and split)."""
    if len(text) <= _MEMO_CHARS:
        return set(_short_key_terms(text))
    return _key_terms(text)


@lru_cache(maxsize=16_384)
def _short_key_terms(text: str) -> frozenset[str]:
    return frozenset(_key_terms(text))


def _key_terms(text: str) -> set[str]:
    out: set[str] = set()
    terms = token_terms
    tokens = _WORD.findall(text) if len(text) <= _MEMO_CHARS else distinct_words(text)
    for token in set(tokens):  # a long output repeats its tokens: each read once
        out.update(terms(token))
    return out


LONG_TOKENS_MAX_CHARS = 4_000_000
"""Characters of long texts whose distinct tokens ``distinct_words`` keeps (oldest dropped): the
long events of the outbox entries one worker round claims, whose segments it builds next."""
_long_tokens: OrderedDict[str, tuple[str, ...]] = OrderedDict()
_long_tokens_chars = 0
_long_tokens_lock = threading.Lock()


def distinct_words(text: str) -> tuple[str, ...]:
    """The distinct word and code tokens of ``text``, in the order they first occur.

    A long text's (over ``_MEMO_CHARS``: a tool output, a long message) are kept in a bounded
    memo, oldest first out, their tokens interned: the pipeline indexes an event's text for
    full-text search (``fts_text.search_text``) and, once its segment is built, reads its key
    terms for the grips (``key_terms``) — the same long text tokenised once, not twice."""
    global _long_tokens_chars
    if len(text) <= _MEMO_CHARS:
        return tuple(dict.fromkeys(_WORD.findall(text)))
    with _long_tokens_lock:
        found = _long_tokens.get(text)
    if found is not None:
        return found
    tokens = tuple(map(sys.intern, dict.fromkeys(_WORD.findall(text))))
    with _long_tokens_lock:
        if text not in _long_tokens:
            _long_tokens[text] = tokens
            _long_tokens_chars += len(text)
            while _long_tokens_chars > LONG_TOKENS_MAX_CHARS and _long_tokens:
                old, _ = _long_tokens.popitem(last=False)
                _long_tokens_chars -= len(old)
    return tokens


@lru_cache(maxsize=65_536)
def _classify(token: str) -> tuple[int, str, str]:
    """(kind, lowercased token, normalised term) for one token."""
    low = token.lower()
    if (
        low in _JUNK_TOKENS
        or _HEX.fullmatch(low)
        or _CLOCK.fullmatch(low)
        or token.startswith(("-", "/", "~"))
    ):
        return _STOP, low, low  # flags, absolute paths, URL schemes, hashes, placeholders
    if is_code_token(token):
        return _CODE, low.removesuffix("()"), low.removesuffix("()")
    plain = low.replace("\u2019", "'")  # "I\u2019m" as Codex writes it is "i'm"
    if plain in STOPWORDS or plain in _WEAK_WORDS or len(low) < 2 or low[0].isdigit():
        return _STOP, low, low
    return _PLAIN, low, normalize_term(token)


@dataclass(slots=True)
class _Candidates:
    """Phrase candidates keyed by their normalised terms, with counts and first positions."""

    count: dict[tuple[str, ...], int] = field(default_factory=dict)
    first: dict[tuple[str, ...], int] = field(default_factory=dict)
    forms: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict)
    proper: dict[tuple[str, ...], int] = field(default_factory=dict)
    code: set[tuple[str, ...]] = field(default_factory=set)
    total: int = 0

    def add(self, key: tuple[str, ...], form: str, proper: bool) -> None:
        n = self.count.get(key)
        if n is None:
            self.count[key] = 1
            self.first[key] = self.total
            self.forms[key] = {form: 1}
            self.proper[key] = proper
            return
        self.count[key] = n + 1
        forms = self.forms[key]
        forms[form] = forms.get(form, 0) + 1
        if proper:
            self.proper[key] += 1

    def flush(self, run: list[tuple[str, str, bool]]) -> None:
        """Add every 1-3 word sub-phrase of a run of plain content words."""
        n = len(run)
        add = self.add
        for i in range(n):
            term, form, proper = run[i]
            add((term,), form, proper)
            if i + 1 < n:
                t2, f2, p2 = run[i + 1]
                if t2 != term:
                    add((term, t2), f"{form} {f2}", proper and p2)
                    if i + 2 < n:
                        t3, f3, p3 = run[i + 2]
                        if t3 != term and t3 != t2:
                            add((term, t2, t3), f"{form} {f2} {f3}", proper and p2 and p3)
        run.clear()


def _candidates(texts: Sequence[str]) -> _Candidates:
    """Candidates: runs of plain words split at stopwords and punctuation; code tokens alone."""
    cands = _Candidates()
    add, flush, code = cands.add, cands.flush, cands.code  # bound once: a token is read per loop
    classify, sentence_gap = _classify, _SENTENCE_GAP.search
    for text in texts:
        run: list[tuple[str, str, bool]] = []  # (term, surface, capitalised mid-sentence)
        prev_end = 0
        for m in _WORD.finditer(text):
            token = m.group()
            start, end = m.span()
            sentence_start = prev_end == 0
            if start > prev_end:
                gap = text[prev_end:start]
                if gap.strip(" \t"):
                    if run:
                        flush(run)
                    sentence_start = sentence_gap(gap) is not None
            prev_end = end
            cands.total += 1
            kind, low, term = classify(token)
            if kind == _PLAIN:
                run.append((term, token, not sentence_start and token[0].isupper()))
                continue
            if run:
                flush(run)
            if kind == _CODE:
                key = (low,)
                add(key, token.removesuffix("()"), False)
                code.add(key)
        if run:
            flush(run)
    return cands


def extract_keyphrases(
    texts: Sequence[str], k: int, *, exclude: frozenset[str] = frozenset()
) -> list[str]:
    """The ``k`` best keyphrases of ``texts`` (deterministic; identifiers and paths kept whole).

    ``exclude`` holds lowercased words that must not be a keyphrase on their own (tool names,
    speaker names the caller shows elsewhere); ``GENERIC_WORDS`` never are, and a phrase made
    only of generic words is dropped as filler ("full suite").
    """
    if k <= 0:
        return []
    cands = _candidates(texts)
    if not cands.count:
        return []
    exclude = frozenset(normalize_term(w) for w in exclude) | exclude
    term_freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    for key, count in cands.count.items():
        if len(key) == 1:
            term_freq[key[0]] = count
        else:
            for w in key:
                degree[w] = degree.get(w, 0) + count
    weight = {
        w: math.log2(1 + tf) * (1 + 0.25 * math.log2(1 + degree.get(w, 0)))
        for w, tf in term_freq.items()
    }
    scored: list[tuple[float, str, tuple[str, ...]]] = []
    span = max(cands.total, 1)
    for key, count in cands.count.items():
        code = key in cands.code
        if all(w in GENERIC_WORDS or w in ACTIVITY_WORDS for w in key) or (
            len(key) == 1 and key[0] in exclude
        ):
            continue
        if len(key) > 1 and not code and key[-1] in _TRAILING_FILLER:
            continue
        if len(key) == 1:
            score = weight[key[0]] if not code else math.log2(1 + count) * 1.8
        else:
            if count < 2:
                continue  # multi-word phrases must recur
            # Cohesion: how often the words occur together rather than apart.
            cohesion = count / min(term_freq.get(w, count) for w in key)
            score = sum(weight.get(w, 0.0) for w in key) * cohesion
        score *= 1.15 - 0.3 * cands.first[key] / span
        if not code and cands.proper[key] * 2 >= count:
            score *= 1.3
        if len(key) == 1 and len(key[0]) < 3:
            score *= 0.5
        scored.append((score, " ".join(key), key))
    scored.sort(key=lambda item: (-item[0], item[1]))
    chosen: list[str] = []
    covered: list[frozenset[str]] = []
    for _, _, key in scored:
        code = key in cands.code
        terms = frozenset(token_terms(key[0])) if code else frozenset(key)
        if not terms or any(terms <= c or (c <= terms and not code) for c in covered):
            continue
        forms = cands.forms[key]
        form = min(forms.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if not code and any(f.islower() for f in forms):
            form = form.lower()  # capitalised only at sentence starts: a common word
        chosen.append(form)
        covered.append(terms)
        if len(chosen) == k:
            break
    return chosen
