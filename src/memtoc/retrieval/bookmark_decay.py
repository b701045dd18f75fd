"""A bookmark's importance as time passes: what ranks bookmarks in the session-start context and
the bookmark listings. Apart from the detector (``bookmarks``, whose cue patterns take a short
command's start-up to compile) so that ``memtoc context`` and the hooks import only this."""

from __future__ import annotations

from memtoc.model import Bookmark

DECAY_HALF_LIFE_DAYS = 90.0
DECAY_FLOOR = 0.2
_DAY_MS = 86_400_000


def effective_importance(bookmark: Bookmark, now_ms: int) -> float:
    """Importance with decay: half-life 90 days from ``last_relevant_ms``, floor 0.2 of it."""
    age_days = max(0, now_ms - bookmark.last_relevant_ms) / _DAY_MS
    factor = max(DECAY_FLOOR, float(0.5 ** (age_days / DECAY_HALF_LIFE_DAYS)))
    return bookmark.importance * factor
