"""The ``env_assignment`` kind: values of secret-named keys (``NAME=value``, ``"name": "value"``,
``--name value``), and :func:`secret_name_strength`, the policy of which names are secret.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from memtoc.ingest.redact_kinds import (
    ALNUM,
    CODEISH,
    MARKER_PREFIX,
    has_digit_and_letter,
    is_placeholder,
    marker,
)

ENV_KIND = "env_assignment"

_STRONG_WORDS = """secret token password passwd passphrase credential credentials apikey privatekey
    secretkey accesskey accountkey authkey signingkey encryptionkey masterkey clientkey sharedkey
    storagekey sessionkey webhookkey"""
_STRONG_SUFFIXES = tuple(_STRONG_WORDS.split())
"""A key name whose letters (separators dropped, lower-cased) end with one of these is secret."""
_TOKEN_NOT_SECRET_WORDS = """bos eos pad unk mask cls sep stop special start end image audio video
    max min num total input output prompt completion reasoning cached eot sot"""
_NOT_SECRET_TOKEN = frozenset(_TOKEN_NOT_SECRET_WORDS.split())
"""``<word>_token`` names that are tokenizer vocabulary or counts, not credentials."""
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@lru_cache(maxsize=4096)
def secret_name_strength(name: str) -> Literal["strong", "generic"] | None:
    """How surely a key name denotes a secret.

    ``"strong"``: the name ends with a secret word (``password``, ``client_secret``,
    ``accessToken``, ``X-Api-Key``, ``DB_PASS``, ``smtp_pwd`` …): any literal value is redacted.
    ``"generic"``: an env-style ``UPPER_SNAKE`` name ending in ``KEY`` (``ACME_SERVICE_KEY``):
    only a high-entropy value is. ``None``: not a secret name — including ``max_tokens``,
    ``token_count``, ``pad_token``, ``public_key``, bare ``pwd`` and ``pass``.
    """
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words:
        return None
    flat = "".join(words)
    last, prev = words[-1], (words[-2] if len(words) > 1 else "")
    if "public" in words:
        return None
    if last == "token" and prev in _NOT_SECRET_TOKEN:
        return None
    if flat.endswith(_STRONG_SUFFIXES):
        return "strong"
    if last in ("pass", "pwd") and prev:
        return "strong"
    stripped = name.strip("-_.$@")
    if last == "key" and prev and stripped.isupper() and "_" in stripped:
        return "generic"
    return None


_ASSIGN = re.compile(
    r"""(?i:(?P<w>secret|token|password|passwd|passphrase|pass|pwd|credentials?|key))
    (?P<kq>\\?["'`]\]?)?  # a quoted key's closing quote: "password": / \"password\": / ['password'] =
    (?:(?P<op>[ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*)|(?P<sp>[ \t]+))  # operator / --flag space
    (?:\\"(?P<eq>[^"\\\n]*+(?:\\(?!")[^"\\\n]*+)*+)(?:\\")?  # the value, maybe unclosed
    |"(?P<dq>[^"\\\n]*+(?:\\.[^"\\\n]*+)*+)"?
    |'(?P<sq>[^'\n]*+)'?
    |`(?P<bq>[^`\n]*+)`?
    |(?P<uq>[^\s"'`,;&(){}\[\]]++(?:&(?![A-Za-z_][\w.-]*=)[^\s"'`,;&(){}\[\]]*+)*+))?""",
    re.VERBOSE,
)
"""A secret word ending a key name, the key's closing quote, the operator and the value."""
_VALUE_GROUPS = frozenset({"eq", "dq", "sq", "bq", "uq"})
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$@-"


_ESCAPED_BREAK = re.compile(r"(?<!\\)\\[nrt]")
"""A line break or tab as JSON or a string literal escapes it: a credential is one line, so a value
ends there (``if API_KEY:\\n    client = …`` in a tool call's JSON assigns nothing)."""
_SECRET_NAME_VALUE = re.compile(r"[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)+")
_LOWER_WORD = re.compile(r"[a-z]++[.:!?]?")


def high_entropy(value: str) -> bool:
    return len(value) >= 16 and has_digit_and_letter(value) and len(set(value)) >= 8


@lru_cache(maxsize=4096)
def value_is_secret(value: str, literal: bool, env_style: bool, generic: bool) -> bool:
    """Whether a secret-named key's value is a credential to redact (see module docstring).

    Cached: logs repeat the same assignments, and a pathological text repeats one millions of
    times.
    """
    if not (literal or env_style or generic) and CODEISH.fullmatch(value):
        return False  # a reference in code (the common case, so it is tested first)
    if value.startswith(MARKER_PREFIX) or ALNUM.search(value) is None:
        return False
    if is_placeholder(value):
        return False
    if _SECRET_NAME_VALUE.fullmatch(value) and secret_name_strength(value) is not None:
        return False  # apiKey: "MY_PROVIDER_API_KEY": the variable that holds it, named
    if generic:
        return high_entropy(value)
    if literal or env_style:
        return True
    if value.isdigit():
        return len(value) >= 6
    return True


_OP_START = "\"'`\\ \t:="
ENV_WORD_FOLLOWERS: tuple[tuple[str, str], ...] = (
    ("secret", _OP_START),
    ("token", _OP_START),
    ("pass", _OP_START + "wp"),  # pass, password, passwd, passphrase
    ("pwd", _OP_START),
    ("cred", "e"),  # credential(s)
    ("key", _OP_START),
)
"""Each secret word of :data:`_ASSIGN` with the characters that may follow it."""
ENV_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (word, re.compile(re.escape(word) + "(?=[" + re.escape(after) + "])"))
    for word, after in ENV_WORD_FOLLOWERS
)
"""Where a secret word of :data:`_ASSIGN` can start, with the characters that may follow it (a
quote closing the key, the operator, or the rest of a longer word). Each regex has a literal
prefix, so ``re`` skips ``keys``, ``tokens``, ``passed`` and ``KeyError`` in C; the follower is a
lookahead, so overlapping words (``passpassword=``: ``pass`` at 0 and at 4) are all found."""

