"""Baseline modes over a project's turns (events), run beside memtoc's own modes.

- ``bm25``: SQLite FTS5 over the events' text (``events_fts``, porter + unicode61), the query is
  the OR of the question's word terms, each quoted (so any text is a valid query), ranked by
  ``bm25()``. No stopword list: BM25's IDF already weighs common words down.
- ``dense``: exact cosine between the question and every turn (one matrix product).
- ``hybrid-rrf``: reciprocal-rank fusion of ``bm25`` and ``dense``: score = sum 1/(60 + rank).
- ``recency-dense``: cosine (clipped at 0) x a recency weight
  ``w = 0.5 + 0.5 · 2^(-age_days / 30)``: a turn from the reference time keeps its full
  similarity, a month-old one 75 %, a very old one 50 % — a mild decay, as for bookmarks.
- ``bookmark-first``: registered only when ``memtoc.retrieval.bookmarks`` exists: the project's
  stored bookmarks scored by their decayed importance x similarity, their events first, then
  ``dense`` to fill.

Each turn is one item: its event's text, its token count from the one counter. Per-project state
(turn texts, token counts, the embedding matrix) is built once in ``prepare``.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memtoc.errors import QueryError, StoreError
from memtoc.eval.metrics import dedupe
from memtoc.eval.modes import (
    ModeContext,
    RetrievedItem,
    note_unregistered,
    register_mode,
)
from memtoc.memory import Memory
from memtoc.model import Event
from memtoc.retrieval.teleport import SearchFilters, bm25_search
from memtoc.retrieval.vectors import cosine_scores
from memtoc.store.sqlite import SqliteStore

RRF_K = 60
RECENCY_HALF_LIFE_DAYS = 30.0
RECENCY_FLOOR = 0.5
_DAY_MS = 86_400_000
_TERM = re.compile(r"\w+")


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any word of ``text`` (quoted terms joined by OR); None if no words."""
    terms = dedupe(t.lower() for t in _TERM.findall(text))
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def recency_weight(ts_ms: npt.NDArray[np.int64], ref_ms: int) -> npt.NDArray[np.float32]:
    """``0.5 + 0.5 · 2^(-age_days / 30)`` (future instants count as age 0)."""
    age_days = np.maximum(ref_ms - ts_ms, 0) / _DAY_MS
    decay = np.power(0.5, age_days / RECENCY_HALF_LIFE_DAYS)
    return (RECENCY_FLOOR + (1.0 - RECENCY_FLOOR) * decay).astype(np.float32)


@dataclass
class Turns:
    """A project's events as retrieval units: ids, texts, tokens, timestamps, FTS lookups."""

    memory: Memory
    project: str
    events: list[Event]
    tokens: list[int]
    index: dict[str, int]
    seq_index: dict[int, int]

    @classmethod
    def load(cls, memory: Memory, project: str) -> Turns:
        events = memory.events(project=project)
        tokens = [memory.counter.count(e.text) for e in events]
        index = {e.event_id: i for i, e in enumerate(events)}
        seq_index: dict[int, int] = {}
        if isinstance(memory.store, SqliteStore):
            seqs = memory.store.connection.execute(
                "SELECT event_id, seq FROM events WHERE project = ?", (project,)
            ).fetchall()
            seq_index = {int(seq): index[eid] for eid, seq in seqs if eid in index}
        return cls(memory, project, events, tokens, index, seq_index)

    @property
    def texts(self) -> list[str]:
        return [e.text for e in self.events]

    @property
    def ts_ms(self) -> npt.NDArray[np.int64]:
        return np.array([e.ts_ms for e in self.events], dtype=np.int64)

    def item(self, i: int) -> RetrievedItem:
        e = self.events[i]
        return RetrievedItem(e.text, (e.event_id,), self.tokens[i])

    def bm25(self, query: str, limit: int) -> list[int]:
        """Indexes of the turns matching ``query``, best BM25 first (ties: earlier first)."""
        match = fts_query(query)
        if match is None:
            return []
        store = self.memory.store
        if not isinstance(store, SqliteStore):  # team mode: the PostgreSQL store's full text
            hits = bm25_search(
                store, query, SearchFilters(projects=(self.project,), kinds=("event",)), limit=limit
            )
            return [self.index[h.item_id] for h in hits if h.item_id in self.index]
        try:
            rows = store.connection.execute(
                "SELECT events_fts.rowid FROM events_fts JOIN events e ON e.seq = events_fts.rowid "
                "WHERE events_fts MATCH ? AND e.project = ? "
                "ORDER BY bm25(events_fts), events_fts.rowid LIMIT ?",
                (match, self.project, limit),
            ).fetchall()
        except Exception as exc:  # sqlite3.Error: an FTS query we built must never fail
            raise StoreError(f"BM25 query {match!r} failed: {exc}") from exc
        return [self.seq_index[r[0]] for r in rows if r[0] in self.seq_index]


