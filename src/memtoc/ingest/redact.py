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
whether any kind can match:

* the *token gate*: one ``bytes.translate`` pass finds runs of 16 or more ``[A-Za-z0-9_-]`` that
  hold an uppercase letter or a digit. Every token format holds such a run (each token kind's
  ``check`` insists on the uppercase letter or digit), so prose and ``snake_case`` code open no
  gate; most formats *are* such a run from their first character (their regex refuses a
  preceding run character), and only runs that
  *start* with a known prefix (``sk-``, ``ghp_``, ``AKIA``, ``eyJ`` …) are searched for anchors,
  so ids and hashes (``toolu_01…``, git SHAs) cost nothing more;
* the *keyword gate*: a secret word in an assignment form whose key name may be secret (an
  operator after it: ``API_KEY=``, ``"token":``; blanks after a ``--flag``; the end of a JSON key),
  found with a literal-prefix regex per word (:data:`~memtoc.ingest.redact_assign.ASSIGNMENT_GATES`,
  so "password reset", ``d['key']`` and ``cache_key = …`` do not count), or a keyword kind's
  needle (``://``, ``bearer``, ``authorization``, ``-----begin``, ``sig=``).

**Batches.** Ingest calls :meth:`Redactor.suspects` once per batch (texts and metadata JSON from
:meth:`Redactor.metadata_probe`): the gates run over the whole batch joined into one blob, every
needle and secret word found in one Aho-Corasick pass in compiled code, Python working per hit
rather than per event, and a token run counts only when it starts with a token prefix (or a token
kind's other anchor occurs). Only the suspects
are redacted; a test runs every regex ungated over the non-suspects and requires no change.

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

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memtoc.errors import ConfigError
from memtoc.ingest.redact_assign import (
    ENV_KIND,
    assignment_starts,
    redact_assignments,
    secret_name_strength,
    value_is_secret,
)
from memtoc.ingest.redact_catalogue import BUILTIN, CONTEXT_KINDS, DEFAULT_KINDS
from memtoc.ingest.redact_gate import batch_suspects, text_gates
from memtoc.ingest.redact_kinds import Gate, SecretKind, marker
from memtoc.model import JsonValue

__all__ = [
    "DEFAULT_KINDS",
    "IdentifierRedactor",
    "Redactor",
    "SecretKind",
    "marker",
    "secret_name_strength",
]

_KIND_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SEP = "\x00"  # joins the text as given and as changed: no anchor spans it
_META_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


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

    def candidates(
        self, text: str, low: str, runs: str, context: str | None = None
    ) -> list[SecretKind]:
        """The kinds one of whose anchors occurs (and whose context words all do, in ``context``
        if given, else in ``low``), in order."""
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
        words = low if context is None else context
        return [k for k in kinds if not k.context or all(w in words for w in k.context)]


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
        chosen = [k for k in BUILTIN if k.name in wanted and k.name not in off]
        context = [k for k in chosen if k.name in CONTEXT_KINDS]
        formats = [k for k in chosen if k.name not in CONTEXT_KINDS]
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

    def _gates(self, text: str) -> tuple[str, bool, bool, str] | None:
        return text_gates(text, self._always)

    @property
    def all_suspect(self) -> bool:
        """Whether every text is a suspect (user patterns have no anchors to prefilter on)."""
        return self._always

    def suspects(self, texts: Sequence[str]) -> set[int]:
        """The batch prefilter: indices of ``texts`` that may hold a secret. Every other text
        is one :meth:`redact` would return unchanged, so a caller redacts only these."""
        if self._always:
            return set(range(len(texts)))
        return batch_suspects(texts)

    @staticmethod
    def metadata_probe(value: Mapping[str, JsonValue]) -> str | None:
        """The text the batch prefilter reads for a metadata value: its JSON (strings, keys and
        punctuation), which opens a gate whenever :meth:`redact_json` could change the value
        (JSON escaping only adds ``\\`` and quotes, which open gates, never close them). None when
        the value cannot be serialised: then it is always a suspect."""
        try:
            return _META_JSON(value)
        except (TypeError, ValueError):
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
        context: str | None = None  # the text as given, lower-cased, once something changed
        current: str | None = None  # the text as changed, lower-cased
        for stage in self._stages:
            if (stage.gate == "token" and not token) or (stage.gate == "keyword" and not keyword):
                continue
            changed = False
            for kind in stage.candidates(text, low, runs, context):
                text, n = kind.apply(text)
                if n:
                    counts[kind.name] = n
                    changed = True
            if changed:
                # A replacement can start a new token run (a token glued to a private key's END
                # line was part of a run beginning with "-----"): later stages also look for
                # anchors in the new text (context words stay those of the text as given).
                now, more_keyword, more_token, more_runs = text_gates(text, True)  # type: ignore[misc]
                keyword, token = keyword or more_keyword, token or more_token
                runs = f"{runs} {more_runs}"
                if context is None:
                    context = low
                low = f"{context}{_SEP}{now}"
                current = now
        if self._assignments and keyword:
            starts = assignment_starts(text, low if current is None else current)
            text, n = redact_assignments(text, starts)
            if n:
                counts[ENV_KIND] = n
        return text, counts

    def redact_json(self, value: JsonValue) -> tuple[JsonValue, dict[str, int]]:
        """Redact every string inside a JSON value, dict keys included.

        A string under a secret-named key (``{"api_key": "abc123xyz"}``) is replaced whole as
        ``env_assignment`` (when that kind is enabled) by the same name and value policy as
        text assignments. A key holding a secret (``{"ghp_…": true}``) is redacted like text;
        when that makes it equal to another key of the same object, ``#2``, ``#3`` … is appended
        so no value is lost. Returns ``value`` itself when nothing was redacted.
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
                if isinstance(key, str) and key:
                    cleaned, found = self.redact(key)
                    if found:
                        for kind, n in found.items():
                            counts[kind] = counts.get(kind, 0) + n
                        key = _unique_key(cleaned, out, value)
                if isinstance(item, str) and self._assignments:
                    strength = secret_name_strength(str(key))
                    if strength is not None and value_is_secret(
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


def _unique_key(key: str, taken: Mapping[object, object], original: Mapping[object, object]) -> str:
    """``key``, or ``key#2``, ``key#3`` … — the first not already a key of either mapping."""
    candidate, n = key, 1
    while candidate in taken or candidate in original:
        n += 1
        candidate = f"{key}#{n}"
    return candidate


class IdentifierRedactor:
    """Redaction of the identifiers an event is stored under — session id, project, agent, the
    file path it was read from — with the same kinds as text (a path or a session name can hold a
    token, a ``KEY=value`` or a URL with a password). The importer calls it for every event
    (``Importer._validate``: files, records, hooks and ``remember`` alike), so it is memoised:
    an import repeats the same few identifiers thousands of times.

    The policy is text's: a token glued to a longer name by ``-`` or ``_`` (``run-AKIA…``) is
    part of that name, as it would be in text; one set off by ``/``, ``.``, ``:``, ``=``, a blank
    or a quote is found. Distinct secrets in one kind of identifier become the same marker (two
    sessions named after two tokens become one session; two files, one checkpoint key, which
    their fingerprints tell apart by reading again).
    """

    def __init__(self, redactor: Redactor, *, size: int = 4096) -> None:
        self.redactor = redactor
        self.size = size
        self._seen: dict[str, str] = {}
        self.found: dict[str, int] = {}
        """Secrets found per kind since the last :meth:`take_found` (each identifier once)."""

    def __call__(self, value: str) -> str:
        cleaned = self._seen.get(value)
        if cleaned is None:
            cleaned, found = self.redactor.redact(value)
            for kind, n in found.items():
                self.found[kind] = self.found.get(kind, 0) + n
            if len(self._seen) >= self.size:
                self._seen.clear()
            self._seen[value] = cleaned
        return cleaned

    def take_found(self) -> dict[str, int]:
        """The counts gathered since the last call (for an ingest report), reset."""
        found, self.found = self.found, {}
        return found


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
