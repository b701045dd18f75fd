"""Sentences and facts from events, scored for salience (used by the extractive summariser).

Every event becomes zero or more ``Fact``s: prose is split into clean sentences (markdown and
code fences removed, commands kept whole); a tool call becomes "Ran `cmd`", "Edited `path`",
"Searched for `pattern`"... (``tool_calls.render_tool_call``: never the raw call or tool name);
a tool result contributes only its error line (or a test tally), since raw output is noise.
Each fact carries its key terms and cue flags; ``score_facts`` turns them into salience scores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memtoc.model import Event
from memtoc.pipeline.summarize.tool_calls import render_tool_call
from memtoc.text.keyphrases import SPEAKER_LABEL, iter_words, token_terms

MAX_WORDS = 40

_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[`*_]*[A-Z0-9])")
_MD_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d{1,3}[.)]\s+|\[[ xX]\]\s+)+")
_MD_INLINE = re.compile(r"\*\*|__|~~|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_ERROR_LINE = re.compile(
    r"(?:^|\s)((?:[A-Za-z_][\w.]*(?:Error|Exception|Warning)|error|ERROR|FAILED|fatal|panic)"
    r"\b[:\s].{0,200})"
)
_PYTEST_FAILED = re.compile(r"FAILED \S*?::(\w+)\S* - (.+)")
_TALLY = re.compile(r"\b\d+ (?:passed|failed|errors?|skipped)\b(?:[, ]+\d+ \w+)*")
_SHELL = re.compile(
    r"^(?:\$ )?(?:git|pytest|python3?|pip|uv|npm|npx|yarn|pnpm|cargo|go|make|docker|kubectl|ls|cd|"
    r"cat|grep|rg|sed|curl|ruff|mypy|node|bash|sh|cp|mv|rm|mkdir|psql|sqlite3|memtoc)\b"
)
_CUES = re.compile(
    r"\b(?:"
    r"(?P<decision>let's|lets|we'll use|we will use|decided|decide|decision|instead|the fix|"
    r"fixed by|root cause|solution|resolved|the problem (?:is|was)|turns out|switch(?:ed)? to|"
    r"going with|chose|conclusion|because)"
    r"|(?P<fix>fix(?:ed|es|ing)?|works now|passes|passing|solved)"
    r"|(?P<life>went|visited|started|joined|bought|adopted|moved|finished|signed up|won|lost|met|"
    r"married|graduated|volunteer\w*|plan(?:s|ned|ning)?|going to|gonna|next (?:week|month|year)|"
    r"last (?:week|month|year|night)|yesterday|tomorrow|weekend|recently|just got|birthday|"
    r"trip|new job|my (?:kids?|husband|wife|partner|family|mom|dad|friend)s?)"
    r")\b"
)
"""Salience cues, matched against the lowercased sentence; the group name says which."""
_CHITCHAT = re.compile(
    r"(?:ok(?:ay)?|thanks?|thank you|great|cool|nice|sure|yes|yeah|yep|no|wow|lol|haha|awesome|"
    r"sounds good|got it|hi|hey|hello|bye|perfect|glad|that's (?:great|awesome|amazing|cool))\b"
)


@dataclass(slots=True)
class Fact:
    """One candidate bullet: a clean sentence or a fact derived from a tool event."""

    text: str
    position: int
    """Order of the fact in the segment (for chronological bullets and tie-breaks)."""
    event_index: int
    terms: frozenset[str]
    kind: str
    """``prose``, ``question``, ``command``, ``edit``, ``read``, ``call``, ``error`` or ``tally``."""
    speaker: str | None = None
    decision: bool = False
    fix: bool = False
    life_event: bool = False
    chitchat: bool = False
    code: bool = False
    score: float = 0.0


def clean_sentence(text: str, max_words: int = MAX_WORDS) -> str:
    """Markdown-free, single-spaced, at most ``max_words`` words (cut ends with an ellipsis)."""
    if "](" in text:
        text = _MD_LINK.sub(r"\1", text)
    text = _MD_PREFIX.sub("", text)
    if "*" in text or "__" in text or "~~" in text:
        text = _MD_INLINE.sub("", text)
    text = " ".join(text.split())
    if text.count("`") % 2:
        text = text.replace("`", "")
    words = text.split(" ")
    if len(words) > max_words:
        text = " ".join(words[:max_words]).rstrip(",;:-(") + "…"
    return text


def _terms_of(text: str) -> tuple[frozenset[str], bool]:
    terms: list[str] = []
    code = False
    for m in iter_words(text):
        tt = token_terms(m.group())
        if len(tt) > 1 and ("_" in tt[0] or "/" in tt[0] or "." in tt[0] or tt[0][0] == "-"):
            code = True
        terms.extend(tt)
    return frozenset(terms), code


def _tool_result_fact(event: Event) -> tuple[str, str] | None:
    """An error line (``error``) or a test tally (``tally``) from a tool result, else None."""
    text = event.text[-4000:]
    errors = [m.group(1) for m in _ERROR_LINE.finditer(text)]
    if errors or event.metadata.get("is_error") is True:
        line = errors[-1] if errors else text.strip().splitlines()[-1] if text.strip() else "failed"
        failed = _PYTEST_FAILED.match(line.strip())
        if failed:  # "FAILED tests/x.py::test_y - msg": the message first, then the test
            return "error", f"Error: {clean_sentence(failed.group(2), 20)} in `{failed.group(1)}`"
        return "error", "Error: " + clean_sentence(line.strip(), 24)
    tally = _TALLY.search(text)
    if tally:
        return "tally", "Tests: " + tally.group(0)
    return None


def _prose_sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, is_command) pairs: fenced code dropped except shell commands."""
    out: list[tuple[str, bool]] = []
    in_fence = False
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            out.extend((s, False) for s in _SENT_SPLIT.split(joined) if s)
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or not line:
            if in_fence and (line.startswith("$ ") or _SHELL.match(line)) and len(line) < 160:
                out.append((line.removeprefix("$ "), True))
            flush()
            continue
        if _MD_PREFIX.match(raw) or line.startswith("|"):
            flush()  # list items and table rows stand alone
        paragraph.append(line)
    flush()
    return out


