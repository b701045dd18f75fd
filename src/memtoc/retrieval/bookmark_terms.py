"""The words a bookmark is about: content words and their stems.

A bookmark's **content words** are its words without function words (articles, pronouns,
auxiliaries, conjunctions, negations) and without the words a conversation uses *about* work in
any project (issue, problem, picture, approach, understand, right, fix, perfect, thanks…). Their
rough **stems** (plural, -ed, -ing, -ly cut) tell whether two statements are about the same
things: ``bookmark_gist`` uses them to tell a content-free sentence, the detector to tie a fix
to its cause, and the session-start context to show no moment twice. Apart from the detector
(whose cue patterns take a short command's start-up to compile) so that ``memtoc context`` and
the hooks import only this.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from memtoc.model import Bookmark


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FUNCTION = _words(
    """a an the this that these those it its it's they them their there here i i'm i've i'd i'll
    me my mine we we're we've we'll us our you you're you've your he she his her what which who
    whom whose where when why how whether if then than so as at by for from in into of on onto
    to with without about over under up down out off and or but nor not no yes yeah yep yup ok
    okay is are was were be been being am do does did doing done have has had having can could
    will would shall should may might must let let's lets just also only even still again very
    much more most too quite really actually now already some any all both each every one other
    such own same few many lot lots bit kind sort ah oh hmm uh uhh um well anyway though
    because since while until after before once whole full never always ever don't doesn't
    didn't isn't aren't wasn't weren't won't can't couldn't wouldn't shouldn't haven't hasn't
    that's there's here's what's it'll"""
)
_DISCOURSE = _words(
    """issue issues problem problems bug bugs cause causes root reason reasons fix fixes fixed
    fixing solution answer question questions point points picture idea ideas thing things stuff
    everything something anything nothing way ways approach approaches option options call case
    part parts detail details situation matter sense mind understand understood understanding
    see seeing saw seen know knew think thought look looks looking looked seem seems seemed find
    found finding identified identify figured figure clear clearly right wrong correct correctly
    good great fine perfect better best cleaner simpler simple easy nice cool exactly indeed true
    totally absolutely completely definitely course thanks thank please sorry apologies
    apologize apologise mistake bad catch fair key meaning specific happening going go goes went
    gone make makes made making get gets got take takes took work works worked working need
    needs needed want wants wanted try tried trying check checked checking happen happened
    happens explain explained say said tell told show shows showed sure glad agree agreed
    obviously basically essentially current currently state review earlier
    terrible fumbling overcomplicating overcomplicated confusion confusing distinction
    observation concern concerns summary recap overview changed straightforward trivial obvious
    real clean confirmed valid line lines recommend recommended recommendation suggest suggested
    suggestion propose proposed proposal"""
)
_NUMBER = re.compile(r"\d[\w.]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*")


@lru_cache(maxsize=8192)
def content_words(sentence: str) -> tuple[str, ...]:
    """The words of ``sentence`` that name something (see the module docstring)."""
    out = []
    for word in _WORD.findall(sentence):
        w = word.lower().replace("\u2019", "'").strip("'-")
        if w.endswith("'s"):
            w = w[:-2]
        if w and w not in _FUNCTION and w not in _DISCOURSE and len(w) > 1:
            out.append(w)
    return tuple(out)


@lru_cache(maxsize=8192)
def stems(text: str) -> frozenset[str]:
    """The content words of ``text`` reduced to a rough stem (plural, -ed, -ing, -ly cut), to
    tell whether two statements are about the same things."""
    out = set()
    for w in content_words(text):
        for suffix in ("ing", "ed", "es", "ly", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 4:
                w = w[: -len(suffix)]
                break
        out.add(w.rstrip("e"))
    return frozenset(out)


def numbers(text: str) -> frozenset[str]:
    """The numbers of ``text`` ("8", "1.25.6", "v2" is not one)."""
    return frozenset(m.rstrip(".") for m in _NUMBER.findall(text))


def related(a: str, b: str) -> bool:
    """Whether two statements share a content word (by stem)."""
    return bool(stems(a) & stems(b))


def distinct(marks: Sequence[Bookmark], limit: int) -> list[Bookmark]:
    """The first ``limit`` of ``marks`` (best first) that are not the same moment as one kept
    before them: sharing more than half of the smaller one's source events, or more than half of
    the smaller one's content words (by stem) — the same bug stated in three turns of a session,
    a fix summarised twice. What the session-start context shows: five moments, not one five
    times."""
    kept: list[Bookmark] = []
    for b in marks:
        if len(kept) >= limit:
            break
        if any(_same_moment(b, k) for k in kept):
            continue
        kept.append(b)
    return kept


def _same_moment(a: Bookmark, b: Bookmark) -> bool:
    if _overlap(set(a.event_ids), set(b.event_ids)):
        return True
    small, large = sorted((a.content, b.content), key=lambda c: len(stems(c)))
    # "retry 8 times" and "retry 5 times" are two decisions
    return _overlap(stems(small), stems(large)) and numbers(small) <= numbers(large)


def _overlap(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> bool:
    smaller = min(len(a), len(b))
    return smaller > 0 and len(a & b) * 2 > smaller
