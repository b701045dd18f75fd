"""The extractive summariser: no model, no network, deterministic.

For a segment: events become facts (``extractive_facts``), scored for salience; 3-5 diverse
bullets are picked MMR-style (score minus redundancy with bullets already chosen) and shown in
order; keywords are the segment's keyphrases (never tool names or filler); the title says what
happened to what (``extractive_titles``: "Fixed order dependence (AssertionError) in db_fixture"),
never the opening words of the first message; L0 is the title and the best
bullet within 100 tokens; L1 adds every bullet, further notable facts and key facts (files,
commands, errors, participants) within 2,000 tokens.

For a period: child bullets are re-ranked by their own salience (decisions, causes, fixes and
errors over plans and tool steps), their coverage of the merged keywords and redundancy, with a penalty on children already represented, so each child
gets a bullet where room allows; keywords propagate by how many children carry them, and the
title names the dominant topics.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.extractive_facts import (
    Fact,
    bullet_salience,
    clean_sentence,
    extract_facts,
    score_facts,
)
from memtoc.pipeline.summarize.extractive_titles import period_title, segment_title
from memtoc.pipeline.summarize.tool_calls import TOOL_NAMES, tool_name
from memtoc.text.keyphrases import extract_keyphrases, key_terms
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

EMPTY_TITLE = "(empty)"


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


class ExtractiveSummarizer:
    """Deterministic extractive summaries (``name = "extractive/1"``)."""

    name = "extractive/1"

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_bullets: int = 5,
        min_bullets: int = 3,
        max_keywords: int = 10,
        abstract_tokens: int = 100,
        overview_tokens: int = 2000,
        redundancy: float = 0.7,
    ) -> None:
        self.counter = counter
        self.max_bullets = max_bullets
        self.min_bullets = min(min_bullets, max_bullets)
        self.max_keywords = max_keywords
        self.abstract_tokens = abstract_tokens
        self.overview_tokens = overview_tokens
        self.redundancy = redundancy

    # -- segments ---------------------------------------------------------------------------

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        facts = extract_facts(events)
        if not facts:
            return self._empty()
        score_facts(facts, events)
        tools = {tool_name(e.metadata).lower() for e in events if e.event_type == "tool_call"}
        keywords = extract_keyphrases(
            [_topic_text(f) for f in facts if f.kind != "call"],
            self.max_keywords,
            exclude=TOOL_NAMES | tools,
        )
        target = max(self.min_bullets, min(self.max_bullets, 2 + len(facts) // 8))
        chosen = self._select(facts, target)
        bullets = [f.text for f in sorted(chosen, key=lambda f: f.position)]
        title = segment_title(facts, keywords, events)
        chosen_ids = {id(f) for f in chosen}
        extra = self._select(
            [f for f in facts if id(f) not in chosen_ids],
            12,
            penalty_terms=[f.terms for f in chosen],
        )
        facts_block = self._key_facts(facts)
        best = max(chosen, key=lambda f: (f.score, -f.position)).text
        return self._finish(title, bullets, keywords, best, [f.text for f in extra], facts_block)

    def _select(
        self,
        facts: Sequence[Fact],
        k: int,
        *,
        penalty_terms: Iterable[frozenset[str]] = (),
    ) -> list[Fact]:
        """MMR: repeatedly take the fact with the best score minus its redundancy."""
        picked: list[Fact] = []
        pool = sorted(facts, key=lambda f: (-f.score, f.position))[: max(4 * k, 40)]
        # Each candidate's largest overlap with what is already chosen, updated per pick.
        overlap = [0.0] * len(pool)
        for terms in penalty_terms:
            overlap = [max(o, _jaccard(f.terms, terms)) for o, f in zip(overlap, pool, strict=True)]
        texts: set[str] = set()
        alive = list(range(len(pool)))
        while alive and len(picked) < k:
            best_i = max(alive, key=lambda i: (pool[i].score - self.redundancy * overlap[i], -i))
            alive.remove(best_i)
            fact = pool[best_i]
            key = fact.text.lower()
            if key in texts or overlap[best_i] > 0.8:
                continue
            texts.add(key)
            picked.append(fact)
            for i in alive:
                o = _jaccard(pool[i].terms, fact.terms)
                if o > overlap[i]:
                    overlap[i] = o
        return picked

    def _key_facts(self, facts: Sequence[Fact]) -> list[str]:
        out: list[str] = []
        groups = (
            ("Participants", sorted({f.speaker for f in facts if f.speaker})),
            ("Files", _unique(f.text.split("`")[1] for f in facts if f.kind == "edit")),
            ("Commands", _unique(f.text.split("`")[1] for f in facts if f.kind == "command")),
            ("Errors", _unique(f.text.removeprefix("Error: ") for f in facts if f.kind == "error")),
        )
        for label, values in groups:
            if values:
                out.append(f"{label}: " + "; ".join(values[:12]))
        return out

    # -- periods ----------------------------------------------------------------------------

    def summarize_children(self, children: Sequence[Summary]) -> Summary:
        live = [c for c in children if c.title != EMPTY_TITLE and (c.bullets or c.keywords)]
        if not live:
            return self._empty()
        keywords = self._merge_keywords(live)
        top_terms = frozenset().union(*(key_terms(k) for k in keywords[:6]))
        candidates: list[tuple[float, int, int, str, frozenset[str]]] = []
        for ci, child in enumerate(live):
            for rank, bullet in enumerate(child.bullets):
                terms = frozenset(key_terms(bullet))
                coverage = len(terms & top_terms) / (len(top_terms) or 1)
                weight = 0.5 / (1 + rank) + coverage + bullet_salience(bullet)
                candidates.append((weight, ci, rank, bullet, terms))
        target = max(self.min_bullets, min(self.max_bullets, len(live)))
        picked: list[tuple[float, int, int, str, frozenset[str]]] = []
        used: Counter[int] = Counter()
        pool = list(candidates)
        while pool and len(picked) < target:

            def value(c: tuple[float, int, int, str, frozenset[str]]) -> tuple[float, int, int]:
                overlap = max((_jaccard(c[4], p[4]) for p in picked), default=0.0)
                return (c[0] - self.redundancy * overlap - 0.8 * used[c[1]], -c[1], -c[2])

            best = max(pool, key=value)
            pool.remove(best)
            if any(
                best[3].lower() == p[3].lower() or _jaccard(best[4], p[4]) > 0.8 for p in picked
            ):
                continue
            picked.append(best)
            used[best[1]] += 1
        bullets = [clean_sentence(p[3]) for p in sorted(picked, key=lambda p: (p[1], p[2]))]
        title = period_title(live, keywords)
        best_bullet = (
            clean_sentence(max(picked, key=lambda p: (p[0], -p[1], -p[2]))[3]) if picked else ""
        )
        extra = [f"{c.title}" for c in live]
        return self._finish(title, bullets, keywords, best_bullet, extra, [], extra_label="Covers")

    def _merge_keywords(self, children: Sequence[Summary]) -> list[str]:
        stats: dict[str, list[float]] = {}
        forms: dict[str, Counter[str]] = {}
        for child in children:
            for rank, kw in enumerate(dict.fromkeys(child.keywords)):
                key = kw.lower()
                entry = stats.setdefault(key, [0.0, 0.0])
                entry[0] += 1
                entry[1] += 1.0 / (1 + rank)
                forms.setdefault(key, Counter())[kw] += 1
        order = sorted(stats, key=lambda k: (-stats[k][0], -stats[k][1], k))
        return [min(forms[k].items(), key=lambda kv: (-kv[1], kv[0]))[0] for k in order][
            : self.max_keywords
        ]

    # -- shared -----------------------------------------------------------------------------

    def _finish(
        self,
        title: str,
        bullets: Sequence[str],
        keywords: Sequence[str],
        best: str,
        extra: Sequence[str],
        key_facts: Sequence[str],
        *,
        extra_label: str = "Also",
    ) -> Summary:
        abstract = f"{title}. {best}" if best else title
        abstract = truncate_to_tokens(self.counter, abstract, self.abstract_tokens)
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


def empty_summary(backend: str) -> Summary:
    """The summary of a segment with nothing to summarise (titled ``EMPTY_TITLE``)."""
    return Summary(
        title=EMPTY_TITLE,
        bullets=(),
        keywords=(),
        abstract=EMPTY_TITLE,
        overview=EMPTY_TITLE,
        backend=backend,
    )


_FACT_PREFIX = re.compile(
    r"^(?:Ran|Edited|Wrote|Read|Fetched|Searched(?: the web)? for|Called|Error:|Tests:) "
)


def _topic_text(fact: Fact) -> str:
    """A fact's text without the words the summariser itself adds ("Ran", "Error:")."""
    if fact.kind == "command":  # the arguments, not the program ("pytest", "git")
        return _FACT_PREFIX.sub("", fact.text).replace("`", " ").strip().partition(" ")[2]
    if fact.kind in ("edit", "read", "error", "tally"):
        return _FACT_PREFIX.sub("", fact.text).replace("`", " ")
    return fact.text


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))
