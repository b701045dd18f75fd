"""Passages: a long event split at its own line structure, so recall packs the part that answers.

A coding history's long events — a plan handed to the agent, a file read, a test run, an
assistant's report — hold many facts, and a question asks about one. Packing such an event whole
spends most of a budget on text that does not answer, and its head (the first lines) often misses
the part that does. So recall's packing unit is the *passage*: an event of at most
``PASSAGE_TOKENS`` is one passage; a longer one is cut at line ends into runs of lines of at most
``PASSAGE_TOKENS`` (a line longer than that is cut at a sentence's end, else at a word boundary).

A passage's relevance to the question is the IDF-weighted sum of the question's key terms it
holds — matched by their Porter stems, as full-text search matched the event ("promotional"
finds "Promotion") — with the IDF taken over the event's own passages: a term on every passage
of a plan says nothing about which part answers, a term on one says a lot. A passage stands for its share of
the event's relevance (the same sum over every term the event holds): the event's score was
earned by all its matches, and a passage holding a few of the terms a long report scatters over
its parts is weaker evidence than a short turn holding them all. The passage right after a
matching one continues it — the reason after its statement ("two separate sections: Action
Summary, File Changes" then "This is redundant: the same files appear in both places"), the
detail under its heading — and keeps a share of its relevance (``CONTINUATION``). Other passages
that hold none of the question's terms are not relevant; when none is, the event's first passage
stands for it (a message's opening usually says what it is about: a plan's title, a report's
conclusion).
A passage in a section continues its heading ("## Issue Found: Silent Commit Checkout Failure"
above "This means if the original commit is unreachable, …"): the heading says what the section
is about in the words a question uses while the section's lines go on in theirs, so a passage
holds its section heading's terms at the ``CONTINUATION`` share, as the passage after a match
does. The event's title is no section's heading: it is about every part of the event.

A passage packed without the event's opening is shown under the event's **title** — a markdown
heading among its first lines ("# Plan: Packmind Promotion After Remediation" under "Implement
the following plan:") — when the title holds one of the question's terms, as a passage is
relevant when it does: a bullet from deep inside a plan reads as part of *that* plan, and the
title is what a question about the task names ("What promotional element did we add to the
Remediate tab?"). A title naming none of them ("## What changed") would only spend the budget.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memtoc.text.keyphrases import key_terms
from memtoc.text.porter import stem_terms
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

PASSAGE_TOKENS = 120
"""The largest passage: about a paragraph, so a 1,000-token budget holds several events' best
parts (gold quotes, a sentence or two, are 25-200 characters)."""
CONTINUATION = 0.6
"""The passage right after one that holds question terms keeps at least this share of that
one's relevance (as a turn next to a hit does in recall's ranking, ``RankConfig.w_neighbour``)."""
_CHARS_PER_TOKEN = 4
"""A cheap upper estimate of text length per token, used to skip counting lines that are short."""
TITLE_LINES = 3
"""A title is a heading among an event's first this many non-blank lines (a lead-in such as
"Implement the following plan:" may come before it)."""
TITLE_CHARS = 200
"""A heading longer than this is a paragraph set as one, not a title."""
_HEADING = re.compile(r"#{1,6} \S")
_SECTION_MARK = re.compile(r"^[ \t]*(?:```|~~~|#{2,6} \S.*)", re.M)
"""A code fence, or a section's heading (level 2 or deeper) at a line's start."""
_SENTENCE_END = re.compile(r"[.!?;][\"')\]*_`]*(?=\s)")
"""Where a sentence ends inside a line: a long line is cut there rather than mid-sentence (an
answer is a sentence or two: cut in two, neither half holds it)."""


@dataclass(frozen=True, slots=True)
class Passage:
    """Characters ``[start, end)`` of an event's text: the ``index``-th of ``count`` passages."""

    index: int
    count: int
    start: int
    end: int
    text: str


