"""The extractive summariser: no model, no network, deterministic.

For a segment: events become facts (``extractive_facts``: the user's requests and corrections,
the agent's conclusions, what tools did and what their results showed), scored for salience;
3-5 diverse bullets (up to 7 where the user handed over a plan: the session's intent, stated
whole-ish) are picked MMR-style (score minus redundancy with bullets already chosen)
and shown in order, those telling tool work as one line ("Edited `evaluator.py` (run_impact);
tests: 14 passed, 1 failed (test_reclone)") and the slots that frees given to what was said;
keywords (up to 15) are the segment's keyphrases from what was said and the files touched that
the node's text does not already hold (never tool names, flags, URLs or hashes); the title says
what was done (``extractive_titles``: "Fixed the diff viewer column layout"). A segment holding
nothing but a tool's output is described by it ("Read `engine.ts` (845 lines, defining …)").

L0 (the abstract) stands on its own, because a parent lists its children by title and L0: the
title, then the most salient facts, whole, until about ``abstract_tokens`` (100) and never past
``abstract_max`` (140). L1 adds every bullet, further notable facts and key facts (files,
commands, errors, participants) within 2,000 tokens.

For a period (``extractive_periods``): the children are grouped into threads; the title names
the main threads, each bullet gives a thread's strongest outcome or decision, the L0 runs
through the threads — a synthesis, never a child's text repeated.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

from memtoc.model import BOOKKEEPING_TITLES, Event, Summary
from memtoc.pipeline.summarize.extractive_facts import (
    TOOL_KINDS,
    Fact,
    bare_tool_fact,
    extract_facts,
    score_facts,
)
from memtoc.pipeline.summarize.extractive_periods import PeriodDigest, digest_children
from memtoc.pipeline.summarize.extractive_titles import segment_title
from memtoc.pipeline.summarize.tool_calls import TOOL_NAMES, render_tool_call, tool_name
from memtoc.pipeline.summarize.tool_results import output_fact, results_of, written_fact
from memtoc.text.keyphrases import extract_keyphrases, is_code_token, key_terms
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

EMPTY_TITLE = "(empty)"
SAID_KINDS = frozenset({"request", "correction", "conclusion", "prose", "question", "user",
                        "motive", "done", "detail",
                        "intent", "plan", "ask", "commit", "tests", "checks", "error"})  # fmt: skip
"""Facts that say something beyond which tool ran on what (else outputs are described too)."""
COVERAGE_WEIGHT = 1.0
"""How much a fact's new terms count when picking bullets (against its salience score)."""
JOIN_SLACK = 4
"""Tokens two texts joined may differ from their counts summed (a merge at the seam)."""
TITLE_OVERLAP = 0.75
"""A fact whose key terms overlap the title's this much (Jaccard) repeats it: no bullet."""
OUTCOME_KINDS = frozenset({"commit", "tests", "changed"})
"""Facts that tell what came of a segment's work: one of them is always a bullet when any is
(else the files it edited, when it did)."""
ASKED_KINDS = frozenset({"request", "correction", "motive", "user", "detail"})
"""Facts of the user's own words in a coding session (a conversation's turns are ``prose``)."""
PLAN_SENTENCES = 12
"""Sentences of the user's words from which a segment's request is a plan (steps, decisions,
checklist) rather than an ask."""
PLAN_BULLETS = 2
"""Bullets a segment holding a plan has beyond ``max_bullets``: the plan stated whole-ish."""
WORK_KINDS = frozenset({"edit", "command", "tests", "checks", "changed", "error"})
"""Facts of tool work that a segment's bullets tell in one line (``_one_work_line``)."""


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


