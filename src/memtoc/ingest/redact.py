"""Secret redaction before storage: no credential reaches the database file or its WAL.

The ingest orchestrator runs every event's text and metadata through one :class:`Redactor`
before the insert. A secret is replaced in place by ``[REDACTED:<kind>]`` and the text around it
is kept, so the event still reads naturally (``url_password`` keeps the user and the host:
``postgres://app:[REDACTED:url_password]@db:5432``; assignments keep the key:
``API_TOKEN=[REDACTED:env_assignment]``).

**Kinds.** Each named kind is one regex for one credential format (``DEFAULT_KINDS`` lists them in
the order they are applied: specific formats first, so ``Bearer ghp_…`` is reported as
``github_token``; the context-based kinds ``url_password``, ``bearer_token``, ``basic_auth`` and
``env_assignment`` last). ``env_assignment`` is the one kind that is code rather than a regex: it
finds ``NAME=value`` / ``NAME: value`` / ``"name": "value"`` / ``--name value`` whose key names a
secret (see :func:`secret_name_strength`) and redacts the value only. There is no blind entropy
scan of free text (git SHAs, ULIDs, UUIDs and base64 blobs would all be false positives); a
high-entropy value is redacted only when its key is secret-named (``SOME_SERVICE_KEY=…``).

**What is deliberately not redacted** (documented decisions):

* empty values, ``None``/``null``/``true``/…, and placeholders: ``<your-key>``, ``${VAR}``, ``$VAR``,
  ``%VAR%``, ``{{ var }}``, ``{var}``, masks (``****``, ``xxxx``, ``sk-…xxxx``), ``changeme``,
  ``your_api_key_here``, ``example``, and the bare words ``password``/``secret``/``token`` — they
  are documentation, not credentials, and keeping them keeps docs readable;
* in code or YAML context (``name = value`` / ``name: value``), an unquoted value that is an
  identifier or dotted path without digits (``api_key: str``, ``token = self.token``,
  ``password = settings.DB_PASSWORD``): that is a reference, not a literal. Quoted literals and
  ``.env``-style lines (``UPPER_NAME=value``) are always redacted, so ``DB_PASSWORD=postgres`` is;
* numbers shorter than 6 digits and non-string JSON values under secret-named keys;
* Twilio SIDs (``AC``/``SK`` + 32 hex) unless the text mentions Twilio.

A private key whose ``-----END`` line is missing (a truncated log) is redacted from ``-----BEGIN``
to the first character outside the PEM alphabet: over-redacting beats leaking half a key.

**Speed.** Redaction runs on every event, so the clean path is a prefilter of a few C-level
passes (about 2 µs for a 200-byte text): a ``bytes.translate`` pass that finds runs of 16 or more
``[A-Za-z0-9_-]`` holding an uppercase letter or a digit (every token format lies in one; prose and
``snake_case`` code mostly have none), plus nine substring tests on the lower-cased text for the
words every context match holds (``key``, ``token``, ``pass``, ``secret``, ``pwd``, ``cred``,
``auth``, ``bearer``, ``://``). A regex alternation of all the anchors would cost 10 to 30 times more in
CPython's ``re``. Only when a gate fires are the kinds behind it tried, each after a substring
test of its own anchors (token anchors are looked for in the long runs only).
:meth:`Redactor.redact_json` gates once on all the strings of a value before walking it.

**Configuration.** ``Redactor(kinds=…, extra_patterns=…, disabled=…)``: run a subset, add named
user regexes (a named group ``secret`` limits the replacement to that group), or disable kinds.
User patterns are not prefiltered (their anchors are unknown), so each one costs a regex search
per text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from memtoc.errors import ConfigError
from memtoc.model import JsonValue

__all__ = ["DEFAULT_KINDS", "Redactor", "SecretKind", "marker", "secret_name_strength"]

MARKER_PREFIX = "[REDACTED:"

Gate = Literal["token", "keyword", "always"]
"""Which prefilter proves a kind may match: a long token run, a keyword, or none (always run)."""


def marker(kind: str) -> str:
    """The replacement text for a secret of ``kind``."""
    return f"{MARKER_PREFIX}{kind}]"


_RUN_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_LOWER_RUN_BYTES = b"abcdefghijklmnopqrstuvwxyz_-"


@dataclass(frozen=True, slots=True)
class SecretKind:
    """One named secret format.

    ``pattern`` finds it; when the pattern has a group named ``secret`` only that group is
    replaced, else the whole match. ``anchors`` (case-sensitive) and ``lower_anchors`` (searched
    in the lower-cased text): at least one must occur for the pattern to be tried; a kind
    without anchors is tried whenever its gate fires. A ``token``-gated kind's anchors made only
    of ``[A-Za-z0-9_-]`` are searched in the long runs alone (they are part of the token).
    ``check`` vets a candidate secret (e.g. "has a digit") to keep look-alike identifiers out.
    """

    name: str
    pattern: re.Pattern[str]
    gate: Gate
    anchors: tuple[str, ...] = ()
    lower_anchors: tuple[str, ...] = ()
    check: Callable[[str], bool] | None = None
    masked_ok: bool = False
    """Redact even a match holding a mask (``xxxx``, ``***``, ``...``): for private keys, whose
    elided or truncated bodies are still key material."""
    run_anchors: tuple[str, ...] = field(init=False, repr=False, compare=False)
    text_anchors: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        in_run: tuple[str, ...] = ()
        if self.gate == "token":
            in_run = tuple(a for a in self.anchors if _RUN_ALPHABET.issuperset(a))
        object.__setattr__(self, "run_anchors", in_run)
        object.__setattr__(self, "text_anchors", tuple(a for a in self.anchors if a not in in_run))

    def apply(self, text: str) -> tuple[str, int]:
        """Replace every vetted match; returns the new text and the number of replacements."""
        count = 0
        has_group = "secret" in self.pattern.groupindex
        tag = marker(self.name)

        def replace(m: re.Match[str]) -> str:
            nonlocal count
            secret = m.group("secret") if has_group else m.group(0)
            if not secret or MARKER_PREFIX in secret:
                return m.group(0)
            if not self.masked_ok and _MASK.search(secret):
                return m.group(0)  # an elided example (``ghp_xxxx…``, ``sk-...``), not a secret
            if self.check is not None and not self.check(secret):
                return m.group(0)
            count += 1
            if not has_group:
                return tag
            start, end = m.span("secret")
            whole = m.group(0)
            base = m.start()
            return whole[: start - base] + tag + whole[end - base :]

        return self.pattern.sub(replace, text), count


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _has_digit_and_letter(s: str) -> bool:
    return _has_digit(s) and any(c.isalpha() for c in s)


def _has_upper_or_digit(s: str) -> bool:
    return bool(s.encode("ascii", "ignore").translate(None, _LOWER_RUN_BYTES))


def _last_segment_upper_or_digit(s: str) -> bool:
    return _has_upper_or_digit(re.split(r"[./]", s)[-1])


def _mixed_case(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s)


_PLACEHOLDER = re.compile(
    r"""<[^<>]*>|\$\{[^}]*\}?|\$\(.*|\$[A-Za-z_]\w*|%[A-Za-z_]\w*%|\{\{.*|\{[\w.]*\}|%\(\w+\)s|%s
    |[|>][-+]?|(.)\1{2,}|(?:change|replace)[_-]?me|your[\w\-\s]*|[\w\-\s]*[_\-\s]here
    |placeholder|examples?|dummy|redacted|none|null|nil|undefined|true|false|yes|no|on|off
    |required|optional|todo|tbd|n/?a|empty|secret|password|passwd|token|api[_-]?key|\.\.\.|…""",
    re.IGNORECASE | re.VERBOSE,
)
_MASK = re.compile(r"x{4,}|X{4,}|\*{3,}|•{3,}|\.{3}|…")
_ALNUM = re.compile(r"[^\W_]")
_CODEISH = re.compile(r"[&*]*[A-Za-z_][A-Za-z_.:<>?&*|]*")
"""An identifier, dotted path or type (``str``, ``self.token``, ``&str``): a reference."""


_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-/]*|[A-Za-z]:\\[\w.\\-]*")
"""A filesystem path (``/run/secrets/db``, ``~/.aws/credentials``): where a secret is, not it."""


def _is_placeholder(value: str) -> bool:
    """A documented non-secret: template, mask, stock example word or file path."""
    return bool(_PLACEHOLDER.fullmatch(value) or _MASK.search(value) or _PATH.fullmatch(value))


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


_PH = r"[^\s/\"'<>]"  # a URL password character (anything that cannot end the authority part)


def _k(
    name: str,
    regex: str,
    gate: Gate,
    anchors: tuple[str, ...] = (),
    lower: tuple[str, ...] = (),
    check: Callable[[str], bool] | None = None,
    masked_ok: bool = False,
) -> SecretKind:
    return SecretKind(name, re.compile(regex), gate, anchors, lower, check, masked_ok)


# Application order matters: a match is replaced before later kinds look at the text, and no kind
# matches a marker, so the first kind to claim a secret names it.
_BUILTIN: tuple[SecretKind, ...] = (
    _k(
        "private_key_block",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"[A-Za-z0-9+/=\s\\:,.]*+(?:-(?!----)[A-Za-z0-9+/=\s\\:,.]*+)*+"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        "keyword",
        anchors=("-----BEGIN",),
        masked_ok=True,
    ),
    _k(
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{13,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        "token",
        anchors=("eyJ",),
    ),
    _k(
        "anthropic_key",
        r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("sk-ant-",),
        check=_has_digit,
    ),
    _k(
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("sk-",),
        check=_has_digit_and_letter,
    ),
    _k(
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        "token",
        anchors=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        check=_has_upper_or_digit,
    ),
    _k(
        "gitlab_token",
        r"(?<![A-Za-z0-9_-])gl(?:pat|rt|dt|ptt)-[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("glpat-", "glrt-", "gldt-", "glptt-"),
        check=_has_upper_or_digit,
    ),
    _k(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]{16,})",
        "token",
        anchors=("hooks.slack.com",),
        check=_last_segment_upper_or_digit,
    ),
    _k(
        "slack_token",
        r"(?<![A-Za-z0-9_-])(?:xox[abposre]|xapp)-[A-Za-z0-9-]{11,}",
        "token",
        anchors=("xox", "xapp-"),
        check=_has_digit,
    ),
    _k(
        "stripe_key",
        r"(?<![A-Za-z0-9_])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        "token",
        anchors=("k_live_", "k_test_", "whsec_"),
        check=_has_upper_or_digit,
    ),
    _k(
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
        "token",
        anchors=("AIza",),
    ),
    _k(
        "aws_access_key_id",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        "token",
        anchors=("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _k(
        "npm_token",
        r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
        "token",
        anchors=("npm_",),
        check=_has_upper_or_digit,
    ),
    _k(
        "huggingface_token",
        r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,40}(?![A-Za-z0-9])",
        "token",
        anchors=("hf_",),
        check=_mixed_case,
    ),
    _k(
        "sendgrid_key",
        r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        "token",
        anchors=("SG.",),
        check=_last_segment_upper_or_digit,
    ),
    _k(
        "twilio_key",
        r"(?<![A-Za-z0-9])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])",
        "token",
        lower=("twilio",),
    ),
    _k(
        "aws_secret_access_key",
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"'\\]{0,2}[ \t]*"
        r"(?::=|=>|=|:)[ \t]*[\"'\\]{0,2}(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "keyword",
        lower=("secret",),
    ),
    _k(
        "azure_storage_key",
        r"(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
        "keyword",
        anchors=("AccountKey=", "SharedAccessKey="),
    ),
    _k(
        "url_password",
        r"://[^\s:/@?#\[\]\"'<>]{0,256}:(?P<secret>(?!\[REDACTED:)" + _PH + r"{1,128})@",
        "keyword",
        anchors=("://",),
        check=_not_placeholder,
    ),
    _k(
        "bearer_token",
        r"(?i:\bbearer)[ \t]+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        "keyword",
        lower=("bearer",),
        check=_has_digit_and_letter,
    ),
    _k(
        "basic_auth",
        r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        "keyword",
        lower=("authorization",),
    ),
)

ENV_KIND = "env_assignment"

DEFAULT_KINDS: tuple[str, ...] = (*(k.name for k in _BUILTIN), ENV_KIND)
"""Every built-in kind, in the order they are applied."""

_CONTEXT_KINDS = frozenset({"url_password", "bearer_token", "basic_auth"})

# --- the prefilter ---------------------------------------------------------------------------

_RUN = b"a" * 16
_RUN_TABLE = bytes(0x61 if chr(i) in _RUN_ALPHABET else 0x20 for i in range(256))
"""Maps ``[A-Za-z0-9_-]`` to ``a`` and every other byte (UTF-8 continuations too) to a space."""


def _encode(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates
        return text.encode("utf-8", "surrogatepass")


def _long_runs(data: bytes, classes: bytes) -> str:
    """The runs of 16+ ``[A-Za-z0-9_-]`` holding an uppercase letter or a digit, joined by spaces.

    Every token format lies inside such a run (the ``check`` of each token kind insists on it),
    so the token kinds' anchors are searched there, not in the whole text; all-lowercase runs
    (``snake_case_identifiers``, ``--kebab-case-flags``) are skipped.
    """
    parts: list[str] = []
    i = classes.find(_RUN)
    while i >= 0:
        j = classes.find(b" ", i)
        if j < 0:
            j = len(classes)
        run = data[i:j]
        if run.translate(None, _LOWER_RUN_BYTES):
            parts.append(run.decode("ascii"))
        i = classes.find(_RUN, j)
    return " ".join(parts)


def _has_keyword(low: str) -> bool:
    """Whether the lower-cased text holds a word that every ``keyword``-gated match holds."""
    return (
        "key" in low
        or "token" in low
        or "pass" in low
        or "secret" in low
        or "pwd" in low
        or "cred" in low
        or "auth" in low
        or "bearer" in low
        or "://" in low
    )


# --- env_assignment: secret-named keys --------------------------------------------------------

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


# The secret word the key name must end with, then the key's closing quote, then the operator.
_ASSIGN = re.compile(
    r"(?P<w>secret|token|password|passwd|passphrase|pass|pwd|credentials?|key)"
    r"(?P<kq>\\?[\"'`])?"
    r"(?:(?P<op>[ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*)|(?P<sp>[ \t]+))",
    re.IGNORECASE,
)
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$@-"
_VALUE = re.compile(
    r"""\\"(?P<eq>[^"\\\n]*+(?:\\(?!")[^"\\\n]*+)*+)(?:\\")?
    |"(?P<dq>[^"\\\n]*+(?:\\.[^"\\\n]*+)*+)"?
    |'(?P<sq>[^'\n]*+)'?
    |`(?P<bq>[^`\n]*+)`?
    |(?P<uq>[^\s"'`,;&(){}\[\]]++(?:&(?![A-Za-z_][\w.-]*=)[^\s"'`,;&(){}\[\]]*+)*+)""",
    re.VERBOSE,
)


def _high_entropy(value: str) -> bool:
    return len(value) >= 16 and _has_digit_and_letter(value) and len(set(value)) >= 8


@lru_cache(maxsize=4096)
def _value_is_secret(value: str, literal: bool, env_style: bool, generic: bool) -> bool:
    """Whether a secret-named key's value is a credential to redact (see module docstring).

    Cached: logs repeat the same assignments, and a pathological text repeats one millions of
    times.
    """
    if not (literal or env_style or generic) and _CODEISH.fullmatch(value):
        return False  # a reference in code (the common case, so it is tested first)
    if value.startswith(MARKER_PREFIX) or _ALNUM.search(value) is None:
        return False
    if _is_placeholder(value):
        return False
    if generic:
        return _high_entropy(value)
    if literal or env_style:
        return True
    if value.isdigit():
        return len(value) >= 6
    return True


_ENV_WORDS = ("secret", "token", "pass", "pwd", "cred", "key")
"""Where a secret word can start (``pass`` also finds ``password``/``passwd``/``passphrase``)."""


def _assignment_starts(text: str, low: str) -> list[int] | None:
    """Where a secret word starts, ascending; None when positions in ``low`` are not those of
    ``text`` (lower-casing expanded a character) and the regex must search instead.

    ``str.find`` on the lower-cased text is far cheaper than a case-insensitive regex search;
    the regex is then only *matched* at these positions.
    """
    if len(low) != len(text):
        return None
    starts: set[int] = set()
    for word in _ENV_WORDS:
        i = low.find(word)
        while i >= 0:
            starts.add(i)
            i = low.find(word, i + 1)
    return sorted(starts)


def _redact_assignments(text: str, low: str) -> tuple[str, int]:
    """The ``env_assignment`` kind: redact the values of secret-named keys in ``text``."""
    out: list[str] = []
    done = pos = count = 0
    tag = marker(ENV_KIND)
    starts = _assignment_starts(text, low)
    match, search, value_at = _ASSIGN.match, _ASSIGN.search, _VALUE.match
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
        begin, pos = m.span()
        before = text[max(0, begin - 64) : begin]
        name = before[len(before.rstrip(_NAME_CHARS)) :] + m["w"]
        flag = name.startswith("-")
        if m["sp"] is not None and not flag:
            continue
        strength = secret_name_strength(name.lstrip("-"))
        if strength is None or (v := value_at(text, pos)) is None:
            continue
        group = v.lastgroup or "uq"
        start, end = v.span(group)
        if group == "uq" and text[end : end + 1] in ("(", "[", "{"):
            continue  # a call or an index: code, not a literal
        env_style = flag or ((m["op"] or "").strip() == "=" and name.isupper())
        if not _value_is_secret(text[start:end], group != "uq", env_style, strength == "generic"):
            continue
        out.append(text[done:start])
        out.append(tag)
        done = pos = end
        count += 1
    if not count:
        return text, 0
    out.append(text[done:])
    return "".join(out), count


# --- the redactor -----------------------------------------------------------------------------

_KIND_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class _Stage:
    """Consecutive kinds behind one gate, with their anchors flattened for one quick pass."""

    gate: Gate
    kinds: tuple[SecretKind, ...]
    run_anchors: tuple[tuple[str, int], ...]
    text_anchors: tuple[tuple[str, int], ...]
    lower_anchors: tuple[tuple[str, int], ...]
    anchorless: frozenset[int]

    @classmethod
    def of(cls, kinds: list[SecretKind]) -> _Stage:
        return cls(
            kinds[0].gate,
            tuple(kinds),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.run_anchors),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.text_anchors),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.lower_anchors),
            frozenset(i for i, k in enumerate(kinds) if not k.anchors and not k.lower_anchors),
        )

    def candidates(self, text: str, low: str, runs: str) -> list[SecretKind]:
        """The kinds one of whose anchors occurs, in application order."""
        hit = {i for a, i in self.run_anchors if a in runs}
        hit.update(i for a, i in self.text_anchors if a in text)
        hit.update(i for a, i in self.lower_anchors if a in low)
        hit |= self.anchorless
        return [self.kinds[i] for i in sorted(hit)]


