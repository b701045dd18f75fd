"""Recall's ranking: which events, grips/segments and bookmarks best answer a question.

Stages, cheapest first (each later one is skipped once the time limit is reached, and the result
says so):

1. **BM25 over events** (``teleport.bm25_search``, ``pool`` candidates) — always runs.
2. **Vectors over events** (the embedder's cosine, ``pool`` candidates).
3. **Expansion**: BM25 over the vocabulary words nearest the question's content words
   (``recall_expand``: "martial" → "taekwondo", "european" → "spain"), static embedders only.
   This search ranks at most ``expand_scan_cap`` rows per expression (search's cap is larger).
   The lists are fused by weighted reciprocal rank: an event at rank ``r`` of a list earns
   ``w / (rrf_k + r)``; the best fused event scores 1.0 before the boosts below are added.
4. **Grips and segments** (BM25 over the ``docs`` index, segment nodes and grips; vectors over
   segment nodes):
   the events a matching grip covers or a matching segment holds get ``w_doc *`` its score.
5. **Session evidence**: an event's session scores the sum of its best ``session_top`` event
   scores; every candidate gets ``w_session *`` its session's (normalised) score. A question's
   evidence tends to sit together, so a turn in a session with several hits beats an isolated one.
6. **Neighbours**: the turns adjacent (in its session) to each of the ``neighbours`` strongest
   hits join with ``w_neighbour *`` that hit's score — answers often follow the question's turn.
   Turns are user and assistant messages: the tool calls and outputs between two turns are not
   one (an agent's conclusion sits after ten tool steps, still the next turn). An agent's turn
   also neighbours the user's message it answers, however many of the agent's own turns and
   tool steps come between: the agent's account repeats the question's words ("Skipping Cursor.
   Gemini reconstruction it is"), the instruction it carries out ("Let's skip Cursor for now and
   focus on Gemini.") is in the user's own words.
   **Replies**: a hit among the ``replies`` strongest that asks a question (its text ends with
   "?": "What else do you guys like doing together?") passes ``w_reply *`` its score on to the
   next turn of its session, the answer — a question matches the words of a question about the
   same thing, while the fact asked for is in the reply (on LoCoMo the turn after a top-8 hit
   ending in "?" is gold 13-17 % of the time, after any other hit 1-3 %). An agent's turn among
   them passes it to the user's next turn the same way: the user decides, corrects or confirms
   what the agent proposed ("no, keep the old schema"), in words of its own — the user's next
   message, after however many of the agent's own turns ("Builds clean.") come between.
7. **Time** (``recall_time``): with a time expression in the question ("last week", "in March")
   an extra BM25/vector pass restricted to its window brings in-window events into the pool;
   events told inside the window get ``+ w_time``, events whose own words name a time inside it
   ("yesterday I went bowling", told the day after) ``+ w_mention``. A question asking *when*
   gives the turns that carry a time expression ``+ w_when``.
8. **Speaker, substance and tools** (``recall_subject``): a turn spoken by a participant the
   question names ("What does Melanie like?" — Melanie's own turns, not "Thanks, Melanie!") gets
   ``+ w_speaker``; every turn's score is multiplied by its substance prior, ``((min(n, full) + 1)
   / (full + 1)) ** power`` for ``n`` content words, so chit-chat does not crowd the budget; a
   tool call or output (or a system event) is multiplied by ``w_tool``: it is the agent's working
   material, long and repeated, and shares the question's words with every other read of the same
   file, while what a person asks about was said in the turns around it. So is an agent's turn
   that only narrates its next step ("Now let me run the tests:", ``recall_subject.narrates``).
9. **Bookmarks**: those matching the query (every term by BM25, or cosine ≥ ``bookmark_cosine``)
   are ranked with the events (``recall._units``): a bookmark is a sentence or two citing its
   events, at its match score times the best event's. They were once pinned ahead of all evidence
   with their whole events, which spent most of a budget on the few long turns a bookmark cites.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo

from memtoc.errors import NotFoundError
from memtoc.model import Event
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall_expand import ExpandConfig, expansion_terms
from memtoc.retrieval.recall_subject import (
    asks_question,
    named_speakers,
    narrates,
    speaker,
    substance,
)
from memtoc.retrieval.recall_time import asks_when, carries_time, mentions_window
from memtoc.retrieval.teleport import Hit, SearchFilters, bm25_search
from memtoc.retrieval.tiers import grip_events
from memtoc.store.capabilities import SearchStore

USER = "user_message"
AGENT = "assistant_message"
TURN_TYPES = (USER, AGENT)
"""A conversation's turns (stages 6 and 8); tool calls and outputs and system events sit between."""
SEGMENT_PREFIX = "toc:segment:"
"""Segment node ids start so (``toc:{level}:{period}``, DESIGN §2)."""
Key = tuple[str, str, str]
"""(kind, project, item id), as search hits name items."""


