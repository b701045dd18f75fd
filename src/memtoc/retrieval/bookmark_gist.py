"""Whether a sentence says something: what a bookmark's text may be made of.

A bookmark is shown to an agent at session start and costs its tokens, so its text must carry the
content of the moment — what was decided, what the cause was, what was agreed — not the cue that
announced it. Cue sentences are often content-free: "Now I understand the full picture.", "I see
the issue now.", "Found it.", "You're right, and it's the right call.", "Never mind!". Which
sentences are, is decided by what is left of them:

- **content words**: a sentence's words without function words (articles, pronouns, auxiliaries,
  conjunctions) and without the words a conversation uses *about* work in any project (issue,
  problem, picture, approach, understand, right, fix, perfect, thanks…). A sentence with none is
  **content-free**; a code-like token (``a_b``, ``a.b``, ``f()``, ``--flag``, ``CamelCase``) or a
  number is always content;
- an **announcement** names a finding without stating it ("I've identified the root cause of why
  the comments are missing", "Here's what's happening:"): what it announces is in the sentences
  that follow;
- an **action** ("Let me run the linter.", "Now I'll update the docs") and a **status report**
  ("All 1216 tests pass.", "Build passes, zero lint issues.") say what is being done, not what was
  learned; **self-talk** ("I should have asked first", "I've been fumbling") is the agent judging
  itself;
- a **dismissal** or politeness ("Never mind!", "Thanks!", "No worries") settles nothing.

``gist`` picks the sentences a bookmark keeps: the cue sentence when it says something, else the
substantive sentences after it (headings, actions, status reports and questions skipped), else
nothing — and then the moment is not bookmarked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memtoc.retrieval.bookmark_terms import content_words

_CODE = re.compile(
    r"\w[\w-]*[_./:]\w|\w\(\)|(?<!\w)--?\w|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*|\d|[#@$]\w"
)

ANNOUNCE = re.compile(
    r"\b(?:(?:now |finally |ok(?:ay)?,? |ah!? )?i(?:'ve| have)? (?:can |just |finally |now )?"
    r"(?:see|understand|know|found|get|identified|figured out|pinpointed|tracked down|spotted)|"
    r"found|there it is|here's)\s+"
    r"(?:exactly |now )?(?:the |what(?:'s| is)? |how |where |why |it\b|this\b|"
    r"(?:two|three|four|several|a few|a couple of|\d+) )?"
    r"(?:(?:real|actual|underlying|full|whole|exact|root) )*"
    r"(?:root cause|cause|issue|problem|bug|culprit|picture|situation|reason|difference|"
    r"going on|happening|wrong|it\b|this\b)",
    re.I,
)
"""A finding named without being stated ("Found the bug.", "Now I understand the issue",
"I've identified the root cause of why …", "Here's what's happening")."""
_ACTION = re.compile(
    r"^(?:(?:ok(?:ay)?|now|next|first|then|so|and|also|great|perfect|good|alright)[,!.]?\s+)*"
    r"(?:let me|let's|i'll|i will|i'm going to|i need to|we need to|i should|i'm (?:doing|"
    r"going|adding|updating|running|checking|fixing|switching|looking|now)|going to|"
    r"time to|moving on|(?:looking|checking|reading|tracing|digging) (?:at|through|into)|"
    r"looking (?:more )?closely)\b|\bthen i'll\b",
    re.I,
)
_STATUS = re.compile(
    r"^(?:(?:all|both|the|zero|no)\s+)?(?:\d[\d,/]*\s+)?(?:existing\s+)?(?:tests?|suite|build|lint(?:er)?|"
    r"typecheck|checks?|changes?|done|committed|pushed|green|clean)\b[^.]{0,60}"
    r"\b(?:pass(?:es|ed|ing)?|clean|succeed(?:s|ed)?|green|ok|done|committed|pushed|compiles|"
    r"issues)\b",
    re.I,
)
_STATUS_WORD = re.compile(
    r"(?:tests?|pass\w*|lint\w*|clean|builds?|typecheck\w*|suite|green|zero|compiles?|"
    r"committed|pushed|succe\w+|ok|existing|errors?|warnings?|issues?|unit|typescript|go|"
    r"vet|format\w*)$"
)
_SELF_TALK = re.compile(
    r"^(?:and |but )?i(?:'ve| have| was| had|'m)?\s+(?:(?:just|clearly|completely|totally|"
    r"also|really)\s+)?(?:should(?:n't| not)? have|jumped|over-?(?:scoped|complicated|"
    r"complicating|engineered|thought)|been \w+ing|violated|conflated|apologi[sz]e|messed|"
    r"made (?:a|an|the) (?:mistake|error)|got (?:it|that|this) wrong|was wrong|was being)\b|"
    r"\bsorry\b|\bapologi[sz]e",
    re.I,
)
_DISMISSAL = re.compile(
    r"^(?:(?:ok(?:ay)?|cool|great|nice|awesome|perfect|ah|oh)[\s,!.…]+)?"
    r"(?:never ?mind|nvm|forget (?:it|that|about it)|no worries|no problem|thanks?(?: you)?|"
    r"thx|ty|cheers|whatever|all good)\b"
    r"[\s!.,…]*(?:(?:then|man|dude|mate|buddy|again|so much|a lot)[\s!.,…]*)?$",
    re.I,
)
"""A reply that only dismisses or thanks ("Never mind!", "ok thanks", "no worries")."""
_QUESTION_OPEN = re.compile(
    r"^(?:is|are|was|were|do|does|did|can|could|would|will|should|have|has|had|isn't|aren't|"
    r"wasn't|don't|doesn't|didn't|how|why|who)\s+(?:there|it|this|that|"
    r"these|those|we|you|i|they|he|she|the|a|an|any|all)\b",
    re.I,
)
_HEADING = re.compile(
    r"^#{1,6}\s|^(?:[A-Z][\w ]{0,40}):$|^[-=*_]{3,}$|^(?:\S+\s+){0,5}\S+:$|"
    r"^(?:here's|here is|here are|these are|this is|the following)\b.*:$|"
    r"^here's (?:what|how|my)\b[^.]{0,40}$|"
    r"\b(?:is|are|was|were|does|do|follows?|following|like|includes?|shows?|says?|reads?)\s*:$",
    re.I,
)
"""A heading or a lead-in to a list ("Current state:", "Here's what X involves:")."""
_PASTED = re.compile(r"^\s*(?:\[[\d/: .-]+|\$ |~/|/\w+/|>>>|[A-Z]:\\\\)")


def says_something(sentence: str) -> bool:
    """Whether ``sentence`` carries content: a content word, a code-like token or a number."""
    return bool(_CODE.search(sentence) or content_words(sentence))


def announces(sentence: str) -> bool:
    """A finding named but not stated: nothing of substance follows the announcing phrase
    ("Found it.", "I've identified the root cause of why the build fails" — the cause itself
    is not in it)."""
    m = ANNOUNCE.search(sentence)
    if m is None:
        return False
    rest = sentence[m.end() :].strip(" .!:;,\u2014\u2013-")
    # "found it at line 1911", "found it in pkg/cmd/x.go": where a thing is, not what is wrong
    return not rest or bool(
        re.match(r"(?:of|behind|for|with|now|here|at|in|on|inside|under)\b|why\b", rest, re.I)
    )


def stated(sentence: str) -> str:
    """The statement inside an announcing or introducing sentence ("I see the issue - line 170
    has X" → "line 170 has X", "Let me answer your question first: X is only used once" → "X is
    only used once"); the sentence itself when there is none."""
    head, colon, rest = sentence.partition(": ")
    if (
        colon
        and rest
        and _names(rest)
        and (is_action(head) or announces(head) or not says_something(head))
    ):
        return stated(rest[:1].upper() + rest[1:])
    m = ANNOUNCE.search(sentence)
    if m is None:
        return sentence
    rest = sentence[m.end() :].lstrip(" .!:;,\u2014\u2013-")
    if rest and _names(rest) and not announces(sentence):
        return rest[:1].upper() + rest[1:]
    return sentence


def _names(text: str) -> bool:
    """Names something: a content word or a code-like token with a letter ("line 702-704" does
    not)."""
    return bool(content_words(text)) or any(
        _CODE.search(t) and re.search(r"[A-Za-z]", t) for t in text.split()
    )


def names_code(text: str) -> bool:
    """Whether ``text`` names a code-like thing (``a_b``, ``a.b``, ``f()``, ``--flag``)."""
    return any(_CODE.search(t) and re.search(r"[A-Za-z]", t) for t in text.split())


def is_lead_in(sentence: str) -> bool:
    """A heading or a lead-in to what follows ("Here's what I'd suggest:", "Current state:")."""
    return bool(_HEADING.search(sentence.strip()))


def is_action(sentence: str) -> bool:
    return bool(_ACTION.search(sentence))


def is_status(sentence: str) -> bool:
    """A report of checks passing and nothing else ("All 1216 tests pass.", "Build OK, zero lint
    issues") — "The tests pass now and each tenant gets its own key" says more."""
    return bool(_STATUS.search(sentence)) and not [
        w for w in content_words(sentence) if not _STATUS_WORD.match(w)
    ]


def is_self_talk(sentence: str) -> bool:
    return bool(_SELF_TALK.search(sentence))


def is_pasted(sentence: str) -> bool:
    """Pasted output rather than someone's words: a prompt or log line ("[02/24/26 9:58 ~/src]
    …", "$ go test"), or a line whose words are mostly code-like tokens."""
    if _PASTED.search(sentence):
        return True
    words = sentence.split()
    return len(words) >= 3 and sum(1 for w in words if _CODE.search(w)) * 2 > len(words)


def asks(sentence: str) -> bool:
    """A question, with or without its "?" ("was there supposed to be a file write here")."""
    return sentence.endswith("?") or bool(_QUESTION_OPEN.search(sentence))


def is_dismissal(sentence: str) -> bool:
    return bool(_DISMISSAL.search(sentence.strip()))


def substantive(sentence: str) -> bool:
    """A sentence a bookmark may keep: it says something and is no announcement, action, status
    report, self-talk, heading or question."""
    return (
        says_something(sentence)
        and not asks(sentence)
        and not _HEADING.search(sentence)
        and not announces(sentence)
        and not is_action(sentence)
        and not is_status(sentence)
        and not is_self_talk(sentence)
    )


def gist(said: Sequence[str], k: int, limit: int = 2, ahead: int = 4) -> list[str]:
    """What sentence ``k`` of ``said`` states: itself when it is substantive (its statement when
    it announces one inline), else up to ``limit`` substantive sentences among the ``ahead``
    that follow it; empty when there are none."""
    first = stated(said[k])
    if substantive(first):
        return [first]
    out = [s for s in (stated(t) for t in said[k + 1 : k + 1 + ahead]) if substantive(s)]
    return out[:limit]
