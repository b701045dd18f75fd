"""Grips: tie every summary bullet to the events it came from.

**Segments.** Each event of the segment scores by key-term overlap with the bullet (the share of the
bullet's key terms the event contains) minus a small per-event penalty; the grip is the contiguous
range with the highest total (a maximum-sum subarray, at most ``MAX_RANGE`` events long), so it
covers the run of events that carries the bullet and not the quiet ones around it. The event that
holds the bullet's quoted sentence (an extractive bullet quotes its event; a tool fact names its
command or path) anchors the range and scores a bonus, so the grip centres on the bullet's own
source — never on a denser run of look-alike tool output elsewhere — and its
excerpt is the quoted sentence, not the head of a nearby tool output. A bullet that
shares no term with any event (an LLM paraphrase) is gripped to its single best event — the first
one when nothing matches — so every bullet still resolves to evidence. The excerpt is the best
sentence of the best-matching event, at most ``EXCERPT_CHARS`` characters.

**Periods.** A day, week, month or year bullet inherits the grips of the child bullets it matches
best (key-term overlap), so every bullet at every level resolves to events in its own subtree.

Grip ids are deterministic — ``grip:{ts_ms:013}:{hash of node, range, bullet, excerpt}`` — so
rebuilding a node recreates the same grips instead of duplicating them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

from memtoc.model import Event, Grip, TocNode
from memtoc.text.keyphrases import key_terms

MAX_RANGE = 8
"""The longest range of events one grip covers."""
EVENT_PENALTY = 0.15
"""Subtracted from each event's score, so ranges only grow through events that help."""
EXCERPT_CHARS = 300
MAX_INHERITED = 3
"""At most this many grips are inherited by one period bullet."""

SOURCE_BONUS = 1.0
"""Added to the score of the event that holds a bullet's quoted sentence."""
MIN_CORE = 8
"""A bullet's quote shorter than this (flattened) is too weak to identify its event."""
SEARCH_CHARS = 20_000
"""How much of each event's text is searched for a quote (the summariser reads no more)."""

_SENTENCE = re.compile(r"(?:[^.!?\n]|\.(?=\S))+[.!?]?")
_EMPHASIS = re.compile(r"\*\*|__|~~|`")
_TOOL_FACT = re.compile(
    r"^(?:Ran|Edited|Wrote|Read|Fetched|Searched(?: the web)? for|Called) `([^`]+)`"
)
_CALL_SAID = re.compile(r"^(?:Committed|Proposed plan|Asked): (.+)")
_RESULT_SAID = re.compile(r"^Committed [0-9a-f]{7,12}: (.+)")
_CALLS = frozenset({"tool_call"})
_RESULTS = frozenset({"tool_result"})
_MESSAGES = frozenset({"user_message", "assistant_message", "system", "note"})
_LABEL = re.compile(r"^[A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?: (?=\S)")


def grip_id(project: str, node_id: str, events: Sequence[Event], bullet: str, excerpt: str) -> str:
    """``grip:{ts_ms:013}:{suffix}``: the suffix hashes everything the grip says (its node, the
    ids of every event in its range, the bullet and the excerpt), so a grip id never changes
    meaning — a late event inside the range makes a new grip, not a stale one."""
    key = "\x1f".join((project, node_id, *(e.event_id for e in events), bullet, excerpt))
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()
    return f"grip:{events[0].ts_ms:013d}:{digest}"


def _overlap(bullet_terms: set[str], terms: set[str]) -> float:
    if not bullet_terms:
        return 0.0
    return len(bullet_terms & terms) / len(bullet_terms)


def best_range(
    scores: Sequence[float], max_len: int = MAX_RANGE, *, anchor: int | None = None
) -> tuple[int, int]:
    """The inclusive ``(start, end)`` of the best contiguous range of penalised ``scores``.

    Ties prefer the higher total, then the shorter range, then the earlier one. When no range
    has a positive total, the single best event wins (the first on ties). With ``anchor``, only
    ranges containing that index count (the bullet's known source event).
    """
    if not scores:
        raise ValueError("best_range needs at least one score")
    if anchor is not None:
        lo = max(0, anchor - max_len + 1)
        ranges = [
            (i, j)
            for i in range(lo, anchor + 1)
            for j in range(anchor, min(len(scores), i + max_len))
        ]
        totals = [sum(scores[i : j + 1]) - EVENT_PENALTY * (j - i + 1) for i, j in ranges]
        k = max(
            range(len(ranges)),
            key=lambda n: (round(totals[n], 9), -(ranges[n][1] - ranges[n][0]), -n),
        )
        return ranges[k]
    best: tuple[float, int, int] | None = None
    for i in range(len(scores)):
        total = 0.0
        for j in range(i, min(len(scores), i + max_len)):
            total += scores[j] - EVENT_PENALTY
            if total > 1e-9 and (best is None or total > best[0] + 1e-9):
                best = (total, i, j)
    if best is not None:
        return best[1], best[2]
    top = max(range(len(scores)), key=lambda k: (scores[k], -k))
    return top, top


