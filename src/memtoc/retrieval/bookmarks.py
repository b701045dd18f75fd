"""Bookmarks: salient moments found in a window of events (DESIGN §2, §5).

The **extractive detector** (``ExtractiveDetector``) reads one session's messages in order (an
agent's bookkeeping left out) and emits ``Bookmark``s of four types from the conversational cues of
``memtoc.retrieval.bookmark_cues``. What it looks for, by who speaks:

The user:

- a **correction** ("No man, the fix is to use .gitignore in subdirs", "this simply isn't true",
  "Why did I have to tell you…?") → ``resolution``: the right version — the agent's conceded
  understanding ("You're right — …", apologies stripped) when it concedes, else the user's claim —
  plus the fix or success that followed. The corrected statement is never a source. A doubt
  ("uhh…", "are you sure?") counts only when the agent concedes.
- a **decision** — a choice or a rule stated as settled ("we don't want the replace directive",
  "X, not Y", "instead of", "only …", "let's go with", "Decision: …") → ``conclusion``, with the
  agent's acknowledgement as a source. A **request** for work ("Let's add an audit log…", "Let's
  address 2", "Update the docs…") or a relayed code review is not a decision.
- **agreement** to what the agent offered (a recommendation, options, "would you like me to…?"):
  "yup", "ok, plan out B", "1", "agent.go", "ship it", "Agreed, … Do it" → ``conclusion`` whose
  content is the proposal (plus what the user added); permission for a mere next step ("shall I
  run the tests?") is not one.
- a **confirmation** of an explanation ("yes, exactly", "ah true") → ``validated``: the statement
  confirmed. A confirmed status report ("all tests pass now") is not understanding.
- **foundational** context: about themselves, the project and its conventions ("my name is", "we
  must support Python 3.9", "WatchAgents is exposed as an API to Intent", "the preferred approach").

The agent:

- a **stated cause** ("Found the bug. In agent.go:76 …", "The root cause was …", "**Problem:** …")
  → ``resolution`` when a fix or success follows (in the message or after it), else a
  ``conclusion`` (a diagnosis); hedged statements ("might", "probably") are not causes. A fix
  summary that says what was wrong ("… instead of writing a single file") is a ``resolution``.
- a **declared** conclusion or decision ("Conclusion: …", "Decision recorded: …") → ``conclusion``,
  with the user's "Confirmed" / "Ship it" as a source.
- a **verdict** answering the user's question ("This is actually intentional…", "No, awk doesn't…",
  "There are no tool uses in this session") → ``conclusion``.

``memtoc eval bookmarks tests/fixtures/bookmarks/moments.jsonl`` scores the detector on 764
hand-labelled windows of two real coding histories (figures in docs/benchmarks.md).

**Content** is one or two clean sentences (markdown and backticks stripped, at most
``MAX_WORDS`` = 50 words, cut at a word with "…").

**Importance** = ``type weight x cue strength x length sanity``, in 0..1:

- type weight: resolution 1.0, conclusion 0.9, foundational 0.85, validated 0.8;
- cue strength: 0..1 from the matched cue (e.g. "we decided" 1.0, "instead of" 0.8 and 0.1 more
  for each further cue in the sentence or an acknowledgement, "yes, exactly" 1.0, "looks good"
  0.6, a stated cause with its fix 0.8, a diagnosis without one 0.7);
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
from functools import lru_cache
from itertools import groupby
from typing import Protocol

from memtoc.model import Bookmark, Event
from memtoc.retrieval import bookmark_cues as cues
from memtoc.retrieval import bookmark_gist as gist
from memtoc.retrieval import bookmark_terms as terms
from memtoc.retrieval.bookmark_decay import DECAY_FLOOR as DECAY_FLOOR
from memtoc.retrieval.bookmark_decay import DECAY_HALF_LIFE_DAYS as DECAY_HALF_LIFE_DAYS
from memtoc.retrieval.bookmark_decay import effective_importance as effective_importance

MAX_WORDS = 50
READ_CHARS = 6_000
"""How much of a message the detector reads."""
TYPE_WEIGHT: dict[str, float] = {
    "resolution": 1.0,
    "conclusion": 0.9,
    "foundational": 0.85,
    "validated": 0.8,
}
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
_TAG_QUESTION = re.compile(r",\s*(?:no|yeah|yes|right|yep|ok|okay)\s*\?", re.I)
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENT_SPLIT = re.compile(
    r"(?<=[.!?])(?<!\bvs\.)(?<!\betc\.)(?<!\be\.g\.)(?<!\bi\.e\.)"  # not after "vs."
    r"(?:\s+(?=[\"'(\[`*A-Z0-9])|(?<=\w\w[.!?])\s+(?=[a-z]))|\n+"
)
"""Sentence ends: before a capital, a quote or a number, and before a lowercase word after a
word's end (users who write in lowercase); lines."""
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_LABEL = re.compile(r"^(?:wrap-up|summary|green|done|update|status|note|fyi)\s*:\s*", re.I)
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
_HEADING_LINE = re.compile(r"^[ \t]*#{1,6}[ \t].*$", re.M)
_ENUMERATOR = re.compile(r"(?<=[\w):\"'])\s+\d{1,2}[.)]$")
"""The number of the next list item, left at a sentence's end when a list is run together
("… old_string/new_string 2.")."""


