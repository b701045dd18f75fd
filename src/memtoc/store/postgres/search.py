"""Full-text ranking on PostgreSQL: the team store's side of teleport's BM25 seam.

``retrieval.teleport.bm25_search`` hands a PostgreSQL store's queries here (the SQLite store's
FTS5 queries stay in teleport). Two ``tsvector`` indexes answer, as on SQLite: ``docs.tsv``
(nodes, grips, bookmarks) and ``event_search.tsv`` (events filed into segments), both holding
FTS5's tokens as lexemes, with each row's length in tokens (``dl``): ``postgres/lexemes``.

- **Any text is a valid query, cut as on SQLite.** The query's terms are SQLite's
  (``fts_text.build_match``: its stop words dropped, a hyphenated word as its parts, a code token
  as its identifier forms), cut and stemmed as the index is (``lexemes.query_lexemes``), then
  quoted into a tsquery (never parsed as tsquery syntax); a text with no lexeme returns nothing.
- **AND first, then OR**, as on SQLite: rows holding every lexeme rank first (factor 1), then —
  when they are fewer than the candidate cap — rows holding any of the rarer lexemes (factor
  ``OR_ONLY_FACTOR``).
- **BM25, scores 0..1**: each candidate row is scored by FTS5's ``bm25()`` computed in SQL
  (``_bm25``: FTS5's IDF, ``ln((N - df + 0.5) / (df + 0.5))`` and at least 1e-6, times how many
  of the expression's phrases hold the lexeme (``_Weights``); term frequency as the row's
  tsvector encodes it (``lexemes.tf_positions``); length normalisation by the row's tokens, ``dl``, over the index's average), over
  the lexemes of the pass's own expression (the OR pass's rarer lexemes only, as FTS5 scores
  the phrases of the expression it matched); divided per index by the best score that index
  returned, times the pass factor — the SQLite store's normalisation of ``bm25()``, so fused
  rankings and thresholds mean the same on both stores. (``ts_rank_cd``, without IDF, lost 27
  points of LoCoMo recall@10 against this.)
- **Filters** are the SQLite ones: projects, kinds, levels (nodes only), time (events and grips
  by instant, nodes by span overlap, bookmarks by creation), session (events, grips, segment
  nodes), role (events only).

At most two round trips per search, whatever the number of lexemes and indexes:
``postgres/text_stats.terms`` returns the query's lexemes with their document frequency in each
index wanted (statistics: that module; no statement when the server's statistics estimate every
lexeme); one statement then runs both passes of both indexes
(``_pass``; the OR pass of an index only runs when its AND pass found fewer than the cap). Per
pass, the newest ``scan_cap`` matches are scored (the caller's, as on SQLite: ``DEFAULT_SCAN_CAP``
unless given; recall's expansion asks for fewer); when the OR pass can match more, every row of its
rarest lexemes (as many as add up to ``scan_cap`` rows) is scored instead, and the newest matches
fill what is left (SQLite's ``_rarest_first``). How they are found depends on how many rows can
match (known from the frequencies): no more than the pass scores (counted exactly) — every
match is scored as the GIN bitmap hands it over, unsorted; few (``BITMAP_ROWS`` at most) — the GIN
bitmap gives every match and the newest are kept (``ORDER BY seq + 0`` keeps the planner off the
other plan); many — a backward walk of the primary key, testing each row, stops at the cap (dense
matches). Left to itself the planner often walked 70,000 rows for 6,000 matches. Scoring reads
only the query's lexemes out of each row's tsvector (``setweight`` marks them, ``ts_filter`` keeps
them): unnesting whole tsvectors made scoring 5 times slower.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memtoc.store.capabilities import (
    DEFAULT_SCAN_CAP,
    DOC_KINDS,
    OR_ONLY_FACTOR,
    Key,
    ScoredRow,
    TextScope,
)
from memtoc.store.postgres import text_stats
from memtoc.store.postgres.base import PgBase
from memtoc.store.postgres.lexemes import TF_SQL, Option, query_groups, query_lexemes
from memtoc.store.postgres.text_stats import index_stats, terms
from memtoc.text.fts_text import build_match

BITMAP_ROWS = 50_000
"""A pass whose matches are bounded by this many rows (by the lexemes' document frequencies) takes
them all from the GIN index and keeps the newest; above it, it walks the newest rows."""
PLAN_SETTINGS = (
    ("enable_seqscan", "off"),
    ("max_parallel_workers_per_gather", "0"),
    ("jit", "off"),
)
"""Planner settings for the ranking statement: a sequential scan re-parses every row's tsvector,
which the planner estimates cheap and is not; parallel workers and JIT cost more than they save on
a statement of a few milliseconds (docs/benchmarks.md, "Figures behind design choices")."""
K1, B = 1.2, 0.75
MIN_IDF = 1e-6
"""FTS5's floor for the IDF of a term in more than half of the rows."""


def _bm25(row: str) -> str:
    """BM25 of one candidate row (alias ``row``, with ``tsv`` and ``dl``) over weighted lexemes
    (term frequency read from the lexeme's positions, ``lexemes.TF_SQL``; length = the row's
    tokens, ``dl``), in FTS5's order of operations. Parameters: weights, lexemes, average length,
    lexemes. Every constant is ``float8``: a bare ``0.75`` is ``numeric``, and numeric arithmetic
    per candidate row and lexeme was a fifth of the scoring time."""
    return (
        f"(SELECT COALESCE(SUM((%s::float8[])[array_position(%s::text[], u.lexeme)] "
        f"* (({TF_SQL} * {1 + K1!r}::float8) / ({TF_SQL} + {K1!r}::float8 * "
        f"({1 - B!r}::float8 + {B!r}::float8 * {row}.dl / %s::float8)))), 0) "
        f"FROM unnest(ts_filter(setweight({row}.tsv, 'A', %s::text[]), '{{a}}')) u)"
    )


def tsquery_text(lexemes: Sequence[str], op: str) -> str:
    """A tsquery of ``lexemes`` joined by ``op`` (``&`` or ``|``), each quoted as tsquery input
    wants it (quotes doubled, backslashes escaped), so no lexeme is ever read as an operator."""
    quoted = ("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)
    return f" {op} ".join(quoted)


class PgSearch(PgBase):
    """BM25 ranked search over the PostgreSQL store's text indexes."""

    def query_lexemes(self, query: str) -> list[str]:
        """The distinct lexemes ``query`` is searched by, in order."""
        match = build_match(query)
        return [] if match is None else [lex for lex, _ in query_lexemes(match.terms)]

    def _terms(
        self, query: str, *, docs: bool, events: bool
    ) -> tuple[list[tuple[str, int, int, int]], list[tuple[Option, ...]]]:
        """``(lexeme, df in docs, df in event_search, terms holding it)`` of ``query``'s lexemes
        (one statement), and the AND pass's structure (``lexemes.query_groups``)."""
        tables = (("docs",) if docs else ()) + (("event_search",) if events else ())
        match = build_match(query)
        if match is None:
            return [], []
        found = query_lexemes(match.terms)
        times = dict(found)
        stats = terms(self, [w for w, _ in found], tables)
        return [(w, d, e, times[w]) for w, d, e in stats], query_groups(match.groups)

    def rank_text(
        self,
        query: str,
        *,
        kinds: Sequence[str],
        scope: TextScope,
        candidates: int = 30,
        scan_cap: int = DEFAULT_SCAN_CAP,
    ) -> list[ScoredRow]:
        """Up to ``candidates`` rows per index matching ``query`` under the filters, scored 0..1
        (see the module doc), best first per index; each pass scores at most the newest
        ``scan_cap`` matches, and the OR pass keeps the lexemes matching at most ``scan_cap``
        rows (when any does)."""
        doc_kinds = [k for k in DOC_KINDS if k in kinds]
        events = "event" in kinds
        if candidates <= 0 or not (doc_kinds or events):
            return []
        terms, groups = self._terms(query, docs=bool(doc_kinds), events=events)
        if not terms or not groups:
            return []

        lexemes = [t[0] for t in terms]
        ctes: list[str] = []
        params: list[Any] = []
        selects: list[str] = []
        indexes: list[tuple[str, _Weights]] = []
        times = [t[3] for t in terms]
        if doc_kinds:
            indexes.append(("docs", self._weights("docs", lexemes, [t[1] for t in terms], times,
                                                  groups)))  # fmt: skip
        if events:
            indexes.append(("event_search", self._weights("event_search", lexemes,
                                                          [t[2] for t in terms], times,
                                                          groups)))  # fmt: skip
        for n, (table, w) in enumerate(indexes):
            where, where_params = (
                _doc_where(doc_kinds, scope) if table == "docs" else _event_where(scope)
            )
            for p, (tsq, bound, newest, scored) in enumerate(_passes(w, scan_cap)):
                name = f"p{n}_{p}"
                gate = f" AND (SELECT COUNT(*) FROM p{n}_0) < %s" if p else ""
                ctes.append(
                    f"{name} AS MATERIALIZED "
                    f"({_pass(table, where, gate, bound, scope.event_fields, newest)})"
                )
                params += [*w.bm25_params(scored, every=p == 0), tsq, *where_params, *([candidates] if p else []),
                           candidates]  # fmt: skip
                selects.append(f"SELECT {n}, {p}, * FROM {name}")
        rows = self._query_planned(
            f"WITH {', '.join(ctes)} {' UNION ALL '.join(selects)} ORDER BY 1, 2, 7 DESC, 8",
            params,
            PLAN_SETTINGS,
        )
        out: list[ScoredRow] = []
        for n in range(len(indexes)):
            out += _merge([r[2:] for r in rows if r[0] == n], [int(r[1]) for r in rows if r[0] == n],
                          candidates)  # fmt: skip
        return out

    def _weights(
        self,
        table: str,
        lexemes: list[str],
        dfs: list[int],
        times: list[int],
        groups: list[tuple[Option, ...]],
    ) -> _Weights:
        """The query's BM25 weights over ``table``: FTS5's IDF, ``ln((N - df + 0.5) / (df +
        0.5))`` and at least ``MIN_IDF``; N and the average length in tokens from
        ``index_stats``."""
        n, avgdl = index_stats(self, table)
        idf = [max(MIN_IDF, math.log((max(n, df) - df + 0.5) / (df + 0.5))) for df in dfs]
        return _Weights(lexemes, dfs, idf, avgdl, groups, times)

    def keep_keys(
        self,
        keys: Sequence[Key],
        *,
        kinds: Sequence[str],
        scope: TextScope,
    ) -> set[Key]:
        """The keys among ``keys`` (found another way: vectors) that pass the same filters (one
        statement per index)."""
        out: set[Key] = set()

        events = [k[2] for k in keys if k[0] == "event" and "event" in kinds]
        if events:
            where, params = _event_where(scope, join=True)
            rows = self._query(
                "SELECT e.project, e.event_id FROM events e "
                f"WHERE e.event_id = ANY(%s) AND {where}",
                [events, *params],
            )
            out.update(("event", r[0], r[1]) for r in rows)
        docs = [k for k in keys if k[0] in DOC_KINDS and k[0] in kinds]
        if docs:
            where, params = _doc_where([k for k in DOC_KINDS if k in kinds], scope)
            rows = self._query(
                "SELECT d.kind, d.project, d.doc_id FROM docs d JOIN unnest(%s::text[], "
                "%s::text[], %s::text[]) AS k(kind, project, doc_id) ON d.kind = k.kind AND "
                f"d.project = k.project AND d.doc_id = k.doc_id WHERE {where}",
                [[k[0] for k in docs], [k[1] for k in docs], [k[2] for k in docs], *params],
            )
            out.update((r[0], r[1], r[2]) for r in rows)
        return out


def _passes(w: _Weights, scan_cap: int) -> list[tuple[str, int, int, list[str]]]:
    """``(tsquery, bound on its matches, how many of the newest it scores, the lexemes it scores
    over)`` of the AND pass and
    (several lexemes) the OR pass — over the rarer lexemes only (those matching at most
    ``scan_cap`` rows) when there are any, as SQLite's teleport does, so a rare term's rows are all
    ranked, not just the newest matches of a common one; when those can match more than
    ``scan_cap`` rows, the rarest lexemes' rows and then the newest matches."""
    # a count that stopped at the cap ("more") bounds nothing
    more = text_stats.DF_CAP + 1
    bounds = [BITMAP_ROWS + 1 if df == more else df for df in w.dfs]
    passes = [(_all_of(w.groups), _all_bound(w.groups, dict(zip(w.lexemes, bounds, strict=True))),
               scan_cap, w.lexemes)]  # fmt: skip
    if len(w.lexemes) > 1:
        pairs = list(zip(w.lexemes, w.dfs, bounds, strict=True))
        rare = [p for p in pairs if p[1] <= scan_cap and p[1] != more]
        used = rare or pairs
        scored = [p[0] for p in used]  # FTS5 scores the phrases of the expression it matched
        any_of = tsquery_text(scored, "|")
        bound = sum(p[2] for p in used)
        if not rare or bound <= scan_cap:
            passes.append((any_of, bound, scan_cap, scored))
            return passes
        # more matches than one pass scores: every row of the rarest lexemes (as many as add up
        # to scan_cap rows), then the newest matches in what is left (SQLite's ``_rarest_first``)
        rarest: list[str] = []
        total = 0
        for lexeme, df, _ in sorted(rare, key=lambda p: p[1]):
            if rarest and total + df > scan_cap:
                break
            rarest.append(lexeme)
            total += df
        passes.append((tsquery_text(rarest, "|"), total, scan_cap, scored))
        if total < scan_cap:
            passes.append((any_of, bound, scan_cap - total, scored))
    return passes


def _all_of(groups: Sequence[tuple[Option, ...]]) -> str:
    """The AND pass's tsquery: every query token by one of its options (``MatchQuery.all_terms``,
    SQLite's AND expression)."""
    return " & ".join(
        "(" + " | ".join("(" + tsquery_text(o, "&") + ")" for o in options) + ")"
        for options in groups
    )


def _all_bound(groups: Sequence[tuple[Option, ...]], bounds: dict[str, int]) -> int:
    """A bound on the AND pass's matches: the least of its tokens' bounds, a token's the sum of
    its options', an option's its rarest lexeme's."""
    return min(sum(min(bounds[x] for x in o) for o in options) for options in groups)


def _pass(table: str, where: str, gate: str, bound: int, join_events: bool, scan_cap: int) -> str:
    """One pass over one index: the newest ``scan_cap`` matches of the tsquery under the filters,
    scored, the best ``cap`` kept as ``(kind, project, item_id, ts_ms, r, seq)``. When ``bound``
    (the most rows the tsquery can match) is within ``scan_cap``, every match is scored as the
    index hands it over (``_every_match``): no newest-first sort, each row scored from the row the
    GIN bitmap read — the same rows, half the server time (docs/benchmarks.md, "Team mode").
    ``bound`` only proves that when it rests on exact counts: an estimate is above
    ``text_stats.ESTIMATE_ABOVE``."""
    seq, alias = ("doc_seq", "d") if table == "docs" else ("seq", "x")
    source = {"docs": "docs d", "event_search": "event_search x"}[table]
    if table == "event_search" and join_events:
        source += " JOIN events e ON e.seq = x.seq"
    match = f"{alias}.tsv @@ CAST(%s AS tsquery) AND {where}{gate}"
    out, rows = (
        ("x.kind, x.project, x.doc_id, x.ts_ms", "docs x ON x.doc_seq = t.s")
        if table == "docs"
        else ("'event', e.project, e.event_id, e.ts_ms", "events e ON e.seq = t.s")
    )
    if _every_match(bound, scan_cap):
        scored = (
            f"SELECT c.s, {_bm25('c')} AS r FROM (SELECT {alias}.{seq} AS s, {alias}.tsv, "
            f"{alias}.dl FROM {source} WHERE {match}) c"
        )
    else:
        order = f"{alias}.{seq} + 0" if bound <= BITMAP_ROWS else f"{alias}.{seq}"
        newest = (
            f"SELECT {alias}.{seq} AS s FROM {source} WHERE {match} "
            f"ORDER BY {order} DESC LIMIT {max(1, int(scan_cap))}"
        )
        # the score as a correlated subquery: one index lookup per candidate (as a join, the
        # planner hashed the whole table)
        scored = (
            f"SELECT c.s, (SELECT {_bm25('x')} FROM {table} x WHERE x.{seq} = c.s) AS r "
            f"FROM ({newest}) c"
        )
    return f"SELECT {out}, t.r, t.s FROM ({scored} ORDER BY r DESC, c.s LIMIT %s) t JOIN {rows}"


def _every_match(bound: int, scan_cap: int) -> bool:
    """Whether a pass scores every match: at most ``scan_cap`` of them, by exact counts."""
    return bound <= scan_cap and bound < text_stats.ESTIMATE_ABOVE


def _merge(rows: list[tuple[Any, ...]], passes: list[int], cap: int) -> list[ScoredRow]:
    """The AND rows, then the OR rows not already found, up to ``cap``; scores divided by the best
    raw score kept, times the pass factor; last, whether the row came from the AND pass."""
    kept: list[tuple[Any, ...]] = []
    seen: set[tuple[str, str]] = set()
    # the AND rows first, then the OR passes' rows (rarest lexemes, newest matches) by score
    ordered = sorted(zip(rows, passes, strict=True), key=lambda rp: (rp[1] > 0, -float(rp[0][4])))
    for row, p in ordered:
        if (row[1], row[2]) not in seen:
            seen.add((row[1], row[2]))
            kept.append((*row[:5], OR_ONLY_FACTOR if p else 1.0))
    kept = kept[:cap]
    best = max((float(r[4]) for r in kept), default=0.0)
    return [
        (r[0], r[1], r[2], int(r[3]), min(1.0, r[5] * (float(r[4]) / best if best > 0 else 1.0)),
         float(r[4]), r[5] == 1.0)
        for r in kept
    ]  # fmt: skip


def _event_where(s: TextScope, *, join: bool = False) -> tuple[str, list[Any]]:
    """SQL conditions (aliases ``x``: event_search, ``e``: events) for the event filters; the
    project is read from ``event_search`` unless ``join`` (events only)."""
    where = "TRUE"
    params: list[Any] = []
    for cond, value in (
        (f"{'e' if join else 'x'}.project = ANY(%s)",
         list(s.projects) if s.projects is not None else None),
        ("e.ts_ms >= %s", s.since_ms),
        ("e.ts_ms < %s", s.until_ms),
        ("e.session_id = %s", s.session_id),
        ("e.role = %s", s.role),
    ):  # fmt: skip
        if value is not None:
            where += f" AND {cond}"
            params.append(value)
    return where, params


def _doc_where(kinds: Sequence[str], s: TextScope) -> tuple[str, list[Any]]:
    """SQL conditions (alias ``d``: docs) for the doc filters."""
    where = "d.kind = ANY(%s)"
    params: list[Any] = [list(kinds)]
    if s.projects is not None:
        where += " AND d.project = ANY(%s)"
        params.append(list(s.projects))
    if s.levels is not None:
        where += " AND (d.kind <> 'node' OR split_part(d.doc_id, ':', 2) = ANY(%s))"
        params.append(list(s.levels))
    span = "(SELECT n.{c} FROM toc_nodes n WHERE n.project = d.project AND n.node_id = d.doc_id)"
    if s.since_ms is not None:
        where += (f" AND (CASE WHEN d.kind = 'node' THEN {span.format(c='end_ms')} > %s "
                  "ELSE d.ts_ms >= %s END)")  # fmt: skip
        params += [s.since_ms, s.since_ms]
    if s.until_ms is not None:
        where += (f" AND (CASE WHEN d.kind = 'node' THEN {span.format(c='start_ms')} "
                  "ELSE d.ts_ms END) < %s")  # fmt: skip
        params.append(s.until_ms)
    if s.session_id is not None:
        where += (
            " AND (CASE d.kind WHEN 'grip' THEN EXISTS (SELECT 1 FROM grips g WHERE "
            "g.grip_id = d.doc_id AND g.session_id = %s) WHEN 'node' THEN EXISTS (SELECT 1 "
            "FROM segments sg WHERE sg.project = d.project AND sg.node_id = d.doc_id AND "
            "sg.session_id = %s) ELSE FALSE END)"
        )
        params += [s.session_id, s.session_id]
    return where, params


@dataclass(frozen=True, slots=True)
class _Weights:
    """A query's lexemes with their document frequency and IDF in one index, the index's average
    length in tokens, the AND pass's structure and how many distinct terms hold each lexeme.

    FTS5 scores each phrase of the expression it matched, so a lexeme weighs its IDF as many
    times as it appears there: in the OR expression once per distinct term holding it
    (``socket`` and ``sockets``), in the AND expression once per option holding it (``auth`` in
    ``auth-check`` and among ``auth.go``'s parts)."""

    lexemes: list[str]
    dfs: list[int]
    idf: list[float]
    avgdl: float
    groups: list[tuple[Option, ...]]
    times: list[int]

    def bm25_params(self, scored: list[str], *, every: bool) -> list[Any]:
        """The parameters of ``_bm25`` scoring over the lexemes ``scored``, in order (``every``:
        for the AND pass)."""
        if every:
            held = Counter(lex for options in self.groups for o in options for lex in o)
            weights = [self.idf[self.lexemes.index(lex)] * held[lex] for lex in scored]
        else:
            weights = [self.idf[i] * self.times[i] for i in map(self.lexemes.index, scored)]
        return [weights, scored, self.avgdl, scored]