@lru_cache(maxsize=32)
def _sentences_of(text: str) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """The sentences of ``text`` (its first ``SEARCH_CHARS``) and, for an ASCII one, its
    lowercased form (None otherwise): split once per event, however many bullets of its segment
    look for their excerpt in it (a few events per segment: a small cache)."""
    sentences = [m.group(0).strip() for m in _SENTENCE.finditer(text[:SEARCH_CHARS])]
    kept = tuple(s for s in sentences if s)
    return kept, tuple(s.lower() if s.isascii() else None for s in kept)


def _probes(terms: set[str]) -> tuple[str, ...]:
    """For each key term, a string every text holding it contains when lowercased: the term
    itself, without its final ``y`` (``libraries`` gives ``library``). A term is its token
    lowercased, or a part of it, with suffixes stripped (``key_terms``), so it is a prefix of
    a lowercased word of the text but for the ``ies`` → ``y`` ending."""
    return tuple(t[:-1] if t.endswith("y") and len(t) > 1 else t for t in terms)


def excerpt_of(text: str, bullet_terms: set[str], limit: int = EXCERPT_CHARS) -> str:
    """The sentence of ``text`` sharing most key terms with the bullet (the first on ties), cut
    to ``limit`` chars. A sentence shares at most as many terms as it holds of the bullet terms'
    ``_probes``, so one that could not beat the best so far is not read (most sentences of a long
    output)."""
    sentences, lowered = _sentences_of(text)
    if not sentences:
        return text.strip()[:limit]
    probes = _probes(bullet_terms)
    best, most = 0, -1
    for k, sentence in enumerate(sentences):
        low = lowered[k]
        if low is None:
            shared = len(bullet_terms & key_terms(sentence))
        else:  # it shares at most as many terms as it holds probes: read it only if that wins
            held = sum(p in low for p in probes)
            if held <= most:
                continue
            shared = len(bullet_terms & key_terms(sentence)) if held else 0
        if shared > most:
            best, most = k, shared
    chosen = sentences[best]
    if len(chosen) < limit // 2:  # a short sentence: add what follows for context
        chosen = " ".join(sentences[best : best + 3])
    return _cut(chosen, limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _flat(text: str) -> str:
    """Lowercased, markdown emphasis and backticks dropped, whitespace collapsed: the form in
    which a bullet's sentence is looked up in an event's text."""
    return " ".join(_EMPHASIS.sub("", text).lower().split())


def bullet_core(bullet: str) -> tuple[str, frozenset[str]]:
    """The part of an extractive bullet quoted verbatim from its event (flattened), and the
    event types that can hold it: the sentence without a speaker label or an ellipsis (a
    message), or what a tool fact names ("Ran `cmd`" → ``cmd`` in a tool call, "Error: msg in
    `test`" → ``msg`` in a tool result). Empty when too short to identify an event."""
    text = bullet.strip().removesuffix("…")
    tool = _TOOL_FACT.match(text)
    said = _CALL_SAID.match(text)
    result = _RESULT_SAID.match(text)
    if tool:
        text, types = tool.group(1).removesuffix("…"), _CALLS
    elif said:  # a commit message, a plan's heading, a question put to the user
        text, types = said.group(1).removesuffix("…"), _CALLS
    elif result:  # "Committed 1a2b3c4: subject (2 files changed…)"
        text, types = result.group(1).split(" (", 1)[0], _RESULTS
    elif text.startswith(("Error: ", "Tests: ")):
        text, types = text[7:].rsplit(" in `", 1)[0], _RESULTS
    else:
        text, types = _LABEL.sub("", text), _MESSAGES
    core = _flat(text)
    return (core, types) if len(core) >= MIN_CORE else ("", types)


def segment_grips(
    project: str,
    node_id: str,
    session_id: str,
    events: Sequence[Event],
    bullets: Sequence[str],
) -> list[Grip]:
    """One grip per bullet over the segment's ``events`` (in time order).

    An event whose text contains the bullet's sentence (``bullet_core``: an extractive bullet
    quotes its event) gets ``SOURCE_BONUS`` on top of its overlap, so the grip centres on the
    event the bullet came from, and its excerpt is the sentence(s) holding the quote rather than
    the head of a long tool output.
    """
    if not events:
        return []
    event_terms = [key_terms(ev.text[:SEARCH_CHARS]) for ev in events]
    flats: list[str | None] = [None] * len(events)  # flattened when a bullet's types ask
    out: list[Grip] = []
    for bullet in bullets:
        bterms = key_terms(bullet)
        raw = [_overlap(bterms, t) for t in event_terms]
        core, types = bullet_core(bullet)
        source = -1
        if core:
            source = _source_of(core, types, events, flats)
            if source >= 0:
                raw[source] += SOURCE_BONUS
        start, end = best_range(raw, anchor=source if source >= 0 else None)
        if source >= 0 and start <= source <= end:
            focus = source
            excerpt = quote_excerpt(events[source].text, core, bterms)
        else:
            focus = max(range(start, end + 1), key=lambda k: (raw[k], -k))
            excerpt = excerpt_of(events[focus].text, bterms)
        first, last = events[start], events[end]
        out.append(
            Grip(
                grip_id=grip_id(project, node_id, events[start : end + 1], bullet, excerpt),
                project=project,
                excerpt=excerpt,
                event_id_start=first.event_id,
                event_id_end=last.event_id,
                ts_ms=first.ts_ms,
                source="segment",
                toc_node_id=node_id,
                session_id=session_id,
            )
        )
    return out


def _source_of(
    core: str, types: frozenset[str], events: Sequence[Event], flats: list[str | None]
) -> int:
    """The first event of one of ``types`` whose flattened text holds ``core`` (-1: none). An
    event is flattened the first time a bullet's types include it (``flats`` keeps it for the
    segment's other bullets): a message bullet never flattens the long tool outputs."""
    for k, event in enumerate(events):
        if event.event_type not in types:
            continue
        flat = flats[k]
        if flat is None:
            flat = flats[k] = _flat(event.text[:SEARCH_CHARS])
        if core in flat:
            return k
    return -1


def _line_sentences(lines: Sequence[str]) -> Iterator[str]:
    """The non-empty sentences of ``lines``, in order, each line split on its own."""
    for line in lines:
        for m in _SENTENCE.finditer(line):
            sentence = m.group(0).strip()
            if sentence:
                yield sentence


def quote_excerpt(text: str, core: str, bullet_terms: set[str], limit: int = EXCERPT_CHARS) -> str:
    """The sentence(s) of ``text`` that hold the bullet's quote (``core``); for a tool call or
    output (lines, no sentences) the line holding it. Falls back to ``excerpt_of``."""
    head = core[:60]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    sentences = _line_sentences(lines)  # split as far as read: the quote is often early
    for sentence in sentences:
        if head[:30] in _flat(sentence):
            chosen = [sentence]
            while len(" ".join(chosen)) < len(core):
                following = next(sentences, None)  # a quote spanning sentences
                if following is None:
                    break
                chosen.append(following)
            return _cut(" ".join(chosen), limit)
    for line in lines:
        flat = _flat(line)
        at = flat.find(head)
        if at >= 0:  # a quote inside a long line (a command inside JSON): centre on it
            lo = max(0, at - 40)
            return _cut(("…" if lo else "") + " ".join(line.split())[lo:], limit)
    return excerpt_of(text, bullet_terms, limit)


def inherited_grips(bullets: Sequence[str], children: Sequence[TocNode]) -> list[tuple[str, ...]]:
    """For each period bullet, the grip ids of the child bullets that match it best.

    Child bullets are ranked by key-term overlap (ties: time order); those scoring at least half
    the best contribute their grips, up to ``MAX_INHERITED``. Without any overlap a bullet takes
    the first gripped bullet of the child whose title and keywords match best (the first child on
    ties), so it never dangles while any child has grips.
    """
    pool: list[tuple[set[str], tuple[str, ...]]] = [
        (key_terms(b.text), b.grip_ids) for c in children for b in c.bullets if b.grip_ids
    ]
    gripped = [c for c in children if any(b.grip_ids for b in c.bullets)]
    heads = [key_terms(" ".join((c.title, *c.keywords))) for c in gripped]
    out: list[tuple[str, ...]] = []
    for bullet in bullets:
        if not pool:
            out.append(())
            continue
        bterms = key_terms(bullet)
        ranked = sorted(
            ((_overlap(bterms, terms), k, ids) for k, (terms, ids) in enumerate(pool)),
            key=lambda r: (-r[0], r[1]),
        )
        chosen: list[str] = []
        if ranked[0][0] > 0:
            top = ranked[0][0]
            for score, _, ids in ranked:
                if score < top / 2 or len(chosen) >= MAX_INHERITED:
                    break
                chosen.extend(g for g in ids if g not in chosen)
        else:
            best = max(range(len(gripped)), key=lambda k: (_overlap(bterms, heads[k]), -k))
            chosen.extend(next(b for b in gripped[best].bullets if b.grip_ids).grip_ids)
        out.append(tuple(chosen[:MAX_INHERITED]))
    return out