def clean(text: str) -> str:
    """One line of plain text: no code fences, markdown emphasis, backticks or bullets."""
    text = _FENCE.sub(" ", text).replace("\u2019", "'").replace("\u2018", "'")
    text = text.replace("`", "")
    text = re.sub(r"(?<!\w)\*{1,3}(?=\S)|(?<=\S)\*{1,3}(?!\w)", "", text)
    text = _BULLET.sub("", text)
    text = _HEADING_MARK.sub("", text)
    text = _LABEL.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def clip_words(text: str, limit: int = MAX_WORDS) -> tuple[str, bool]:
    words = text.split()
    if len(words) <= limit:
        return text, False
    return " ".join(words[:limit]).rstrip(",;:") + "…", True


@lru_cache(maxsize=2048)
def sentences(text: str) -> tuple[str, ...]:
    """Sentences (and lines) of a message, cleaned, without code blocks; a tag question ("…, no?",
    "…, yeah?") is a statement looking for agreement, not a question; a markdown heading is a
    label, not a sentence, and is left out. Only the first
    ``READ_CHARS`` characters are read (what a moment says is said early; a pasted log is not
    read whole), and results are cached: a pass reads its context events again."""
    text = _FENCE.sub("\n", text[:READ_CHARS])
    text = _HEADING_LINE.sub("\n", _TAG_QUESTION.sub(".", text))
    out = []
    for part in _SENT_SPLIT.split(text):
        s = clean(part)
        if s[-2:-1].isdigit():
            s = _ENUMERATOR.sub("", s)
        if s and re.search(r"[^\W\d_]", s):  # not a bare "1." or "---"
            out.append(s)
    return tuple(out)


def _join(parts: Sequence[str], limit: int = MAX_WORDS) -> str:
    """Sentences joined while they fit ``limit`` words (the first one always); a sentence that
    says nothing the ones before it did not (by content word) is left out."""
    out: list[str] = []
    words = 0
    said: set[str] = set()
    for part in parts:
        n = len(part.split())
        if out and words + n > limit:
            break
        stems = terms.stems(part)
        if out and stems and stems <= said:
            continue
        said |= stems
        part = _cap(part.rstrip(" :;,\u2014\u2013-"))
        if not part:
            continue
        out.append(part if part[-1] in ".!?…" else part + ".")
        words += n
    return " ".join(out)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# -- the extractive detector ---------------------------------------------------------------------
_MESSAGES = {"user_message", "assistant_message"}
_ADDRESS = re.compile(
    r"^(?:(?:uh+|um+|hm+|ha+|whoa|wow|dude|man|bro|buddy|ugh|oh|ah|no man|ok(?:ay)?|so|wait)"
    r"[\s,.!…]*)+(?=\w)",
    re.I,
)
"""Interjections and address before the words ("uhh... DUDE", "Whoa buddy!")."""
_LEAD_IN = re.compile(r"^(?:ok(?:ay)?|alright|so|right|well|hmm+|k|look)[,.!…]*\s+", re.I)
_STARTS_ACTION = re.compile(r"^(?:let me|now let me|i'll|i will|next,? i|first,? let me)\b", re.I)
_NUMBERED = re.compile(r"(?:option\s*)?(?:\d|[a-e])(?:\s*(?:,|and|&|then)\s*(?:\d|[a-e]))*")
_LISTED = re.compile(r"(?:^|\s)(?:\d|[a-e])[.)]\s|\boption\b|\*\*", re.I)
_REPORT = re.compile(
    r"^(?:i (?:ran|tested|did|got|have|see|added|made|fixed)|something|here's|here is|there's)\b",
    re.I,
)
_SELF_CORRECTION = re.compile(r"\bi (?:need to correct|was wrong|mis(?:read|understood))", re.I)
_ACK = re.compile(
    r"^(?:ok(?:ay)?[,.]?\s+)?(?:agreed|makes sense|sounds good|will do|good (?:call|idea)|got it|"
    r"understood|yes,? exactly|exactly|confirmed|ship it|do it|perfect|great|yes|yup|yep)\b",
    re.I,
)


