"""What a drill-down returns (``memtoc.retrieval.drill``): the levels it walks, each level's
depth boost, the candidates it scored and kept, and the result with its path and fallback."""

from __future__ import annotations

from dataclasses import dataclass

from memtoc.model import JsonValue, TocNode
from memtoc.retrieval.tiers import SearchItem

LEVEL_ORDER: tuple[str, ...] = ("year", "month", "week", "day", "segment")
DEPTH_BOOST: dict[str, float] = {
    "year": 0.6,
    "month": 0.7,
    "week": 0.8,
    "day": 0.9,
    "segment": 1.0,
}


@dataclass(frozen=True, slots=True)
class Scored:
    """A candidate node, the window it was searched in and its similarities."""

    node: TocNode
    window: tuple[int, int]
    own: float
    evidence: float

    @property
    def similarity(self) -> float:
        return max(self.own, self.evidence)

    @property
    def score(self) -> float:
        return self.similarity * DEPTH_BOOST[self.node.level]


@dataclass(frozen=True, slots=True)
class DrillStep:
    """One level of the drill: how many candidates were scored and which were kept."""

    level: str
    candidates: int
    chosen: tuple[Scored, ...]

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "level": self.level,
            "candidates": self.candidates,
            "chosen": [
                {
                    "node_id": s.node.node_id,
                    "project": s.node.project,
                    "title": s.node.title,
                    "score": round(s.score, 6),
                    "own": round(s.own, 6),
                    "evidence": round(s.evidence, 6),
                }
                for s in self.chosen
            ],
        }


@dataclass(frozen=True, slots=True)
class DrillResult:
    """What ``drill`` returns: the path taken, the items, and whether it fell back."""

    query: str
    depth: str
    path: tuple[DrillStep, ...]
    items: tuple[SearchItem, ...]
    fallback: tuple[str, ...] = ()
    """Cascade stages that contributed items (``range``, ``flat``); empty: the drill alone."""
    reason: str | None = None
    """Why the drill's own items were dropped, else None."""
    time_range: dict[str, JsonValue] | None = None
    degraded: str | None = None

    @property
    def tokens(self) -> int:
        return sum(item.tokens for item in self.items)

    @property
    def chosen_segments(self) -> tuple[Scored, ...]:
        return next((s.chosen for s in self.path if s.level == "segment"), ())

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "query": self.query,
            "depth": self.depth,
            "path": [step.to_dict() for step in self.path],
            "fallback": list(self.fallback),
            "reason": self.reason,
            "time_range": self.time_range,
            "degraded": self.degraded,
            "tokens": self.tokens,
            "items": [item.to_dict() for item in self.items],
        }
