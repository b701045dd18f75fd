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

**Speed.** Redaction runs on every event, so a prefilter of a few C-level passes decides first
whether any kind can match (about 2 µs for a clean 200-byte text on an idle machine):

* the *token gate*: one ``bytes.translate`` pass finds runs of 16 or more ``[A-Za-z0-9_-]`` that
  hold an uppercase letter or a digit. Every token format holds such a run (each token kind's
  ``check`` insists on the uppercase letter or digit), so prose and ``snake_case`` code open no
  gate; most formats *are* such a run from their first character (their regex refuses a
  preceding run character), and only runs that
  *start* with a known prefix (``sk-``, ``ghp_``, ``AKIA``, ``eyJ`` …) are searched for anchors,
  so ids and hashes (``toolu_01…``, git SHAs) cost nothing more;
* the *keyword gate*: a secret word followed by a character that can continue an assignment
  (``key=``, ``"token":``, ``password:``; ``keys``, ``passed`` and ``KeyError`` do not count),
  found with ``in`` and a literal-prefix regex per word, or ``://``, ``bearer``,
  ``authorization``, ``-----begin``.

A single regex alternation of all the anchors would cost 10 to 30 times more in CPython's
``re``. Only the kinds behind an open gate are tried, each after a substring test of its own
anchors; the assignment pass then runs its regex only at the positions the keyword gate found.
:meth:`Redactor.redact_json` redacts all the strings of a value joined into one text first and
walks the value only when that changed something or a key is secret-named. A test compares the
result with every regex run ungated, so the prefilter is an exact optimisation.

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
    context: tuple[str, ...] = ()
    """Words that must all occur in the lower-cased text besides an anchor (Twilio SIDs)."""
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
    context: tuple[str, ...] = (),
) -> SecretKind:
    return SecretKind(name, re.compile(regex), gate, anchors, lower, check, masked_ok, context)


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
        r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
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
        r"(?<![A-Za-z0-9_-])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        "token",
        anchors=("sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"),
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
        r"(?<![A-Za-z0-9_-])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        "token",
        anchors=("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _k(
        "npm_token",
        r"(?<![A-Za-z0-9_-])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
        "token",
        anchors=("npm_",),
        check=_has_upper_or_digit,
    ),
    _k(
        "huggingface_token",
        r"(?<![A-Za-z0-9_-])hf_[A-Za-z0-9]{30,40}(?![A-Za-z0-9])",
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
        r"(?<![A-Za-z0-9_-])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])",
        "token",
        anchors=("SK", "AC"),
        context=("twilio",),
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
_RUN_PREFIXES = tuple(a.encode() for k in _BUILTIN for a in k.run_anchors)
"""How a token kind's match begins: the start of its run."""

# --- the prefilter ---------------------------------------------------------------------------

_RUN = b"a" * 16
_RUN_TABLE = bytes(0x61 if chr(i) in _RUN_ALPHABET else 0x20 for i in range(256))
"""Maps ``[A-Za-z0-9_-]`` to ``a`` and every other byte (UTF-8 continuations too) to a space."""


def _encode(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates
        return text.encode("utf-8", "surrogatepass")


def _long_runs(data: bytes, classes: bytes) -> tuple[bool, str]:
    """Whether the text holds a *qualifying* run, and those that start like a token, joined.

    A qualifying run is 16+ ``[A-Za-z0-9_-]`` holding an uppercase letter or a digit. Every
    token format is such a run from its first character on: each token kind's regex refuses a
    preceding ``[A-Za-z0-9_-]`` and its ``check`` insists on the uppercase letter or digit. So
    all-lowercase runs (``snake_case_identifiers``, ``--kebab-flags``) close no gate, and ids and
    hashes (``toolu_01…``, git SHAs) open the token gate but bring no anchor to look at.
    """
    qualified = False
    parts: list[str] = []
    i = classes.find(_RUN)
    while i >= 0:
        j = classes.find(b" ", i)
        if j < 0:
            j = len(classes)
        run = data[i:j]
        if run.translate(None, _LOWER_RUN_BYTES):
            qualified = True
            if run.startswith(_RUN_PREFIXES):
                parts.append(run.decode("ascii"))
        i = classes.find(_RUN, j)
    return qualified, " ".join(parts)


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


_OP_START = "\"'`\\ \t:="
_ENV_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (word, re.compile(re.escape(word) + "[" + re.escape(after) + "]"))
    for word, after in (
        ("secret", _OP_START),
        ("token", _OP_START),
        ("pass", _OP_START + "wp"),  # pass, password, passwd, passphrase
        ("pwd", _OP_START),
        ("cred", "e"),  # credential(s)
        ("key", _OP_START),
    )
)
"""Where a secret word of :data:`_ASSIGN` can start, with the characters that may follow it (a
quote closing the key, the operator, or the rest of a longer word). Each regex has a literal
prefix, so ``re`` skips ``keys``, ``tokens``, ``passed`` and ``KeyError`` in C."""


def _assignment_possible(low: str) -> bool:
    """The ``keyword`` gate's main half: could the lower-cased text hold an assignment (or an
    AWS secret key or Azure account key, which are assignments too)?"""
    for word, rx in _ENV_WORDS:  # noqa: SIM110 (a plain loop: this is the hot path)
        if word in low and rx.search(low) is not None:
            return True
    return False


def _assignment_starts(text: str, low: str) -> list[int] | None:
    """Where a secret word followed by a plausible character starts, ascending; None when
    positions in ``low`` are not those of ``text`` (lower-casing expanded a character) and the
    regex must search instead. The regex :data:`_ASSIGN` is then only *matched* there: far
    cheaper than a case-insensitive regex search over the whole text."""
    if len(low) != len(text):
        return None
    return sorted({m.start() for word, rx in _ENV_WORDS if word in low for m in rx.finditer(low)})


def _redact_assignments(text: str, starts: list[int] | None) -> tuple[str, int]:
    """The ``env_assignment`` kind: redact the values of secret-named keys in ``text``
    (``starts`` from :func:`_assignment_starts`)."""
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
_Gates = tuple[str, bool, bool, str]
"""(lower-cased text, keyword gate, token gate, token-like runs)."""


@dataclass(frozen=True, slots=True)
class _Stage:
    """Consecutive kinds behind one gate, with their anchors flattened for one quick pass."""

    gate: Gate
    kinds: tuple[SecretKind, ...]
    run_anchors: tuple[tuple[str, int], ...]
    text_anchors: tuple[tuple[str, int], ...]
    lower_anchors: tuple[tuple[str, int], ...]
    anchorless: tuple[int, ...]

    @classmethod
    def of(cls, kinds: list[SecretKind]) -> _Stage:
        return cls(
            kinds[0].gate,
            tuple(kinds),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.run_anchors),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.text_anchors),
            tuple((a, i) for i, k in enumerate(kinds) for a in k.lower_anchors),
            tuple(i for i, k in enumerate(kinds) if not k.anchors and not k.lower_anchors),
        )

    def candidates(self, text: str, low: str, runs: str) -> list[SecretKind]:
        """The kinds one of whose anchors occurs (and whose context words all do), in order."""
        hit = [i for a, i in self.run_anchors if a in runs] if runs else []
        if self.text_anchors:
            hit += [i for a, i in self.text_anchors if a in text]
        if self.lower_anchors:
            hit += [i for a, i in self.lower_anchors if a in low]
        if self.anchorless:
            hit += self.anchorless
        if not hit:
            return []
        kinds = [self.kinds[i] for i in sorted(set(hit))]
        return [k for k in kinds if not k.context or all(w in low for w in k.context)]


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
                raise ConfigError(f"unknown secret kind {name!r}", setting="redact_disable")
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

    def _gates(self, text: str) -> _Gates | None:
        """What the prefilter found, or None when no kind can match (module docstring)."""
        low = text.lower()
        keyword = (
            _assignment_possible(low)
            or "://" in low
            or "bearer" in low
            or "authorization" in low
            or "-----begin" in low
        )
        if not keyword and len(low) != len(text):  # positions shifted: the words alone decide
            keyword = any(word in low for word, _ in _ENV_WORDS)
        data = _encode(text)
        classes = data.translate(_RUN_TABLE)
        qualified, runs = _long_runs(data, classes) if _RUN in classes else (False, "")
        if keyword or qualified or self._always:
            return low, keyword, qualified, runs
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
        return self._redact_gated(text, *gates)

    def _redact_gated(
        self, text: str, low: str, keyword: bool, token: bool, runs: str
    ) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}
        changed = False
        for stage in self._stages:
            if (stage.gate == "token" and not token) or (stage.gate == "keyword" and not keyword):
                continue
            for kind in stage.candidates(text, low, runs):
                text, n = kind.apply(text)
                if n:
                    counts[kind.name] = n
                    changed = True
        if self._assignments and keyword:
            starts = _assignment_starts(text, text.lower() if changed else low)
            text, n = _redact_assignments(text, starts)
            if n:
                counts[ENV_KIND] = n
        return text, counts

    def redact_json(self, value: JsonValue) -> tuple[JsonValue, dict[str, int]]:
        """Redact every string inside a JSON value; dict keys are kept.

        A string under a secret-named key (``{"api_key": "abc123xyz"}``) is replaced whole as
        ``env_assignment`` (when that kind is enabled) by the same name and value policy as
        text assignments. Returns ``value`` itself when nothing was redacted.
        """
        strings: list[str] = []
        named = _collect_strings(value, strings) and self._assignments
        if not named:
            # One pass over all the strings at once: no match can span the newline between two
            # of them (no kind's secret holds a newline except a private key's body, which still
            # changes the blob), so an unchanged blob proves every string unchanged. User
            # patterns are arbitrary regexes, so with them the strings are walked one by one.
            blob = "\n".join(strings)
            gates = self._gates(blob) if blob else None
            if gates is None:
                return value, {}
            if not self._always and not self._redact_gated(blob, *gates)[1]:
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


def _collect_strings(value: JsonValue, strings: list[str]) -> bool:
    """Append every string inside ``value`` (dict keys included) to ``strings``; return whether
    a dict key is secret-named. Allocates nothing else: this runs on every event's metadata."""
    if isinstance(value, str):
        strings.append(value)
        return False
    named = False
    if isinstance(value, dict):
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            strings.append(name)
            if not named and secret_name_strength(name) is not None:
                named = True
            if not isinstance(item, str | int | float | None):
                named = _collect_strings(item, strings) or named
            elif isinstance(item, str):
                strings.append(item)
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, str):
                strings.append(item)
            elif not isinstance(item, int | float | None):
                named = _collect_strings(item, strings) or named
    return named