class ExtractiveSummarizer:
    """Deterministic extractive summaries (``name = "extractive/2"``)."""

    name = "extractive/2"

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_bullets: int = 5,
        min_bullets: int = 3,
        max_keywords: int = 15,
        abstract_tokens: int = 100,
        abstract_max: int = 140,
        overview_tokens: int = 2000,
        redundancy: float = 0.7,
    ) -> None:
        self.counter = counter
        self.max_bullets = max_bullets
        self.min_bullets = min(min_bullets, max_bullets)
        self.max_keywords = max_keywords
        self.abstract_tokens = abstract_tokens
        self.abstract_max = max(abstract_max, abstract_tokens)
        self.overview_tokens = overview_tokens
        self.redundancy = redundancy

    # -- segments ---------------------------------------------------------------------------

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        facts = extract_facts(events, context)
        if not any(f.kind in SAID_KINDS for f in facts):  # only tool steps: what did they show?
            facts += self._output_facts(events, context, start=len(facts))
            if not facts:
                return self._empty()
        score_facts(facts, events)
        tools = {tool_name(e.metadata).lower() for e in events if e.event_type == "tool_call"}
        speakers = {f.speaker.lower() for f in facts if f.speaker}
        phrases = extract_keyphrases(
            [_topic_text(f) for f in facts if f.kind != "call"],
            self.max_keywords * 3,
            exclude=TOOL_NAMES | tools | speakers | GREETINGS,
        )
        keywords = phrases[: self.max_keywords]
        # a plan handed over is the session's intent: its steps and decisions are what a reader
        # of the segment wants, so a long request is stated whole-ish, in a few more bullets
        asked = sum(f.kind in ASKED_KINDS for f in facts)
        cap = self.max_bullets + (PLAN_BULLETS if asked >= PLAN_SENTENCES else 0)
        target = max(self.min_bullets, min(self.max_bullets, 2 + len(facts) // 8))
        if cap > self.max_bullets:
            target = cap
        title = segment_title(facts, keywords, events)
        # a bullet repeating the title says nothing the reader has not just read
        named = frozenset(key_terms(title))
        untitled = [f for f in facts if _plain(f.text) != _plain(title)
                    and _jaccard(f.terms, named) < TITLE_OVERLAP]  # fmt: skip
        pool = untitled if len(untitled) >= self.min_bullets else facts
        chosen = self._select(pool, target)
        if not any(f.kind in OUTCOME_KINDS for f in chosen):  # what came of it, when known
            outcome = max((f for f in facts if f.kind in OUTCOME_KINDS),
                          key=lambda f: (f.score, -f.position), default=None)  # fmt: skip
            if outcome is None and not any(f.kind == "edit" for f in chosen):
                outcome = next((f for f in facts if f.kind == "edit"), None)  # the files changed
            if outcome is not None and len(chosen) < cap:
                chosen.append(outcome)
            elif outcome is not None:  # in place of the weakest
                weakest = min(chosen, key=lambda f: (f.score, -f.position))
                chosen = [f for f in chosen if f is not weakest] + [outcome]
        lines, merged = self._one_work_line(chosen, pool)
        bullets = [f.text for f in sorted(lines, key=lambda f: f.position)]
        chosen = [f for f in lines if f.kind != "work"] + merged  # the facts the bullets tell
        chosen_ids = {id(f) for f in chosen}
        extra = self._select(
            [f for f in facts if id(f) not in chosen_ids],
            12,
            penalty_terms=[f.terms for f in chosen],
        )
        facts_block = self._key_facts(facts)
        # L0 stands alone (the best fact first) and adds what the bullets do not say
        by_score = sorted(chosen, key=lambda f: (-f.score, f.position))
        ranked = [by_score[0].text, *(f.text for f in extra if f.score > 0)]
        ranked += [f.text for f in by_score[1:]]
        abstract = self._abstract(title, ranked, keywords)
        recurring = Counter(t for f in facts for t in f.terms)
        shown = {t for f in facts if f.text in abstract or id(f) in chosen_ids for t in f.terms}
        keywords = complementary_keywords(
            phrases, shown | named, self.max_keywords, recurring, named
        )
        return self._finish(title, bullets, keywords, abstract, [f.text for f in extra],
                            facts_block)  # fmt: skip

    def _one_work_line(
        self, chosen: list[Fact], facts: Sequence[Fact]
    ) -> tuple[list[Fact], list[Fact]]:
        """The chosen bullets with those telling tool work (files edited, commands run, tests,
        checks, errors) as one line of kind ``work``, in the order it happened ("Edited
        `a.py` (f, g); ran `pytest`; tests: 14 passed, 1 failed (test_x)"), and the facts that
        line tells. The slots it frees go to what was said (among ``facts``, the bullets' pool),
        else to more of the work, in the line."""
        work = sorted((f for f in chosen if f.kind in WORK_KINDS), key=lambda f: f.position)
        edits = [f for f in facts if f.kind == "edit" and all(f is not w for w in work)]
        if not work or len(work) + min(len(edits), 1) < 2:
            return chosen, []
        kept = [f for f in chosen if f.kind not in WORK_KINDS]
        taken = {id(f) for f in chosen}
        said = [f for f in facts if id(f) not in taken and f.kind not in TOOL_KINDS]
        more = self._select(said, len(work) - 1, penalty_terms=[f.terms for f in chosen])
        short = len(work) - 1 - len(more)  # nothing more was said: more of the work, in the line
        if not any(f.kind == "edit" for f in work):  # the files it changed, whatever was chosen
            work += edits[:1]
        if short > 0:
            taken |= {id(f) for f in work}
            rest = [f for f in facts if id(f) not in taken and f.kind in WORK_KINDS]
            work += sorted(rest, key=lambda f: (-f.score, f.position))[:short]
        work.sort(key=lambda f: f.position)
        text = "; ".join(_lower_first(f.text) if k else f.text for k, f in enumerate(work))
        first = work[0]
        terms = frozenset().union(*(f.terms for f in work))
        line = Fact(text, first.position, first.event_index, terms, "work", code=True,
                    score=max(f.score for f in work))  # fmt: skip
        return [*kept, line, *more], work

    def _output_facts(
        self, events: Sequence[Event], context: Sequence[Event], start: int = 0
    ) -> list[Fact]:
        """What the tools showed or wrote, for a segment where nobody says anything: each output
        described by what it was, each file written whole by what it put there."""
        out: list[Fact] = []
        for i, _call, action in results_of(events, context):
            if events[i].text.strip():
                described = output_fact(events[i], action)
                terms = frozenset(t for t in described.text.lower().split() if len(t) > 2)
                out.append(Fact(described.text, start + len(out), i, terms, described.kind,
                                code=True))  # fmt: skip
        for i, event in enumerate(events):
            action = render_tool_call(event.text, event.metadata) if event.event_type == (
                "tool_call") else None  # fmt: skip
            # a file written whole: its size and what it defines (an edit's fact names the
            # names it touched already)
            wrote = action is not None and action.kind == "edit" and action.text.startswith("Wrote")
            written = written_fact(event, action) if action is not None and wrote else None
            if written is not None:
                terms = frozenset(t for t in written.text.lower().split() if len(t) > 2)
                out.append(Fact(written.text, start + len(out), i, terms, "read", code=True))
        return out

    def _select(
        self,
        facts: Sequence[Fact],
        k: int,
        *,
        penalty_terms: Iterable[frozenset[str]] = (),
    ) -> list[Fact]:
        """MMR with coverage: repeatedly take the fact with the best score, minus its redundancy
        with what is chosen, plus the weight of the segment's terms it adds that nothing chosen
        says yet (``COVERAGE_WEIGHT``; a term weighs by how many facts use it)."""
        picked: list[Fact] = []
        pool = sorted(facts, key=lambda f: (-f.score, f.position))[: max(4 * k, 40)]
        freq: Counter[str] = Counter(t for f in facts for t in f.terms)
        weight = {t: math.log1p(n) for t, n in freq.items()}
        top = max(weight.values(), default=1.0) or 1.0
        covered: set[str] = set()
        for terms in penalty_terms:
            covered |= terms

        def gain(f: Fact) -> float:
            new = math.fsum([weight[t] for t in f.terms if t not in covered])
            return COVERAGE_WEIGHT * new / (top * (len(f.terms) + 2))

        # Each candidate's largest overlap with what is already chosen, updated per pick.
        overlap = [0.0] * len(pool)
        for terms in penalty_terms:
            for i, f in enumerate(pool):
                if not terms.isdisjoint(f.terms):  # disjoint: a Jaccard of 0 moves nothing
                    overlap[i] = max(overlap[i], _jaccard(f.terms, terms))
        texts: set[str] = set()
        alive = list(range(len(pool)))
        gains = [gain(f) for f in pool]  # recomputed only for facts a pick covers terms of
        while alive and len(picked) < k:
            best_i = max(
                alive,
                key=lambda i: (pool[i].score - self.redundancy * overlap[i] + gains[i], -i),
            )
            alive.remove(best_i)
            fact = pool[best_i]
            key = fact.text.lower()
            if key in texts or overlap[best_i] > 0.8:
                continue
            texts.add(key)
            picked.append(fact)
            newly = fact.terms - covered
            covered |= newly
            for i in alive:
                terms = pool[i].terms
                if newly.isdisjoint(terms):
                    if fact.terms.isdisjoint(terms):
                        continue  # no overlap: neither score moves
                else:
                    gains[i] = gain(pool[i])
                o = _jaccard(terms, fact.terms)
                if o > overlap[i]:
                    overlap[i] = o
        return picked

    def _key_facts(self, facts: Sequence[Fact]) -> list[str]:
        out: list[str] = []
        groups = (
            ("Participants", sorted({f.speaker for f in facts if f.speaker})),
            ("Files", _unique(s for f in facts if f.kind == "edit" for s in _ticked(f.text))),
            ("Commands", _unique(s for f in facts if f.kind == "command" for s in _ticked(f.text))),
            ("Errors", _unique(f.text.removeprefix("Error: ") for f in facts if f.kind == "error")),
            ("Tests", _unique(f.text.removeprefix("Tests: ") for f in facts if f.kind == "tests")),
        )
        for label, values in groups:
            if values:
                out.append(f"{label}: " + "; ".join(values[:12]))
        return out

    # -- periods ----------------------------------------------------------------------------

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        live = [c for c in children if c.title != EMPTY_TITLE and c.title.strip()]
        # an agent's bookkeeping says nothing about the period unless it is all there is
        live = [c for c in live if not is_bookkeeping(c)] or live
        if not live:
            return self._empty()
        digest: PeriodDigest = digest_children(
            live, level=level, max_bullets=self.max_bullets, min_bullets=self.min_bullets,
            max_keywords=self.max_keywords, redundancy=self.redundancy, avoid=avoid,
        )  # fmt: skip
        abstract = self._abstract(digest.title, digest.lines, digest.keywords)
        # keywords add to the text beside them; a single word when several children carry it
        carried = Counter(t for c in live for t in {t for k in c.keywords for t in _terms(k)})
        said = digest.shown | key_terms(abstract)
        keywords = complementary_keywords(
            digest.candidates, said, self.max_keywords, carried, key_terms(digest.title)
        )
        return self._finish(digest.title, digest.bullets, keywords, abstract,
                            digest.covers, [], extra_label="Covers")  # fmt: skip

    # -- shared -----------------------------------------------------------------------------

    def _abstract(self, title: str, sentences: Sequence[str], keywords: Sequence[str]) -> str:
        """L0: the title, then whole sentences (best first) until about ``abstract_tokens``,
        never past ``abstract_max``; a short one ends with its keywords."""
        count = self.counter.count
        text = title
        used = count(text)
        seen = {_plain(title)}
        named = frozenset(key_terms(title))
        for sentence in sentences:
            if used >= self.abstract_tokens:
                break
            sentence = sentence.strip()
            if not sentence or _plain(sentence) in seen or _said_in(sentence, text):
                continue
            if _jaccard(frozenset(key_terms(sentence)), named) >= TITLE_OVERLAP:
                continue  # says the title again ("Committed: <the title>")
            piece = f"{'' if text.endswith(('.', '!', '?', '…')) else '.'} {sentence}"
            joined = text + piece
            # counted piece by piece (the whole again only near the limit, where a merge of
            # tokens across the join could matter): an L0 is built from many candidates
            n = used + count(piece)
            if n > self.abstract_max - JOIN_SLACK:
                n = count(joined)
            if n <= self.abstract_max:
                text, used = joined, n
                seen.add(_plain(sentence))
        if used < self.abstract_tokens * 0.6 and keywords:
            tail = [k for k in keywords if k.lower() not in text.lower()]
            if tail:
                joined = f"{text}{'' if text.endswith(('.', '!', '?', '…')) else '.'} " + (
                    "About: " + ", ".join(tail)
                )
                text = truncate_to_tokens(self.counter, joined, self.abstract_max)
        return text

    def _finish(
        self,
        title: str,
        bullets: Sequence[str],
        keywords: Sequence[str],
        abstract: str,
        extra: Sequence[str],
        key_facts: Sequence[str],
        *,
        extra_label: str = "Also",
    ) -> Summary:
        abstract = truncate_to_tokens(self.counter, abstract, self.abstract_max)
        lines = [title, "", *(f"- {b}" for b in bullets)]
        if keywords:
            lines += ["", "Keywords: " + ", ".join(keywords)]
        lines += key_facts
        if extra:
            lines += ["", f"{extra_label}:", *(f"- {x}" for x in extra)]
        overview = truncate_to_tokens(self.counter, "\n".join(lines), self.overview_tokens)
        return Summary(
            title=title,
            bullets=tuple(bullets),
            keywords=tuple(keywords),
            abstract=abstract,
            overview=overview,
            backend=self.name,
        )

    def _empty(self) -> Summary:
        return empty_summary(self.name)


_BOOKKEEPING_WHAT = {
    "command": "slash command",
    "compact_summary": "compaction summary",
    "interrupt": "interruption",
    "warmup": "sub-agent warm-up",
    "caveat": "local-command notice",
    "command_output": "command output",
    "hook": "hook notice",
    "notice": "agent notice",
    "context": "injected environment context",
    "instructions": "injected instructions",
}


def bookkeeping_summary(events: Sequence[Event], backend: str) -> Summary:
    """A segment holding only an agent's bookkeeping (``Event.bookkeeping``), described by what
    it was — the slash commands typed ("Local command /exit"), an interruption, a compaction, a
    warm-up — so no node is ``(empty)`` while it holds events. The notices' own words are never
    quoted (they are nobody's words), and it has no keywords."""
    kinds = _unique(e.bookkeeping or "notice" for e in events)
    commands = _unique(e.text.split()[0] for e in events
                       if e.bookkeeping == "command" and e.text.strip().startswith("/"))  # fmt: skip
    if commands:
        title = f"Local command {', '.join(commands[:3])}"
    elif "compact_summary" in kinds:
        title = "Conversation compacted"
    elif "interrupt" in kinds:
        title = "Interrupted by the user"
    else:
        title = "Agent bookkeeping: " + ", ".join(
            _BOOKKEEPING_WHAT.get(k, k.replace("_", " ")) for k in kinds[:3]
        )
    described = [_BOOKKEEPING_WHAT.get(k, k.replace("_", " ")) for k in kinds]
    bullets = [f"Agent bookkeeping: {', '.join(described)}"]
    abstract = f"{title}. {bullets[0]}."
    return Summary(title, tuple(bullets), (), abstract, "\n".join([title, "", *bullets]),
                   backend=backend)  # fmt: skip


def is_bookkeeping(summary: Summary) -> bool:
    """Whether ``summary`` describes a segment of bookkeeping only (``bookkeeping_summary``)."""
    return not summary.keywords and summary.title.startswith(BOOKKEEPING_TITLES)


GREETINGS = frozenset(
    """bye goodbye hi hey hello thanks thank wow lol haha yeah yep yup okay ok cool nice great
    awesome congrats sure""".split()  # noqa: SIM905 - a word list reads better as text
)
"""Words of greeting and assent: never a keyword (every conversation has them)."""
CENTRAL_KEYWORDS = 3
"""Keywords kept first whatever the bullets say: the segment's main keyphrases (what a period's
title is made of), unless the title itself names them (a period reads its children's titles
too: ``extractive_periods.merge_keywords``)."""


def complementary_keywords(
    phrases: Sequence[str],
    said: AbstractSet[str],
    k: int,
    recurring: Counter[str],
    titled: AbstractSet[str] = frozenset(),
) -> list[str]:
    """Up to ``k`` keywords from ``phrases`` (best first): the ``CENTRAL_KEYWORDS`` best the
    title (its key terms ``titled``) does not name; then those naming something the node's text
    (title, L0, bullets: its key terms ``said``) does not — a reader sees keywords beside that
    text, so a keyword repeating it tells them nothing, while one it does not hold is a term to
    search by: phrases and identifiers, words recurring in the facts (``recurring`` counts the
    facts holding each term), then words said once; a single word only when it can name a thing
    (``_substantive``). Phrases the text already holds fill the list only up to
    ``REPEAT_SHARE`` of ``k``. None is what nobody searches by (``_NO_KEYWORD``)."""
    phrases = [p for p in phrases if _NO_KEYWORD.search(p) is None]
    head = [p for p in phrases[:CENTRAL_KEYWORDS] if not _terms(p) <= titled]
    new: list[str] = []
    unsaid: list[str] = []
    for phrase in phrases[CENTRAL_KEYWORDS:]:
        terms = _terms(phrase)
        if terms <= said:
            continue
        if " " in phrase or is_code_token(phrase):
            new.append(phrase)
        elif _substantive(phrase):
            (new if any(recurring[t] >= 2 for t in terms) else unsaid).append(phrase)
    chosen = list(dict.fromkeys(head + new + unsaid))[:k]
    repeats = max(0, round(k * REPEAT_SHARE) - len(chosen))  # said already: a few at most
    return chosen + [p for p in phrases if p not in chosen][:repeats]


_NO_KEYWORD = re.compile(
    r"^[ab]/|^-|://|^https?$|^www\.|redacted|[<>]|^/|^~/|^[0-9a-f]{7,40}$|^\d+$|\s-", re.IGNORECASE
)
"""Never a keyword: a diff's side of a path (``a/src/x.ts``: the path itself is one), a flag or a
command line, a URL or address, a redaction placeholder, markup, an absolute path, a hash or a
bare number — nothing anyone searches by."""
REPEAT_SHARE = 2 / 3
"""Keywords repeating the node's text fill the list up to this share of its size, no further."""


def _substantive(word: str) -> bool:
    """Whether a single word may be a keyword: long enough to name a thing ("swim", "parsley"),
    no adverb, no contraction ("nicely", "how're")."""
    return len(word) >= 4 and word.isalpha() and not word.lower().endswith("ly")


@lru_cache(maxsize=16_384)
def _terms(keyword: str) -> frozenset[str]:
    """A keyword's key terms (keywords recur across nodes: cached)."""
    return frozenset(key_terms(keyword))


def _first_words(text: str, n: int) -> str:
    words = text.split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


def empty_summary(backend: str) -> Summary:
    """The summary of a segment with nothing to summarise (titled ``EMPTY_TITLE``): only for
    input without any text at all."""
    return Summary(
        title=EMPTY_TITLE,
        bullets=(),
        keywords=(),
        abstract=EMPTY_TITLE,
        overview=EMPTY_TITLE,
        backend=backend,
    )


_FACT_PREFIX = re.compile(
    r"^(?:Ran|Edited|Wrote|Read(?: and searched)?|Fetched|Searched(?: the web)? for|Called|Error:|"
    r"Tests:|Committed(?: [0-9a-f]+)?:|Proposed plan:|Planned:|Asked:) "
)
_TICKED = re.compile(r"`([^`]+)`")
_TOOL_WORDS = re.compile(
    r"\band \d+ more (?:files|commands|tasks?)\b|\(\d+ lines\)|\bdefines\b|\(\d+ files? changed[^)]*\)"
    r"|\b\d+ (?:insertions?|deletions?)\(?[+-]?\)?"
)


def _ticked(text: str) -> list[str]:
    return _TICKED.findall(text)


def _topic_text(fact: Fact) -> str:
    """A fact's text without the words the summariser itself adds ("Ran", "Error:") and, for a
    command, without the purpose the agent wrote beside it ("verify", "show", "check" are no
    topic of the segment)."""
    if fact.kind in TOOL_KINDS:
        text = bare_tool_fact(fact.text) if fact.kind == "command" else fact.text
        text = _FACT_PREFIX.sub("", text)
        text = _TOOL_WORDS.sub(" ", text)
        return text.replace("`", " ")
    return fact.text


_LOWER_START = re.compile(r"^(?:Ran|Edited|Wrote|Read|Fetched|Searched|Tests|Lint|Type check|Error|"
                          r"Planned|Go tests|Output of)\b")  # fmt: skip


def _lower_first(text: str) -> str:
    """A fact continuing a line: its opening verb or label in lower case ("ran `x`")."""
    return text[:1].lower() + text[1:] if _LOWER_START.match(text) else text


def _plain(text: str) -> str:
    """A sentence for comparing: lowercased, without the punctuation that ends it."""
    return text.lower().rstrip(" .!?…:;")


def _said_in(sentence: str, text: str) -> bool:
    """``sentence`` is already in ``text`` word for word (a period's line whose topic came first:
    "X: the user wants json…" then "the user wants json…")."""
    plain = _plain(sentence)
    if len(plain.split()) < 3:
        return False  # a word or two may be said again in another sense
    at = text.lower().find(plain)
    return at >= 0 and (at == 0 or not text[at - 1].isalnum())


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))