@dataclass(frozen=True, slots=True)
class RankConfig:
    """Weights and depths of recall's ranking (see the module docstring).

    Defaults tuned on LoCoMo (docs/benchmarks.md, "Recall"), a change kept only when it helped
    both halves of the dataset (conversations 0-4 and 5-9): a small ``rrf_k`` (10, not search's
    60) lets the head of each list count; vectors weigh 0.6 of BM25 with the static model and the
    expansion list 0.5; a session's evidence adds up to 0.5 (0.7 before the speaker and substance
    priors); neighbours of a hit join at 0.6 of its score, and the reply to one of the 24 best
    hits that asks a question at 0.8 of it (0.8-1.0 and 16-32 hits all scored alike). A turn by a
    speaker the question names gains 0.2; a turn with ``n`` < 7 content words keeps
    ``((n + 1) / 8) ** 0.5`` of its score.
    """

    pool: int = 60
    rrf_k: float = 10.0
    w_bm25: float = 1.0
    w_vec: float = 0.6
    w_expand: float = 0.5
    expand: ExpandConfig = field(default_factory=ExpandConfig)
    expand_scan_cap: int = 2_000
    """Scan cap of the expansion's BM25 search (search's own is ``DEFAULT_SCAN_CAP``, 5,000):
    its up to 30 alternative words make the widest OR expression recall ranks, and a word
    matching more rows than this says little about a question. At 1M events the expansion
    search took 8.5 ms CPU a question on average, up to 26 ms; 3.6 ms with this cap
    (docs/benchmarks.md, "Query")."""
    w_doc: float = 0.1
    docs: int = 5
    w_session: float = 0.5
    session_top: int = 3
    neighbours: int = 8
    w_neighbour: float = 0.6
    replies: int = 24
    """The strongest hits whose reply joins when they ask a question (stage 6)."""
    w_reply: float = 0.8
    w_time: float = 0.5
    w_mention: float = 1.0
    w_when: float = 0.2
    time_candidates: int = 100
    """Candidates (best first) whose text is parsed for time expressions (``recall_time``)."""
    w_tool: float = 0.5
    """A tool call's or output's share of its score (stage 8): the agent's working material —
    long, repetitive (the same file read ten times), rarely what a person asks about; what was
    concluded from it is in the turns around it."""
    w_speaker: float = 0.2
    substance_words: int = 7
    substance_power: float = 0.5
    bookmarks: int = 3
    bookmark_cosine: float = 0.75


class Deadline:
    """A time limit measured on a monotonic timer (injectable for tests)."""

    def __init__(
        self, limit_ms: float | None, timer: Callable[[], float] = time.perf_counter
    ) -> None:
        self.timer = timer
        self.start = timer()
        self.limit_ms = limit_ms

    def elapsed_ms(self) -> float:
        return (self.timer() - self.start) * 1000.0

    def expired(self) -> bool:
        return self.limit_ms is not None and self.elapsed_ms() >= self.limit_ms


