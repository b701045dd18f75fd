"""A period (day, week, month, year) from its children's summaries: threads, not a concatenation.

1. **Threads** — the pieces of work the period holds:

   - a day's segments name their session (``Summary.thread``), and a session is one piece of
     work: its segments form one thread, named by what was committed in it (past tense), else by
     its first title that says what was done (not a tool step such as "Read `x`");
   - a week's days (a month's weeks, a year's months) already state their threads: every bullet
     of a period reads "topic: what happened". The bullets are regrouped by topic (topics whose
     key terms mostly coincide are one), so a piece of work that ran over two days is one thread
     of the week. A bullet without a topic takes its child's title as one.

2. **Weight.** A thread weighs its size (segments or bullets) plus the salience of what it says
   (decisions, causes, fixes, commits, test outcomes up; tool steps and failed tool calls down:
   ``bullet_salience``).
3. **Bullets.** One per thread, heaviest first, up to ``PERIOD_BULLETS`` (a thread with nothing
   but tool steps gives way), then the heaviest threads a second one while the period has fewer
   than ``min_bullets`` — each written "topic: what happened", condensed the higher the level
   (``DAY_WORDS`` words under a day, ``PERIOD_WORDS`` above), so a parent never repeats a
   child's line verbatim.
4. **Title.** The heaviest threads' topics, joined while they fit ("Fixed the diff viewer column
   layout; Added JSON report import and 5 more"). A conversation (children titled "Caroline &
   Melanie: …") keeps its speakers and names its main keyphrases.
5. **L0** runs through the bullets in weight order (``ExtractiveSummarizer._abstract``), each
   thread's topic told once (by the title or its first line), so its words go to what happened.
   A bullet that would be a thread's topic alone (its lines all a child's) gives way to the
   thread's next line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from memtoc.model import Summary
from memtoc.pipeline.summarize.extractive_facts import bullet_salience, clean_sentence
from memtoc.pipeline.summarize.extractive_markdown import SENT_SPLIT
from memtoc.pipeline.summarize.extractive_titles import (
    MAX_TITLE,
    _topics,
    and_list,
    headline,
    past_tense,
    shorten,
)
from memtoc.text.keyphrases import key_terms, normalize_term

TOPIC_CHARS = 60
PERIOD_BULLETS = 8
"""A period gives one bullet per thread, up to this many (the heaviest threads first)."""
DAY_WORDS = 28
PERIOD_WORDS = 16
"""Words of a child's line a period keeps: under a day, and above (weeks, months, years)."""
LEVEL_WORDS = {"day": DAY_WORDS, "week": PERIOD_WORDS, "month": 12, "year": 10}
"""The same per level when the summariser is told it: the higher, the more condensed."""
L0_FACTS = 8
"""Sentences of a child's L0 beyond its bullets that its period weighs (its next best facts)."""
L0_LINES = 16
"""Lines beyond the bullets a period's L0 is offered (it holds about 100 tokens)."""
SAME_TOPIC = 0.6
"""Two topics whose key terms overlap this much (Jaccard) are one thread."""
SUBAGENT_MARK = "/agent-"
"""A sub-agent's session id is ``<parent session>/agent-<id>`` (the importers' convention)."""
SUBAGENT_PENALTY = 2.0
"""A sub-agent's lines only tell a thread when its own session has nothing left to say."""
OUTCOME_BONUS = 0.2
"""Added to the lines of a session's last two segments, where its outcome is told."""

_STEP_TITLE = re.compile(
    r"^(?:Read|Edited|Wrote|Ran|Searched|Fetched|Called|Output of|Tool output|Tests:|Debugging|"
    r"Discussing|Running|Editing|Now\b|Let me\b|I'll\b)"
)
"""Titles naming a tool step or a vague activity rather than what was done."""
_COMMITTED = re.compile(r"^Committed(?: [0-9a-f]{7,12})?: ")


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