class ExtractiveDetector:
    """Cue-based detection (see the module docstring); deterministic, no model, no network."""

    name = "extractive"

    def detect(self, events: Sequence[Event]) -> Detection:
        found: dict[str, Bookmark] = {}
        ordered = sorted(events, key=lambda e: (e.project, e.session_id, e.ts_ms, e.event_id))
        for _, group in groupby(ordered, key=lambda e: (e.project, e.session_id)):
            for b in _Session([e for e in group if not e.bookkeeping]).detect():
                found.setdefault(b.bookmark_id, b)
        return Detection(sorted(found.values(), key=lambda b: (b.created_ms, b.bookmark_id)))


def _is_message(e: Event, role: str | None = None) -> bool:
    return e.event_type in _MESSAGES and (role is None or e.role == role)


@lru_cache(maxsize=2048)
def _head_words(text: str, n: int = 80) -> str:
    return " ".join(clean(text[: n * 40]).split()[:n])


def _best(text: str, cues: Sequence[tuple[re.Pattern[str], float]]) -> tuple[float, str] | None:
    """The statement (not a question) of ``text`` with the strongest cues: (strength, sentence).
    A sentence's strength is its strongest cue's, plus 0.1 for each further cue family it
    matches ("let's use Redis *instead of* the dict"), at most 1."""
    best: tuple[float, str] | None = None
    for sentence in sentences(text):
        if (
            gist.asks(sentence)
            or gist.is_dismissal(sentence)
            or not gist.says_something(_ADDRESS.sub("", sentence))
        ):
            continue  # a question, "Never mind!", "Perfect, that's it" settle nothing
        hits = [strength for pattern, strength in cues if pattern.search(sentence)]
        if not hits:
            continue
        value = min(1.0, max(hits) + 0.1 * (len(hits) - 1))
        if best is None or value > best[0]:
            best = (value, sentence)
    return best


