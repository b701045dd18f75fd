"""Sentences and facts from events, scored for salience (used by the extractive summariser).

Every event becomes zero or more ``Fact``s, each of a *kind* that says whose words it is and
what it did — because in a coding session what the user asked and corrected, and what the agent
concluded, matter more than the tool traffic around them:

- a **user** turn: its opening sentences (or a plan's heading) are the ``request``; a turn that
  pushes back ("no, …", "actually …", "instead …") is a ``correction``; later sentences are
  ``user`` prose. A conversation transcript (turns labelled ``Name: …``, as LoCoMo's) keeps
  ``prose`` and ``question`` facts with the speaker's name;
- an **assistant** turn: sentences carrying a conclusion (root cause, the fix, a decision, an
  outcome) are ``conclusion``s; announcements of what it is about to do ("Let me check…") are
  ``intent``; the rest ``prose``. Fenced code is dropped, except shell commands;
- a **tool call** is rendered in words (``tool_calls.render_tool_call``): edits and reads are
  gathered into one fact each ("Edited `a.ts` (runImpact), `b.ts` and 3 more files", each file
  with the names its edits touched), commands (with their purpose) and to-do items too, while a
  commit, a proposed plan or a question put to the user stand alone;
- a **tool result** gives what it showed (``tool_results``): a test tally (the last one of the
  segment: its outcome), a commit, files changed, a real error — never the raw output, and no
  "error" read out of a file's code.

Agent bookkeeping in the text (``<command-name>`` wrappers, ``<details>`` markup) is dropped.
Each fact carries its key terms and cue flags; ``score_facts`` turns kind, cues and centrality
into a salience score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from memtoc.model import Event
from memtoc.pipeline.summarize.extractive_markdown import MD_PREFIX as _MD_PREFIX
from memtoc.pipeline.summarize.extractive_markdown import TAG as _TAG
from memtoc.pipeline.summarize.extractive_markdown import sentences as _sentences
from memtoc.pipeline.summarize.tool_calls import render_tool_call
from memtoc.pipeline.summarize.tool_results import describe_result, results_of
from memtoc.pipeline.summarize.tool_work import EDIT_NAMES, shown_with
from memtoc.text.keyphrases import SPEAKER_LABEL, token_terms, words

MAX_WORDS = 40
READ_CHARS = 20_000
"""How much of one message the summariser reads."""
REQUEST_SENTENCES = 2
"""Sentences of a user turn that count as its request."""
WHY_SENTENCES = 2
"""Sentences of a plan's "Context" (problem, goal) section that say why the work is wanted."""
LEAD_IN_WORDS = 20
"""An agent's sentence ending in a colon and at most this long announces what follows."""
LISTED_FILES = 3
"""Files named in a gathered edit or read fact before "and N more"."""
COMMIT_SENTENCES = 3
"""Sentences of a commit message's body read as facts (what changed and why)."""
GATHERED_WORDS = 60
"""Words of a gathered fact (files with the names edited, commands with their purpose)."""

