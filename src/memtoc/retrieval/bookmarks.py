"""Bookmarks: salient moments found in a window of events (DESIGN §2, §5).

The **extractive detector** (``ExtractiveDetector``) reads one session's events in order and emits
``Bookmark``s of four types, each from conversational cues:

``conclusion``
    a decision: "let's use X", "we'll go with", "we decided", "decision: …", "the plan is",
    "from now on". Questions and exploratory "let's look / check / try" are not decisions. An
    acknowledgement from the other side right after ("agreed", "makes sense") adds to the cue and
    its event joins the sources.
``resolution``
    what turned out to be right after a **correction** or an **error**. A user correction ("no,
    the bug is in refresh_token()", "that's not it") is followed by the assistant's corrected
    understanding; the bookmark keeps that understanding (apologies stripped) plus the fix or the
    success that followed (tests passing) — never the wrong guess that was corrected, whose event
    is not a source. Without a correction, a failing tool result followed by a stated cause ("root
    cause: …", "found it") and a success makes a weaker resolution; a cause that the user then
    corrects is never used.
``validated``
    the user confirms ("yes, exactly", "that's right", "perfect, that works"): the assistant
    statement being confirmed (its first substantial sentences) is bookmarked, with both events.
    A confirmed status report ("all tests pass now") is not understanding and is skipped (the
    fix it reports is a resolution's business).
``foundational``
    what the user says about themselves, their project and constraints: "my name is", "I'm a
    backend developer", "our team uses", "we must support Python 3.9", "we never deploy on Fridays".

**Content** is one or two clean sentences (markdown and backticks stripped, at most
``MAX_WORDS`` = 50 words, cut at a word with "…").

**Importance** = ``type weight x cue strength x length sanity``, in 0..1:

- type weight: resolution 1.0, conclusion 0.9, foundational 0.85, validated 0.8;
- cue strength: 0..1 from the matched cue (e.g. "we decided" 1.0, a bare "let's" 0.6, "yes,
  exactly" 1.0, "looks good" 0.6; a resolution without a confirmed fix 0.7);
- length sanity: 1.0 for 5-50 words, 0.5 under 5 words, 0.85 when the content had to be cut.

**Identity**: ``bookmark_id = "bm:{created_ms:013}:{hash}"`` where the hash is BLAKE2b of the
project, the sorted source event ids and the type — the same moment always gets the same id.
``created_ms`` is the time of the last source event; ``last_relevant_ms`` starts equal to it.

**Decay** (``effective_importance``): ``importance x max(0.2, 0.5^(age_days / 90))`` with age
measured from ``last_relevant_ms`` — a half-life of 90 days, never below a fifth of the original;
using a bookmark (``Store.touch_bookmarks``) resets its age.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Protocol

from memtoc.model import Bookmark, Event

MAX_WORDS = 50
TYPE_WEIGHT: dict[str, float] = {
    "resolution": 1.0,
    "conclusion": 0.9,
    "foundational": 0.85,
    "validated": 0.8,
}
DECAY_HALF_LIFE_DAYS = 90.0
DECAY_FLOOR = 0.2
_DAY_MS = 86_400_000
RESOLUTION_WINDOW = 25
"""Events after a correction or an error within which the fix must show up."""

_MESSAGES = {"user_message", "assistant_message"}


# -- the detector protocol ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Detection:
    """What a detector found in a window, and how: ``degraded`` says why a preferred detector was
    not used (None when it was)."""

    bookmarks: list[Bookmark]
    backend: str = "extractive"
    degraded: str | None = None


class BookmarkDetector(Protocol):
    """Finds bookmarks in a window of events (one project; any sessions, in time order)."""

    name: str

    def detect(self, events: Sequence[Event]) -> Detection: ...


# -- scoring, ids, decay --------------------------------------------------------------------------
def bookmark_id(project: str, event_ids: Sequence[str], type_: str, created_ms: int) -> str:
    """The deterministic id of a bookmark: creation instant + hash(project, sorted events, type)."""
    key = "\x00".join([project, ",".join(sorted(set(event_ids))), type_])
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"bm:{max(0, created_ms):013d}:{digest}"


def length_sanity(content: str, cut: bool) -> float:
    if cut:
        return 0.85
    return 0.5 if len(content.split()) < 5 else 1.0


def importance(type_: str, cue: float, content: str, cut: bool = False) -> float:
    """``type weight x cue strength x length sanity``, clamped to 0..1, 3 decimals."""
    value = TYPE_WEIGHT.get(type_, 0.5) * max(0.0, min(1.0, cue)) * length_sanity(content, cut)
    return round(max(0.0, min(1.0, value)), 3)


def effective_importance(bookmark: Bookmark, now_ms: int) -> float:
    """Importance with decay: half-life 90 days from ``last_relevant_ms``, floor 0.2 of it."""
    age_days = max(0, now_ms - bookmark.last_relevant_ms) / _DAY_MS
    factor = max(DECAY_FLOOR, float(0.5 ** (age_days / DECAY_HALF_LIFE_DAYS)))
    return bookmark.importance * factor


def make_bookmark(
    project: str, type_: str, content: str, sources: Sequence[Event], cue: float
) -> Bookmark | None:
    """A bookmark from cleaned ``content`` and its source events (None when content is empty)."""
    text, cut = clip_words(clean(content))
    if not text or not sources:
        return None
    ids = tuple(sorted({e.event_id for e in sources}))
    created = max(e.ts_ms for e in sources)
    return Bookmark(
        bookmark_id=bookmark_id(project, ids, type_, created),
        project=project,
        content=text,
        event_ids=ids,
        importance=importance(type_, cue, text, cut),
        type=type_,
        created_ms=created,
        last_relevant_ms=created,
    )


# -- text helpers -----------------------------------------------------------------------------------
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`A-Z0-9])|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_LABEL = re.compile(r"^(?:wrap-up|summary|green|done|update|status|note|fyi)\s*:\s*", re.I)


def clean(text: str) -> str:
    """One line of plain text: no code fences, markdown emphasis, backticks or bullets."""
    text = _FENCE.sub(" ", text)
    text = text.replace("`", "")
    text = re.sub(r"(?<!\w)\*{1,3}(?=\S)|(?<=\S)\*{1,3}(?!\w)", "", text)
    text = _BULLET.sub("", text)
    text = _LABEL.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def clip_words(text: str, limit: int = MAX_WORDS) -> tuple[str, bool]:
    words = text.split()
    if len(words) <= limit:
        return text, False
    return " ".join(words[:limit]).rstrip(",;:") + "…", True


def sentences(text: str) -> list[str]:
    """Sentences (and lines) of a message, cleaned, without code blocks."""
    text = _FENCE.sub("\n", text)
    out = []
    for part in _SENT_SPLIT.split(text):
        s = clean(part)
        if s:
            out.append(s)
    return out


def _join(parts: Sequence[str], limit: int = MAX_WORDS) -> str:
    """Sentences joined while they fit ``limit`` words (the first one always)."""
    out: list[str] = []
    words = 0
    for part in parts:
        n = len(part.split())
        if out and words + n > limit:
            break
        part = _cap(part)
        out.append(part if part[-1] in ".!?…" else part + ".")
        words += n
    return " ".join(out)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# -- cues ------------------------------------------------------------------------------------------
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_DECISION_CUES: tuple[tuple[re.Pattern[str], float], ...] = (
    (_rx(r"\b(?:we|i)(?:'ve| have)?\s+decided\b|\bdecided to\b|\bdecision\s*:"), 1.0),
    (_rx(r"\b(?:we'll|we will|let's|let us|we're|we are)\s+go(?:ing)?\s+with\b"), 1.0),
    (_rx(r"\bwe(?:'ve| have)?\s+agreed\b|\bagreed on\b|\bwe settled on\b"), 0.9),
    (_rx(r"\bthe plan is\b|\bfrom now on\b|\bgoing forward\b"), 0.9),
    (
        _rx(
            r"\blet's (?:not )?(?:use|keep|switch|move|make|require|run|store|allow|add|cap|"
            r"export|publish|split|gate|validate|verify|log|only|backfill|version|warm|key|"
            r"scale|never|always|stick|adopt|drop|remove|standardi[sz]e|pin|replace|set|put|"
            r"limit|enforce|deprecate|rename|migrate|ship|write|return)\b"
        ),
        1.0,
    ),
    (_rx(r"\bwe(?:'ll| will| should) (?:use|keep|switch to|standardi[sz]e on|stick with)\b"), 0.8),
    (
        _rx(
            r"\blet's\b(?! (?:see|look|check|try|start|pick|debug|investigate|figure|think|take|"
            r"dig|find|get|begin|continue|focus|go ahead|first|quickly|also|wait|reproduce|"
            r"review the|re-?run|run the tests))"
        ),
        0.6,
    ),
)
_ACK = _rx(
    r"^(?:ok(?:ay)?[,.]?\s+)?(?:agreed|makes sense|sounds good|will do|good call|"
    r"i'll go with (?:that|it)|ok(?:ay)?[,.!]?$|done)"
)
_CORRECTION = _rx(
    r"^(?:no\b|nope\b|that's not (?:it|right|correct)|that is not (?:it|right)|that's wrong|"
    r"wrong\b|not quite|incorrect|actually,? (?:the|it's|it is)|you're looking at the wrong|"
    r"you are looking at the wrong)"
)
_APOLOGY = _rx(
    r"^(?:you're right|you are right|sorry|my (?:mistake|bad)|apologies|good catch|"
    r"confirmed|indeed|right)\b[,.!:;]?\s*(?:sorry[,.!]?\s*)?"
)
_IMPERATIVE = _rx(r"^(?:look|check|try|please|go|can you|could you|have a look)\b")
_ERROR = re.compile(
    r"\bFAILED\b|Traceback \(most recent call last\)|\b\d+ failed\b|\bError:|\bERROR\b|"
    r"exit (?:code|status) [1-9]"
)
_PASSED = _rx(r"\b\d+ passed\b")
_SUCCESS = _rx(
    r"\b(?:all (?:the )?tests? pass|(?:tests?|suite) pass(?:es)?\b|"
    r"\bpass(?:es)? now\b|fixed\b|^green\b|works now|no longer (?:fails|occurs|happens|raises)|"
    r"the fix (?:works|worked))"
)
_CAUSE = _rx(
    r"\broot cause\b|\bfound it\b|\bthe (?:bug|problem|issue|cause) (?:is|was)\b|\bcaused by\b|"
    r"\bthe fix is\b|\bthat's the (?:actual )?bug\b"
)
_FIX = _rx(r"\bthe fix is\b|\bi (?:changed|fixed|updated)\b|\bfixed\b|\bi propose\b")
_CONFIRM: tuple[tuple[re.Pattern[str], float], ...] = (
    (
        _rx(
            r"^(?:(?:yes|yep|yeah)[,!.]?\s*)?(?:exactly|that's (?:right|correct|it|exactly it)|"
            r"that is (?:right|correct)|correct|precisely|spot on)\b"
        ),
        1.0,
    ),
    (_rx(r"^(?:(?:perfect|great|yes)[,!.]?\s*)?(?:that|it) works\b"), 0.9),
    (_rx(r"^(?:yes|yep|yeah)[,!.]?\s*that (?:matches|makes sense|'s what)"), 0.9),
    (_rx(r"^(?:yes|yep|yeah)\b"), 0.7),
    (_rx(r"^(?:looks good|lgtm)\b"), 0.6),
    (_rx(r"^perfect\b"), 0.6),
    (_rx(r"^(?:right|ok|okay)[,.]?\s*go ahead\b"), 0.5),
)
_FOUNDATIONAL: tuple[tuple[re.Pattern[str], float], ...] = (
    (_rx(r"\bmy name is\b|\bcall me [A-Z]"), 1.0),
    (
        _rx(
            r"\bwe (?:must|have to|need to|can't|cannot|can not|are required to|should never|"
            r"never|always|only) (?:support|use|run|target|deploy|keep|ship|stay|be|release|"
            r"store|allow)\b"
        ),
        1.0,
    ),
    (
        _rx(
            r"\bi(?:'m| am) (?:a|an) (?!bit\b|little\b|lot\b|few\b|quick\b|bit\b)[\w-]+"
            r"(?: [\w-]+)? (?:developer|engineer|designer|scientist|manager|researcher|student|"
            r"lead|architect|maintainer|admin|founder|analyst|consultant|writer|teacher)\b"
        ),
        0.9,
    ),
    (_rx(r"\bi(?:'m| am) (?:a|an) (?:developer|engineer|designer|student|researcher)\b"), 0.9),
    (_rx(r"\bi work (?:at|for|as|on)\b"), 0.9),
    (
        _rx(
            r"\b(?:our|my) (?:team|company|project|stack|codebase|app|service|product|setup|repo|"
            r"org|organi[sz]ation|infra|infrastructure|ci|backend|frontend)\b[^.?!]{0,40}?\b"
            r"(?:uses?|runs? on|is (?:built|written|hosted|deployed)|targets?|deploys? (?:to|on)|"
            r"requires?|needs? to)\b"
        ),
        0.9,
    ),
    (_rx(r"\b(?:must|has to|needs to) (?:support|run on|be compatible with|stay on)\b"), 0.8),
    (_rx(r"\bproject [A-Z][\w-]+ (?:uses|runs|is|has)\b"), 0.8),
    (_rx(r"\b(?:always|never) use\b|\bi prefer\b|\bwe prefer\b"), 0.7),
    (_rx(r"\bwe (?:use|run|deploy to|host on|target)\b"), 0.7),
)


def _best_cue(text: str, cues: Sequence[tuple[re.Pattern[str], float]]) -> tuple[float, str] | None:
    """The strongest cue among the sentences of ``text``: (strength, sentence)."""
    best: tuple[float, str] | None = None
    for sentence in sentences(text):
        if sentence.endswith("?"):
            continue
        for pattern, strength in cues:
            if pattern.search(sentence) and (best is None or strength > best[0]):
                best = (strength, sentence)
                break
    return best


def _is_message(e: Event, role: str | None = None) -> bool:
    return e.event_type in _MESSAGES and (role is None or e.role == role)


# -- the extractive detector ---------------------------------------------------------------------
class ExtractiveDetector:
    """Cue-based detection (see the module docstring); deterministic, no model, no network."""

    name = "extractive"

    def detect(self, events: Sequence[Event]) -> Detection:
        found: dict[str, Bookmark] = {}
        ordered = sorted(events, key=lambda e: (e.project, e.session_id, e.ts_ms, e.event_id))
        for _, group in groupby(ordered, key=lambda e: (e.project, e.session_id)):
            for b in _detect_session(list(group)):
                found.setdefault(b.bookmark_id, b)
        return Detection(sorted(found.values(), key=lambda b: (b.created_ms, b.bookmark_id)))


def _detect_session(events: list[Event]) -> Iterator[Bookmark]:
    corrected = _corrected_statements(events)
    for i, e in enumerate(events):
        if not _is_message(e):
            continue
        if (b := _conclusion(events, i)) is not None:
            yield b
        if e.role == "user":
            yield from _user_cues(events, i)
        if (b := _error_resolution(events, i, corrected)) is not None:
            yield b


def _user_cues(events: list[Event], i: int) -> Iterator[Bookmark]:
    for make in (_correction_resolution, _validated, _foundational):
        b = make(events, i)
        if b is not None:
            yield b


def _conclusion(events: list[Event], i: int) -> Bookmark | None:
    e = events[i]
    cue = _best_cue(e.text, _DECISION_CUES)
    if cue is None:
        return None
    strength, sentence = cue
    sentence = re.sub(r"^(?:ok(?:ay)?|alright|so|right)[,.!]\s*", "", sentence, flags=re.I)
    sentence = re.sub(r"^decision\s*:\s*", "", sentence, flags=re.I)
    if e.role == "assistant":
        strength *= 0.85  # the user's decisions weigh more than the agent's
    sources = [e]
    for nxt in events[i + 1 : i + 4]:
        if _is_message(nxt) and nxt.role != e.role:
            first = (sentences(nxt.text) or [""])[0]
            if _ACK.search(first):
                strength = min(1.0, strength + 0.1)
                sources.append(nxt)
            break
    return make_bookmark(e.project, "conclusion", _cap(sentence), sources, strength)


def _next_message(events: list[Event], i: int, role: str, within: int) -> int | None:
    for j in range(i + 1, min(len(events), i + 1 + within)):
        if _is_message(events[j]):
            return j if events[j].role == role else None
    return None


def _success_after(events: list[Event], i: int) -> tuple[list[Event], str | None]:
    """Events confirming a fix after index ``i`` (a passing run, an assistant saying it is fixed)
    and the assistant's sentence that says so; stops at the next user correction."""
    sources: list[Event] = []
    for e in events[i + 1 : i + 1 + RESOLUTION_WINDOW]:
        if _is_message(e, "user") and _CORRECTION.search(e.text.strip()):
            break
        if e.event_type == "tool_result" and _PASSED.search(e.text) and not _ERROR.search(e.text):
            sources = [e]
        elif _is_message(e, "assistant"):
            said = sentences(e.text)
            hits = [k for k, s in enumerate(said) if _SUCCESS.search(s)]
            if hits:
                return [*sources, e], _informative(said, hits[0])
    return [], None