class _Session:
    """One session's messages in order, and the rules that read them."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.msgs = [i for i, e in enumerate(events) if _is_message(e)]
        self.corrected = self._corrected()

    def detect(self) -> Iterator[Bookmark]:
        for k, i in enumerate(self.msgs):
            e = self.events[i]
            prev = self.events[self.msgs[k - 1]] if k > 0 else None
            nxt = self.events[self.msgs[k + 1]] if k + 1 < len(self.msgs) else None
            if e.role == "user":
                yield from self._user(i, e, prev, nxt)
            elif e.role == "assistant" and e.event_id not in self.corrected:
                yield from self._assistant(i, e, prev, nxt)

    def _last_error(self, i: int) -> Event | None:
        """The last failing tool output in the window before event ``i`` (read newest first:
        long outputs before it are not searched)."""
        window = self.events[max(0, i - RESOLUTION_WINDOW) : i]
        return next(
            (
                p
                for p in reversed(window)
                if p.event_type == "tool_result" and cues.ERROR.search(p.text)
            ),
            None,
        )

    def _corrected(self) -> set[str]:
        """Assistant messages the user corrected next: never a source of what was right."""
        out: set[str] = set()
        for a, b in zip(self.msgs, self.msgs[1:], strict=False):
            first, second = self.events[a], self.events[b]
            if first.role == "assistant" and second.role == "user" and _corrects(second.text):
                out.add(first.event_id)
        return out

    # -- the user's turns -------------------------------------------------------------------------
    def _user(self, i: int, e: Event, prev: Event | None, nxt: Event | None) -> Iterator[Bookmark]:
        text = _head_words(e.text)
        offered = prev if prev is not None and prev.role == "assistant" else None
        reply = nxt if nxt is not None and nxt.role == "assistant" else None
        if _corrects(e.text) or (_challenges(e.text) and _concedes(reply)):
            b = self._correction(i, e, reply)
            if b is not None:
                yield b
                return
        # a decision is the user's own framing: its first lines, not a pasted plan, log or review
        decided = None if cues.QUOTED.search(text) else _best(text, cues.DECISION)
        if decided is not None and not _is_request(decided[1]):
            yield self._decision(e, decided, offered, reply)
        elif (
            offered is not None
            and len(text.split()) <= 40
            and not gist.is_dismissal(text)  # "ok thanks", "never mind": no agreement
            and _agrees(text, offered.text)
        ):
            b = self._agreement(e, text, offered)
            if b is not None:
                yield b
        found = None if cues.QUOTED.search(text) else _best(text, cues.FOUNDATIONAL)
        if found is not None and len(terms.content_words(found[1])) >= 2:
            # a durable fact names at least two things ("we must support Python 3.9")
            b = make_bookmark(e.project, "foundational", _cap(found[1]), [e], found[0])
            if b is not None:
                yield b

    def _correction(self, i: int, e: Event, reply: Event | None) -> Bookmark | None:
        """The right version after the user's correction: the agent's conceded understanding, or
        the user's own claim; plus the fix or success that followed."""
        sources = [e]
        parts: list[str] = []
        if reply is not None and _concedes(reply):
            parts = _understanding(reply.text)[:2]
            if parts and len(parts[0].split()) >= 8:
                parts = parts[:1]
            if parts:
                sources.append(reply)
        if not parts:
            parts = _claim(e.text)
        success, said = _success_after(
            self.events, self.events.index(sources[-1]), " ".join([e.text[:400], *parts])
        )
        if said is not None:
            parts = [*parts[:1], said]
        if not parts:
            return None  # "no, that did nothing" and no fix stated: nothing to keep
        strength = 1.0 if success or len(sources) > 1 else 0.8
        return make_bookmark(e.project, "resolution", _join(parts), [*sources, *success], strength)

    def _decision(
        self, e: Event, decided: tuple[float, str], offered: Event | None, reply: Event | None
    ) -> Bookmark:
        strength, sentence = decided
        sentence = _LEAD_IN.sub("", sentence)
        sentence = re.sub(r"^decision(?: recorded)?\s*:\s*", "", sentence, flags=re.I)
        sources = [e]
        if (
            offered is not None
            and offered.event_id not in self.corrected
            and cues.AGREE.search(_LEAD_IN.sub("", clean(e.text)))
        ):  # "Agreed, eight retries with jitter": what was agreed is the agent's proposal
            said = sentences(offered.text)
            proposal = [s for s in said if cues.PROPOSAL.search(s)]
            if not proposal and said and said[-1].endswith("?"):
                proposal = [said[-1]]  # "Would you like to tackle these next?" — "yes, and …"
            if proposal:
                rest = sentence
                for _ in range(2):  # "yes, and yeah, just …"
                    rest = _AGREED.sub("", cues.AGREE.sub("", rest, count=1)).strip(" ,.!-—")
                agreed = _proposal_content(proposal, proposal, [])
                if agreed is None and not _vague(_OFFER.sub("", proposal[-1])):
                    agreed = _cap(proposal[-1])  # a step, but what the user's words answer
                if agreed is not None:
                    sentence = f"{agreed} — {rest}" if len(rest.split()) >= 2 else agreed
                elif len(rest.split()) >= 2:  # "Proceed with these changes?" — "yeah, just …"
                    sentence = rest
                sources.insert(0, offered)
        if reply is not None and _ACK.search((sentences(reply.text) or [""])[0]):
            strength = min(1.0, strength + 0.1)
            sources.append(reply)
        b = make_bookmark(e.project, "conclusion", _cap(sentence), sources, strength)
        assert b is not None  # a matched sentence is never empty
        return b

    def _agreement(self, e: Event, text: str, offered: Event) -> Bookmark | None:
        """A short reply accepting what the agent offered (a conclusion), or confirming what it
        explained (validated)."""
        if offered.event_id in self.corrected:
            return None
        said = [s for s in sentences(offered.text) if len(s.split()) >= 3]
        if not said:
            return None
        proposal = [s for s in said if cues.PROPOSAL.search(s)]
        question = [s for s in said if s.endswith("?")]
        first = _LEAD_IN.sub("", text).strip()
        picked = _picks(first, offered.text)
        extra = _beyond_agreement(text)
        if extra and (
            _is_request(extra)
            or "?" in text
            or _REPORT.search(extra)
            or _STARTS_ACTION.search(said[-1])
            or not (_best(extra, cues.DECISION) or cues.CHOICE_VERB.search(extra))
        ):
            extra = ""  # accepting nothing: a new request, a question, a report ("now it works")
        confirm = next((s for p, s in cues.CONFIRM if p.search(text)), None)
        status = cues.SUCCESS.search(said[0]) or cues.STATUS.search(said[0])
        if status and not (proposal or question):
            return None  # "commit" after "Done. Here's a summary…" decides nothing
        if any(cues.DECLARED.search(s) for s in said[:4]):
            return None  # "Confirmed" of a declared conclusion: a source of that bookmark
        if proposal or question or picked or (extra and len(said) >= 2):
            if not proposal and question and not picked and cues.MECHANICAL.search(question[-1]):
                return None  # permission for a next step ("shall I run the tests?")
            content = _proposal_content(said, proposal, question, first, offered.text)
            if content is None:
                return None  # permission for a step ("run a git pull now?" — "yes")
            listed = _picked_option(first, offered.text) is not None
            addition = extra or (first if picked and not listed else "")
            if addition and not terms.related(addition, content):
                content = f"{content} — {addition}"
            strength = 1.0 if proposal or picked else 0.8
            return make_bookmark(e.project, "conclusion", content, [offered, e], strength)
        if len(text.split()) > 30 or confirm is None:
            return None
        parts = [s for s in said if len(s.split()) >= 4 and gist.substantive(s)]
        if not parts or status:
            return None  # a confirmed status report ("tests pass now") is no understanding
        return make_bookmark(e.project, "validated", _join(parts[:2]), [offered, e], confirm)

    # -- the agent's turns ------------------------------------------------------------------------
    def _assistant(
        self, i: int, e: Event, prev: Event | None, nxt: Event | None
    ) -> Iterator[Bookmark]:
        said = sentences(e.text)
        if not said:
            return
        asked = prev if prev is not None and prev.role == "user" else None
        ack = nxt if nxt is not None and nxt.role == "user" and _acks(nxt.text) else None
        lead = said[:4]
        challenged = asked is not None and (
            _corrects(asked.text) or _challenges(asked.text) or "?" in asked.text
        )
        if cues.CONCESSION.search(said[0]) and (challenged or _SELF_CORRECTION.search(said[0])):
            parts = _understanding(e.text)[:2]
            if parts:
                success, line = _success_after(self.events, i, " ".join(parts))
                if line is not None:
                    parts = [parts[0], line]
                sources = [*([asked] if asked else []), e, *success]
                yield from _maybe(e.project, "resolution", _join(parts), sources, 1.0)
                return
        declared = next((k for k, s in enumerate(lead) if cues.DECLARED.search(s)), None)
        if declared is not None:
            content = re.sub(
                r"^(?:conclusion|decision(?: recorded)?|verdict|takeaway|finding)\s*:\s*",
                "",
                lead[declared],
                flags=re.I,
            )
            if not gist.substantive(content):  # "Conclusion:" then the conclusion
                content = " ".join(gist.gist(said, declared, limit=1))
            sources = [e, *([ack] if ack else [])]
            yield from _maybe(e.project, "conclusion", _cap(content), sources, 1.0)
            return
        cause = next(
            (
                k
                for k, s in enumerate(lead)
                if cues.CAUSE.search(s) and not cues.HEDGE.search(s) and not gist.is_action(s)
            ),
            None,
        )  # "I'll investigate and find the root cause" names no cause
        if cause is not None:
            found = gist.gist(said, cause)
            if not found:
                return  # "Now I understand the full picture." and nothing said after it
            stated = found[0] if len(found[0].split()) >= 6 else _join(found)
            success, line = _success_after(self.events, i, stated)
            inside = any(cues.SUCCESS.search(s) for s in said)
            if success or inside:
                parts = [stated, line] if line is not None else [stated]
                error = self._last_error(i)
                sources = [*([error] if error else []), e, *success, *([ack] if ack else [])]
                yield from _maybe(e.project, "resolution", _join(parts), sources, 0.8)
            else:
                sources = [e, *([ack] if ack else [])]
                yield from _maybe(e.project, "conclusion", _join([stated]), sources, 0.7)
            return
        head = said[:8]
        if any(cues.FIX_WORD.search(s) for s in head[:3]):
            wrong = next((s for s in head if cues.FIXED_DESC.search(s)), None)
            if wrong is not None:
                sources = [e, *([ack] if ack else [])]
                yield from _maybe(e.project, "resolution", _join([wrong]), sources, 0.7)
                return
        if _STARTS_ACTION.search(said[0]) or cues.STATUS.search(said[0]):
            return
        if asked is not None and _verdict(lead):
            k = next(k for k, s in enumerate(lead) if _verdict([s]))
            found = gist.gist(said, k)  # "Yes, but with a specific meaning." → what it means
            if found:
                sources = [e, *([ack] if ack else [])]
                yield from _maybe(e.project, "conclusion", _join(found), sources, 0.7)


