"""Secrets that are arguments of a command or fields of a config: ``mysql -p<password>``,
``curl -u user:<password>``, ``sshpass -p '<password>'``, a ``Cookie:`` header, a Docker config's
``"auth"``, and known tokens hidden in base64 (a Kubernetes secret's value).

None of these is a token format of its own: what makes each a secret is where it stands. Each
kind is anchored on the command or field name (the keyword gate), matches within one command
(up to a newline, ``;``, ``|`` or ``&``; a ``\\``-continued line goes on), redacts only the
value, and leaves placeholders (``$MYSQL_PWD``, ``<password>``) alone. The base64 kind is the
exception: it is anchored on what the encoding of a known token prefix begins with (``QUtJQ`` is
``AKIA``; any case, for the keyword gate), decodes the run, and redacts it whole when the decoded
text holds a secret of a kind it is given (:func:`base64_kind`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence

from memtoc.ingest.redact_kinds import SecretKind, is_placeholder, not_placeholder, secret_kind

_SAME_COMMAND = r"(?:[^\n|;&]|\\\n)*?"
"""The rest of one shell command, lazily: no newline (unless escaped), ``;``, ``|`` or ``&``."""
_VALUE = r"(?:(?P<q>['\"]))?(?P<secret>(?(q)[^'\"\n]+|[^\s'\"]+))"
"""A value, bare or quoted (the quotes are kept)."""


_COOKIE_ATTRIBUTES = frozenset(
    [
        "path",
        "domain",
        "expires",
        "max-age",
        "samesite",
        "secure",
        "httponly",
        "priority",
        "partitioned",
        "version",
        "comment",
    ]
)


def _credential_cookie(value: str) -> bool:
    """Whether a cookie string holds a value that looks like a credential: 8 or more characters
    with a letter and a digit, or 20 or more (``sessionid=8f2k…``; not ``theme=dark``, nor the
    attributes of a ``Set-Cookie``: ``Max-Age=31536000``)."""
    for pair in value.split(";"):
        name, eq, cookie = pair.partition("=")
        cookie = cookie.strip().strip('"')
        if not eq or name.strip().lower() in _COOKIE_ATTRIBUTES or is_placeholder(cookie):
            continue
        mixed = any(c.isdigit() for c in cookie) and any(c.isalpha() for c in cookie)
        if (len(cookie) >= 8 and mixed) or len(cookie) >= 20:
            return True
    return False


def _docker_auth(value: str) -> bool:
    """A Docker config ``auth``: base64 of ``user:password``."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(b":")
    return bool(colon and user and password) and decoded.isascii()


