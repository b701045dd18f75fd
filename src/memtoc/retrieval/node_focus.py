"""What a question's ranking of events says about a node's children and bullets (node views'
``focus``).

``Memory.node(focus=…)`` passes the memory's own ranking of the project's events for the
question (recall's, ``FocusHit`` each); here it is read against a node:

- a child scores by its best hit inside its span (a segment: inside its session too), so the
  children holding the events the question is about are listed first;
- a bullet scores by its best hit inside its grips' ranges (the events it was summarised from),
  so the bullet leading to the evidence is the one shown first — with that grip cited first.

Nothing here ranks on its own: without hits (no focus ranking, or no match inside the node) the
view keeps its summary order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import replace
from typing import NamedTuple

from memtoc.errors import NotFoundError
from memtoc.model import Bullet, TocNode
from memtoc.retrieval.recall_passages import passages_text, rank_passages, split_passages
from memtoc.store.base import Store
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter

SNIPPET_TOKENS = 100
"""The most of an event a focused view quotes under a child: one passage of about this size."""
SNIPPET_TRIES = 3
"""Hits tried, best first, for a quote not shown yet."""


class FocusHit(NamedTuple):
    """One event the ranking found for the focus: when, how well (higher better), which session,
    which event ("" when the ranking did not say)."""

    ts_ms: int
    score: float
    session_id: str
    event_id: str = ""


FocusHits = Callable[[str, TocNode], tuple[Sequence[FocusHit], str | None]]
"""``(focus, node) -> (hits inside the node's period and project, degraded)``: why the ranking ran
degraded (no embedder) or None (``Memory.node`` passes recall's ranking of events)."""


class GripSpan(NamedTuple):
    """The time range and session of a grip's events."""

    start_ms: int
    end_ms: int
    session_id: str


def best_hit(
    hits: Iterable[FocusHit], start_ms: int, end_ms: int, session_id: str | None = None
) -> float | None:
    """The best score among ``hits`` in ``[start_ms, end_ms]`` (and ``session_id`` when given),
    None when none falls there."""
    return max(
        (
            h.score
            for h in hits
            if start_ms <= h.ts_ms <= end_ms and (session_id is None or h.session_id == session_id)
        ),
        default=None,
    )


def grip_spans(store: Store, grip_ids: Iterable[str]) -> dict[str, GripSpan]:
    """Each grip's range as times and session (a grip gone since the summary was written is left
    out: its bullet scores by its other grips)."""
    grips = []
    for gid in dict.fromkeys(grip_ids):
        try:
            grips.append(store.get_grip(gid))
        except NotFoundError:
            continue
    ends = {g.event_id_start for g in grips} | {g.event_id_end for g in grips}
    ts = {e.event_id: e.ts_ms for e in store.get_events(ends)} if ends else {}
    return {
        g.grip_id: GripSpan(
            ts.get(g.event_id_start, g.ts_ms),
            max(ts.get(g.event_id_end, g.ts_ms), ts.get(g.event_id_start, g.ts_ms)),
            g.session_id,
        )
        for g in grips
    }


def ranked_bullets(
    store: Store, bullets: Sequence[Bullet], hits: Sequence[FocusHit], terms: Set[str] = frozenset()
) -> list[tuple[Bullet, float | None]]:
    """``bullets`` with their scores, best first — each bullet's grips reordered so the one over
    its best hit comes first — then those without a hit, in summary order. Bullets reaching the
    same hit (several bullets are often cut from one long message) are ordered by how many of
    the focus's key ``terms`` they say, then by the narrower grip (it says more about the hit
    than a bullet summing up a whole exchange)."""
    if not hits:
        return [(b, None) for b in bullets]
    spans = grip_spans(store, (g for b in bullets for g in b.grip_ids))
    keys: list[tuple[float, int, int] | None] = []
    out: list[Bullet] = []
    for bullet in bullets:
        per_grip: dict[str, tuple[float, int]] = {}
        for gid in bullet.grip_ids:
            span = spans.get(gid)
            score = best_hit(hits, *span) if span is not None else None
            if span is not None and score is not None:
                per_grip[gid] = (score, span.end_ms - span.start_ms)
        if not per_grip:
            keys.append(None)
            out.append(bullet)
            continue
        order = sorted(per_grip, key=lambda g: (-per_grip[g][0], per_grip[g][1]))
        rest = tuple(g for g in bullet.grip_ids if g not in per_grip)
        said = len(terms & key_terms(bullet.text)) if terms else 0
        keys.append((per_grip[order[0]][0], said, per_grip[order[0]][1]))
        out.append(replace(bullet, grip_ids=(*order, *rest)))
    ranked = [(i, k) for i, k in enumerate(keys) if k is not None]
    ranked.sort(key=lambda p: (-p[1][0], -p[1][1], p[1][2]))
    return [(out[i], k[0]) for i, k in ranked] + [
        (out[i], None) for i, k in enumerate(keys) if k is None
    ]


def node_hits(hits: Iterable[FocusHit], node: TocNode) -> list[FocusHit]:
    """The hits inside ``node``: its span ``[start, end)``, and its session for a segment (the
    sessions of one busy hour overlap in time)."""
    session = node.session_id if node.level == "segment" else None
    return [
        h
        for h in hits
        if node.start_ms <= h.ts_ms < node.end_ms and (session is None or h.session_id == session)
    ]


def snippet(
    store: Store,
    counter: TokenCounter,
    hits: Sequence[FocusHit],
    terms: Set[str],
    limit: int = SNIPPET_TOKENS,
    *,
    said: Set[str] = frozenset(),
) -> str | None:
    """The evidence behind the best of ``hits``, quoted: its event's passage (of at most
    ``limit`` tokens) holding most of the focus's key ``terms``, on one line, "…" marking what
    is left out — what a search result's snippet is, so an agent reads the answer where the
    listing points to it. A quote in ``said`` (already shown above it: a resumed session
    repeats its predecessor's summary) gives way to the next hit's; None without hits, or
    when no event is left to quote."""
    ranked_hits = sorted((h for h in hits if h.event_id), key=lambda h: -h.score)
    for hit in ranked_hits[:SNIPPET_TRIES]:
        try:
            text = store.get_event(hit.event_id).text.strip()
        except NotFoundError:
            continue
        ranked = rank_passages(set(terms), split_passages(text, counter, limit)) if text else []
        if not ranked:
            continue
        shown, _ = passages_text(text, [ranked[0][0]])
        quote = " ".join(shown.split())
        if quote not in said:
            return quote
    return None
