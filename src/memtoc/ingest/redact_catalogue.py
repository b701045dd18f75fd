"""The built-in secret kinds, in the order they are applied (see :mod:`memtoc.ingest.redact`).

Each kind is one regex for one credential format, with the anchors the prefilter looks for and a
``check`` that keeps look-alike identifiers out. Every kind has realistic synthetic samples in
``tests/fixtures/redaction/corpus.jsonl``; ``memtoc bench redaction`` reports per-kind detection
and the false-positive rate on a clean corpus of code and prose; ``memtoc eval redaction`` does
so for every place a secret can be stored (text, metadata values and keys, session ids, projects,
file paths).
"""

from __future__ import annotations

from memtoc.ingest.redact_assign import ENV_KIND
from memtoc.ingest.redact_commands import COMMAND_KINDS, base64_kind
from memtoc.ingest.redact_kinds import (
    PH,
    SecretKind,
    has_digit,
    has_digit_and_letter,
    has_upper_or_digit,
    last_segment_upper_or_digit,
    mixed_case,
    not_placeholder,
    secret_kind,
)
from memtoc.ingest.redact_services import SERVICE_TOKENS, SIGNED_URLS

# Application order matters: a match is replaced before later kinds look at the text, and no kind
# matches a marker, so the first kind to claim a secret names it.
_FORMATS: tuple[SecretKind, ...] = (
    secret_kind(
        "pgp_private_key",
        r"-----BEGIN PGP PRIVATE KEY BLOCK-----"
        r"[A-Za-z0-9+/=\s\\:,.]*+(?:-(?!----)[A-Za-z0-9+/=\s\\:,.]*+)*+"
        r"(?:-----END PGP PRIVATE KEY BLOCK-----)?",
        "keyword",
        anchors=("-----BEGIN PGP PRIVATE KEY BLOCK-----",),
        masked_ok=True,
    ),
    secret_kind(
        "private_key_block",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"[A-Za-z0-9+/=\s\\:,.]*+(?:-(?!----)[A-Za-z0-9+/=\s\\:,.]*+)*+"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        "keyword",
        anchors=("-----BEGIN",),
        masked_ok=True,
    ),
    secret_kind(
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{13,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        "token",
        anchors=("eyJ",),
    ),
    secret_kind(
        "anthropic_key",
        r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("sk-ant-",),
        check=has_digit,
    ),
    secret_kind(
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("sk-",),
        check=has_digit_and_letter,
    ),
    secret_kind(
        "github_token",
        r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        "token",
        anchors=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        check=has_upper_or_digit,
    ),
    secret_kind(
        "gitlab_token",
        r"(?<![A-Za-z0-9_-])gl(?:pat|rt|dt|ptt)-[A-Za-z0-9_-]{20,}",
        "token",
        anchors=("glpat-", "glrt-", "gldt-", "glptt-"),
        check=has_upper_or_digit,
    ),
    secret_kind(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]{16,})",
        "token",
        anchors=("hooks.slack.com",),
        check=last_segment_upper_or_digit,
    ),
    secret_kind(
        "slack_token",
        r"(?<![A-Za-z0-9_-])(?:xox[abposre]|xapp)-[A-Za-z0-9-]{11,}",
        "token",
        anchors=("xox", "xapp-"),
        check=has_digit,
    ),
    secret_kind(
        "stripe_key",
        r"(?<![A-Za-z0-9_-])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        "token",
        anchors=("sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"),
        check=has_upper_or_digit,
    ),
    secret_kind(
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
        "token",
        anchors=("AIza",),
    ),
    secret_kind(
        "aws_access_key_id",
        r"(?<![A-Za-z0-9_-])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        "token",
        anchors=("AKIA", "ASIA", "ABIA", "ACCA"),
        check=lambda s: not s.endswith("EXAMPLE"),  # AWS's documented AKIAIOSFODNN7EXAMPLE
    ),
    secret_kind(
        "npm_token",
        r"(?<![A-Za-z0-9_-])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
        "token",
        anchors=("npm_",),
        check=has_upper_or_digit,
    ),
    secret_kind(
        "huggingface_token",
        r"(?<![A-Za-z0-9_-])hf_[A-Za-z0-9]{30,40}(?![A-Za-z0-9])",
        "token",
        anchors=("hf_",),
        check=mixed_case,
    ),
    secret_kind(
        "sendgrid_key",
        r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",
        "token",
        anchors=("SG.",),
        check=last_segment_upper_or_digit,
    ),
    secret_kind(
        "twilio_key",
        r"(?<![A-Za-z0-9_-])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])",
        "token",
        anchors=("SK", "AC"),
        context=("twilio",),
    ),
    *SERVICE_TOKENS,
    secret_kind(
        "aws_secret_access_key",
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"'\\]{0,2}[ \t]*"
        r"(?::=|=>|=|:)[ \t]*[\"'\\]{0,2}(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "keyword",
        lower=("secret",),
    ),
    secret_kind(
        "azure_storage_key",
        r"(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
        "keyword",
        anchors=("AccountKey=", "SharedAccessKey="),
    ),
    *SIGNED_URLS,
    *COMMAND_KINDS,
)
BUILTIN: tuple[SecretKind, ...] = (
    *_FORMATS,
    base64_kind(_FORMATS),
    secret_kind(
        "url_password",
        r"://[^\s:/@?#\[\]\"'<>]{0,256}:(?P<secret>(?!\[REDACTED:)" + PH + r"{1,128})@",
        "keyword",
        anchors=("://",),
        check=not_placeholder,
    ),
    secret_kind(
        "bearer_token",
        r"(?i:\bbearer)[ \t]+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        "keyword",
        lower=("bearer",),
        check=has_digit_and_letter,
    ),
    secret_kind(
        "basic_auth",
        r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        "keyword",
        lower=("authorization",),
    ),
)

DEFAULT_KINDS: tuple[str, ...] = (*(k.name for k in BUILTIN), ENV_KIND)
"""Every built-in kind, in the order they are applied."""

CONTEXT_KINDS = frozenset({"url_password", "bearer_token", "basic_auth"})
RUN_PREFIXES = tuple(a.encode() for k in BUILTIN for a in k.run_anchors)
