"""Retrieval metrics for the evaluation harness: pure functions over ranked ids and budgeted items.

Definitions (used by every benchmark adapter, and documented in ``docs/benchmarks.md``):

- **Ranked turns** of a result list are the event ids of its items in order, duplicates dropped
  (first appearance wins): a mode that returns a turn twice does not use two of its ``k`` slots.
- **recall@k**: the fraction of a question's *distinct* gold ids among the first ``k`` ranked ids.
- **Budget cut**: items are taken in order while their tokens fit the budget; the first item that
  does not fit is cut to the tokens left, and the cut ends the context. An event counts as
  *returned* only when its full text lies inside the returned context: for a whole item, when its
  text contains the event's text; for the cut item, when the prefix of the item's text up to the
  end of the event's text fits in the tokens left (token counts use the one ``TokenCounter``).
- **Sessions**: ranked sessions are the sessions of the ranked turns, duplicates dropped
  (as LongMemEval maps turn rankings to session rankings); session recall@k is computed on them.
- **recall_any@k / recall_all@k**: 1.0 if any / all gold sessions are among the first ``k``.
- **NDCG@k**: binary relevance, DCG = sum over ranks i (1-based) of rel_i / log2(i + 1), divided by
  the DCG of the ideal ranking (all gold first).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from memtoc.text.tokens import TokenCounter


class BudgetItem(Protocol):
    """What the budget cut needs from a retrieved item."""

    @property
    def text(self) -> str: ...

    @property
    def event_ids(self) -> Sequence[str]: ...

    @property
    def tokens(self) -> int: ...


def dedupe(ids: Iterable[str]) -> list[str]:
    """``ids`` in order of first appearance, each once."""
    return list(dict.fromkeys(ids))


def ranked_events(items: Iterable[BudgetItem]) -> list[str]:
    """The event ids of ``items`` in order, each once."""
    return dedupe(e for item in items for e in item.event_ids)


def recall_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Fraction of the distinct ``gold`` ids among the first ``k`` distinct ``ranked`` ids.

    An empty gold set has no recall to measure: callers skip such questions, and this returns 0.
    """
    wanted = set(gold)
    if not wanted:
        return 0.0
    top = set(dedupe(ranked)[:k])
    return len(wanted & top) / len(wanted)


def recall_any_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if any gold id is among the first ``k`` distinct ranked ids, else 0.0."""
    top = set(dedupe(ranked)[:k])
    return 1.0 if set(gold) & top else 0.0


def recall_all_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if every gold id is among the first ``k`` distinct ranked ids, else 0.0."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    return 1.0 if wanted <= set(dedupe(ranked)[:k]) else 0.0


def ndcg_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Binary-relevance NDCG over the first ``k`` distinct ranked ids (0.0 for an empty gold set)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    top = dedupe(ranked)[:k]
    dcg = sum(1.0 / math.log2(i + 2) for i, rid in enumerate(top) if rid in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(wanted), k)))
    return dcg / ideal


def sessions_of(ranked_events: Sequence[str], session_of: Mapping[str, str]) -> list[str]:
    """The sessions of ``ranked_events`` in order of first appearance (unknown events skipped)."""
    return dedupe(session_of[e] for e in ranked_events if e in session_of)


@dataclass(frozen=True, slots=True)
class BudgetCut:
    """What a context cut to a token budget holds: events returned whole, and tokens used."""

    event_ids: tuple[str, ...]
    tokens: int


def budget_cut(
    items: Iterable[BudgetItem],
    budget: int,
    counter: TokenCounter,
    event_text: Mapping[str, str],
) -> BudgetCut:
    """Cut ``items`` to ``budget`` tokens (see the module docstring for the rules).

    ``event_text`` gives each event's text; an event whose text is unknown or not found in its
    item's text does not count as returned.
    """
    used = 0
    returned: list[str] = []
    for item in items:
        left = budget - used
        if left <= 0:
            break
        if item.tokens <= left:
            used += item.tokens
            returned.extend(
                e for e in item.event_ids if e in event_text and event_text[e] in item.text
            )
            continue
        # The partial last item: keep the events whose text ends inside the prefix that fits.
        pos = 0
        fitted_end = 0
        for e in item.event_ids:
            text = event_text.get(e)
            if text is None:
                continue
            start = item.text.find(text, pos)
            if start < 0:
                continue
            end = start + len(text)
            if counter.count(item.text[:end]) > left:
                break
            returned.append(e)
            fitted_end = end
            pos = end
        used += counter.count(item.text[:fitted_end]) if fitted_end else 0
        break
    return BudgetCut(tuple(dedupe(returned)), used)


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean; 0.0 for no values."""
    return math.fsum(values) / len(values) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
