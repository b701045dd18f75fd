"""A node view (DESIGN §5 ``node(id)``): what an agent reads when it opens a TOC node.

A view costs what it is worth, so an agent with a 500-2,000-token budget can walk year → segment:

- **L0** (default): the node's id and title; the abstract's sentences that say something the title
  and bullets do not (an extractive L0 restates its bullets); each bullet (a period's cut to
  ``BULLET_CHARS`` unless focused) citing its first grip id (``+N`` says how many more it has;
  all are in ``to_dict()`` and at L1); then the children, one short line each — ``- [id] title``
  (a child's id carries its date, a segment's its start time).
- **L1**: adds the keywords, the overview and each child's L0 abstract.
- **Paging**: at most ``limit`` children (default ``DEFAULT_CHILD_LIMIT``, ``FOCUS_CHILD_LIMIT``
  with a focus) are listed from ``offset`` on; a last line says how many
  more there are and the offset that lists them ("… 62 more: offset=12").
- **Focus** (the question being answered): children are listed most-about-the-focus first — by
  the best hit inside each child's span (``FocusHit``: the memory's own ranking of events for
  the question, recall's; ``node_focus.py``), children without a hit after, in time order (the
  header says how many hold one). A day shows under each of its first ``MATCH_CHILDREN``
  segments holding a hit the segment's bullet over its best hit, with that grip (one expand from
  the evidence), and quotes the best hit's passage about the focus (``> …``, as a search
  result's snippet: ``node_focus.snippet``), said once when bullet and quote say the same. A
  focused year or month first names the days holding its ``HOT_HITS`` best hits (``hot_days``:
  the day with the best hit first, each with how many it holds) — where the evidence spreads,
  and a way down past the month and week. A period whose children hold hits shows none of its
  own bullets (its children are the way on); one without shows its ``FOCUS_BULLETS`` bullet
  most about the focus, whole.
  A segment keeps all its bullets (they are the way to its events), those over the best hits
  first, each citing its grip over the hit first. The same idea as ``expand``'s focus.
- **Bookkeeping**: a child of an agent's bookkeeping alone (sub-agent warm-ups, command notices:
  ``TocNode.bookkeeping_only``) is not listed, unless the node itself is one.

``tokens`` is the count of ``render()``: what the agent pays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memtoc.errors import QueryError
from memtoc.model import Bullet, JsonValue, TocNode, iso_ms
from memtoc.retrieval.node_focus import (
    FocusHit,
    FocusHits,
    node_hits,
    ranked_bullets,
    snippet,
)
from memtoc.store.base import Store
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter

TIERS = ("L0", "L1")
DEFAULT_CHILD_LIMIT = 8
"""Children listed per view unless the caller asks for more (a busy day has 50-200 segments)."""
FOCUS_CHILD_LIMIT = 5
"""Children listed per focused view unless the caller asks for more: ordered by relevance, the
first few carry most of its worth and the rest is a page away."""
MAX_CHILD_LIMIT = 500
FOCUS_BULLETS = 1
"""A focused view of a period shows at most this many bullets: the one most about the focus
(its children, listed by relevance, are the way on)."""
TITLE_CHARS = 90
"""A child's title in an L0 listing is cut (at a word, with "…") to about this many characters."""
HOT_TITLE_CHARS = 60
"""A hot day's title is cut shorter: its id and hit count are what it is listed for."""
BULLET_CHARS = 120
"""A period's bullet at L0 is cut to about this many characters (whole at L1, and the one bullet
a focused view shows; a segment's bullets are always whole: they can hold the very words an
agent looks for)."""

HOT_HITS = 10
"""A focused view of a period above a day says in which days its this many best hits lie."""
HOT_DAYS = 3
"""… naming at most this many days, the one with the best hit first."""
HOT_LEVELS = frozenset({"year", "month"})
"""Levels whose focused view names the days holding its best hits (a week lists its days)."""

MATCH_CHILDREN = 5
"""A focused view shows, under this many of its first children holding a match (a whole
focused page), the child's bullet most about the focus (with its grip) and its quote: the
evidence where the listing points, without opening the child."""


