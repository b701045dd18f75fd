"""What tool work did, in a few words per call: an edit by the names it touched, a command by
what the agent said it was for, a task the agent set itself by its subject.

A gathered edit fact reads "Edited `engine.ts` (runRemediation, applyPatch) and `types.ts`
(RemediationAction)" rather than naming files alone, and a command fact "Ran `bun run test`
(run all tests)": the names and purposes are what a reader (and a search) looks for, and neither
is in the file list. Names are read from the call's own arguments — the names an edit's new text
defines (``def``, ``class``, ``function``, ``interface`` …), then the identifiers it brings in that
the replaced text did not use (called, or a component rendered), most used first — so nothing is guessed and nothing is read from
disk. Deterministic, no model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from memtoc.text.keyphrases import is_code_token

EDIT_NAMES = 3
"""Names an edited file is shown with."""
PURPOSE_WORDS = 8
"""Words of a command's stated purpose (its ``description``) shown beside it."""
MIN_NAME = 4
"""An identifier shorter than this names nothing worth showing (``i``, ``id``, ``db``)."""

_DEFINES = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:pub(?:\([^)]*\))?\s+)?"
    r"(?P<kind>def|class|func|function|interface|type|struct|fn|const|enum|let|var)\s+"
    r"(?:\([^)]*\)\s*)?([A-Za-z_]\w{2,})",
    re.MULTILINE,
)
_CALLABLE = frozenset({"def", "class", "func", "function", "fn"})
_USES = re.compile(r"<([A-Z]\w*)|(?<![\w.])(?:self\.|this\.)?([A-Za-z_]\w*)\s*\(")
"""A name put to use: a function called (``detectCrossReference(``, ``self._clone_repo(``), a
class constructed, a component rendered (``<StepCard``) — not a method of some other object
(``expect(x).toBe(``), an attribute or a key."""
_NOT_NAME = re.compile(r"[/\\]|^-|^\d|\.(?:[a-z]{1,4})$|^https?\b|://")
"""A token that is code but no name a reader looks for: a path, a flag, a number, a file name
(``x.ts``), an address."""


def edit_names(args: Mapping[str, object]) -> list[str]:
    """The names an edit or write touched, best first: those its new text defines (functions
    and classes, then types and constants), then the functions it calls and components it
    renders that the text it replaced did not (most used first) — not the attributes, keys and
    variables around them."""
    pairs: list[tuple[str, str]] = []
    new = _text(args, "new_string", "content", "file_text", "new_str")
    if new:
        pairs.append((_text(args, "old_string", "old_str"), new))
    edits = args.get("edits")
    if isinstance(edits, list):
        for e in edits:
            if isinstance(e, Mapping):
                pairs.append((_text(e, "old_string"), _text(e, "new_string")))
    defined: list[str] = []
    typed: list[str] = []  # types, constants, variables: after the functions and classes
    used: Counter[str] = Counter()
    first: dict[str, int] = {}
    for old, new_text in pairs:
        if not new_text:
            continue
        head = new_text[:50_000]
        defined += [m.group(2) for m in _DEFINES.finditer(head)
                    if m.group("kind") in _CALLABLE]  # fmt: skip
        typed += [m.group(2) for m in _DEFINES.finditer(head)
                  if m.group("kind") not in _CALLABLE]  # fmt: skip
        before = {a or b for a, b in _USES.findall(old)} if old else set()
        for m in _USES.finditer(head):
            token = m.group(1) or m.group(2)
            if token in before or not _is_name(token):
                continue
            used[token] += 1
            first.setdefault(token, len(first))
    names = [n for n in dict.fromkeys(defined + typed) if _is_name(n) or n[:1].isupper()]
    ranked = sorted(used, key=lambda t: (-used[t], first[t]))
    return list(dict.fromkeys([*names, *ranked]))


def purpose(args: Mapping[str, object]) -> str:
    """What the agent said a command was for (its ``description``), lowercased and short, or ''
    when it says no more than a verb."""
    value = args.get("description")
    if not isinstance(value, str) or not value.strip():
        return ""
    parts = " ".join(value.split()).rstrip(".").split(" ")
    if len(parts) < 2:
        return ""  # "Run", "Check": says nothing the command does not
    text = " ".join(parts[:PURPOSE_WORDS]) + ("…" if len(parts) > PURPOSE_WORDS else "")
    if text[:1].isupper() and not text[1:2].isupper():  # "Run all tests", not "API check"
        text = text[:1].lower() + text[1:]
    return text


def task_subject(args: Mapping[str, object]) -> str:
    """The subject of a task the agent set itself (a to-do list's item), or ''."""
    for key in ("subject", "content", "title"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


def shown_with(subject: str, extra: str) -> str:
    """A subject in backticks with what it says in parentheses: "`a.ts` (f, g)"."""
    return f"`{subject}` ({extra})" if extra else f"`{subject}`"


def _is_name(token: str) -> bool:
    return (
        len(token) >= MIN_NAME
        and is_code_token(token)
        and _NOT_NAME.search(token) is None
        and any(c.isalpha() for c in token)
    )


def _text(args: Mapping[str, object], *keys: str) -> str:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return ""