@dataclass(slots=True)
class _Thread:
    topic: str
    terms: frozenset[str]
    lines: list[tuple[float, str, frozenset[str]]] = field(default_factory=list)
    """(value, text, key terms) of every line it could give, best first once sorted."""
    size: int = 0
    first: int = 0
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class PeriodDigest:
    title: str
    bullets: list[str]
    keywords: list[str]
    lines: list[str]
    """Sentences for the L0, best first."""
    covers: list[str]
    """The children's titles (for L1)."""
    candidates: list[str] = field(default_factory=list)
    """More keywords, best first (``keywords`` are the first of them)."""
    shown: frozenset[str] = frozenset()
    """Key terms of the title and the bullets."""


def merge_keywords(children: Sequence[Summary], k: int, names: Sequence[str] = ()) -> list[str]:
    """Keywords carried by the most children (then by rank), in their most common form; a
    child's title counts among them the keyphrases it names (``titled_keywords``: a child's
    keywords leave out what its title says)."""
    stats: dict[str, list[float]] = {}
    forms: dict[str, Counter[str]] = {}
    for child in children:
        for rank, kw in enumerate(dict.fromkeys([*titled_keywords(child, names), *child.keywords])):
            key = kw.lower()
            entry = stats.setdefault(key, [0.0, 0.0])
            entry[0] += 1
            entry[1] += 1.0 / (1 + rank)
            forms.setdefault(key, Counter())[kw] += 1
    order = sorted(stats, key=lambda key: (-stats[key][0], -stats[key][1], key))
    return [min(forms[key].items(), key=lambda kv: (-kv[1], kv[0]))[0] for key in order][:k]


_PARTS_SUFFIX = re.compile(r"(?: \(\d+ (?:segment|day|part|month)s?\))?(?: and \d+ more)?$")
"""What a period's title adds after its topics: how many children say it, how many threads
more (no topic of its parent's)."""
_TICKED = re.compile(r"`([^`]+)`")


def titled_keywords(child: Summary, names: Sequence[str]) -> list[str]:
    """The keyphrases a child's title names: a conversation's topics ("Caroline & Melanie:
    pottery, camping and kids"), else its identifiers in backticks (not a command line)."""
    title = _PARTS_SUFFIX.sub("", child.title)
    if names:
        rest = _strip_names(title, names)
        if rest == title:
            return []
        return [t.strip() for t in re.split(r", | and ", rest) if t.strip()]
    return [t for t in _TICKED.findall(title) if not any(c.isspace() for c in t)]


def _value(text: str, rank: int) -> float:
    return bullet_salience(text) + 0.3 / (1 + rank)


def _strip_names(title: str, names: Sequence[str]) -> str:
    head, sep, rest = title.partition(": ")
    return rest if sep and names and set(head.split(" & ")) <= set(names) else title


def _session_threads(children: Sequence[Summary], names: Sequence[str]) -> list[_Thread]:
    """A day's segments grouped by session (children without one are a thread each)."""
    groups: dict[str, list[int]] = {}
    for i, child in enumerate(children):  # a sub-agent's session is part of its parent's work
        key = child.thread.split(SUBAGENT_MARK, 1)[0] if child.thread else f"\x00{i}"
        groups.setdefault(key, []).append(i)
    threads: list[_Thread] = []
    for members in groups.values():
        topic = ""
        for i in members:  # what was committed says best what the work was
            commit = next((b for b in children[i].bullets if _COMMITTED.match(b)), None)
            if commit is not None:
                message = _COMMITTED.sub("", commit).split(" (", 1)[0]
                topic = past_tense(headline(message, TOPIC_CHARS))
                break
        if not topic:
            own = [i for i in members if SUBAGENT_MARK not in (children[i].thread or "")]
            titles = [_strip_names(children[i].title, names) for i in own or members]
            said = next((t for t in titles if not _STEP_TITLE.match(t)), titles[0])
            topic = headline(said, TOPIC_CHARS)
        thread = _Thread(topic[:1].upper() + topic[1:], frozenset(key_terms(topic)),
                         size=len(members), first=members[0])  # fmt: skip
        for m, i in enumerate(members):
            late = OUTCOME_BONUS if m >= len(members) - 2 else 0.0  # a session ends on its outcome
            delegated = SUBAGENT_MARK in (children[i].thread or "")
            for rank, bullet in enumerate(_child_lines(children[i])):
                value = _value(bullet, rank) + late - (SUBAGENT_PENALTY if delegated else 0.0)
                thread.lines.append((value, bullet, frozenset(key_terms(bullet))))
        threads.append(thread)
    return threads