def _pieces(text: str, counter: TokenCounter, limit: int) -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of each non-blank line, a line over ``limit`` tokens cut at word
    boundaries; ``tokens`` is exact for long lines and an estimate for short ones."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        if not line.strip():
            continue
        if len(line) <= limit:  # fewer characters than the limit: fewer tokens too
            out.append((start, start + len(line), 1 + len(line) // _CHARS_PER_TOKEN))
            continue
        size = counter.count(line)
        if size < limit:
            out.append((start, start + len(line), size + 1))
            continue
        at = 0
        while at < len(line):
            rest = line[at:]
            part = truncate_to_tokens(counter, rest, limit - 1) or rest[: limit * _CHARS_PER_TOKEN]
            if len(part) < len(rest):  # end on a sentence's end when one is not too early
                ends = [m.end() for m in _SENTENCE_END.finditer(part)]
                if ends and ends[-1] > len(part) // 3:
                    part = part[: ends[-1]]
            out.append((start + at, start + at + len(part), limit))
            at += len(part)
            while at < len(line) and line[at].isspace():
                at += 1
    return out


def split_passages(text: str, counter: TokenCounter, limit: int = PASSAGE_TOKENS) -> list[Passage]:
    """``text`` as passages of about ``limit`` tokens at most, cut at line ends (module
    docstring). Each passage is a contiguous slice of ``text`` that starts and ends on non-blank
    characters; adjacent passages together are the slice from the first's start to the last's end."""
    runs: list[list[int]] = []  # [start, end, tokens]
    for start, end, size in _pieces(text, counter, limit):
        if runs and runs[-1][2] + size <= limit:
            runs[-1][1] = end
            runs[-1][2] += size
        else:
            runs.append([start, end, size])
    return [
        Passage(i, len(runs), start, end, text[start:end]) for i, (start, end, _) in enumerate(runs)
    ]


def title_span(text: str) -> tuple[int, int] | None:
    """Characters ``[start, end)`` of ``text``'s title: a markdown heading line among its first
    ``TITLE_LINES`` non-blank lines, of at most ``TITLE_CHARS`` (``None``: it has none)."""
    pos = 0
    seen = 0
    while seen < TITLE_LINES and pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end].strip()
        if line:
            if _HEADING.match(line):
                if len(line) > TITLE_CHARS:
                    return None
                start = text.index(line[0], pos)
                return start, start + len(line)
            seen += 1
        pos = end + 1
    return None


def passages_text(
    text: str, passages: Sequence[Passage], *, title: set[str] | None = None
) -> tuple[str, bool]:
    """The passages of ``text`` in text order, adjacent ones as one slice, "…" marking what is
    left out before, between and after; and whether they cover all of it (then: ``text``). With
    ``title`` (the question's key terms), the event's title (``title_span``) leads when it holds
    one of them and no chosen passage holds it."""
    chosen = sorted(passages, key=lambda p: p.index)
    if chosen and len({p.index for p in chosen}) == chosen[0].count:
        return text, True
    out: list[str] = []
    span = title_span(text) if title and chosen else None
    if title and span is not None and span[1] <= chosen[0].start:
        heading = text[span[0] : span[1]]
        if stem_terms(key_terms(heading)) & stem_terms(title):
            out.append(heading)
    run_start: Passage | None = None
    previous: Passage | None = None
    for p in chosen:
        if previous is None or p.index != previous.index + 1:
            if previous is not None and run_start is not None:
                out.append(text[run_start.start : previous.end])
            if previous is not None or p.index > 0:
                out.append("…")
            run_start = p
        previous = p
    if previous is not None and run_start is not None:
        out.append(text[run_start.start : previous.end])
        if previous.index < previous.count - 1:
            out.append("…")
    return "\n".join(out), False


def section_headings(passages: Sequence[Passage]) -> list[str | None]:
    """The heading of the section each passage starts in: the last markdown heading of level 2
    or deeper before it, outside code fences, that is not the event's title (a title — of any
    level, ``title_span`` — or a level-1 heading is about the whole event, so says nothing about
    which part answers; a ``#`` line inside a fence is a comment); ``None`` before the first."""
    out: list[str | None] = []
    current: str | None = None
    fenced = False
    span = title_span(passages[0].text) if passages else None
    title = passages[0].text[span[0] : span[1]] if span else None
    for p in passages:
        out.append(current)
        for mark in _SECTION_MARK.findall(p.text):
            mark = mark.strip()
            if mark.startswith(("```", "~~~")):
                fenced = not fenced
            elif not fenced and mark != title:
                current = mark
    return out


def passage_relevance(
    question_terms: set[str], passages: Sequence[Passage]
) -> tuple[list[float], float]:
    """Each passage's IDF-weighted count of the question's key terms — those in its text, and at
    the ``CONTINUATION`` share those only in the heading of the section it starts in
    (``section_headings``) — with the IDF over ``passages``, and the event's: the same sum
    over every term some passage holds."""
    if not question_terms or len(passages) <= 1:
        return [0.0] * len(passages), 0.0
    question = stem_terms(question_terms)
    own = [stem_terms(key_terms(p.text)) & question for p in passages]
    under = [
        (stem_terms(key_terms(h)) & question) - mine if h else set()
        for mine, h in zip(own, section_headings(passages), strict=True)
    ]
    df: dict[str, int] = {}
    for mine, inherited in zip(own, under, strict=True):
        for t in mine | inherited:
            df[t] = df.get(t, 0) + 1
    n = len(passages)
    idf = {t: math.log(1.0 + n / d) for t, d in df.items()}
    rel = [
        sum(idf[t] for t in mine) + CONTINUATION * sum(idf[t] for t in inherited)
        for mine, inherited in zip(own, under, strict=True)
    ]
    return rel, sum(idf.values())


def rank_passages(
    question_terms: set[str], passages: Sequence[Passage]
) -> list[tuple[Passage, float]]:
    """The passages worth packing, best first, each with its share of the event's relevance
    (1.0 for a passage holding every question term the event holds). Without any relevant
    passage: the first passage alone, at 1.0."""
    if not passages:
        return []
    rel, event = passage_relevance(question_terms, passages)
    if event <= 0:
        return [(passages[0], 1.0)]
    # the lines right after a match continue it: a reason after its statement, an answer after
    # its heading
    rel = [max(r, CONTINUATION * before) for r, before in zip(rel, [0.0, *rel[:-1]], strict=True)]
    order = sorted(range(len(passages)), key=lambda i: (-rel[i], i))
    return [(passages[i], rel[i] / event) for i in order if rel[i] > 0]