def _informative(said: Sequence[str], k: int, min_words: int = 5) -> str:
    """Sentence ``k``, or its nearest neighbour when it is too short to say anything ("Fixed.",
    "That's the actual bug.")."""
    if len(said[k].split()) >= min_words:
        return said[k]
    for j in (k + 1, k - 1):
        if 0 <= j < len(said) and len(said[j].split()) >= min_words:
            return said[j]
    return said[k]


def _understanding(text: str) -> list[str]:
    """The substance of an acknowledgement: sentences without apologies or bare fillers."""
    out = []
    for s in sentences(text):
        stripped = _APOLOGY.sub("", s).strip()
        if len(stripped.split()) < 3 and not re.search(r"\w+\(\)", stripped):
            continue
        out.append(_cap(stripped))
    return out


def _correction_resolution(events: list[Event], i: int) -> Bookmark | None:
    e = events[i]
    first = e.text.strip()
    if not _CORRECTION.search(first):
        return None
    sources = [e]
    parts: list[str] = []
    j = _next_message(events, i, "assistant", within=4)
    if j is not None:
        parts = _understanding(events[j].text)[:2]
        if parts and len(parts[0].split()) >= 8:
            parts = parts[:1]  # one substantive sentence says it; a short one needs the next
        if parts:
            sources.append(events[j])
    if not parts:  # no acknowledgement: the user's own corrected claim
        claim = [s for s in sentences(first) if not _IMPERATIVE.search(s)]
        claim = [_cap(_CORRECTION.sub("", s).lstrip(" ,.!")) for s in claim]
        parts = [s for s in claim if len(s.split()) >= 3][:1]
    if not parts:
        return None
    success, sentence = _success_after(events, j if j is not None else i)
    cue = 1.0 if success else 0.7
    if sentence is not None:
        parts = [*parts, sentence]
    return make_bookmark(e.project, "resolution", _join(parts), [*sources, *success], cue)