def _child_lines(child: Summary) -> list[str]:
    """What a child says, best first: its bullets, then the sentences of its L0 that are
    neither its title nor a bullet (a segment's L0 adds its next most salient facts)."""
    lines = list(child.bullets)
    seen = {_plain(child.title), *(_plain(b) for b in lines)}
    for sentence in SENT_SPLIT.split(child.abstract):
        plain = _plain(sentence)
        if plain and plain not in seen and not plain.startswith("about: "):
            seen.add(plain)
            lines.append(sentence.strip().rstrip("."))
            if len(lines) >= len(child.bullets) + L0_FACTS:
                break
    return lines


def _plain(text: str) -> str:
    return text.strip().lower().rstrip(" .!?…:;")


def _topic_threads(children: Sequence[Summary], names: Sequence[str]) -> list[_Thread]:
    """Periods' bullets ("topic: text") regrouped by topic."""
    threads: list[_Thread] = []
    for i, child in enumerate(children):
        fallback = headline(_PARTS_SUFFIX.sub("", _strip_names(child.title, names)), TOPIC_CHARS)
        for rank, bullet in enumerate(_child_lines(child)):
            head, sep, text = bullet.partition(": ")
            if not sep or not text or not _is_topic(head, names):
                head, text = fallback, bullet
            terms = frozenset(key_terms(head))
            home = next(
                (t for t in threads if t.topic == head or _jaccard(t.terms, terms) >= SAME_TOPIC),
                None,
            )
            if home is None:
                home = _Thread(head, terms, first=i)
                threads.append(home)
            home.size += 1
            home.lines.append((_value(text, rank), text, frozenset(key_terms(text))))
    if not threads:  # children with nothing to say beyond their titles: a thread each
        for i, child in enumerate(children):
            topic = headline(_strip_names(child.title, names), TOPIC_CHARS)
            threads.append(_Thread(topic, frozenset(key_terms(topic)), size=1, first=i))
    return threads


_LABEL = re.compile(
    r"^(?:error|errors|decision|root cause|cause|fix|fixed|tests?|committed|note|warning|summary|"
    r"problem|solution|result|outcome|plan|context|update|step|why|how|what|asked|reason|bug|"
    r"issue|conclusion|answer|question|important|todo|done|agent bookkeeping)\b",
    re.IGNORECASE,
)


def _is_topic(head: str, names: Sequence[str]) -> bool:
    """Whether the ``head`` of a "head: text" line is a period's topic (not a label such as
    "Error", "Root cause" or a speaker's name)."""
    return (
        len(head) <= TOPIC_CHARS + 5
        and len(head.split()) >= 2
        and head not in names
        and "`" not in head
        and _LABEL.match(head) is None
    )


