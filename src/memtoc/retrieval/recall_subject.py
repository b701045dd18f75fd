"""Priors of recall's ranking over turns: who said it, whether it says anything, whether it asks.

**Speaker.** In a conversation between named people the answer to "What activities does Melanie
partake in?" is in what *Melanie* said ("I just signed up for a pottery class"), not in the other
person's "Thanks, Melanie!", which matches the question's name just as well. ``speaker(event)`` is
the turn's speaker: ``metadata["speaker"]`` when an importer recorded one, else the ``Name: ``
label a transcript writes before a user or assistant message (the form the extractive summariser
also reads, ``pipeline.summarize.extractive_facts``; a tool's "Error: …" is no speaker).
``named_speakers(question, speakers)`` are the speakers
among the candidates that the question names as a word ("Melanie", "Melanie's"); recall adds
``w_speaker`` to their turns. A question naming none of them, or all of them ("What do Jon and Gina
both like?"), changes nothing; nor does a store without speakers (an agent's own sessions).

**Substance.** Chit-chat ("Wow, looks awesome! Did you join in?") rarely holds what a question asks
for, yet short turns rank high: BM25 favours short texts, and a short turn's vector is dominated by
the one name it shares with the question. ``content_words(event)`` counts a turn's content words
(plain words of 3+ letters, stopwords and the speaker label out, in its first ``MAX_CHARS``
characters); recall multiplies a turn's score by ``((min(n, full) + 1) / (full + 1)) ** power``:
a turn with ``full`` content words or more keeps its score, "Thanks, Caroline!" (one content word)
about half of it. Counts are memoised per event (bounded).

**Narration.** ``narrates(event)``: an agent's turn that only announces its next step ("Perfect!
Now let me test the error case when there's no PR:") names the question's words — it is about the
same work — yet holds no fact: what happened is in the tool work it introduces and the turns that
report it. Recall weighs it as the tool work it introduces (``RankConfig.w_tool``); in a long
session whose every turn names the same subject, such lines had filled the budget.

**Questions.** ``asks_question(event)``: a turn that ends with "?" hands the floor over for an
answer; recall lets the next turn inherit part of such a hit's score.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memtoc.model import Event
from memtoc.retrieval import bookmark_gist as gist
from memtoc.retrieval.bookmarks import sentences
from memtoc.text.keyphrases import SPEAKER_LABEL, STOPWORDS

MAX_CHARS = 600
"""Content words are counted in a turn's first characters only (enough to reach ``full``)."""
_MEMO_MAX = 200_000
_WORD = re.compile(r"[a-z][a-z']+")
_SPEAKING_ROLES = frozenset({"user", "assistant"})

_COUNTS: dict[tuple[str, int], int] = {}


def speaker(event: Event) -> str | None:
    """Who said ``event``: its ``metadata["speaker"]``, else the ``Name: `` label of a message's
    text (not of a tool's output, where "Error: …" is no speaker)."""
    value = event.metadata.get("speaker")
    if isinstance(value, str) and value.strip():
        return value.strip()
    if event.role not in _SPEAKING_ROLES:
        return None
    match = SPEAKER_LABEL.match(event.text)
    return match.group(1) if match else None


def named_speakers(question: str, speakers: Iterable[str]) -> frozenset[str]:
    """The ``speakers`` the question names as a word; empty when it names none or all of them."""
    known = set(speakers)
    named = frozenset(s for s in known if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", question))
    return named if named != known else frozenset()


def asks_question(event: Event) -> bool:
    """Whether ``event`` ends by asking something (its text ends with "?"): the turn after it is
    the answer (recall's replies, ``recall_rank`` stage 6)."""
    return event.text.rstrip().endswith("?")


def content_words(event: Event) -> int:
    """How many content words ``event``'s text holds (module docstring), memoised."""
    key = (event.event_id, len(event.text))  # a forgotten event's text is purged: counted anew
    n = _COUNTS.get(key)
    if n is None:
        text = event.text
        match = SPEAKER_LABEL.match(text)
        if match:
            text = text[match.end() :]
        words = _WORD.findall(text[:MAX_CHARS].lower())
        n = sum(1 for w in words if len(w) > 2 and w not in STOPWORDS)
        if len(_COUNTS) >= _MEMO_MAX:
            _COUNTS.clear()
        _COUNTS[key] = n
    return n


def substance(event: Event, full: int, power: float) -> float:
    """The substance prior of ``event``: ``((min(n, full) + 1) / (full + 1)) ** power`` — 1.0 at
    ``full`` content words, never 0 (a bare "Yes!" can still answer the turn before it)."""
    if full <= 0 or power <= 0:
        return 1.0
    share = (min(content_words(event), full) + 1) / (full + 1)
    return float(share**power)


_NARRATION_CHARS = 400
"""An agent's turn longer than this says more than its next step."""


def narrates(event: Event) -> bool:
    """An agent's turn that only narrates its own next step ("Perfect! Now let me test the error
    case when there's no PR:", "Let me check the config file."): every sentence an action, a
    lead-in or an exclamation. What happened is in the tool work it introduces, not in it."""
    if event.event_type != "assistant_message" or len(event.text) > _NARRATION_CHARS:
        return False
    said = sentences(event.text)
    return bool(said) and all(
        gist.is_action(s) or gist.is_lead_in(s) or not gist.says_something(s) for s in said
    )