_GATE_WORDS = (
    ("secret", "secret"),
    ("token", "token"),
    ("pass", "pass(?:word|wd|phrase)?"),
    ("pwd", "pwd"),
    ("cred", "credentials?"),
    ("key", "key"),
)
GATE_WORD_FORMS: dict[str, tuple[str, ...]] = {
    "secret": ("secret",),
    "token": ("token",),
    "pass": ("pass", "password", "passwd", "passphrase"),
    "pwd": ("pwd",),
    "cred": ("credential", "credentials"),
    "key": ("key",),
}
"""Every word each of :data:`_GATE_WORDS`' alternations takes (a test checks it): the batch
prefilter looks for all of them in one pass, then asks the word's gate regex at each."""
_BLANK = r"(?:[ \t]|\\t)"
"""A blank, or a tab as JSON writes it (metadata is read as JSON)."""
GATE_OPERATOR = r"[\\\"'`]{0,4}\]?" + _BLANK + "*[:=]"
"""What must follow a secret word for an ``op`` match of :data:`_ASSIGN`: the key's closing quote
(``\\?["'`]``, or two quote characters as the ``aws_secret_access_key`` kind allows; up to four
characters, as JSON escapes each), blanks, then ``:`` or ``=`` (every operator, ``:=`` and ``=>``
included, starts with one of them)."""
GATE_SPACE = r"[\\\"'`]{0,4}" + _BLANK
"""What follows a secret word for a ``sp`` match (``--password value``): counts only in a flag."""
GATE_JSON_KEY = r'(?:[^A-Za-z0-9"\\\n\x00]|\\[^u]|\\u[0-9a-fA-F]{4})*"[ \t]*:'
"""The rest of a JSON key after a secret word, then ``":``: characters that are no letters or
digits (so no further word for :func:`secret_name_strength`), or JSON escapes. A metadata key
like ``"-----END PRIVATE KEY-----"`` or ``"password@"`` is secret-named for
:meth:`Redactor.redact_json`, which reads the whole key."""
ASSIGNMENT_GATES: tuple[tuple[str, str], ...] = tuple(
    (word, f"(?P<w>{alt})(?:(?P<op>{GATE_OPERATOR})|(?P<key>{GATE_JSON_KEY})|(?P<sp>{GATE_SPACE}))")
    for word, alt in _GATE_WORDS
)
"""Per secret word: a literal (for ``in``) and one regex source for both forms, compiled here for
text and in :mod:`memtoc.ingest.redact_gate` for bytes (each has a literal prefix, so ``re``
finds its hits in C; one pass per word).

An assignment is redacted only when :data:`_ASSIGN` matches with an operator after the word
(``key=``, ``"token": ``, ``password := ``; group ``op``) or with blanks after a word that ends a
``--flag`` name (group ``sp``), and only when the key name is secret (:func:`name_may_be_secret`); so prose
like "password reset", "the key is" or "tests pass now", and code like ``d['key'] = v`` or
``cache_key = …``, open no gate. Group ``w`` is the word as :data:`_ASSIGN` takes it."""
_STR_GATES = tuple((word, re.compile(rx)) for word, rx in ASSIGNMENT_GATES)
_NAME_BYTES = _NAME_CHARS.encode()