class _TurnMode:
    """Shared plumbing: per-project ``Turns`` (and the turn matrix when ``dense``)."""

    name = "turns"
    dense = False

    def __init__(self, ctx: ModeContext) -> None:
        self.ctx = ctx
        if self.dense:
            ctx.require_embedder()
        self.turns: dict[str, Turns] = {}

    def prepare(self, memory: Memory, project: str) -> None:
        self.turns = {project: Turns.load(memory, project)}
        if self.dense:
            self.matrix(project)

    def _turns(self, project: str) -> Turns:
        try:
            return self.turns[project]
        except KeyError:
            raise QueryError(f"mode {self.name}: project {project!r} was not prepared") from None

    def matrix(self, project: str) -> npt.NDArray[np.float32]:
        return self.ctx.embed_texts((project, "turns"), self._turns(project).texts)

    def similarities(self, query: str, project: str) -> npt.NDArray[np.float32]:
        return cosine_scores(self.matrix(project), self.ctx.embed_query(query))

    def items(self, project: str, order: list[int], k: int) -> list[RetrievedItem]:
        turns = self._turns(project)
        return [turns.item(i) for i in order[:k]]


def _top(scores: npt.NDArray[np.float32], k: int) -> list[int]:
    """Indexes of the ``k`` highest scores, best first; ties go to the earlier turn."""
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in order[:k]]


class Bm25Mode(_TurnMode):
    name = "bm25"

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        return self.items(project, self._turns(project).bm25(query, k), k)


class DenseMode(_TurnMode):
    name = "dense"
    dense = True

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        return self.items(project, _top(self.similarities(query, project), k), k)


def rrf(rankings: list[list[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: ids by descending sum of 1/(k + rank) (rank from 1); stable."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, start=1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: -scores[i])


class HybridRrfMode(_TurnMode):
    name = "hybrid-rrf"
    dense = True

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        turns = self._turns(project)
        depth = max(k, 200)
        lexical = turns.bm25(query, depth)
        semantic = _top(self.similarities(query, project), depth)
        return self.items(project, rrf([lexical, semantic]), k)


class RecencyDenseMode(_TurnMode):
    name = "recency-dense"
    dense = True

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        sims = np.maximum(self.similarities(query, project), 0.0)
        weights = recency_weight(self._turns(project).ts_ms, ref_ms)
        return self.items(project, _top(sims * weights, k), k)


class BookmarkFirstMode(_TurnMode):
    """Bookmarks first (``effective_importance`` x similarity), then dense turns to fill.

    ``effective_importance`` is the bookmarks module's importance with its decay at the reference
    time. With no bookmarks in a project's store this is exactly ``dense``; ``notes()`` says how
    many bookmarks the run saw, so a report cannot pass that off as a bookmark result.
    """

    name = "bookmark-first"
    dense = True
    max_bookmarks = 5

    def __init__(self, ctx: ModeContext) -> None:
        super().__init__(ctx)
        self.seen_bookmarks = 0
        self.projects_without = 0

    def prepare(self, memory: Memory, project: str) -> None:
        super().prepare(memory, project)
        count = len(memory.store.list_bookmarks(project))
        self.seen_bookmarks += count
        self.projects_without += count == 0

    def tally(self) -> dict[str, int]:
        return {"seen": self.seen_bookmarks, "without": self.projects_without}

    def absorb(self, tally: dict[str, int]) -> None:
        self.seen_bookmarks += tally["seen"]
        self.projects_without += tally["without"]

    def notes(self) -> list[str]:
        return [
            f"{self.name}: {self.seen_bookmarks} bookmarks in the stores; "
            f"{self.projects_without} projects had none (there it equals dense)"
        ]

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        from memtoc.retrieval.bookmarks import effective_importance

        turns = self._turns(project)
        marks = turns.memory.store.list_bookmarks(project)
        out: list[RetrievedItem] = []
        seen: set[str] = set()
        if marks:
            vecs = self.ctx.embed_texts((project, "bookmarks"), [b.content for b in marks])
            sims = np.maximum(cosine_scores(vecs, self.ctx.embed_query(query)), 0.0)
            weight = np.array([effective_importance(b, ref_ms) for b in marks], np.float32)
            scores = weight * sims
            for j in _top(scores, self.max_bookmarks):
                if scores[j] <= 0:
                    break
                ids = tuple(e for e in marks[j].event_ids if e in turns.index and e not in seen)
                if not ids:
                    continue
                texts = [turns.events[turns.index[e]].text for e in ids]
                text = "\n".join([marks[j].content, *texts])
                out.append(RetrievedItem(text, ids, self.ctx.counter.count(text)))
                seen.update(ids)
        for i in _top(self.similarities(query, project), k + len(seen)):
            if turns.events[i].event_id not in seen:
                out.append(turns.item(i))
        return out


register_mode("bm25", Bm25Mode)
register_mode("dense", DenseMode)
register_mode("hybrid-rrf", HybridRrfMode)
register_mode("recency-dense", RecencyDenseMode)
if importlib.util.find_spec("memtoc.retrieval.bookmarks") is not None:
    register_mode("bookmark-first", BookmarkFirstMode)
else:
    note_unregistered(
        "bookmark-first", "memtoc.retrieval.bookmarks does not exist yet (no bookmarks to rank)"
    )
