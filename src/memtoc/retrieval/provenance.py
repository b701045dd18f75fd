"""Which summariser built the summaries a result shows — so a degraded one is never silent.

A node records the backend that built it (``summarizer``) and, when an LLM backend failed and the
extractive fallback built it instead, why (``degraded``). ``summary_provenance`` looks at the node
items of a search or recall result: summaries built by the fallback, or by another backend than
the configured one (history summarised before the summariser was switched), are listed in the
result's ``summaries`` field and named in its ``degraded`` text, with the command that
re-summarises them. The renderer records each shown summary's backend on its item
(``SearchItem.built_by``), so this costs no store read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memtoc.model import JsonValue
from memtoc.retrieval.tiers import SearchItem

HINT = "`memtoc rebuild --summaries` re-summarises them"


@dataclass(frozen=True, slots=True)
class SummaryProvenance:
    """The node items of a result whose summaries are not the configured backend's own."""

    configured: str
    degraded: tuple[str, ...]
    reason: str | None
    other: dict[str, str]
    """Node id → the other backend that built it."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "configured": self.configured,
            "degraded": list(self.degraded),
            "degraded_reason": self.reason,
            "other_backend": dict(self.other),
        }

    def describe(self) -> str:
        parts = []
        if self.degraded:
            parts.append(
                f"summaries degraded: {len(self.degraded)} of the results' summaries were built by "
                f"the extractive fallback ({self.reason})"
            )
        if self.other:
            backends = ", ".join(sorted(set(self.other.values())))
            parts.append(
                f"summaries stale: {len(self.other)} of the results' summaries were built by "
                f"{backends}, not the configured {self.configured}"
            )
        return "; ".join(parts) + f"; {HINT}"


def summary_provenance(items: Iterable[SearchItem], configured: str) -> SummaryProvenance | None:
    """The provenance problems of the summaries ``items`` show (node items at L0/L1, which carry
    ``built_by``), or None when every one is the configured backend's own."""
    degraded: list[str] = []
    reason: str | None = None
    other: dict[str, str] = {}
    for item in items:
        if item.built_by is None:
            continue
        summarizer, why = item.built_by
        if why:
            degraded.append(item.id)
            reason = reason or why
        elif summarizer != configured:
            other[item.id] = summarizer
    if not degraded and not other:
        return None
    return SummaryProvenance(configured, tuple(degraded), reason, other)
