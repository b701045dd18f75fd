"""A message's sentences as its Markdown structure gives them (used by ``extractive_facts``).

Coding agents and their users write Markdown: a plan handed to the agent has a title, a
"Context" section saying why, step headings, a table of files and a "Verification" list; an
agent's report lists what it changed under a lead-in ("Here's what was implemented:"). Read as
flat prose, the section labels ("Context", "Changes") look like requests and a table row like
"| File | Change |" like a fact. Here every sentence comes with what it is:

- ``heading``: a heading that names something (a plan's title, a step); a heading that is only a
  section *label* ("Context", "Files to modify", "Design Decisions (confirmed with user)") is
  not a sentence, it sets the ``section`` of what follows;
- ``section``: the role of the section the sentence is in — ``why`` (context, problem, goal,
  background: the motivation), ``decision`` (design decisions, approach), ``detail`` (files to
  modify, verification, testing: the plan's checklist) or ``""``;
- ``command``: a shell command from a fenced block (other fenced code is dropped);
- a table row becomes one sentence, its cells joined ("`src/api/index.ts`: Register the route");
  header and separator rows are dropped.

Notices an agent injects into the user's turn (Claude Code's "If you need specific details from
before exiting plan mode … read the full transcript at: …") are dropped: nobody said them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[`*_]*[A-Z0-9])")
MD_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d{1,3}[.)]\s+|\[[ xX]\]\s+)+")
TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]{0,300})?/?>")
_HEADING = re.compile(r"^\s*#{1,4}\s+(.{4,160}?)\s*#*\s*$")
_SHELL = re.compile(
    r"^(?:\$ )?(?:git|pytest|python3?|pip|uv|npm|npx|yarn|pnpm|bun|cargo|go|make|docker|kubectl|"
    r"ls|cd|cat|grep|rg|sed|curl|ruff|mypy|node|bash|sh|cp|mv|rm|mkdir|psql|sqlite3|memtoc)\b"
)
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
_INJECTED = re.compile(
    r"^if you need specific details from before exiting plan mode\b|"
    r"\bread the full transcript at:?\s", re.IGNORECASE
)  # fmt: skip
"""Claude Code's notice appended to a plan it hands over for implementation."""

_WHY_WORDS = """context background problem problems motivation goal goals overview why summary
    rationale requirements issue"""
_DECISION_WORDS = "design decision decisions approach choices tradeoffs"
_DETAIL_WORDS = """verification testing tests test validation checks files file modify modified
    critical key out scope risks notes todo checklist"""
_SECTION_WORDS: dict[str, str] = {
    **dict.fromkeys(_WHY_WORDS.split(), "why"),
    **dict.fromkeys(_DECISION_WORDS.split(), "decision"),
    **dict.fromkeys(_DETAIL_WORDS.split(), "detail"),
}
"""Words of a section label, and the role they give the section (the first such word wins)."""
_LABEL_FILLER = frozenset(
    """the to and of a an in for be with implementation implement plan steps step changes change
    proposed details detailed new code what how""".split()  # noqa: SIM905 - reads better as text
)
"""Other words a section label may hold ("Files to modify", "Implementation Steps")."""


class Sentence(NamedTuple):  # a tuple: messages are split into many
    text: str
    command: bool = False
    heading: bool = False
    section: str = ""


def section_label(heading: str) -> str | None:
    """The role of a heading that is only a section label (``None``: it names something)."""
    plain = re.sub(r"\([^)]*\)|[^\w\s]", " ", heading.lower())
    words = plain.split()
    if not words or len(words) > 4 or any(w.isdigit() for w in words[:1]):
        return None
    role = next((_SECTION_WORDS[w] for w in words if w in _SECTION_WORDS), None)
    if role is None:
        return "" if all(w in _LABEL_FILLER for w in words) else None
    return role if all(w in _SECTION_WORDS or w in _LABEL_FILLER for w in words) else None


def _table_row(line: str) -> str | None:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    cells = [c for c in cells if c]
    if not cells:
        return None
    return cells[0] if len(cells) == 1 else f"{cells[0]}: {'; '.join(cells[1:])}"


def sentences(text: str) -> list[Sentence]:
    """The sentences of ``text`` with their role (module docstring): fenced code dropped except
    shell commands, markup-only lines dropped, list items and table rows on their own."""
    out: list[Sentence] = []
    in_fence = False
    paragraph: list[str] = []
    section = ""

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            out.extend(Sentence(s, section=section) for s in SENT_SPLIT.split(joined) if s)
            paragraph.clear()

    lines = text.splitlines()
    for n, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("```"):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or not line:
            if in_fence and (line.startswith("$ ") or _SHELL.match(line)) and len(line) < 160:
                out.append(Sentence(line.removeprefix("$ "), command=True, section=section))
            flush()
            continue
        if line.startswith("<") and (line.endswith(">") or not TAG.sub("", line).strip()):
            flush()  # markup: <details>, <command-name>…</command-name>, <tool-use …>
            continue
        if ("plan mode" in line or "transcript" in line) and _INJECTED.search(line):
            flush()
            continue
        heading = _HEADING.match(raw)
        if heading:
            flush()
            role = section_label(heading.group(1))
            if role is None:
                out.append(Sentence(heading.group(1), heading=True, section=section))
            else:
                section = role
            continue
        if line.startswith("|"):
            flush()
            following = lines[n + 1].strip() if n + 1 < len(lines) else ""
            if _TABLE_RULE.match(line) or _TABLE_RULE.match(following):
                continue  # a separator row, or the header above one
            row = _table_row(line)
            if row:
                out.append(Sentence(row, section=section))
            continue
        if MD_PREFIX.match(raw):
            flush()  # list items stand alone
        paragraph.append(line)
    flush()
    return out