@dataclass
class Ranking:
    """What the ranking found: scored events, doc units, matching bookmarks and how it went."""

    scores: dict[str, float] = field(default_factory=dict)
    """Event id → final score (higher is better)."""
    events: dict[str, Event] = field(default_factory=dict)
    """Every scored event, loaded."""
    docs: list[tuple[Key, float, tuple[Event, ...]]] = field(default_factory=list)
    """Matching grips/segments, best first, with their events."""
    bookmarks: list[tuple[str, str, float]] = field(default_factory=list)
    """Pinned bookmarks: (project, bookmark id, score), best first."""
    bookmark_hits: list[Hit] | None = None
    """Bookmarks the docs stage's BM25 search found beside grips and segments (one search for
    both; ``None`` when it did not run)."""
    method: str = "bm25"
    stages: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Stages left out because the time limit was reached."""

    def ranked_events(self) -> list[Event]:
        """Scored events, best first (ties: earlier first)."""
        order = sorted(self.scores, key=lambda i: (-self.scores[i], self.events[i].ts_ms, i))
        return [self.events[i] for i in order]


def _rrf(lists: Sequence[tuple[float, Sequence[str]]], k: float) -> dict[str, float]:
    """Weighted reciprocal-rank fusion of ranked id lists; normalised so the best is 1.0."""
    scores: dict[str, float] = {}
    for weight, ids in lists:
        for rank, item in enumerate(dict.fromkeys(ids), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    best = max(scores.values(), default=0.0)
    return {i: s / best for i, s in scores.items()} if best > 0 else scores


class Ranker:
    """Runs the stages of the module docstring for one question."""

    def __init__(
        self,
        store: SearchStore,
        semantic: SemanticIndex | None,
        config: RankConfig,
        deadline: Deadline,
        tz: tzinfo = UTC,
    ) -> None:
        self.store = store
        self.semantic = semantic if semantic is not None and semantic.degraded is None else None
        self.cfg = config
        self.deadline = deadline
        self.tz = tz

    def _stage(self, out: Ranking, name: str) -> bool:
        """True when stage ``name`` may run; else it is recorded as skipped."""
        if self.deadline.expired():
            out.skipped.append(name)
            return False
        out.stages.append(name)
        return True

    def _vector_ids(
        self, query: str, f: SearchFilters, kinds: tuple[str, ...], k: int
    ) -> list[tuple[Key, float]]:
        if self.semantic is None:
            return []
        found = self.semantic.search(
            query,
            k,
            projects=f.projects,
            kinds=kinds,
            since_ms=f.since_ms,
            until_ms=f.until_ms,
        )
        return [((key.kind, key.project, key.item_id), cos) for key, cos in found]

    def rank(self, query: str, filters: SearchFilters, window: tuple[int, int] | None) -> Ranking:
        cfg = self.cfg
        out = Ranking(method="hybrid" if self.semantic is not None else "bm25")
        scores = self._first_pass(query, filters, window, out)
        # 4. grips and segments
        if cfg.w_doc > 0 and cfg.docs > 0 and self._stage(out, "docs"):
            self._docs(query, filters, out)
            for _key, score, events in out.docs:
                for e in events:
                    out.events.setdefault(e.event_id, e)
                    scores[e.event_id] = scores.get(e.event_id, 0.0) + cfg.w_doc * score
        # 5. session evidence
        if cfg.w_session > 0 and self._stage(out, "sessions"):
            scores = self._sessions(scores, out.events)
        # 6. neighbours
        neighbours = cfg.neighbours > 0 and cfg.w_neighbour > 0
        replies = cfg.replies > 0 and cfg.w_reply > 0
        if (neighbours or replies) and self._stage(out, "neighbours"):
            self._neighbours(scores, out)
        # 7. time
        self._time(query, window, scores, out)
        # 8. speaker and substance
        self._subject(query, scores, out)
        out.scores = scores
        # 9. bookmarks
        if cfg.bookmarks > 0 and self._stage(out, "bookmarks"):
            self._bookmarks(query, filters, out)
        return out

    def _first_pass(
        self, query: str, filters: SearchFilters, window: tuple[int, int] | None, out: Ranking
    ) -> dict[str, float]:
        """Stages 1-3: BM25, vectors and expansion over events (and inside the question's time
        window), fused; the candidates loaded into ``out.events``."""
        cfg = self.cfg
        ev = SearchFilters(projects=filters.projects, kinds=("event",))
        wf = None
        if window is not None:
            wf = SearchFilters(
                projects=filters.projects, kinds=("event",), since_ms=window[0], until_ms=window[1]
            )
        # 1. BM25 over events (always)
        out.stages.append("bm25")
        lists: list[tuple[float, Sequence[str]]] = []
        for f in (ev, wf):
            if f is not None:
                hits = bm25_search(self.store, query, f, limit=cfg.pool)
                lists.append((cfg.w_bm25, [h.item_id for h in hits]))
        # 2. vectors over events
        if self.semantic is not None and self._stage(out, "vectors"):
            for f in (ev, wf):
                if f is not None:
                    found = self._vector_ids(query, f, ("event",), cfg.pool)
                    lists.append((cfg.w_vec, [k[2] for k, _ in found]))
        # 3. expansion: BM25 over the vocabulary words nearest the question's
        if self.semantic is not None and cfg.w_expand > 0:
            terms = expansion_terms(query, self.semantic.embedder, cfg.expand)
            if terms and self._stage(out, "expand"):
                hits = bm25_search(
                    self.store, " ".join(terms), ev, limit=cfg.pool, scan_cap=cfg.expand_scan_cap
                )
                lists.append((cfg.w_expand, [h.item_id for h in hits]))
        fused = _rrf(lists, cfg.rrf_k)
        out.events = {e.event_id: e for e in self.store.get_events(fused)}
        return {i: s for i, s in fused.items() if i in out.events}

    def _time(
        self, query: str, window: tuple[int, int] | None, scores: dict[str, float], out: Ranking
    ) -> None:
        """Stage 7: told inside the question's window, naming a time inside it, carrying a time
        when the question asks *when* (``recall_time``)."""
        cfg = self.cfg
        when = cfg.w_when > 0 and asks_when(query)
        if window is None and not when:
            return
        best = sorted(scores, key=lambda i: -scores[i])[: cfg.time_candidates]
        parse = set(best) if self._stage(out, "time") else set()
        for i in scores:
            event = out.events[i]
            if window is not None:
                lo, hi = window
                if lo <= event.ts_ms < hi:
                    scores[i] += cfg.w_time
                elif i in parse and cfg.w_mention > 0 and mentions_window(event, window, self.tz):
                    scores[i] += cfg.w_mention
            if when and i in parse and carries_time(event, self.tz):
                scores[i] += cfg.w_when

    def _subject(self, query: str, scores: dict[str, float], out: Ranking) -> None:
        """Stage 8: the substance and tool priors, then ``+ w_speaker`` for the named speakers'
        turns."""
        cfg = self.cfg
        if cfg.substance_words > 0 and cfg.substance_power > 0 and self._stage(out, "substance"):
            for i in scores:
                event = out.events[i]
                scores[i] *= substance(event, cfg.substance_words, cfg.substance_power)
                if event.event_type not in TURN_TYPES or narrates(event):
                    scores[i] *= cfg.w_tool
        if cfg.w_speaker <= 0:
            return
        by = {i: speaker(out.events[i]) for i in scores}
        named = named_speakers(query, {s for s in by.values() if s is not None})
        if named and self._stage(out, "speaker"):
            for i, who in by.items():
                if who in named:
                    scores[i] += cfg.w_speaker

    def _docs(self, query: str, filters: SearchFilters, out: Ranking) -> None:
        """Grips and segment nodes by BM25 and vectors, fused; the same BM25 search also brings
        the bookmarks that match (for stage 8): one FTS query over the docs index, not two."""
        cfg = self.cfg
        f = SearchFilters(
            projects=filters.projects, kinds=("node", "grip", "bookmark"), levels=("segment",)
        )
        hits = bm25_search(self.store, query, f, limit=2 * (cfg.docs + cfg.bookmarks))
        out.bookmark_hits = [h for h in hits if h.kind == "bookmark"]
        lexical = [h.key for h in hits if h.kind != "bookmark"][: cfg.docs]
        # vectors over nodes only: grips are 3-4x as many rows and add nothing measurable
        # (LoCoMo within 1,000 tokens 0.8499 with them, 0.8495 without)
        vec = [k for k, _ in self._vector_ids(query, f, ("node",), cfg.docs * 4)]
        vec = [k for k in vec if k[2].startswith(SEGMENT_PREFIX)][: cfg.docs]
        fused: dict[Key, float] = {}
        for weight, keys in ((cfg.w_bm25, lexical), (cfg.w_vec, vec)):
            for rank, key in enumerate(keys, start=1):
                fused[key] = fused.get(key, 0.0) + weight / (cfg.rrf_k + rank)
        best = max(fused.values(), default=0.0)
        for key in sorted(fused, key=lambda k: -fused[k])[: cfg.docs]:
            events = self._doc_events(key)
            if events:
                out.docs.append((key, fused[key] / best, tuple(events)))

    def _doc_events(self, key: Key) -> list[Event]:
        kind, project, item_id = key
        try:
            if kind == "grip":
                return grip_events(self.store, self.store.get_grip(item_id))
            return self.store.segment_member_events(project, item_id)
        except NotFoundError:  # gone since it was indexed (forget, rebuild)
            return []

    def _sessions(self, scores: dict[str, float], events: dict[str, Event]) -> dict[str, float]:
        cfg = self.cfg
        per: dict[str, list[float]] = {}
        for i, s in scores.items():
            per.setdefault(events[i].session_id, []).append(s)
        sess = {k: sum(sorted(v, reverse=True)[: cfg.session_top]) for k, v in per.items()}
        best = max(sess.values(), default=0.0) or 1.0
        return {i: s + cfg.w_session * sess[events[i].session_id] / best for i, s in scores.items()}

    def _neighbours(self, scores: dict[str, float], out: Ranking) -> None:
        """Stage 6: the turns next to the strongest hits (an agent's: the user's message it
        answers too), and the replies to the hits that ask or that the user answers. Turns are
        user and assistant messages: the tool calls and outputs between two of them are not a
        turn of the conversation."""
        cfg = self.cfg
        ranked = sorted(scores, key=lambda i: -scores[i])
        top = ranked[: cfg.neighbours] if cfg.w_neighbour > 0 else []
        # the hits a reply answers, with their scores before any neighbour gain: one that asks,
        # or an agent's turn (the user's next message decides, corrects or confirms what it said)
        answered = [
            (i, scores[i])
            for i in (ranked[: cfg.replies] if cfg.w_reply > 0 else [])
            if asks_question(out.events[i]) or out.events[i].event_type == AGENT
        ]
        replies: dict[str, list[Event]] = {}
        for i in top:
            hit = out.events[i]
            before, after = self.store.session_neighbors(
                hit, before=1, after=1, event_types=TURN_TYPES
            )
            if hit.event_type == AGENT and before and before[0].event_type != USER:
                # an agent's turn answers the user's message before it, past the agent's own
                # turns and tool steps: that message is its neighbour in the conversation
                prompt, _ = self.store.session_neighbors(
                    hit, before=1, after=0, event_types=(USER,)
                )
                before += prompt
            replies[i] = after
            for n in (*before, *after):
                self._join(scores, out, n, cfg.w_neighbour * scores[i])
        for i, score in answered:
            hit = out.events[i]
            answer = replies.get(i)
            if answer is None or (
                not asks_question(hit) and not any(n.event_type == USER for n in answer)
            ):
                # an agent's statement is answered by the user's next message, however many
                # of the agent's own turns ("Builds clean.") come between
                types = TURN_TYPES if asks_question(hit) else (USER,)
                _, answer = self.store.session_neighbors(hit, before=0, after=1, event_types=types)
            for n in answer:
                if n.event_type == USER or asks_question(hit):
                    self._join(scores, out, n, cfg.w_reply * score)

    @staticmethod
    def _join(scores: dict[str, float], out: Ranking, event: Event, gain: float) -> None:
        """``event`` scores at least ``gain`` (loaded into ``out.events`` if new)."""
        out.events.setdefault(event.event_id, event)
        if gain > scores.get(event.event_id, 0.0):
            scores[event.event_id] = gain

    def _bookmarks(self, query: str, filters: SearchFilters, out: Ranking) -> None:
        cfg = self.cfg
        f = SearchFilters(projects=filters.projects, kinds=("bookmark",))
        chosen: dict[Key, float] = {}
        if out.bookmark_hits is None:
            out.bookmark_hits = bm25_search(self.store, query, f, limit=cfg.bookmarks)
        for h in out.bookmark_hits[: cfg.bookmarks]:
            if h.every_term:
                chosen[h.key] = h.score
        for key, cos in self._vector_ids(query, f, ("bookmark",), cfg.bookmarks):
            if cos >= cfg.bookmark_cosine:
                chosen[key] = max(chosen.get(key, 0.0), cos)
        best = sorted(chosen, key=lambda k: -chosen[k])[: cfg.bookmarks]
        out.bookmarks = [(k[1], k[2], chosen[k]) for k in best]