@dataclass(frozen=True, slots=True)
class ChildView:
    """A child as listed under its parent: id, level, title, L0 and span."""

    node_id: str
    level: str
    title: str
    abstract: str
    start_ms: int
    end_ms: int
    new: bool = False
    """Not yet covered by the parent's summary (the parent is rebuilt at most once per age)."""
    score: float | None = None
    """With a focus: the score of the best hit inside the child (None: no hit)."""
    match: Bullet | None = None
    """With a focus, for the first ``MATCH_CHILDREN`` children holding a hit: the child's bullet
    over its best hit, its grip over that hit first."""
    snippet: str | None = None
    """With a focus, for the same children: the passage of the best hit's event most about the
    focus (``node_focus.snippet``), quoted."""

    def render(self, tier: str = "L1") -> str:
        note = " (new: not yet in the summary above)" if self.new else ""
        if tier == "L0":
            line = f"- [{self.node_id}] {short_title(self.title)}{note}"
        else:
            line = f"- [{self.node_id}] {self.title}: {self.abstract}{note}"
        match, quote = self.match, self.snippet
        if match is not None and quote is not None:  # one line when one says the other
            said, quoted = _gist(match.text), _gist(quote)
            if said in quoted:
                return f"{line}\n  > {quote}{_grips(match.grip_ids, tier)}"
            if quoted in said:
                quote = None
        if match is not None:
            line += f"\n  * {match.text}{_grips(match.grip_ids, tier)}"
        if quote is not None:
            line += f"\n  > {quote}"
        return line

    def to_dict(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {
            "node_id": self.node_id,
            "level": self.level,
            "title": self.title,
            "abstract": self.abstract,
            "start_time": iso_ms(self.start_ms),
            "end_time": iso_ms(self.end_ms),
            "new": self.new,
        }
        if self.score is not None:
            data["score"] = round(self.score, 6)
        if self.match is not None:
            data["match"] = self.match.to_dict()
        if self.snippet is not None:
            data["snippet"] = self.snippet
        return data


@dataclass(frozen=True, slots=True)
class HotDay:
    """A day holding some of a focused period's best hits: one way down past its month and
    week."""

    node_id: str
    title: str
    hits: int
    """How many of the period's ``HOT_HITS`` best hits lie in it."""
    start_ms: int
    end_ms: int

    def render(self, of: int) -> str:
        return (
            f"- [{self.node_id}] {short_title(self.title, HOT_TITLE_CHARS)} ({self.hits} of {of})"
        )

    def to_dict(self) -> dict[str, JsonValue]:
        return {"node_id": self.node_id, "title": self.title, "hits": self.hits}


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node and a page of its children, as shown to an agent."""

    node: TocNode
    children: tuple[ChildView, ...]
    """The children listed (one page: ``offset`` on, at most ``limit``)."""
    tier: str
    tokens: int
    provisional: bool = False
    """The summary may change: the period is still running, or a child is newer than it."""
    total_children: int | None = None
    """All the node's children (default: those listed)."""
    offset: int = 0
    limit: int = DEFAULT_CHILD_LIMIT
    focus: str | None = None
    matched: int | None = None
    """With a focus: how many of all the children hold a hit (they are listed first)."""
    degraded: str | None = None
    """Why the focus order is degraded (e.g. the search had no embedder: BM25 only), or None."""
    shown: tuple[Bullet, ...] | None = None
    """The bullets shown, in the order shown (default: ``focus_bullets``)."""
    bullet_matches: int | None = None
    """With a focus ranking: how many of the bullets shown hold a hit (they come first)."""
    hot: tuple[HotDay, ...] = ()
    """With a focus, a year's or month's first page: the days holding its best hits."""
    hot_of: int = 0
    """How many best hits ``hot`` counts (``HOT_HITS``, fewer when the period holds fewer)."""

    @property
    def bullets(self) -> tuple[Bullet, ...]:
        """The bullets shown (a focused view orders them by the focus and a period's leaves out
        those not about it)."""
        return focus_bullets(self.node, self.focus) if self.shown is None else self.shown

    @property
    def more(self) -> int:
        """Children after this page."""
        total = len(self.children) if self.total_children is None else self.total_children
        return max(0, total - self.offset - len(self.children))

    def render(self) -> str:
        return render_node(
            self.node,
            self.children,
            self.tier,
            self.provisional,
            more=self.more,
            offset=self.offset,
            focus=self.focus,
            degraded=self.degraded,
            matched=self.matched,
            bullets=self.bullets,
            bullet_matches=self.bullet_matches,
            hot=self.hot,
            hot_of=self.hot_of,
        )

    def to_dict(self) -> dict[str, JsonValue]:
        node = self.node.to_dict()
        if self.tier == "L0":
            node.pop("overview")
        data: dict[str, JsonValue] = {
            "node": node,
            "children": [c.to_dict() for c in self.children],
            "total_children": len(self.children)
            if self.total_children is None
            else self.total_children,
            "offset": self.offset,
            "more": self.more,
            "tier": self.tier,
            "tokens": self.tokens,
            "provisional": self.provisional,
        }
        if self.focus is not None:
            data["focus"] = self.focus
            data["focus_degraded"] = self.degraded
            data["focus_matched"] = self.matched
            data["bullets_shown"] = [b.to_dict() for b in self.bullets]
            data["bullets_matched"] = self.bullet_matches
            data["hot_days"] = [h.to_dict() for h in self.hot]
        return data


def short_title(title: str, limit: int = TITLE_CHARS) -> str:
    """``title`` on one line, cut at a word to about ``limit`` characters ("…" marks the cut)."""
    one = " ".join(title.split())
    if len(one) <= limit:
        return one
    one = one.replace("…", " ")  # one mark of a cut, the last
    cut = one[:limit].rsplit(" ", 1)[0] if " " in one[:limit] else one[:limit]
    return cut.rstrip(" ,;:-") + "…"


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NOT_WORD = re.compile(r"\W+")


def _gist(text: str) -> str:
    """``text``'s words, lower-cased, one space apart (markup and punctuation gone): to tell
    whether one line says another."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".!?… ")


def _topic(text: str) -> str | None:
    """The head of a ``topic: detail`` line (how extractive bullets read), if it has one."""
    head, sep, _ = text.partition(": ")
    return head if sep and len(head) >= 12 else None


def novel_abstract(node: TocNode) -> str:
    """The abstract's sentences that the title and the bullets do not already say (an
    extractive abstract runs through its bullets: a sentence inside one, or on the same topic,
    is a restatement; an LLM's abstract usually is not, and is kept)."""
    said = [_norm(node.title), *(_norm(b.text) for b in node.bullets)]
    topics = {t for t in map(_topic, said) if t}
    kept = []
    for sentence in _SENTENCE.split(node.abstract.strip()):
        norm = _norm(sentence)
        if not norm or any(norm in other for other in said) or _topic(norm) in topics:
            continue
        kept.append(sentence)
    return " ".join(kept)


def _grips(grip_ids: Sequence[str], tier: str) -> str:
    if not grip_ids:
        return ""
    if tier == "L1" or len(grip_ids) == 1:
        return f" ({', '.join(grip_ids)})"
    return f" ({grip_ids[0]} +{len(grip_ids) - 1})"


def render_node(
    node: TocNode,
    children: Sequence[ChildView],
    tier: str,
    provisional: bool = False,
    *,
    more: int = 0,
    offset: int = 0,
    focus: str | None = None,
    degraded: str | None = None,
    matched: int | None = None,
    bullets: Sequence[Bullet] | None = None,
    bullet_matches: int | None = None,
    hot: Sequence[HotDay] = (),
    hot_of: int = 0,
) -> str:
    """The text an agent reads for a node view (what ``tokens`` counts): ``bullets`` are those
    shown, in order (default ``focus_bullets``), the first ``bullet_matches`` holding a hit;
    ``hot`` the days holding the ``hot_of`` best hits."""
    head = f"{node.node_id} — {node.title}"
    if provisional:
        head += " (provisional summary)"
    lines = [head]
    if tier == "L1":
        lines.append(node.abstract)
    elif focus is None or node.level == "segment":
        lines.append(novel_abstract(node))
    if bullets is None:
        bullets = focus_bullets(node, focus)
    if bullet_matches and node.level == "segment" and len(node.bullets) > 1:
        lines.append(f"bullets most about the focus first ({bullet_matches} hold matches):")
    cut = tier == "L0" and node.level != "segment" and focus is None  # a focused one: whole
    lines += [
        f"* {short_title(b.text, BULLET_CHARS) if cut else b.text}{_grips(b.grip_ids, tier)}"
        for b in bullets
    ]
    if not bullets and node.bullets and children and focus is not None:
        lines.append(f"({len(node.bullets)} bullets left out: the children are the way on)")
    elif len(bullets) < len(node.bullets):
        lines.append(f"({len(node.bullets) - len(bullets)} more bullets, less about the focus)")
    if tier == "L1":
        if node.keywords:
            lines.append("keywords: " + ", ".join(node.keywords))
        if node.overview:
            lines.append(node.overview)
    if hot:
        lines.append(f"days holding the {hot_of} best matches:")
        lines += [h.render(hot_of) for h in hot]
    if children and (more or offset or focus is not None):
        order = "most about the focus first" if focus is not None else "in time order"
        if focus is not None and matched is not None:
            order += f" ({matched} hold matches)" if matched else " (none holds a match)"
        shown = f"{offset + 1}-{offset + len(children)} of {offset + len(children) + more}"
        lines.append(f"children {shown}, {order}:")
        if focus is not None and degraded:
            lines.append(f"(focus order degraded: {degraded})")
    lines += [c.render(tier) for c in children]
    if more:
        lines.append(f"… {more} more: offset={offset + len(children)}")
    return "\n".join(line for line in lines if line)


def focus_bullets(node: TocNode, focus: str | None) -> tuple[Bullet, ...]:
    """The bullets a view shows: all, or with a focus a period's ``FOCUS_BULLETS`` holding most
    of its key terms (at least one), in summary order (a segment's bullets are all kept: they
    are the way to its events)."""
    if focus is None or node.level == "segment":
        return node.bullets
    terms = key_terms(focus)
    held = [len(terms & key_terms(b.text)) for b in node.bullets]
    best = sorted((i for i, n in enumerate(held) if n), key=lambda i: -held[i])[:FOCUS_BULLETS]
    return tuple(node.bullets[i] for i in sorted(best))


def children_of(store: Store, node: TocNode) -> list[TocNode]:
    """A node's children as they stand, in time order: a month's weeks are those holding one of its
    days (a week straddling two months is a child of each it has days in); otherwise the nodes
    naming it as parent."""
    if node.level == "month":
        days = store.list_nodes(
            node.project, level="day", since_ms=node.start_ms, until_ms=node.end_ms
        )
        from memtoc.pipeline.toc import weeks_of_days  # the pipeline: only for a month's view

        return weeks_of_days(store, node.project, node.start_ms, node.end_ms, days)
    if node.level == "segment":
        return []
    return store.list_nodes(node.project, parent_id=node.node_id)


def _focus_order(
    kids: list[ChildView], nodes: Sequence[TocNode], hits: Sequence[FocusHit]
) -> list[ChildView]:
    """``kids`` (of ``nodes``) scored by their best hit inside (``node_hits``), best first;
    children without a hit keep time order after them."""
    scored = []
    for kid, child in zip(kids, nodes, strict=True):
        best = max((h.score for h in node_hits(hits, child)), default=None)
        scored.append(replace(kid, score=best))
    hit = sorted((k for k in scored if k.score is not None), key=lambda k: -(k.score or 0.0))
    return hit + [k for k in scored if k.score is None]


def _focused_bullets(
    store: Store, node: TocNode, hits: Sequence[FocusHit], focus: str
) -> tuple[tuple[Bullet, ...], int]:
    """The bullets a focused view shows and how many of them hold a hit: a segment's all, those
    over the best hits first; a period's ``FOCUS_BULLETS`` over its best hits (by key terms when
    none of its bullets leads to a hit; ``node_view`` leaves them out when its children hold
    hits)."""
    ranked = ranked_bullets(store, node.bullets, node_hits(hits, node), key_terms(focus))
    matched = sum(score is not None for _, score in ranked)
    if node.level == "segment":
        return tuple(b for b, _ in ranked), matched
    if matched:
        return tuple(b for b, _ in ranked[:FOCUS_BULLETS]), min(matched, FOCUS_BULLETS)
    return focus_bullets(node, focus), 0


def node_view(
    store: Store,
    counter: TokenCounter,
    node_id: str,
    project: str | None = None,
    *,
    tier: str = "L0",
    now_ms: int | None = None,
    focus: str | None = None,
    focus_hits: FocusHits | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> NodeView:
    """A node with a page of its children, and the tokens of its rendering.

    ``now_ms`` (the memory's clock) decides whether a period is still running; ``focus`` orders
    the children by ``focus_hits`` (when given) and leaves out bullets not about it."""
    if tier not in TIERS:
        raise QueryError(f"node views come at L0 or L1, not {tier!r}")
    if offset < 0:
        raise QueryError(f"offset must be ≥ 0 (got {offset})")
    if limit is None:
        limit = DEFAULT_CHILD_LIMIT if focus is None else FOCUS_CHILD_LIMIT
    if not 1 <= limit <= MAX_CHILD_LIMIT:
        raise QueryError(f"limit must be 1..{MAX_CHILD_LIMIT} (got {limit})")
    if focus is not None:
        focus = " ".join(focus.split()) or None
    node = store.find_node(node_id, project)
    covered = set(node.child_node_ids)
    nodes = children_of(store, node)
    if not node.bookkeeping_only:  # a child of warm-ups or command notices alone is noise
        nodes = [c for c in nodes if not c.bookkeeping_only]
    kids = [
        ChildView(
            c.node_id,
            c.level,
            c.title,
            c.abstract,
            c.start_ms,
            c.end_ms,
            new=c.node_id not in covered,
        )
        for c in nodes
    ]
    degraded = None
    matched = None
    shown = None
    bullet_matches = None
    hot: tuple[HotDay, ...] = ()
    hot_of = 0
    if focus is not None and focus_hits is not None:
        hits, degraded = focus_hits(focus, node)
        shown, bullet_matches = _focused_bullets(store, node, hits, focus)
        if kids:
            kids = _focus_order(kids, nodes, hits)
            matched = sum(k.score is not None for k in kids)
            kids = _with_matches(
                store, counter, kids, {c.node_id: c for c in nodes}, hits, offset, focus
            )
            if matched:  # the children, most about the focus first, are the way on
                shown, bullet_matches = (), 0
        if node.level in HOT_LEVELS and offset == 0:
            hot, hot_of = hot_days(store, node, hits)
    running = node.level != "segment" and now_ms is not None and now_ms < node.end_ms
    provisional = running or any(k.new for k in kids)
    page = tuple(kids[offset : offset + limit])
    more = max(0, len(kids) - offset - len(page))
    text = render_node(
        node,
        page,
        tier,
        provisional,
        more=more,
        offset=offset,
        focus=focus,
        degraded=degraded,
        matched=matched,
        bullets=shown,
        bullet_matches=bullet_matches,
        hot=hot,
        hot_of=hot_of,
    )
    return NodeView(
        node,
        page,
        tier,
        counter.count(text),
        provisional,
        len(kids),
        offset,
        limit,
        focus,
        matched,
        degraded,
        shown,
        bullet_matches,
        hot,
        hot_of,
    )


def hot_days(
    store: Store, node: TocNode, hits: Sequence[FocusHit]
) -> tuple[tuple[HotDay, ...], int]:
    """The days of ``node`` holding its ``HOT_HITS`` best ``hits`` (at most ``HOT_DAYS``, the
    day with the best hit first, as children are listed), each with how many of them it holds,
    and how many hits were counted: where the evidence spreads, so an agent can go to a day without reading the month
    and week above it, and to the second day when the first is not it."""
    best = sorted(hits, key=lambda h: -h.score)[:HOT_HITS]
    if not best:
        return (), 0
    days = [
        d
        for d in store.list_nodes(
            node.project, level="day", since_ms=node.start_ms, until_ms=node.end_ms
        )
        if not d.bookkeeping_only  # as listings leave them out
    ]
    counts: dict[str, int] = {}
    top: dict[str, float] = {}
    for hit in best:
        day = next((d for d in days if d.start_ms <= hit.ts_ms < d.end_ms), None)
        if day is None:
            continue
        counts[day.node_id] = counts.get(day.node_id, 0) + 1
        top.setdefault(day.node_id, hit.score)
    by_id = {d.node_id: d for d in days}
    order = sorted(counts, key=lambda i: -top[i])[:HOT_DAYS]
    return tuple(
        HotDay(i, by_id[i].title, counts[i], by_id[i].start_ms, by_id[i].end_ms) for i in order
    ), len(best)


def _with_matches(
    store: Store,
    counter: TokenCounter,
    kids: list[ChildView],
    nodes: dict[str, TocNode],
    hits: Sequence[FocusHit],
    offset: int,
    focus: str,
) -> list[ChildView]:
    """``kids`` with the first ``MATCH_CHILDREN`` holding a hit (on the first page only) showing
    their bullet over their best hit."""
    out = list(kids)
    terms = key_terms(focus)
    said: set[str] = set()  # quotes shown above: each is said once
    for i, kid in enumerate(kids[: MATCH_CHILDREN if offset == 0 else 0]):
        if kid.score is None:
            break
        child = nodes[kid.node_id]
        inside = node_hits(hits, child)
        if child.level != "segment":  # a period's bullet digests many sessions: no way in
            continue
        ranked = ranked_bullets(store, child.bullets, inside, terms)
        match = ranked[0][0] if ranked and ranked[0][1] is not None else None
        quote = snippet(store, counter, inside, terms, said=said)
        if quote is not None:
            said.add(quote)
        out[i] = replace(kid, match=match, snippet=quote)
    return out