_MD_INLINE = re.compile(r"\*\*|__|~~|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_PLAN_PREFIX = re.compile(r"^(?:plan|fix|feature|bug|task|goal|summary)\s*[:—-]\s*", re.IGNORECASE)
_CUES = re.compile(
    r"\b(?:"
    r"(?P<decision>let's|lets|we'll use|we will use|decided|decide|decision|instead|the fix|"
    r"fixed by|root cause|solution|resolved|the problem (?:is|was)|the issue (?:is|was)|"
    r"turns out|switch(?:ed)? to|going with|chose|conclusion|because|caused by)"
    r"|(?P<fix>fix(?:ed|es|ing)?|works now|passes|passing|solved|all \d+ tests|succeeded|"
    r"now (?:works|passes|renders|shows))"
    r"|(?P<finding>pre-existing|unrelated|already (?:exists?|there|handled|hidden|in place|uses?|"
    r"has|does|covered)|(?:is|was|were|are) missing|doesn't exist|does not exist|the culprit|"
    r"i see the (?:issue|problem|bug)|accidentally|which means|that's why|this happens|"
    r"happens because|is required|requires)"
    r"|(?P<life>went|visited|started|joined|bought|adopted|moved|finished|signed up|won|lost|met|"
    r"married|graduated|volunteer\w*|plan(?:s|ned|ning)?|going to|gonna|next (?:week|month|year)|"
    r"last (?:week|month|year|night)|yesterday|tomorrow|weekend|recently|just got|birthday|"
    r"trip|new job|my (?:kids?|husband|wife|partner|family|mom|dad|friend)s?)"
    r")\b"
)
"""Salience cues, matched against the lowercased sentence; the group name says which."""
_DID = re.compile(
    r"\b(?:i|we)(?:'ve| have| had| just| recently| finally| also| even)* (?:\w+ed|got|made|took|"
    r"saw|met|ran|won|found|began|built|wrote|gave|did|bought|taught|tried|sold|drove|flew|"
    r"read|left|lost|spent|kept|held|began|am (?:\w+ing)|'m (?:\w+ing))\b"
)
"""A speaker telling what they did or are doing ("I just launched…", "we got another cat"):
what a conversation's summary retells."""


def _did(body: str) -> bool:
    return ("i " in body or "we " in body) and _DID.search(body) is not None


_CHITCHAT = re.compile(
    r"(?:ok(?:ay)?|thanks?|thank you|great|cool|nice|sure|yes|yeah|yep|no|wow|lol|haha|awesome|"
    r"sounds good|got it|hi|hey|hello|bye|perfect|glad|that's (?:great|awesome|amazing|cool))\b"
)
_INTENT_START = re.compile(
    r"^(?:now,? |next,? |first,? |ok(?:ay)?,? |great,? |good,? |perfect,? )?"
    r"(?:let me|let's (?:check|look|see|read|run|verify|start|explore|examine|find)|i'll|i will|"
    r"i need to|i'm going to|i am going to|i should|we need to check|time to)\b",
    re.IGNORECASE,
)
_FIX_INTENT = re.compile(r"^(?:now,? |ok(?:ay)?,? )?(?:let me|i'll|i will|i need to) (?:fix|correct|"
                         r"remove|escape|change|update|rewrite|move)\b", re.IGNORECASE)  # fmt: skip
"""An agent about to fix something: the sentence before it said what was wrong."""
_LEAD_IN = re.compile(r":\s*$")
_DONE = re.compile(
    r"^(?:added|fixed|changed|removed|updated|created|replaced|moved|renamed|implemented|"
    r"refactored|extracted|introduced|wrapped|converted|switched|enabled|disabled|deleted|merged|"
    r"restored|simplified|rewrote|split|made)\b",
    re.IGNORECASE,
)
"""An agent's report of what it did ("Added `isSkillsSubFile()` helper that …")."""
_CORRECTION = re.compile(
    r"^(?:no\b|nope\b|not\b|actually\b|wait\b|stop\b|don't\b|do not\b|that's (?:not|wrong)|"
    r"that is (?:not|wrong)|wrong\b|instead\b|i said\b|i meant\b|rather\b|undo\b|revert\b)",
    re.IGNORECASE,
)
_REQUEST_FILLER = re.compile(
    r"^(?:(?:hey|hi|ok(?:ay)?|so|great|thanks|perfect|cool|alright)[,!.]?\s+)*"
    r"(?:implement the following plan:?\s*|(?:can|could|would) you(?: please)?\s+|please\s+|"
    r"i(?:'d| would) like (?:you )?to\s+|i want (?:you )?to\s+|let's\s+|we need to\s+)?",
    re.IGNORECASE,
)

_NOT_SPEAKERS = frozenset(
    """
    note notes update updates error errors warning fixed fix summary plan context problem solution
    result results status question answer todo important edit file files step tip example output
    input reason cause decision goal approach bug issue feature task changes done test tests
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Section labels ("Note: …", "Fixed: …") that open a line like a speaker's name but are not."""

KIND_WEIGHT: dict[str, float] = {
    "request": 1.2,
    "correction": 1.2,
    "commit": 1.3,
    "plan": 1.0,
    "conclusion": 0.8,
    "motive": 0.9,
    "done": 0.6,
    "error": 0.9,
    "tests": 0.7,
    "checks": 0.5,
    "ask": 0.6,
    "question": -0.3,
    "user": 0.3,
    "detail": -0.3,
    "changed": 0.3,
    "edit": 0.25,
    "command": 0.1,
    "task": -0.3,
    "prose": 0.0,
    "tool_error": -0.8,
    "read": -0.4,
    "intent": -0.6,
    "call": -0.6,
    "output": -0.5,
}
"""Base salience of each kind of fact (``score_facts`` adds centrality and cues)."""
TOOL_KINDS = frozenset({"command", "edit", "read", "call", "commit", "plan", "ask", "tests", "checks",
                        "changed", "error", "tool_error", "output", "task"})  # fmt: skip
"""Facts derived from tool calls and results (not anybody's words)."""


@dataclass(slots=True)
class Fact:
    """One candidate bullet: a clean sentence or a fact derived from a tool event."""

    text: str
    position: int
    """Order of the fact in the segment (for chronological bullets and tie-breaks)."""
    event_index: int
    terms: frozenset[str]
    kind: str
    """One of ``KIND_WEIGHT``'s kinds."""
    speaker: str | None = None
    decision: bool = False
    fix: bool = False
    life_event: bool = False
    finding: bool = False
    """Says what something is or was (pre-existing, unrelated, missing, already there)."""
    chitchat: bool = False
    code: bool = False
    heading: bool = False
    """A markdown heading (a plan's or a section's title)."""
    score: float = 0.0


def clean_sentence(text: str, max_words: int = MAX_WORDS) -> str:
    """Markdown-free, single-spaced, at most ``max_words`` words (cut ends with an ellipsis)."""
    if "](" in text:
        text = _MD_LINK.sub(r"\1", text)
    if "<" in text:
        text = _TAG.sub(" ", text)
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


def request_phrase(text: str) -> str:
    """A request without its politeness ("can you please …", "implement the following plan:")
    and a plan heading's label ("Plan: …"), capitalised."""
    text = _REQUEST_FILLER.sub("", text.strip(), count=1)
    text = _PLAN_PREFIX.sub("", text, count=1).strip()
    return text[:1].upper() + text[1:] if text else ""


def _terms_of(text: str) -> tuple[frozenset[str], bool]:
    """A fact's key terms, and whether it names code (an identifier with parts: a snake_case or
    dotted name, a path, a flag). Each distinct token is read once."""
    terms: set[str] = set()
    code = False
    for token in set(words(text)):
        tt = token_terms(token)
        terms.update(tt)
        if not code and len(tt) > 1 and ("_" in tt[0] or "/" in tt[0] or "." in tt[0]
                                         or tt[0][0] == "-"):  # fmt: skip
            code = True
    return frozenset(terms), code


def _gathered(verb: str, subjects: Mapping[str, Sequence[str]], noun: str) -> str:
    listed = list(subjects.items())
    limit = EDIT_NAMES if noun == "files" else 1  # a command: the purpose first stated
    shown = [shown_with(s, ", ".join(extra[:limit])) for s, extra in listed[:LISTED_FILES]]
    more = len(listed) - len(shown)
    if more > 0:
        return f"{verb} {', '.join(shown)} and {more} more {noun}"
    if len(shown) > 1:
        return f"{verb} {', '.join(shown[:-1])} and {shown[-1]}"
    return f"{verb} {shown[0]}"


_Reading = tuple[str, frozenset[str], bool, bool, bool, bool, bool, bool]


@lru_cache(maxsize=8192)
def _read_sentence(raw: str, speaker: str | None) -> _Reading | None:
    """What a candidate sentence says, as a fact holds it: its cleaned text, key terms, whether it
    names code, and its cues (decision, fix, life event, finding, chitchat); None when nothing
    is left to say. Cached: a segment rebuilt as events arrive, and the overlap read again as the
    next segment's context, give the same sentences again."""
    text = clean_sentence(raw)
    if not text or not any(c.isalnum() for c in text):
        return None
    terms, code = _terms_of(text)
    body = text[len(speaker) + 2 :] if speaker and text.startswith(speaker + ": ") else text
    body = body.lower()
    cues = {m.lastgroup for m in _CUES.finditer(body)}
    return (
        text,
        terms,
        code,
        "decision" in cues,
        "fix" in cues,
        "life" in cues or (speaker is not None and _did(body)),
        "finding" in cues,
        _CHITCHAT.match(body) is not None,
    )


def extract_facts(events: Sequence[Event], context: Sequence[Event] = ()) -> list[Fact]:
    """Every candidate bullet of a segment, in order (``context``: the events before the
    segment, where the calls answered by its first results may be)."""
    facts: list[Fact] = []

    def add(text: str, index: int, kind: str, speaker: str | None = None,
            heading: bool = False) -> Fact | None:  # fmt: skip
        read = _read_sentence(text, speaker)
        if read is None:
            return None
        text, terms, code, decision, fix, life_event, finding, chitchat = read
        if kind in ("edit", "command") and "` (" in text:
            terms = _terms_of(bare_tool_fact(text))[0]
        fact = Fact(
            text=text,
            position=len(facts),
            event_index=index,
            terms=terms,
            kind=kind,
            speaker=speaker,
            decision=decision,
            fix=fix,
            life_event=life_event,
            finding=finding,
            chitchat=chitchat,
            code=code or kind in ("command", "edit"),
            heading=heading,
        )
        facts.append(fact)
        return fact

    results = {i: action for i, _call, action in results_of(events, context)}
    gathered: dict[str, _Gathered] = {}
    seen_errors: set[str] = set()
    for index, event in enumerate(events):
        etype = event.event_type
        if etype == "tool_call":
            action = render_tool_call(event.text, event.metadata)
            if action is None:
                continue
            if action.kind in _GATHERED:
                at, verbs, subjects = gathered.setdefault(action.kind, (len(facts), [], {}))
                verbs.append(action.text.split(" `", 1)[0].split(":", 1)[0])
                if action.kind == "task":  # a to-do list: its items are the subjects
                    for item in (action.subject, *action.extras):
                        subjects.setdefault(item, [])
                elif action.subject:  # the same file edited again: the names of both edits
                    shown = subjects.setdefault(action.subject, [])
                    shown += [x for x in action.extras if x not in shown]
                if at == len(facts):  # a placeholder keeps the first one's place
                    add(action.text, index, action.kind)
                continue
            add(action.text, index, action.kind)
            if action.detail:  # a commit's body: what changed and why, in the author's words
                for part in _sentences(action.detail)[:COMMIT_SENTENCES]:
                    add(part.text, index, "done")
            continue
        if etype == "tool_result":
            for result in describe_result(event, results.get(index)):
                if result.kind in ("error", "tool_error"):
                    # the same failure seen again (re-runs) is one fact, where it first showed
                    message = result.text.rsplit(" in `", 1)[0]
                    if message in seen_errors:
                        continue
                    seen_errors.add(message)
                add(result.text, index, result.kind)
            continue
        if etype in ("session_start", "session_end") or not event.text.strip():
            continue
        _message_facts(event, index, add)
    _gather(facts, gathered)
    # test and lint runs: the last tally is the outcome (an earlier failure is told by its error)
    stale: set[int] = set()
    for kind in ("tests", "checks"):
        tallies = [f for f in facts if f.kind == kind]
        stale |= {id(f) for f in tallies[:-1]}
    if stale:
        facts = [f for f in facts if id(f) not in stale]
        for position, fact in enumerate(facts):
            fact.position = position
    return facts


_GATHERED = frozenset({"edit", "read", "command", "task"})
_Gathered = tuple[int, list[str], dict[str, list[str]]]
"""Where the first fact of a kind is, the verbs of its calls, and each subject (a file, a
command, a task) with what it is shown with (the names edited, the command's purpose)."""


def _gather(facts: list[Fact], gathered: dict[str, _Gathered]) -> None:
    """Replace the first edit/read/command/task fact by one naming all of the segment's, each
    file with the names its edits touched and each command with its purpose."""
    nouns = {"edit": "files", "read": "files", "command": "commands", "task": "tasks"}
    for kind, (at, verbs, subjects) in gathered.items():
        if at >= len(facts) or facts[at].kind != kind:
            continue
        if len(subjects) < 2 and kind != "edit":
            continue  # one call, or the same one again: its own fact says it
        verb = _verb_of(kind, verbs)
        if kind == "task":
            text = _planned(list(subjects))
        else:
            text = _gathered(verb, subjects, nouns[kind])
        text = clean_sentence(text, GATHERED_WORDS)
        terms, _ = _terms_of(bare_tool_fact(text))
        old = facts[at]
        facts[at] = Fact(text, old.position, old.event_index, terms, kind, code=True)


_SHOWN_WITH = re.compile(r"(`[^`]*`) \([^()]*\)")


def bare_tool_fact(text: str) -> str:
    """A tool fact without what its subjects are shown with (an edit's names, a command's
    purpose): those inform the reader and weigh nothing in choosing bullets — the same step is
    no more salient for the agent having described it."""
    return _SHOWN_WITH.sub(r"\1", text)


def _verb_of(kind: str, verbs: Sequence[str]) -> str:
    if kind == "edit":
        return "Wrote" if all(v == "Wrote" for v in verbs) else "Edited"
    if kind == "read":
        return "Read and searched" if verbs and verbs[0].startswith("Searched") else "Read"
    return "Ran"


def _planned(items: Sequence[str]) -> str:
    shown = items[:LISTED_FILES]
    more = len(items) - len(shown)
    tail = f"; and {more} more task{'s' if more > 1 else ''}" if more > 0 else ""
    return "Planned: " + "; ".join(shown) + tail


def _message_facts(event: Event, index: int, add: _Add) -> None:
    text = event.text
    speaker = event.metadata.get("speaker")
    match = SPEAKER_LABEL.match(text) if event.role != "assistant" else None
    if match and match.group(1).lower() not in _NOT_SPEAKERS:
        speaker, text = match.group(1), text[match.end() :]
    label = speaker if isinstance(speaker, str) and speaker else None
    user = event.role == "user" and label is None
    said = why = 0
    previous: Fact | None = None
    for k, part in enumerate(_sentences(text[:READ_CHARS])):
        sentence, heading = part.text, part.heading
        if part.command:
            add(f"Ran `{sentence}`", index, "command")
            continue
        if label is not None:  # a conversation: every speaker's words are prose
            kind = "question" if sentence.rstrip().endswith("?") else "prose"
            add(f"{label}: {sentence}", index, kind, label)
            continue
        if user:  # a plan's sections: why it is wanted, what was decided, its checklist
            if said < REQUEST_SENTENCES or (heading and k < 12):
                kind = "correction" if said == 0 and _CORRECTION.match(sentence) else "request"
            elif part.section == "why" and why < WHY_SENTENCES:
                kind, why = "motive", why + 1
            else:
                kind = "detail" if part.section == "detail" else "user"
            if kind == "request":
                sentence = request_phrase(sentence)
            said += 1
            fact = add(sentence, index, kind, heading=heading)
            if fact is not None and part.section == "decision":
                fact.decision = True
            continue
        plain = _MD_PREFIX.sub("", sentence, count=1).replace("**", "")  # no list marker, bold
        if _INTENT_START.match(plain):
            kind = "intent"
            if previous is not None and previous.kind == "prose" and _FIX_INTENT.match(plain):
                previous.kind = "conclusion"  # what it is about to fix: the diagnosis before
        elif plain.rstrip().endswith("?"):
            kind = "question"
        elif _LEAD_IN.search(plain) and len(plain.split()) <= LEAD_IN_WORDS:
            kind = "intent"  # "Now add the test cases to `x.test.ts`:" announces, says nothing
        elif _DONE.match(plain):
            kind = "done"
        else:
            kind = "prose"
        fact = add(sentence, index, kind, heading=heading)
        if fact is not None and kind == "prose" and (fact.decision or fact.fix or fact.finding):
            fact.kind = "conclusion"
        previous = fact


class _Add(Protocol):  # the signature of ``extract_facts``'s ``add``
    def __call__(self, text: str, index: int, kind: str, speaker: str | None = None,
                 heading: bool = False) -> Fact | None: ...  # fmt: skip


def score_facts(facts: Sequence[Fact], events: Sequence[Event]) -> None:
    """Set each fact's salience: its kind's weight, centrality to the segment's terms, cues."""
    doc_freq: dict[str, int] = {}
    for fact in facts:
        for term in fact.terms:
            doc_freq[term] = doc_freq.get(term, 0) + 1
    speakers = {f.speaker for f in facts if f.speaker}
    weight = {t: math.log1p(df) for t, df in doc_freq.items() if t.lower() not in _lower(speakers)}
    top = max(weight.values(), default=1.0) or 1.0
    user_turns = {i for i, e in enumerate(events) if e.role == "user"}
    first_request = next((f.position for f in facts if f.kind in ("request", "correction")), -1)
    for fact in facts:
        content = [weight.get(t, 0.0) for t in fact.terms]
        n = len(content)
        centrality = math.fsum(content) / (top * math.sqrt(n + 2)) if n else 0.0
        score = centrality + KIND_WEIGHT.get(fact.kind, 0.0)
        if fact.kind == "question":
            score += 0.3 if fact.event_index in user_turns or fact.speaker else 0.0
        if fact.position == first_request:
            score += 0.3
        if fact.heading:
            score += 0.3
        if fact.kind not in TOOL_KINDS:
            if fact.decision:
                score += 0.6
            if fact.fix:
                score += 0.4
            if fact.life_event:
                score += 0.5
            if fact.finding:
                score += 0.3
        if fact.code and fact.kind in ("prose", "conclusion"):
            score += 0.3
        if fact.chitchat:
            score -= 0.6
        if n <= 2 and fact.kind not in TOOL_KINDS:
            score -= 0.5
        if fact.kind not in TOOL_KINDS and fact.code and _words_outside_code(fact.text) < 2:
            score -= 1.0  # a label and a path ("File: `src/a.ts`"): names, says nothing
        fact.score = score


_CODE_SPAN = re.compile(r"`[^`]*`|\S*[/\\.]\S*[A-Za-z]\S*")


def _words_outside_code(text: str) -> int:
    """How many words of ``text`` are prose: outside code spans, paths and dotted names."""
    return sum(any(c.isalpha() for c in w) for w in _CODE_SPAN.sub(" ", text).split())


def _lower(names: Iterable[str | None]) -> set[str]:
    return {n.lower() for n in names if n}


_INTENT = re.compile(
    r"^(?:\w+: )?(?:plan:|i'll |i will |let me |next,? i|ran `|read `|read a file|searched |"
    r"called `|wrote `|edited `|output of |tool output|read and searched)",
    re.IGNORECASE,
)


def bullet_salience(text: str) -> float:
    """How much a finished bullet says, from its wording alone (for merging child summaries):
    decisions, causes, fixes and outcomes up, errors a little, intentions and plain tool steps
    down."""
    low = text.lower()
    cues = {m.lastgroup for m in _CUES.finditer(low)}
    score = 0.5 * ("decision" in cues) + 0.3 * ("fix" in cues) + 0.3 * ("life" in cues)
    if low.startswith(("cause:", "fix:", "decision:", "root cause", "committed")):
        score += 0.3
    if low.startswith("error:"):  # a failure on the way: what came of the work says more
        score -= 0.2
    if low.startswith("tests:"):
        score += 0.2
    if _INTENT.match(text) or _INTENT_START.match(text) or text.rstrip().endswith(":"):
        score -= 0.4
    if _TOOL_STEP.match(text):
        score -= 0.6
    if _TOOL_FAILURE.match(text):
        score -= 0.8
    return score


_TOOL_STEP = re.compile(
    r"^(?:Ran|Read(?: and searched)?|Edited|Wrote|Searched(?: the web)? for|Fetched|Called|"
    r"Output of|Tool output) "
)


_TOOL_FAILURE = re.compile(r"^(?:\w[\w &]*: )?(?:Edit of|Read|Call)\b[^:]*\bfailed: ")