def name_may_be_secret(run: str, word: str, flag: bool) -> bool:
    """Whether :func:`redact_assignments` may call the key ending with ``word`` secret, where
    ``run`` is the ``_NAME_CHARS`` run within 64 characters before the word (original case).

    It takes the name as that run plus the word, but sees the text after the kinds applied
    before it; a replacement ends with ``]``, which ends a name, so the name it sees may be any
    suffix of ``run`` plus the word: each is tried (``secret_name_strength`` is cached). With
    ``flag`` (blanks after the word, not an operator) the name must also start with ``-``.
    """
    name = run + word
    for i in range(len(run) + 1):
        if flag and name[i] != "-":
            continue
        if secret_name_strength(name[i:].lstrip("-")) is not None:
            return True
    return False


def _name_run(text: str, at: int) -> str:
    before = text[max(0, at - 64) : at]
    return before[len(before.rstrip(_NAME_CHARS)) :]


def gate_hit(text: str, m: re.Match[str], flag: bool) -> bool:
    """A gate regex's match (``ASSIGNMENT_GATES``, searched in the lower-cased text) in the
    original ``text``: does it name a secret key?"""
    at = m.start()
    return name_may_be_secret(_name_run(text, at), text[at : m.end("w")], flag)


_QUOTES = frozenset(b"\"'`")
_JSON_KEY_REST = re.compile(GATE_JSON_KEY.encode())
_KEY_SPAN = 256


def gate_hit_bytes(data: bytes, m: re.Match[bytes], flag: bool) -> bool:
    """:func:`gate_hit` on UTF-8 bytes: the name run and the word are ASCII, so byte and
    character windows agree on them (a multi-byte character ends the run as it does in the text).

    The batch prefilter also reads metadata as JSON, where :meth:`Redactor.redact_json` judges a
    whole key (``"my api key": …``), not just its name run: so before a closing quote, every
    suffix of the quoted key is tried too (a key with an escape, or longer than 256 bytes,
    always counts).
    """
    at, end = m.start(), m.end("w")
    word = data[at:end].decode("ascii")
    before = data[max(0, at - 64) : at]
    run = before[len(before.rstrip(_NAME_BYTES)) :].decode("ascii")
    if name_may_be_secret(run, word, flag):
        return True
    if flag:
        return False
    if m["key"] is not None or _JSON_KEY_REST.match(data, end):
        quote = 0x22
    else:
        closing = data[end : end + 4].lstrip(b"\\")[:1]
        if not closing or closing[0] not in _QUOTES:
            return False
        quote = closing[0]
    start = data.rfind(quote, max(0, at - _KEY_SPAN), at)
    if start < 0 or (start and data[start - 1] == 0x5C):  # not found, or an escaped quote
        return True
    key = data[start + 1 : at]
    if b"\\" in key or b"\x00" in key:
        return True
    try:
        return name_may_be_secret(key.decode(), word, False)
    except UnicodeDecodeError:
        return True


def assignment_possible(low: str, text: str | None = None) -> bool:
    """The ``keyword`` gate's main half: could the lower-cased text hold an assignment (or an
    AWS secret key or Azure account key, which are assignments too: their key names are secret
    names)? ``text`` is the original (same length as ``low``) for the name check; without it
    any operator or flag form counts."""
    for word, rx in _STR_GATES:
        if word not in low:
            continue
        m = rx.search(low)
        while m is not None:  # hits may overlap (``token\\token:``): resume one character on
            if text is None or gate_hit(text, m, m["sp"] is not None):
                return True
            m = rx.search(low, m.start() + 1)
    return False