def digest_children(
    children: Sequence[Summary],
    *,
    level: str | None = None,
    max_bullets: int,
    min_bullets: int,
    max_keywords: int,
    redundancy: float,
    avoid: Collection[str] = (),
) -> PeriodDigest:
    """The period's title, bullets, keywords, L0 lines and covered titles (module docstring)."""
    names = _speakers(children)
    candidates = merge_keywords(children, 3 * max_keywords, names)
    keywords = candidates[:max_keywords]
    sessions = any(c.thread for c in children)
    threads = _session_threads(children, names) if sessions else _topic_threads(children, names)
    words = LEVEL_WORDS.get(level or "", DAY_WORDS if sessions else PERIOD_WORDS)
    coarse = level in ("month", "year")
    for thread in threads:
        thread.lines.sort(key=lambda line: -line[0])
        thread.weight = thread.size + sum(max(0.0, v) for v, _, _ in thread.lines[:3])
    order = sorted(range(len(threads)), key=lambda t: (-threads[t].weight, threads[t].first))
    lines_total = sum(len(t.lines) for t in threads)
    # the bullets are spread over the threads: one each while there are many, more each
    # while there are few (a day of one session says more of it than its first lines)
    target = min(PERIOD_BULLETS, max(min_bullets, max_bullets, len(threads)), max(1, lines_total))
    child_lines = {b for c in children for b in c.bullets} | set(avoid)
    # a day of one session: its title names it, its lines need no topic before them (above a
    # day the lines keep their topic, so a week never repeats its one day's lines verbatim)
    single = sessions and len(threads) == 1
    every_line = [list(t.lines) for t in threads]
    picked: list[tuple[int, str, frozenset[str]]] = []
    for round_ in range(target):
        for t in order:
            if len(picked) >= target:
                break
            pool = threads[t].lines
            named: tuple[int, str, frozenset[str]] | None = None
            while pool:
                value, line, terms = pool.pop(0)
                if round_ == 0 and value <= 0 and len(threads) > target:
                    break  # a thread with nothing but tool steps gives way to others
                if round_ > 0 and value <= 0 and len(picked) >= min_bullets:
                    continue  # a thread's further lines must say something
                if any(_jaccard(terms, p[2]) > 1 - redundancy / 2 for p in picked):
                    continue
                said = _line(threads[t].topic, line, words, child_lines, coarse=coarse,
                             bare=single)  # fmt: skip
                if said is None or any(said == p[1] for p in picked):
                    continue
                if said == threads[t].topic:  # the topic alone: only if no line says more
                    named = named or (t, said, terms)
                    continue
                picked.append((t, said, terms))
                named = None
                break
            if named is not None and not any(p[0] == t for p in picked):
                picked.append(named)
        if len(picked) >= target or not any(t.lines for t in threads):
            break
    if not picked:  # every line would repeat a child's: name the threads and their size
        for t in order[:target]:
            size = threads[t].size
            plural = "s" if size != 1 else ""
            noun = _CHILD_NOUN.get(level or "", "part")
            for line in (f"{threads[t].topic} ({size} part{plural})",
                         f"{threads[t].topic} ({size} {noun}{plural})",
                         f"{threads[t].topic} (this {level or 'period'})"):  # fmt: skip
                if line not in child_lines:
                    picked.append((t, line, threads[t].terms))
                    break
    rank_of = {t: n for n, t in enumerate(order)}
    picked.sort(key=lambda p: rank_of[p[0]])
    bullets = [p[1] for p in picked]
    title = _title(threads, order, children, names, keywords, level)
    # L0: the strongest bullet, then what the bullets do not say (the threads' next lines)
    offered = sorted(((v, rank_of[t], t, line, terms) for t in order
                      for v, line, terms in every_line[t]), key=lambda x: (-x[0], x[1]))  # fmt: skip
    told: list[frozenset[str]] = []
    lines, weak = bullets[:1], list[str]()
    # a thread's topic is told once: by the title or by its first line in the L0
    topics_told = {threads[t].topic for t in order if threads[t].topic in title}
    topics_told |= {threads[p[0]].topic for p in picked[:1]}
    for value, _, t, line, terms in offered:  # each says something the others do not
        if len(told) >= L0_LINES:
            break  # more than an L0 can hold
        if any(_jaccard(terms, p[2]) > 1 - redundancy / 2 for p in picked) or any(
            _jaccard(terms, other) > 1 - redundancy / 2 for other in told
        ):
            continue
        body = _body(threads[t].topic, line, words)
        if _words(body) < 2:
            continue  # nothing beyond the topic
        topic = threads[t].topic
        if single or (value > 0 and topic in topics_told):
            said = body
        else:
            said = f"{topic}: {body}"
            if value > 0:
                topics_told.add(topic)
        (lines if value > 0 else weak).append(said)
        told.append(terms)
    lines += bullets[1:] + weak  # the weak ones only fill an L0 that is still short
    shown = frozenset(key_terms(title)).union(*(p[2] for p in picked))
    return PeriodDigest(title, bullets, keywords, lines, [c.title for c in children],
                        candidates, shown)  # fmt: skip


