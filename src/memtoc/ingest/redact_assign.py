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
    (?P<kq>\\?["'`])?  # the closing quote of a quoted key: "password": / \"password\":
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
    (word, re.compile(re.escape(word) + "[" + re.escape(after) + "]"))
    for word, after in ENV_WORD_FOLLOWERS
)
"""Where a secret word of :data:`_ASSIGN` can start, with the characters that may follow it (a
quote closing the key, the operator, or the rest of a longer word). Each regex has a literal
prefix, so ``re`` skips ``keys``, ``tokens``, ``passed`` and ``KeyError`` in C."""


def assignment_possible(low: str) -> bool:
    """The ``keyword`` gate's main half: could the lower-cased text hold an assignment (or an
    AWS secret key or Azure account key, which are assignments too)?"""
    for word, rx in ENV_WORDS:  # noqa: SIM110 (a plain loop: this is the hot path)
        if word in low and rx.search(low) is not None:
            return True
    return False


def assignment_starts(text: str, low: str) -> list[int] | None:
    """Where a secret word followed by a plausible character starts, ascending; None when
    positions in ``low`` are not those of ``text`` (lower-casing expanded a character) and the
    regex must search instead. The regex :data:`_ASSIGN` is then only *matched* there: far
    cheaper than a case-insensitive regex search over the whole text."""
    if len(low) != len(text):
        return None
    return sorted({m.start() for word, rx in ENV_WORDS if word in low for m in rx.finditer(low)})


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
        env_style = flag or ((m["op"] or "").strip() == "=" and name.isupper())
        if not value_is_secret(text[start:end], group != "uq", env_style, strength == "generic"):
            continue
        out.append(text[done:start])
        out.append(tag)
        done = pos = end
        count += 1
    if not count:
        return text, 0
    out.append(text[done:])
    return "".join(out), count