def assignment_starts(text: str, low: str) -> list[int] | None:
    """Where a secret word followed by a plausible character starts, ascending; None when
    positions in ``low`` are not those of ``text`` (lower-casing expanded a character) and the
    regex must search instead. The regex :data:`_ASSIGN` is then only *matched* there: far
    cheaper than a case-insensitive regex search over the whole text."""
    if len(low) != len(text):
        return None
    return sorted({m.start() for word, rx in ENV_WORDS if word in low for m in rx.finditer(low)})


def _in_expansion(text: str, at: int) -> bool:
    """Whether the key name at ``at`` opens a shell parameter expansion (``${NAME…}``,
    ``${!NAME…}``, ``${#NAME…}``): its ``:`` is an operator of the expansion, not an assignment."""
    return text[max(0, at - 2) : at] == "${" or text[max(0, at - 3) : at] in ("${!", "${#")


def _is_prose_for_ambiguous_name(name: str, value: str) -> bool:
    """A sentence under a key ending in ``pass`` or ``pwd``, words that also mean a test's pass
    or the working directory (``"test-pass": "Tests pass but the refactored code …"``): prose, not
    a password (a passphrase goes under ``passphrase`` or ``password``, which stay strong)."""
    words = _WORDS.findall(name)
    return bool(words) and words[-1].lower() in ("pass", "pwd") and len(value.split()) >= 3


def redact_assignments(text: str, starts: list[int] | None) -> tuple[str, int]:
    """The ``env_assignment`` kind: redact the values of secret-named keys in ``text``
    (``starts`` from :func:`assignment_starts`)."""
    out: list[str] = []
    done = pos = count = 0
    tag = marker(ENV_KIND)
    match, search = _ASSIGN.match, _ASSIGN.search
    k = 0
    while True:
        if starts is None:
            m = search(text, pos)
        else:
            m = None
            while m is None and k < len(starts):
                if starts[k] >= pos:
                    m = match(text, starts[k])
                k += 1
        if m is None:
            break
        begin = m.start()
        pos = m.end("op") if m["sp"] is None else m.end("sp")  # a rejected value is searched too
        group = m.lastgroup
        if group not in _VALUE_GROUPS:
            continue
        before = text[max(0, begin - 64) : begin]
        name = before[len(before.rstrip(_NAME_CHARS)) :] + m["w"]
        flag = name.startswith("-")
        if m["sp"] is not None and not flag:
            continue
        strength = secret_name_strength(name.lstrip("-"))
        if strength is None:
            continue
        start, end = m.span(group)
        if group == "uq" and text[end : end + 1] in ("(", "[", "{"):
            continue  # a call or an index: code, not a literal
        at = begin - (len(name) - len(m["w"]))  # where the key name starts
        if group == "uq" and (
            text[at - 1 : at] == "$" or text[max(0, at - 5) : at].lower() == "$env:"
        ):
            continue  # $NAME = … / $env:NAME = …: PowerShell, PHP: a bare value is code
        if m["op"] == ":" and m["kq"] is None and text[at - 1 : at] == ":":
            continue  # a:b:secret:c — a part of a colon-separated name (an ARN), not a key
        if _in_expansion(text, at):
            # ${NAME:?message} / ${NAME:+alternate}: no value; ${NAME:-default}: the default is
            if (m["op"] or "").strip() != ":" or text[start : start + 1] not in ("-", "="):
                continue
            start += 1
        value = text[start:end]
        if (cut := _ESCAPED_BREAK.search(value)) is not None:
            end = start + cut.start()
            value = value[: cut.start()]
        if m["sp"] is not None and (
            m["kq"] is not None or (group == "uq" and _LOWER_WORD.fullmatch(value))
        ):
            continue  # "`--api-key` and …", "--api-key flag": a flag named in prose, no value
        if _is_prose_for_ambiguous_name(name, value):
            continue
        env_style = flag or ((m["op"] or "").strip() == "=" and name.isupper())
        if not value_is_secret(value, group != "uq", env_style, strength == "generic"):
            continue
        out.append(text[done:start])
        out.append(tag)
        done = pos = end
        count += 1
    if not count:
        return text, 0
    out.append(text[done:])
    return "".join(out), count