def extract_facts(events: Sequence[Event]) -> list[Fact]:
    """Every candidate bullet of a segment, in order."""
    facts: list[Fact] = []

    def add(text: str, index: int, kind: str, speaker: str | None = None) -> None:
        text = clean_sentence(text)
        if not text:
            return
        terms, code = _terms_of(text)
        body = text[len(speaker) + 2 :] if speaker and text.startswith(speaker + ": ") else text
        body = body.lower()
        cues = {m.lastgroup for m in _CUES.finditer(body)}
        facts.append(
            Fact(
                text=text,
                position=len(facts),
                event_index=index,
                terms=terms,
                kind=kind,
                speaker=speaker,
                decision="decision" in cues,
                fix="fix" in cues,
                life_event="life" in cues,
                chitchat=_CHITCHAT.match(body) is not None,
                code=code or kind in ("command", "edit"),
            )
        )

    seen_errors: set[str] = set()
    for index, event in enumerate(events):
        etype = event.event_type
        if etype == "tool_call":
            action = render_tool_call(event.text, event.metadata)
            if action:
                add(action.text, index, action.kind)
            continue
        if etype == "tool_result":
            result = _tool_result_fact(event)
            if result:
                # The same failure seen again (re-runs) is one fact, kept where it first showed.
                message = result[1].rsplit(" in `", 1)[0]
                if result[0] == "error" and message in seen_errors:
                    continue
                seen_errors.add(message)
                add(result[1], index, result[0])
            continue
        if etype in ("session_start", "session_end") or not event.text.strip():
            continue
        text = event.text
        speaker = event.metadata.get("speaker")
        match = SPEAKER_LABEL.match(text)
        if match:
            speaker, text = match.group(1), text[match.end() :]
        label = speaker if isinstance(speaker, str) and speaker else None
        for sentence, is_command in _prose_sentences(text[:20_000]):
            if is_command:
                add(f"Ran `{sentence}`", index, "command")
                continue
            kind = "question" if sentence.rstrip().endswith("?") else "prose"
            add(f"{label}: {sentence}" if label else sentence, index, kind, label)
    return facts


def score_facts(facts: Sequence[Fact], events: Sequence[Event]) -> None:
    """Set each fact's salience: centrality to the segment's terms plus cue bonuses."""
    doc_freq: dict[str, int] = {}
    for fact in facts:
        for term in fact.terms:
            doc_freq[term] = doc_freq.get(term, 0) + 1
    speakers = {f.speaker for f in facts if f.speaker}
    weight = {t: math.log1p(df) for t, df in doc_freq.items() if t.lower() not in _lower(speakers)}
    top = max(weight.values(), default=1.0) or 1.0
    user_turns = {i for i, e in enumerate(events) if e.role == "user"}
    for fact in facts:
        content = [weight.get(t, 0.0) for t in fact.terms]
        n = len(content)
        centrality = math.fsum(content) / (top * math.sqrt(n + 2)) if n else 0.0
        score = centrality
        if fact.kind == "error":
            score += 0.9
        elif fact.kind == "tally":
            score += 0.4
        elif fact.kind in ("command", "edit"):
            score += 0.35
        elif fact.kind == "call":
            score -= 0.3
        elif fact.kind == "question":
            score += 0.5 if fact.event_index in user_turns or fact.speaker else 0.2
        if fact.decision:
            score += 0.6
        if fact.fix:
            score += 0.4
        if fact.life_event:
            score += 0.5
        if fact.code and fact.kind == "prose":
            score += 0.3
        if fact.chitchat:
            score -= 0.6
        if n <= 2 and fact.kind in ("prose", "question"):
            score -= 0.5
        fact.score = score


def _lower(names: Iterable[str | None]) -> set[str]:
    return {n.lower() for n in names if n}


_INTENT = re.compile(
    r"^(?:\w+: )?(?:plan:|i'll |i will |let me |next,? i|ran `|read `|searched |called `|wrote `)",
    re.IGNORECASE,
)


def bullet_salience(text: str) -> float:
    """How much a finished bullet says, from its wording alone (for merging child summaries):
    decisions, causes and fixes up, errors a little, intentions and plain tool steps down."""
    low = text.lower()
    cues = {m.lastgroup for m in _CUES.finditer(low)}
    score = 0.5 * ("decision" in cues) + 0.3 * ("fix" in cues) + 0.3 * ("life" in cues)
    if low.startswith(("error:", "cause:", "fix:", "decision:", "root cause")):
        score += 0.3
    if _INTENT.match(text):
        score -= 0.4
    return score