def _maybe(
    project: str, type_: str, content: str, sources: Sequence[Event], cue: float
) -> Iterator[Bookmark]:
    b = make_bookmark(project, type_, content, sources, cue)
    if b is not None:
        yield b


def _corrects(text: str) -> bool:
    """The user states a correction (its own words are the right version)."""
    head = _head_words(text, 60)
    if _YES_BUT.search(head) and (sentences(text) or ("",))[0].endswith("?"):
        return False  # "Yes, but when you say X you mean Y, correct?" asks, it corrects nothing
    return bool(cues.CORRECTION.search(head) or cues.CORRECTION_INSIDE.search(head))


_YES_BUT = re.compile(r"^(?:ok(?:ay)?|yes|yeah|yup|sure)[,.]?\s+but\b", re.I)


def _challenges(text: str) -> bool:
    """The user doubts what the agent did or said (a correction if the agent concedes)."""
    return bool(cues.CHALLENGE.search(_head_words(text, 60)))


def _concedes(reply: Event | None) -> bool:
    return reply is not None and bool(
        cues.CONCESSION.search(_ADDRESS.sub("", _head_words(reply.text, 40)))
    )


def _is_request(sentence: str) -> bool:
    """A request for work or a question, unless it also states a choice or a rule."""
    s = _LEAD_IN.sub("", re.sub(r"^(?:\W+|https?://\S+\s*)+", "", sentence))
    if not cues.REQUEST.search(s):
        return False
    strong = [p for p, strength in cues.DECISION if strength >= 0.9]
    return not any(p.search(s) for p in strong)


