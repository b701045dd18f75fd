"""BM25 over the SQLite store's FTS5 indexes (``TextRanking``, ``store/capabilities.py``).

Two FTS5 indexes answer: ``docs_fts`` (nodes, grips, bookmarks — the ``docs`` table) and
``events_fts`` (events, by ``seq``). Both index ``fts_text.search_text`` of their text, and a
query becomes a quoted, code-aware FTS5 expression (``fts_text.build_match``), so any user text is
a valid query and a query with no searchable term returns nothing.

Ranking and speed
-----------------
Each index is asked for at most ``candidates`` rows ordered by ``bm25()``. The query runs
*AND-first*: rows holding every query term are ranked first; only when they are fewer than the
candidate cap does the *OR* query (any term) rank the rest. On common words the AND query is
also what keeps latency down (FTS5 ranks only rows that survive the intersection).

Scores
------
FTS5's ``bm25()`` is unbounded and its scale differs between the two indexes, so each index's
scores are normalised to 0..1 by dividing by the best score that index returned for the query, and
multiplied by the fraction of the query's terms the row matched in the AND pass (1.0) or 0.5
(OR-only rows: they miss at least one term). A row that matches every term and ranks first in its
index scores 1.0. (The PostgreSQL store ranks its ``tsvector`` indexes the same way:
``store/postgres/search.py``.)

Filters (``TextScope``)
-----------------------
``projects`` (any of), ``kinds``, ``levels`` (nodes only: other kinds pass), ``since_ms`` /
``until_ms`` (events and grips by time, nodes by overlap of their span, bookmarks by creation),
``session_id`` (events, grips, segment nodes), ``role`` (events only).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from memtoc.store.capabilities import (
    DEFAULT_SCAN_CAP,
    DOC_KINDS,
    OR_ONLY_FACTOR,
    Key,
    ScoredRow,
    TextScope,
)
from memtoc.store.sqlite.base import SqliteBase
from memtoc.text.fts_text import MatchQuery, build_match, quote
from memtoc.text.keyphrases import normalize_term

if TYPE_CHECKING:
    from memtoc.store.sqlite.store import SqliteStore

PAIR_ENOUGH_DIVISOR = 3
"""After the two-term pass, the bounded OR pass is skipped once a third of the candidates wanted
(``limit`` rows at the default ``3 * limit`` candidates) hold every term or two of them."""
MAX_PAIR_TERMS = 12
"""The two-term pass is built for at most this many terms (66 pairs)."""


def _in(column: str, values: Sequence[Any], params: list[Any]) -> str:
    if not values:
        return ""
    params.extend(values)
    return f" AND {column} IN ({','.join('?' * len(values))})"


def _event_where(f: TextScope, params: list[Any]) -> str:
    """``AND …`` conditions on events (alias ``e``) for every event filter."""
    where = ""
    if f.projects is not None:
        where += _in("e.project", f.projects, params)
    for cond, value in (
        ("e.ts_ms >= ?", f.since_ms),
        ("e.ts_ms < ?", f.until_ms),
        ("e.session_id = ?", f.session_id),
        ("e.role = ?", f.role),
    ):
        if value is not None:
            where += f" AND {cond}"
            params.append(value)
    return where


def _event_index(f: TextScope) -> _Index:
    params: list[Any] = []
    where = _event_where(f, params)
    columns = "'event', e.project, e.event_id, e.ts_ms"
    return _Index("events_fts", columns, "events e ON e.seq = f.rowid", where, params)


_NODE_SPAN = (
    "(SELECT n.{col} FROM toc_nodes n WHERE n.project = d.project AND n.node_id = d.doc_id)"
)


def _doc_where(f: TextScope, kinds: Sequence[str], params: list[Any]) -> str:
    """``AND …`` conditions on docs (alias ``d``) for every filter that applies to them."""
    where = _in("d.kind", kinds, params)
    if f.projects is not None:
        where += _in("d.project", f.projects, params)
    if f.levels is not None:
        level = "substr(d.doc_id, 5, instr(substr(d.doc_id, 5), ':') - 1)"
        where += f" AND (d.kind != 'node' OR {level} IN ({','.join('?' * len(f.levels))}))"
        params.extend(f.levels)
    if f.since_ms is not None:
        end = _NODE_SPAN.format(col="end_ms")
        where += f" AND (CASE WHEN d.kind = 'node' THEN {end} > ? ELSE d.ts_ms >= ? END)"
        params.extend([f.since_ms, f.since_ms])
    if f.until_ms is not None:
        start = _NODE_SPAN.format(col="start_ms")
        where += f" AND (CASE WHEN d.kind = 'node' THEN {start} ELSE d.ts_ms END) < ?"
        params.append(f.until_ms)
    if f.session_id is not None:
        where += (
            " AND (CASE d.kind WHEN 'grip' THEN EXISTS (SELECT 1 FROM grips g WHERE "
            "g.grip_id = d.doc_id AND g.session_id = ?) WHEN 'node' THEN EXISTS (SELECT 1 FROM "
            "segments sg WHERE sg.project = d.project AND sg.node_id = d.doc_id AND "
            "sg.session_id = ?) ELSE 0 END)"
        )
        params.extend([f.session_id, f.session_id])
    return where


def _doc_index(f: TextScope, kinds: Sequence[str]) -> _Index:
    params: list[Any] = []
    where = _doc_where(f, kinds, params)
    columns = "d.kind, d.project, d.doc_id, d.ts_ms"
    return _Index("docs_fts", columns, "docs d ON d.doc_seq = f.rowid", where, params)


@dataclass(frozen=True, slots=True)
class _Index:
    """One FTS index, how its rows join the table they index, and the filter conditions."""

    fts: str
    columns: str
    join: str
    where: str
    params: list[Any]

    def probe(self, store: SqliteStore, expression: str, offset: int) -> int | None:
        """The rowid of the ``offset``-th newest match (``None``: fewer matches). Walks rowids
        only — no ranking — so it costs about ``offset`` postings."""
        rows = store._query(
            f"SELECT rowid FROM {self.fts} WHERE {self.fts} MATCH ? "
            "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (expression, offset),
        )
        return int(rows[0][0]) if rows else None

    def count(self, store: SqliteStore, expression: str, most: int) -> int:
        """How many rows match, counting at most ``most`` (walks at most that many postings)."""
        rows = store._query(
            f"SELECT count(*) FROM (SELECT rowid FROM {self.fts} WHERE {self.fts} MATCH ? LIMIT ?)",
            (expression, most),
        )
        return int(rows[0][0])

    def ranked(
        self, store: SqliteStore, expression: str, limit: int, floor: int | None, inner: int | None
    ) -> list[tuple[Any, ...]]:
        """Matches best first by BM25 that pass the filters: FTS5 ranks (its ``rank`` order, at
        most ``inner`` rows, rowids ≥ ``floor``), then the join applies the filters."""
        sub = f"SELECT rowid, rank FROM {self.fts} WHERE {self.fts} MATCH ?"
        params: list[Any] = [expression]
        if floor is not None:
            sub += " AND rowid >= ?"
            params.append(floor)
        sub += " ORDER BY rank"
        if inner is not None:
            sub += " LIMIT ?"
            params.append(inner)
        sql = (
            f"SELECT {self.columns}, -f.rank FROM ({sub}) f JOIN {self.join} "
            f"WHERE 1{self.where} ORDER BY f.rank LIMIT ?"
        )
        return store._query(sql, [*params, *self.params, limit])


class _TermCounts:
    """How many rows of an index hold each term, up to ``scan_cap`` (above it: ``None``, a
    common term), remembered per store until its data changes (``PRAGMA data_version`` for other
    connections' commits, ``total_changes`` for this connection's): the OR pass asks it for every
    term of every query, and at a million events each count of a common term walks ``scan_cap``
    postings."""

    MAX_ENTRIES = 50_000

    def __init__(self) -> None:
        self.version: tuple[int, int] = (-1, -1)
        self.known: dict[tuple[str, str, int], int | None] = {}

    def rows(self, store: SqliteStore, index: _Index, term: str, scan_cap: int) -> int | None:
        version = (int(store._query("PRAGMA data_version")[0][0]), store.connection.total_changes)
        if version != self.version or len(self.known) > self.MAX_ENTRIES:
            self.version, self.known = version, {}
        key = (index.fts, term, scan_cap)
        if key not in self.known:
            n = index.count(store, quote(term), scan_cap + 1)
            self.known[key] = n if n <= scan_cap else None
        return self.known[key]


_COUNTS: weakref.WeakKeyDictionary[SqliteStore, _TermCounts] = weakref.WeakKeyDictionary()


def _term_counts(store: SqliteStore) -> _TermCounts:
    cache = _COUNTS.get(store)
    if cache is None:
        cache = _COUNTS[store] = _TermCounts()
    return cache


def _ranked(
    store: SqliteStore, index: _Index, match: MatchQuery, candidates: int, scan_cap: int
) -> list[tuple[Any, ...]]:
    """AND-first: rows with every term (factor 1), then rows with any term (factor 0.5).

    Ranking cost is bounded: the OR pass leaves out terms matching more than ``scan_cap`` rows
    (unless every term does), and an expression still matching more than ``scan_cap`` rows is
    ranked over the rows of its rarest terms and its newest matches (``_rarest_first``) — with
    filters, over every match when those leave fewer than ``candidates`` rows (exact, slower:
    common terms + a selective filter).

    When every term is common, the OR expression's rows holding two of its terms, of different
    query words, are ranked first (``_pairs``: far fewer rows, newest first); the bounded OR pass
    runs only if the rows so far are fewer than a third of ``candidates``
    (``PAIR_ENOUGH_DIVISOR``: a search's ``limit`` by default, at least one row) — with that many
    rows holding two terms or more, rows holding one are left out (a minimum should-match of
    two). FTS5 scores such a row ``m - 1`` times its OR score (``m``: the terms it holds, each
    counted once per matching pair): a row holding two keeps its OR score, one holding more gets
    a coordination boost, and every row of the pass still carries the OR factor.
    """
    rows: list[tuple[Any, ...]] = []
    seen: set[str] = set()

    def take(factor: float, expression: str, floor: int | None) -> bool:
        """Rank ``expression`` (over matches from rowid ``floor``); True once the cap is full."""
        # the join applies the filters to the best `inner` matches: without filters, the best
        # `candidates`; with filters, all matches when they are at most scan_cap (no floor), else
        # 8x over, re-ranked in full below if the filters leave too few
        inner = candidates if not index.where else None if floor is None else 8 * candidates
        found = index.ranked(store, expression, candidates, floor, inner)
        if len(found) < candidates and index.where and floor is not None:
            # the filters ate the bounded top: rank every match, so a selective filter (an old
            # session, a time window) still finds what it holds
            found = index.ranked(store, expression, candidates, None, None)
        for row in found:
            if row[2] not in seen:
                seen.add(row[2])
                rows.append((*row, factor))
        return len(rows) >= candidates

    if take(1.0, match.all_terms, index.probe(store, match.all_terms, scan_cap)):
        return rows[:candidates]
    if match.any_terms == match.all_terms:
        return rows
    counts = _term_counts(store)
    rows_of = {t: counts.rows(store, index, t, scan_cap) for t in match.terms}
    rare = [t for t in match.terms if rows_of[t] is not None]
    terms = rare or list(match.terms)
    expression = " OR ".join(quote(t) for t in terms)
    floor = index.probe(store, expression, scan_cap)
    if floor is not None and rare:
        # more matches than the cap: the rows holding the rarest terms, from the whole index,
        # merged with the newest matches, all scored over every term
        return _rarest_first(store, index, rows, seen, terms, rows_of, candidates, scan_cap)
    pairs = _pairs(terms, match) if floor is not None and len(terms) <= MAX_PAIR_TERMS else None
    if pairs:
        take(OR_ONLY_FACTOR, pairs, index.probe(store, pairs, scan_cap))
        if len(rows) >= max(1, candidates // PAIR_ENOUGH_DIVISOR):
            return rows[:candidates]
    take(OR_ONLY_FACTOR, expression, floor)
    return rows[:candidates]


def _rarest_first(
    store: SqliteStore,
    index: _Index,
    rows: list[tuple[Any, ...]],
    seen: set[str],
    terms: Sequence[str],
    rows_of: dict[str, int | None],
    candidates: int,
    scan_cap: int,
) -> list[tuple[Any, ...]]:
    """The OR pass when ``terms`` match more than ``scan_cap`` rows. Ranking every match would
    cost as many postings; ranking only the newest ``scan_cap`` would lose every older row (on a
    seven-month history, most of it). Instead the terms are taken rarest first while their rows
    add up to at most ``scan_cap`` (``rarest``): every row holding one of them is scored over
    *all* the terms — FTS5's BM25 is a sum over the expression's phrases, so ``rarest AND
    others`` scores a row holding both kinds exactly, and ``rarest`` alone one holding no other.
    The newest matches fill what is left of ``scan_cap`` (rows holding only commoner terms,
    scored over all the terms too), and all are merged by score: about ``scan_cap`` rows ranked,
    as before, but no longer only the newest."""
    ordered = sorted(terms, key=lambda t: rows_of[t] or 0)
    rarest: list[str] = []
    total = 0
    for t in ordered:
        if rarest and total + (rows_of[t] or 0) > scan_cap:
            break
        rarest.append(t)
        total += rows_of[t] or 0
    others = [t for t in terms if t not in rarest]
    rare_or = " OR ".join(quote(t) for t in rarest)
    inner = None if index.where else candidates
    found = index.ranked(store, rare_or, candidates, None, inner)
    if others:
        both = f"({rare_or}) AND ({' OR '.join(quote(t) for t in others)})"
        found += index.ranked(store, both, candidates, None, inner)
    left = scan_cap - total  # the newest matches get what the rarest terms' rows left
    if left > 0:
        expression = " OR ".join(quote(t) for t in terms)
        floor = index.probe(store, expression, left)
        bound = inner if inner is not None or floor is None else 8 * candidates
        newest = index.ranked(store, expression, candidates, floor, bound)
        if (
            index.where
            and floor is not None
            and len({r[2] for r in (*found, *newest)}) < candidates
        ):
            newest = index.ranked(store, expression, candidates, None, None)  # filters ate them
        found += newest
    best: dict[str, tuple[Any, ...]] = {}
    for row in found:
        if row[2] not in best or row[4] > best[row[2]][4]:
            best[row[2]] = row
    for row in sorted(best.values(), key=lambda r: -r[4]):
        if row[2] not in seen:
            seen.add(row[2])
            rows.append((*row, OR_ONLY_FACTOR))
    return rows[:candidates]


def _pairs(terms: Sequence[str], match: MatchQuery) -> str | None:
    """An FTS5 expression matching rows that hold two of ``terms`` from different query tokens,
    or ``None`` when no two terms can pair. A code token's own forms (``refresh_token``,
    ``refreshtoken``, ``refresh``, ``token``) do not pair, nor do two forms of one word
    (``socket``, ``sockets``: the index stems both alike, so their pair would match every row
    holding either)."""
    tokens = {t: {i for i, g in enumerate(match.groups) if t in g.forms} for t in terms}
    pairs = [
        f"({quote(a)} AND {quote(b)})"
        for i, a in enumerate(terms)
        for b in terms[i + 1 :]
        if len(tokens[a] | tokens[b]) > 1 and normalize_term(a) != normalize_term(b)
    ]
    return " OR ".join(pairs) or None


def _normalise(rows: list[tuple[Any, ...]]) -> list[ScoredRow]:
    best = max((r[4] for r in rows), default=0.0)
    out: list[ScoredRow] = []
    for kind, project, item_id, ts_ms, raw, factor in rows:
        rel = raw / best if best > 0 else 1.0
        out.append((kind, project, item_id, ts_ms, min(1.0, factor * rel), raw, factor == 1.0))
    return out


class SqliteSearch(SqliteBase):
    """``TextRanking`` for ``SqliteStore``."""

    def _store(self) -> SqliteStore:
        return cast("SqliteStore", self)

    def rank_text(
        self,
        query: str,
        *,
        kinds: Sequence[str],
        scope: TextScope,
        candidates: int = 30,
        scan_cap: int = DEFAULT_SCAN_CAP,
    ) -> list[ScoredRow]:
        """``TextRanking.rank_text`` over the FTS5 indexes (module docstring)."""
        match = build_match(query)
        if match is None or candidates <= 0:
            return []
        doc_kinds = [k for k in DOC_KINDS if k in kinds]
        rows: list[ScoredRow] = []
        if doc_kinds:
            index = _doc_index(scope, doc_kinds if len(doc_kinds) < len(DOC_KINDS) else [])
            rows += _normalise(_ranked(self._store(), index, match, candidates, scan_cap))
        if "event" in kinds:
            rows += _normalise(
                _ranked(self._store(), _event_index(scope), match, candidates, scan_cap)
            )
        return rows

    def keep_keys(self, keys: Sequence[Key], *, kinds: Sequence[str], scope: TextScope) -> set[Key]:
        """``TextRanking.keep_keys``: the same filters as ``rank_text``, key by key."""
        wanted = set(kinds)
        out: set[Key] = set()
        events = [k[2] for k in keys if k[0] == "event" and "event" in wanted]
        for i in range(0, len(events), 500):
            chunk = events[i : i + 500]
            params: list[Any] = list(chunk)
            where = _event_where(scope, params)
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                f"SELECT e.project, e.event_id FROM events e WHERE e.event_id IN ({marks}){where}",
                params,
            )
            out.update(("event", r[0], r[1]) for r in rows)
        for kind, project, item_id in keys:
            if kind == "event" or kind not in wanted:
                continue
            params = [project, item_id]
            where = _doc_where(scope, [kind], params)
            sql = f"SELECT 1 FROM docs d WHERE d.project = ? AND d.doc_id = ?{where}"
            if self._query(sql, params):
                out.add((kind, project, item_id))
        return out