def _corrected_statements(events: list[Event]) -> set[str]:
    """Ids of assistant messages the user corrected next (never used as a resolution's cause)."""
    out: set[str] = set()
    last_assistant: Event | None = None
    for e in events:
        if not _is_message(e):
            continue
        if e.role == "assistant":
            last_assistant = e
        elif e.role == "user":
            if last_assistant is not None and _CORRECTION.search(e.text.strip()):
                out.add(last_assistant.event_id)
            last_assistant = None
    return out


def _error_resolution(events: list[Event], i: int, corrected: set[str]) -> Bookmark | None:
    """A stated cause (after a failing tool result) followed by a success; the cause must not be
    one the user corrected, and no correction may come between (that is the correction path)."""
    e = events[i]
    if e.role != "assistant" or e.event_id in corrected:
        return None
    cause = next((s for s in sentences(e.text) if _CAUSE.search(s)), None)
    if cause is None:
        return None
    prior = events[max(0, i - RESOLUTION_WINDOW) : i]
    errors = [p for p in prior if p.event_type == "tool_result" and _ERROR.search(p.text)]
    if not errors:
        return None
    if any(_is_message(p, "user") and _CORRECTION.search(p.text.strip()) for p in prior):
        return None
    parts = _understanding(e.text) or [cause]
    idx = next((k for k, s in enumerate(parts) if _CAUSE.search(s)), 0)
    stated = _informative(parts, idx, min_words=6)  # "Found it." / "That's the bug." need context
    success, sentence = _success_after(events, i)
    if not success:
        return None
    parts = [stated, sentence] if sentence is not None else [stated]
    return make_bookmark(e.project, "resolution", _join(parts), [errors[-1], e, *success], 0.8)


def _validated(events: list[Event], i: int) -> Bookmark | None:
    e = events[i]
    text = clean(e.text)
    if len(text.split()) > 30:
        return None
    strength = next((s for p, s in _CONFIRM if p.search(text)), None)
    if strength is None:
        return None
    for j in range(i - 1, -1, -1):
        prev = events[j]
        if _is_message(prev, "user"):
            return None
        if _is_message(prev, "assistant"):
            parts = [s for s in sentences(prev.text) if len(s.split()) >= 4 and not s.endswith("?")]
            if not parts:
                return None
            if _SUCCESS.search(parts[0]):
                return None  # a confirmed status report ("tests pass now") is no understanding
            return make_bookmark(e.project, "validated", _join(parts[:2]), [prev, e], strength)
    return None


def _foundational(events: list[Event], i: int) -> Bookmark | None:
    e = events[i]
    cue = _best_cue(e.text, _FOUNDATIONAL)
    if cue is None:
        return None
    strength, sentence = cue
    return make_bookmark(e.project, "foundational", _cap(sentence), [e], strength)