COMMAND_KINDS: tuple[SecretKind, ...] = (
    secret_kind(
        # mysql -u root -pS3cret (a bare -p, or -p followed by a blank, prompts: no secret)
        "mysql_password",
        r"(?i:\b(?:mysql(?:dump|admin|import|check|sh|binlog)?|mariadb(?:-dump|-admin)?)\b)"
        + _SAME_COMMAND
        + r"[ \t]-p"
        + _VALUE,
        "keyword",
        lower=("mysql", "mariadb"),
        check=not_placeholder,
    ),
    secret_kind(
        # curl -u user:password / --user user:password / -uuser:password
        "curl_password",
        r"(?i:\bcurl\b)"
        + _SAME_COMMAND
        + r"[ \t](?:-u|--user)(?:[ \t]+|=)?(?:(?P<q>['\"]))?[^\s:'\"]+:"
        + r"(?P<secret>(?(q)[^'\"\n]+|[^\s'\"]+))",
        "keyword",
        lower=("curl",),
        check=not_placeholder,
    ),
    secret_kind(
        # sshpass -p 'password' ssh … (-f FILE and -e read it from elsewhere: no secret)
        "sshpass_password",
        r"(?i:\bsshpass\b)" + _SAME_COMMAND + r"[ \t]-p[ \t]*" + _VALUE,
        "keyword",
        lower=("sshpass",),
        check=not_placeholder,
    ),
    secret_kind(
        # Cookie: / Set-Cookie: headers (also as a quoted key in code or JSON), curl -b/--cookie:
        # the whole cookie string, when one of its values looks like a credential
        "cookie",
        r"(?:(?i:\b(?:set-)?cookie)\\?[\"']?\]?[ \t]*[:=]|(?i:\bcurl\b)"
        + _SAME_COMMAND
        + r"[ \t](?:-b|--cookie)(?:[ \t]+|=))[ \t]*\\?[\"']?"
        + r"(?P<secret>[^\s\"'\\;][^\n\"'\\]*)",
        "keyword",
        lower=("cookie", "curl"),
        check=_credential_cookie,
    ),
    secret_kind(
        # ~/.netrc (and _netrc): machine HOST login USER password PASSWORD, on one line or more
        "netrc_password",
        r"(?i:\bmachine)[ \t]+\S+(?:\s+(?:login|account|port)[ \t]+\S+)*\s+password[ \t]+"
        r"(?P<secret>[^\s'\"]+)",
        "keyword",
        lower=("machine",),
        check=not_placeholder,
    ),
    secret_kind(
        # PHP: define('DB_PASSWORD', 'value'); (WordPress' wp-config.php: AUTH_KEY, …_SALT too)
        "php_define",
        r"\bdefine\(\s*['\"](?P<name>[A-Z0-9_]*(?:PASSWORD|PASSWD|PASS|SECRET|TOKEN|KEY|SALT))"
        r"['\"]\s*,\s*(?P<q>['\"])(?P<secret>[^'\"\n]+)(?P=q)",
        "keyword",
        lower=("define(",),
        check=not_placeholder,
    ),
    secret_kind(
        # ~/.docker/config.json: {"auths": {"registry": {"auth": "<base64 user:password>"}}}
        "docker_auth",
        r"\\?\"(?:auth|identitytoken)\\?\"[ \t]*:[ \t]*\\?\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\\?\"",
        "keyword",
        lower=('"auth"', '"auth\\"', '"identitytoken'),
        check=_docker_auth,
    ),
)
"""Keyword-gated kinds tried with the other format kinds, before the context kinds."""

_B64_RUN = "[A-Za-z0-9+/]"
ENCODED_PREFIXES = (
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "sk-",
    "xoxb-",
    "xoxp-",
    "sk_live_",
    "rk_live_",
    "AIza",
    "hf_",
    "npm_",
    "dckr_pat_",
    "-----BEGIN",
    '{"auths"',
)
"""Plain-text prefixes whose base64 encodings are looked for: known token formats, a PEM private
key (a Kubernetes ``tls.key``), a Docker config (``.dockerconfigjson``)."""


def _encoded_start(prefix: str) -> str:
    """The base64 characters that ``prefix``'s bytes fully determine (at the start of a run)."""
    raw = prefix.encode()
    return base64.b64encode(raw).decode()[: len(raw) * 8 // 6]


def base64_kind(decoded_kinds: Sequence[SecretKind]) -> SecretKind:
    """``base64_secret``: a base64 run that decodes to text holding a secret of one of
    ``decoded_kinds`` (the run is replaced whole)."""

    def holds_secret(run: str) -> bool:
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
            text = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            return False
        return any(kind.apply(text)[1] for kind in decoded_kinds)

    starts = tuple(dict.fromkeys(_encoded_start(p) for p in ENCODED_PREFIXES))
    alternatives = "|".join(re.escape(a) for a in starts)
    return secret_kind(
        "base64_secret",
        rf"(?<![A-Za-z0-9+/])(?:{alternatives}){_B64_RUN}{{8,}}={{0,2}}(?![A-Za-z0-9+/=])",
        # keyword-gated on the starts (any case): a base64 run is broken into short token runs
        # by its "+" and "/", so the token gate's 16-character run may not hold it
        "keyword",
        # (their first five characters: enough to be rare, few enough case spellings for the
        # batch gate's automaton)
        lower=tuple(dict.fromkeys(s[:5].lower() for s in starts)),
        check=holds_secret,
        masked_ok=True,
    )
