"""Teleport: BM25 over TOC nodes, grips, bookmarks and events, with filters (DESIGN §5).

Each store ranks its own text indexes — docs (nodes, grips, bookmarks) and events — AND-first,
scores normalised to 0..1 per index (``Stores`` below); a query with no searchable term returns
nothing, and any user text is a valid query.

Filters
-------
``projects`` (any of), ``kinds``, ``levels`` (nodes only: other kinds pass), ``since_ms`` /
``until_ms`` (events and grips by time, nodes by overlap of their span, bookmarks by creation),
``session_id`` (events, grips, segment nodes; period nodes and bookmarks have no session and are
left out), ``role`` (events only: other kinds are left out).

Stores
------
Ranking is a store capability (``TextRanking``, ``store/capabilities.py``): the SQLite store ranks
its FTS5 indexes (``store/sqlite/search.py``: ``bm25()`` over quoted, code-aware expressions,
AND-first, then pairs, then OR), the PostgreSQL store its ``tsvector`` indexes
(``store/postgres/search.py``: the same filters, passes and 0..1 normalisation). This module holds
what both share: the filters' validation, the merge of both indexes, and the ``Hit`` type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memtoc.errors import QueryError
from memtoc.model import LEVELS, ROLES
from memtoc.store.capabilities import (
    DEFAULT_SCAN_CAP,
    DOC_KINDS,
    OR_ONLY_FACTOR,
    SearchStore,
    TextRanking,
    TextScope,
)
from memtoc.text.fts_text import build_match

__all__ = [
    "DEFAULT_SCAN_CAP",
    "DOC_KINDS",
    "KINDS",
    "OR_ONLY_FACTOR",
    "Hit",
    "SearchFilters",
    "SearchStore",
    "bm25_search",
    "filter_keys",
]

KINDS: tuple[str, ...] = ("node", "grip", "bookmark", "event")


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """What a search may return. ``None`` means no restriction."""

    projects: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    levels: tuple[str, ...] | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    session_id: str | None = None
    role: str | None = None

    def __post_init__(self) -> None:
        for name, values, known in (
            ("kind", self.kinds, KINDS),
            ("level", self.levels, LEVELS),
        ):
            bad = [v for v in values or () if v not in known]
            if bad:
                raise QueryError(f"unknown {name} {bad[0]!r} (expected one of {', '.join(known)})")
        if self.role is not None and self.role not in ROLES:
            raise QueryError(f"unknown role {self.role!r} (expected one of {', '.join(ROLES)})")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.until_ms <= self.since_ms
        ):
            raise QueryError("empty time range: --until must be after --since")

    def effective_kinds(self) -> tuple[str, ...]:
        """The kinds that can match: a role filter only fits events, a level filter (without
        explicit kinds) means nodes, a session filter rules bookmarks out."""
        kinds = self.kinds or (("node",) if self.levels else KINDS)
        if self.role is not None:
            kinds = tuple(k for k in kinds if k == "event")
        if self.session_id is not None:
            kinds = tuple(k for k in kinds if k != "bookmark")
        return tuple(k for k in KINDS if k in kinds)


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked item: which index row it is and its scores."""

    kind: str
    project: str
    item_id: str
    ts_ms: int
    score: float
    """Normalised to 0..1 (see the module docstring)."""
    raw: float = 0.0
    """The method's own score (``-bm25()``, or a cosine), for diagnostics."""
    every_term: bool = False
    """A BM25 hit found by the AND pass: it holds every term of the query."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.project, self.item_id)


def _scope(f: SearchFilters) -> TextScope:
    """The filters as the store's text ranking takes them (kinds apart)."""
    return TextScope(f.projects, f.levels, f.since_ms, f.until_ms, f.session_id, f.role)


def bm25_search(
    store: TextRanking,
    query: str,
    filters: SearchFilters | None = None,
    *,
    limit: int = 10,
    candidates: int | None = None,
    scan_cap: int = DEFAULT_SCAN_CAP,
) -> list[Hit]:
    """The best ``limit`` items for ``query`` by BM25, scores in 0..1, best first.

    ``candidates`` caps the rows taken from each index (default ``max(3 * limit, 30)``); the
    result merges both indexes by normalised score.
    """
    if limit <= 0:
        return []
    f = filters or SearchFilters()
    if build_match(query) is None:
        return []
    cap = candidates if candidates is not None else max(3 * limit, 30)
    rows = store.rank_text(
        query, kinds=f.effective_kinds(), scope=_scope(f), candidates=cap, scan_cap=scan_cap
    )
    hits = [Hit(*row) for row in rows]
    hits.sort(key=lambda h: (-h.score, -h.raw, h.kind, h.item_id))
    return hits[:limit]


def filter_keys(
    store: TextRanking, keys: Sequence[tuple[str, str, str]], filters: SearchFilters
) -> set[tuple[str, str, str]]:
    """The keys (kind, project, item id) among ``keys`` that pass ``filters`` — the same rules as
    ``bm25_search``, for hits found another way (vector search)."""
    return store.keep_keys(keys, kinds=filters.effective_kinds(), scope=_scope(filters))