def _agrees(text: str, offered: str = "") -> bool:
    first = _LEAD_IN.sub("", text).strip()
    return bool(
        cues.AGREE.search(first)
        or cues.AGREE.search(text)
        or any(p.search(text) for p, _ in cues.CONFIRM)
        or _picks(first, offered)
    )


def _picks(reply: str, offered: str) -> bool:
    """A short reply naming one of the things offered: an option number or letter when the offer
    lists options, a word of the offer ("agent.go", "WatchProviders"), or an imperative pick
    ("revert it", "drop both for 1"); never a bare command ("commit", "continue")."""
    if not offered or len(reply.split()) > 8 or cues.BARE_COMMAND.search(reply) or "?" in reply:
        return False  # "Do we even need X then?" asks, it does not pick
    if cues.CHOICE_VERB.search(reply):
        return True
    if not cues.CHOICE.search(reply):
        return False
    token = reply.strip(" .!").lower()
    if _NUMBERED.fullmatch(token):  # "1", "4 and 1", "option B": the offer must list options
        return bool(_LISTED.search(offered))
    return token in offered.lower()


def _acks(text: str) -> bool:
    first = (sentences(text) or [""])[0]
    return bool(_ACK.search(first)) and len(_head_words(text, 31).split()) <= 30


def _verdict(lead: Sequence[str]) -> bool:
    return any(
        (cues.VERDICT.search(s) or cues.VERDICT_INSIDE.search(s)) and not cues.HEDGE.search(s)
        for s in lead
    )


_AGREED = re.compile(r"^[\s,.!]*(?:please|then)?[\s,.!]*(?:and|but|also)?[\s,.!]+", re.I)
"""What joins an acceptance to what the user adds ("yes please, and …")."""
_OFFER = re.compile(
    r"^(?:(?:so|or|and|then|also)[,.]?\s+)*(?:if you(?:'d)? (?:want|like|prefer),? i can (?:also )?|"
    r"i can (?:also )?|would you like me to|do you want me to|want me to|should i|shall i|"
    r"should we|shall we|do you want to|would you prefer to|or do you want to|"
    r"would you like to)\s*",
    re.I,
)
_OPTION_LINE = re.compile(
    r"^\s*(?:[-*]\s*)?\**(?:option\s+)?([1-9a-e])[.):]\**\s+(.+)$", re.I | re.M
)