def _line(
    topic: str,
    text: str,
    words: int,
    child_lines: set[str],
    *,
    coarse: bool = False,
    bare: bool = False,
) -> str | None:
    """A child's line as the period states it: condensed, after its thread's topic (``bare``:
    alone, the period having one thread, which its title names; None when that is a child's
    line); when that would repeat a child's line, "topic — text", or the topic alone for a
    month or a year (None when even that is a child's line)."""
    body = clean_sentence(text, words)
    if bare:
        return body if body and body not in child_lines else None
    body = _body(topic, text, words)
    if body and _words(body) < 2:
        return None  # the rest of a sentence the topic cut ("minted…"): says nothing alone
    line = f"{topic}: {body}" if body else topic
    if line not in child_lines:
        return line
    if body and not coarse and f"{topic} — {body}" not in child_lines:
        return f"{topic} — {body}"
    return None if topic in child_lines else topic


def _words(text: str, enough: int = 2) -> int:
    """Words of ``text`` holding a letter, counted up to ``enough``."""
    n = 0
    for w in text.split():
        if any(c.isalpha() for c in w):
            n += 1
            if n >= enough:
                break
    return n


def _body(topic: str, text: str, words: int) -> str:
    """A child's line condensed to ``words``, without its thread's topic in front."""
    body = clean_sentence(text, words)
    if body.lower().startswith(topic.lower()):
        body = body[len(topic) :].lstrip(" :—-")
    return body


def _speakers(children: Sequence[Summary]) -> list[str]:
    """The speakers of a conversation's children ("Caroline & Melanie: …" titles)."""
    prefixes = Counter(c.title.split(": ", 1)[0] for c in children if ": " in c.title)
    if not prefixes:
        return []
    prefix, n = min(prefixes.items(), key=lambda kv: (-kv[1], kv[0]))
    if n * 2 < len(children) or not ("&" in prefix or prefix.istitle()):
        return []
    if len(prefix.split()) > 5 or any(normalize_term(w) in _NOT_NAMES for w in prefix.split()):
        return []
    return prefix.split(" & ")


_NOT_NAMES = frozenset({"fix", "add", "correction", "committ", "error", "tests:", "plan"})


def _title(
    threads: Sequence[_Thread],
    order: Sequence[int],
    children: Sequence[Summary],
    names: Sequence[str],
    keywords: Sequence[str],
    level: str | None = None,
) -> str:
    child_titles = {c.title for c in children}
    if names:  # a conversation: its speakers and main keyphrases
        head = f"{' & '.join(names)}: "
        plain, idents, _ = _topics(keywords, {n.lower() for n in names})
        topics = [*plain, *idents][:3]
        while len(topics) > 1 and len(head + and_list(topics)) > MAX_TITLE:
            topics.pop()
        title = shorten(head + (and_list(topics) or "conversation"))
    else:
        done = [threads[t].topic for t in order if not _STEP_TITLE.match(threads[t].topic)]
        done = list(dict.fromkeys(done or [threads[order[0]].topic]))
        title, shown = done[0], 1
        for topic in done[1:]:
            if len(f"{title}; {topic}") > MAX_TITLE:
                break
            title, shown = f"{title}; {topic}", shown + 1
        others = len(threads) - shown
        if others > 0:
            suffix = f" and {others} more"
            title = shorten(title, MAX_TITLE - len(suffix)) + suffix
        title = shorten(title)
    if title in child_titles:  # one child saying it all: say what the period holds
        noun = _CHILD_NOUN.get(level or "", "part")
        suffix = f" ({len(children)} {noun}{'s' if len(children) > 1 else ''})"
        title = shorten(title, MAX_TITLE - len(suffix)) + suffix
    return title


_CHILD_NOUN = {"day": "segment", "week": "day", "month": "day", "year": "month"}
