"""What a secret kind is: :class:`SecretKind`, the marker that replaces a secret, and the shared
policy of what is *not* a secret (placeholders, masks, paths) used by every kind's checks.

The catalogue of built-in kinds is :mod:`memtoc.ingest.redact_catalogue`; the engine that runs
them is :mod:`memtoc.ingest.redact`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

MARKER_PREFIX = "[REDACTED:"

Gate = Literal["token", "keyword", "always"]
"""Which prefilter proves a kind may match: a long token run, a keyword, or none (always run)."""


def marker(kind: str) -> str:
    """The replacement text for a secret of ``kind``."""
    return f"{MARKER_PREFIX}{kind}]"


RUN_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
LOWER_RUN_BYTES = b"abcdefghijklmnopqrstuvwxyz_-"


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
            in_run = tuple(a for a in self.anchors if RUN_ALPHABET.issuperset(a))
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
            if not self.masked_ok and MASK.search(secret):
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


def has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def has_digit_and_letter(s: str) -> bool:
    return has_digit(s) and any(c.isalpha() for c in s)


def has_upper_or_digit(s: str) -> bool:
    return bool(s.encode("ascii", "ignore").translate(None, LOWER_RUN_BYTES))


def last_segment_upper_or_digit(s: str) -> bool:
    return has_upper_or_digit(re.split(r"[./]", s)[-1])


def mixed_case(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s)


PLACEHOLDER = re.compile(
    r"""<[^<>]*>|\$\{[^}]*\}?|(?:\$\{[^}]*\}[:/._@-]?)+|\$\(.*|\$[A-Za-z_]\w*|%[A-Za-z_]\w*%|\$?\{\{.*|\{[\w.]*\}|%\(\w+\)s|%s
    |[|>][-+]?|(.)\1{2,}|(?:change|replace)[_-]?me|your[\w\-\s]*|[\w\-\s]*[_\-\s]here
    |placeholder|examples?|dummy|redacted|none|null|nil|undefined|true|false|yes|no|on|off
    |required|optional|todo|tbd|n/?a|empty|secret|password|passwd|token|api[_-]?key|\.\.\.|…""",
    re.IGNORECASE | re.VERBOSE,
)
MASK = re.compile(r"x{4,}|X{4,}|\*{3,}|•{3,}|\.{3}|…")
ALNUM = re.compile(r"[^\W_]")
CODEISH = re.compile(r"[&*]*[A-Za-z_][A-Za-z_.:<>?&*|]*!?")
"""An identifier, dotted path or type (``str``, ``self.token``, ``&str``, TypeScript's non-null
``apiKey!``): a reference."""


PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-/]*|[A-Za-z]:\\[\w.\\-]*")
"""A filesystem path (``/run/secrets/db``, ``~/.aws/credentials``): where a secret is, not it."""


def is_placeholder(value: str) -> bool:
    """A documented non-secret: template, mask, stock example word or file path."""
    return bool(PLACEHOLDER.fullmatch(value) or MASK.search(value) or PATH.fullmatch(value))


def not_placeholder(value: str) -> bool:
    return not is_placeholder(value)


PH = r"[^\s/\"'<>]"  # a URL password character (anything that cannot end the authority part)


def secret_kind(
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