class Redactor:
    """Replaces secrets with ``[REDACTED:<kind>]`` markers (module docstring: kinds, policy, cost).

    ``kinds``: the built-in kinds to run (default: all of :data:`DEFAULT_KINDS`);
    ``extra_patterns``: user kinds, name → regex (a named group ``secret`` narrows the
    replacement), applied after the built-in token formats and before the context kinds;
    ``disabled``: kinds to leave out. Unknown kind names, bad names and bad regexes raise
    :class:`~memtoc.errors.ConfigError` naming the offender.
    """

    def __init__(
        self,
        kinds: Iterable[str] | None = None,
        extra_patterns: Mapping[str, str] | None = None,
        disabled: Iterable[str] = (),
    ) -> None:
        wanted = DEFAULT_KINDS if kinds is None else tuple(kinds)
        extras = dict(extra_patterns or {})
        off = frozenset(disabled)
        for name in wanted:
            if name not in DEFAULT_KINDS:
                raise ConfigError(f"unknown secret kind {name!r}", setting="redact.kinds")
        for name in off:
            if name not in DEFAULT_KINDS and name not in extras:
                raise ConfigError(f"unknown secret kind {name!r}", setting="redact.disabled")
        user: list[SecretKind] = []
        for name, regex in extras.items():
            setting = f"redact.patterns.{name}"
            if not _KIND_NAME.fullmatch(name) or name in DEFAULT_KINDS:
                raise ConfigError(
                    "a pattern name must be 1-64 of [A-Za-z0-9_.-] and not a built-in kind",
                    setting=setting,
                )
            try:
                compiled = re.compile(regex)
            except re.error as exc:
                raise ConfigError(f"invalid regex {regex!r}: {exc}", setting=setting) from exc
            if compiled.fullmatch(""):
                raise ConfigError(f"regex {regex!r} matches the empty string", setting=setting)
            if name not in off:
                user.append(SecretKind(name, compiled, "always"))
        chosen = [k for k in _BUILTIN if k.name in wanted and k.name not in off]
        context = [k for k in chosen if k.name in _CONTEXT_KINDS]
        formats = [k for k in chosen if k.name not in _CONTEXT_KINDS]
        self._kinds: tuple[SecretKind, ...] = (*formats, *user, *context)
        self._assignments = ENV_KIND in wanted and ENV_KIND not in off
        self._always = bool(user)
        groups: list[list[SecretKind]] = []
        for kind in self._kinds:  # consecutive kinds behind the same gate form one stage
            if groups and groups[-1][0].gate == kind.gate:
                groups[-1].append(kind)
            else:
                groups.append([kind])
        self._stages = tuple(_Stage.of(group) for group in groups)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The enabled kinds, in the order they are applied."""
        names = tuple(k.name for k in self._kinds)
        return (*names, ENV_KIND) if self._assignments else names

    def _gates(self, text: str) -> tuple[str, bool, str] | None:
        """(lower-cased text, keyword gate, long runs), or None when no kind can match."""
        low = text.lower()
        keyword = _has_keyword(low)
        data = _encode(text)
        classes = data.translate(_RUN_TABLE)
        runs = _long_runs(data, classes) if _RUN in classes else ""
        if keyword or runs or self._always:
            return low, keyword, runs
        return None

    def might_contain_secret(self, text: str) -> bool:
        """The prefilter alone: False means :meth:`redact` would return ``text`` unchanged."""
        return bool(text) and self._gates(text) is not None

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """Return ``text`` with every secret replaced, and the number replaced per kind."""
        if not text:
            return text, {}
        gates = self._gates(text)
        if gates is None:
            return text, {}
        low, keyword, runs = gates
        counts: dict[str, int] = {}
        changed = False
        for stage in self._stages:
            if (stage.gate == "token" and not runs) or (stage.gate == "keyword" and not keyword):
                continue
            for kind in stage.candidates(text, low, runs):
                text, n = kind.apply(text)
                if n:
                    counts[kind.name] = n
                    changed = True
        if self._assignments and keyword:
            text, n = _redact_assignments(text, text.lower() if changed else low)
            if n:
                counts[ENV_KIND] = n
        return text, counts

    def redact_json(self, value: JsonValue) -> tuple[JsonValue, dict[str, int]]:
        """Redact every string inside a JSON value; dict keys are kept.

        A string under a secret-named key (``{"api_key": "abc123xyz"}``) is replaced whole as
        ``env_assignment`` (when that kind is enabled) by the same name and value policy as
        text assignments. Returns ``value`` itself when nothing was redacted.
        """
        parts: list[str] = []
        _collect_strings(value, parts)
        if not parts or not self.might_contain_secret("\n".join(parts)):
            return value, {}
        counts: dict[str, int] = {}
        return self._walk(value, counts), counts

    def _walk(self, value: JsonValue, counts: dict[str, int]) -> JsonValue:
        if isinstance(value, str):
            text, found = self.redact(value)
            for kind, n in found.items():
                counts[kind] = counts.get(kind, 0) + n
            return text
        if isinstance(value, dict):
            out: dict[object, JsonValue] = {}
            for key, item in value.items():
                if isinstance(item, str) and self._assignments:
                    strength = secret_name_strength(str(key))
                    if strength is not None and _value_is_secret(
                        item, True, False, strength == "generic"
                    ):
                        out[key] = marker(ENV_KIND)
                        counts[ENV_KIND] = counts.get(ENV_KIND, 0) + 1
                        continue
                out[key] = self._walk(item, counts)
            return out
        if isinstance(value, list | tuple):
            items = [self._walk(item, counts) for item in value]
            return items if isinstance(value, list) else tuple(items)
        return value


def _collect_strings(value: JsonValue, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            parts.append(str(key))
            _collect_strings(item, parts)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_strings(item, parts)