def _proposal_content(
    said: list[str], proposal: list[str], question: list[str], reply: str = "", offer: str = ""
) -> str | None:
    """What was accepted, labelled as the thing agreed to: the option the reply picked ("1", "B",
    "revert it") when the offer listed options, the alternative it named in "A, or B?", else the
    recommendation or the offer without "would you like me to" — and when that only points at
    something ("Want me to make that change?", "Here's what I'd suggest:"), the sentence it points
    at; None when what was accepted is a mechanical next step (permission, not a decision)."""
    picked = _picked_option(reply, offer)
    if picked is not None:
        return picked
    advised = [p for p in proposal if _ADVICE.search(p) and not p.endswith("?")]
    chosen = (advised or proposal or question or said)[-1]  # the recommendation over the offer
    option = _OPTION_NAMED.search(chosen)
    if option is not None:  # "I'd go with option 2" — what option 2 is
        picked = _picked_option(option.group(1), offer)
        if picked is not None:
            return picked
    text = gist.stated(re.sub(r"^(?:my )?recommendation\s*:\s*", "", chosen, flags=re.I))
    text = _OFFER.sub("", text).rstrip("?").strip()
    alternatives = [
        a for a in re.split(r",?\s+or\s+(?:(?:do|would|should|are|is) you\s+)?", text) if a
    ]
    if len(alternatives) > 1:  # "Refine that logic now, or are you satisfied…?" — the one picked
        named = [a for a in alternatives if reply and terms.related(a, reply)]
        text = named[0] if len(named) == 1 else alternatives[0]
    text = _OFFER.sub("", text).strip(" ,:;")
    mechanical = cues.MECHANICAL.search(text) or _VCS_STEP.search(text)
    if mechanical and not (reply and terms.related(text, reply)):
        return None
    if _vague(text):
        k = said.index(chosen) if chosen in said else len(said)
        ahead = chosen.endswith(":") or gist.is_lead_in(chosen)
        near = said[k + 1 : k + 4] if ahead else said[max(0, k - 2) : k][::-1]
        found = next((s for s in map(gist.stated, near) if gist.substantive(s)), None)
        if found is not None:
            text = found.strip(" ,:;.")
        elif not (reply and _picks(reply, offer)):  # "Which one?" — "agent.go" names it
            return None  # "Want to test it out?" after "Builds clean." — what "it" is, is not said
    text = text.strip(" ,:;.")
    return _cap(text) if text else None


def _vague(text: str) -> bool:
    """A proposal that only points at what it proposes ("Make that change", "Keep all six",
    "Here's what I'd suggest"): a lead-in, or a pointing word and two content words at most."""
    return (
        not gist.says_something(text)
        or gist.is_lead_in(text)
        or (bool(_POINTING.search(text)) and len(terms.content_words(text)) <= 2)
    )


_POINTING = re.compile(
    r"\b(?:that|this|it|these|those|them|both|all|what|either|which)\b|#\d", re.I
)
_OPTION_NAMED = re.compile(r"\boption\s+([1-9a-e])\b", re.I)
_ADVICE = re.compile(r"\brecommend|\bsuggest|\bpropose|\bi(?:'d| would) (?:go|use|keep|pick)", re.I)
_VCS_STEP = re.compile(
    r"\bgit (?:pull|push|fetch|rebase|stash|checkout|switch)\b|\bfast-forward\b", re.I
)


def _picked_option(reply: str, offer: str) -> str | None:
    """The listed option a short reply picks: by its number or letter ("1", "option B"), or by a
    word of it ("revert it" → "2. The change should be reverted…")."""
    if not reply or not offer or len(reply.split()) > 8:
        return None
    options = {m.group(1).lower(): clean(m.group(2)) for m in _OPTION_LINE.finditer(offer[-4000:])}
    if len(options) < 2:
        return None
    token = re.sub(r"^(?:option|approach|plan)\s+", "", reply.strip(" .!").lower())
    if token in options:
        return _cap(options[token].rstrip(" :"))
    named = [text for text in options.values() if terms.related(text, reply)]
    return _cap(named[0].rstrip(" :")) if len(named) == 1 else None


def _beyond_agreement(text: str) -> str:
    """What the user added after accepting ("yup, but also …")."""
    rest = cues.AGREE.sub("", _LEAD_IN.sub("", text), count=1).strip(" ,.!-—")
    rest = re.sub(
        r"^(?:that's good|that's fine|and yeah|and|but|also)[,.]?\s*", "", rest, flags=re.I
    )
    return rest if len(rest.split()) >= 3 else ""


