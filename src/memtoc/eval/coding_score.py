"""Scoring for ``memtoc eval coding``: gold quotes inside returned items, within a token budget.

The rule is the corpora's (``shared/datasets/coding/README.md``): a question is *answered* when
its gold quote(s) appear, whitespace-normalised (runs of whitespace collapsed to one space, ends
stripped) and case-insensitive, inside the text of **one** returned item — a quote whose halves
sit in two items does not count, since the agent could not read it as one piece of evidence.
``need = "any"``: one quote is enough; ``need = "all"``: every quote must be found (each in some
item, not necessarily the same one).

Also here: the packing every baseline shares (whole events by rank until the budget, see
``pack_whole``) and the checks the eval runs on every answer (budget, citations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from memtoc.text.tokens import TokenCounter

SEPARATOR = "\n"
"""How a method's items are joined into the context an agent reads (recall joins the same way)."""
MIN_LEFT = 3
"""Packing stops when fewer tokens than this are left (no event is that small)."""


def norm(text: str) -> str:
    """Whitespace collapsed to single spaces, ends stripped, lower-cased (the scoring rule)."""
    return " ".join(text.split()).lower()


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One returned piece of context: its text and the events it cites (included or referenced)."""

    text: str
    event_ids: tuple[str, ...]
    tokens: int


def quote_positions(quotes: Sequence[str], items: Sequence[ContextItem]) -> list[int | None]:
    """For each quote, the 1-based position of the first item whose text holds it whole (None
    when no single item does)."""
    texts = [norm(item.text) for item in items]
    out: list[int | None] = []
    for quote in quotes:
        q = norm(quote)
        out.append(next((n for n, t in enumerate(texts, start=1) if q and q in t), None))
    return out


def is_answered(need: str, positions: Sequence[int | None]) -> bool:
    """``need = "all"``: every quote found; otherwise (``"any"``) at least one."""
    found = [p is not None for p in positions]
    return all(found) if need == "all" else any(found)


def context_tokens(items: Sequence[ContextItem], counter: TokenCounter) -> int:
    """Tokens of the context the agent reads: the items' texts joined by newlines."""
    return counter.count(SEPARATOR.join(i.text for i in items)) if items else 0


def pack_whole(
    ranked: Iterable[int],
    text_of: Callable[[int], str],
    tokens_of: Callable[[int], int],
    event_id_of: Callable[[int], str],
    budget: int,
    counter: TokenCounter,
) -> list[ContextItem]:
    """Whole events in rank order while they fit ``budget`` (the baselines' packing).

    An event too long for the tokens left is **skipped** and the next one tried (never cut: a
    baseline returns events, not fragments), until fewer than ``MIN_LEFT`` tokens are left or the
    ranking ends. Each item after the first costs a separator. The joined context is counted once
    more at the end and the last item dropped while it is over (tokenisation across a separator
    can differ from the sum of the parts), so the budget is never exceeded.
    """
    sep = counter.count(SEPARATOR)
    items: list[ContextItem] = []
    used = 0
    for i in ranked:
        left = budget - used
        if left < MIN_LEFT:
            break
        cost = tokens_of(i) + (sep if items else 0)
        if cost > left:
            continue
        items.append(ContextItem(text_of(i), (event_id_of(i),), tokens_of(i)))
        used += cost
    while items and context_tokens(items, counter) > budget:
        items.pop()
    return items


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken contract seen by the eval: what, for which question, method and budget."""

    kind: str
    """``budget`` (the context is over budget) or ``citation`` (an event id that does not
    resolve in the store)."""
    qid: str
    method: str
    budget: int
    detail: str


def budget_violation(
    items: Sequence[ContextItem], budget: int, counter: TokenCounter, reported: int | None = None
) -> str | None:
    """Why the context breaks ``budget`` (its own count, or the count the method reported), or
    None when it fits."""
    counted = context_tokens(items, counter)
    if counted > budget:
        return f"context counts {counted} tokens > budget {budget}"
    if reported is not None and reported > budget:
        return f"method reported {reported} tokens > budget {budget}"
    return None


def unresolved(
    items: Sequence[ContextItem], known: Callable[[Sequence[str]], set[str]]
) -> list[str]:
    """The cited event ids that ``known`` (ids → those found in the store) does not resolve."""
    cited = list(dict.fromkeys(e for item in items for e in item.event_ids))
    found = known(cited) if cited else set()
    return [e for e in cited if e not in found]