def _success_after(events: list[Event], i: int, about: str = "") -> tuple[list[Event], str | None]:
    """Events confirming a fix after index ``i`` (a passing run, an assistant saying it is fixed)
    and the assistant's sentence that says what the fix was — a substantive sentence at or after
    its success cue that shares a content word with ``about`` (what was wrong), None when it only
    reports ("All 1216 tests pass.", "Let me run the linter.") or tells of another fix; stops at
    the next user correction."""
    sources: list[Event] = []
    for e in events[i + 1 : i + 1 + RESOLUTION_WINDOW]:
        if _is_message(e, "user"):
            if _corrects(e.text):
                break
            continue
        if (
            e.event_type == "tool_result"
            and cues.PASSED.search(e.text)
            and not cues.ERROR.search(e.text)
        ):
            sources = [e]
        elif _is_message(e, "assistant"):
            said = sentences(e.text)
            if any(cues.SUCCESS.search(s) for s in said):
                return [*sources, e], _fix_line(said, about)
    return [], None


def _fix_line(said: Sequence[str], about: str) -> str | None:
    """The sentence of a success message that says what was fixed: the substantive one sharing
    the most content words with ``about`` (what was wrong) — "Timeline filtering now hides
    vis-groups…", not "Fixed colour mismatch…" of another fix in the same message."""
    wanted = terms.stems(about)
    best: tuple[int, int, str] | None = None
    for k, s in enumerate(said[:12]):
        s = gist.stated(s)
        if not gist.substantive(s):
            continue
        shared = len(terms.stems(s) & wanted) if about else 1
        if shared and (best is None or shared > best[0]):
            best = (shared, -k, s)
    return best[2] if best else None


def _claim(text: str) -> list[str]:
    """The user's own version in a correction: its statements that say something, without the
    correcting opener ("No, …"), interjections ("uhh… dude"), questions and requests."""
    out = []
    for s in sentences(text):
        if gist.is_pasted(s):
            break  # what follows a pasted prompt or log line is its output, not the user's words
        s = _ADDRESS.sub("", s)
        stripped = _cap(cues.CORRECTION.sub("", s).lstrip(" ,.!…"))
        s = stripped if len(stripped.split()) >= 4 else _cap(s)
        if (
            len(s.split()) >= 3
            and not s.endswith("?")
            and not _is_request(s)
            and gist.says_something(cues.CORRECTION.sub("", s))
            and not _CONTENT_FREE_CLAIM.search(s)
            and not gist.is_pasted(s)
        ):
            out.append(s)
    return out[:2]


_CONTENT_FREE_CLAIM = re.compile(
    r"^(?:no,?\s*)?(?:that|it|this)(?:'s| is| was)? (?:did(?:n't| not)? (?:nothing|work|help|"
    r"change anything)|(?:still )?(?:broken|wrong|not (?:working|it|right)|the same))\W*$",
    re.I,
)
"""A bug report without a version of its own ("No, that did nothing:", "still broken")."""


_CORRECTED_PLAN = re.compile(
    r"^(?:(?:ok(?:ay)?|so|now)[,.]?\s+)?(?:let me|i'll|i will|let's)\s+"
    r"(?=(?:use|switch|move|rename|replace|add|remove|drop|keep|change|store|call|put|pass)\b)",
    re.I,
)


def _understanding(text: str) -> list[str]:
    """The substance of a concession: its substantive sentences, without apologies, fillers
    ("And it's the right call."), announcements, actions and self-talk ("I should have asked") —
    but the corrected plan when it names what ("Let me use `uv tool upgrade --reinstall`…")."""
    out = []
    for s in sentences(text):
        stripped = cues.CONCESSION.sub("", s).lstrip(" ,.!:;-\u2014\u2013").rstrip(" ,;-")
        stripped = re.sub(r"^(?:sorry|i apologi[sz]e)[,.!]?\s*", "", stripped, flags=re.I)
        stripped = re.sub(r"^(?:and|but|so|on both counts)[,.]?\s+", "", stripped, flags=re.I)
        stripped = gist.stated(_cap(stripped))
        call = re.search(r"\w+\(\)", stripped) and not gist.is_action(stripped)
        plan = _CORRECTED_PLAN.match(stripped)
        if plan and gist.names_code(stripped) and not cues.MECHANICAL.search(stripped):
            out.append(_cap(stripped[plan.end() :]).rstrip(" .!:"))
        elif call or (len(stripped.split()) >= 3 and gist.substantive(stripped)):
            out.append(stripped.rstrip(" .!:"))
    return out
