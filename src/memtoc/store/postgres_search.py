"""Full-text ranking on PostgreSQL: the team store's side of teleport's BM25 seam.

``retrieval.teleport.bm25_search`` hands a PostgreSQL store's queries here (the SQLite store's
FTS5 queries stay in teleport). Two ``tsvector`` indexes answer, as on SQLite: ``docs.tsv``
(nodes, grips, bookmarks) and ``event_search.tsv`` (events filed into segments), both the
``english`` configuration (Porter stems, like SQLite's ``porter`` tokenizer).

- **Any text is a valid query.** The query's lexemes come from ``to_tsvector`` of the text
  itself (never parsed as tsquery syntax), then are quoted into a tsquery; a text with no lexeme
  (only stop words or punctuation) returns nothing.
- **AND first, then OR**, as on SQLite: rows holding every lexeme rank first (factor 1), then —
  when they are fewer than the candidate cap — rows holding any (factor ``OR_ONLY_FACTOR``).
- **BM25, scores 0..1**: each candidate row is scored by BM25 in SQL (``_BM25``: IDF per lexeme
  as FTS5 computes it, term frequency from the lexeme's positions in the row's tsvector, length
  normalisation by distinct lexemes), divided per index by the best score that index returned,
  times the pass factor — the SQLite store's normalisation of ``bm25()``, so fused rankings and
  thresholds mean the same on both stores. (``ts_rank_cd``, without IDF, lost 27 points of LoCoMo
  recall@10 against this.)
- **Filters** are the SQLite ones: projects, kinds, levels (nodes only), time (events and grips
  by instant, nodes by span overlap, bookmarks by creation), session (events, grips, segment
  nodes), role (events only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memtoc.store.postgres_base import PgBase, pg_text

OR_ONLY_FACTOR = 0.5
SCAN_CAP = 5_000
"""Most matching rows one pass scores (the newest), as SQLite's ``DEFAULT_SCAN_CAP``: keeps
queries made of very common words fast however large the store."""
STATS_TTL_S = 60.0
DF_CAP = 50_000
K1, B = 1.2, 0.75
_BM25 = (
    f"SELECT COALESCE(SUM(w.idf * cardinality(u.positions) * (1 + {K1}) / "
    f"(cardinality(u.positions) + {K1} * (1 - {B} + {B} * length(m.tsv) / %s))), 0) AS r "
    "FROM unnest(m.tsv) u JOIN unnest(%s::text[], %s::float8[]) AS w(lex, idf) "
    "ON w.lex = u.lexeme"
)
"""BM25 of one candidate row ``m`` over the query's weighted lexemes (term frequency = the
lexeme's positions in the row's tsvector, length = its distinct lexemes)."""
DOC_KINDS = ("node", "grip", "bookmark")

ScoredRow = tuple[str, str, str, int, float, float]
"""``(kind, project, item_id, ts_ms, score 0..1, raw rank)``."""
Key = tuple[str, str, str]


def tsquery_text(lexemes: Sequence[str], op: str) -> str:
    """A tsquery of ``lexemes`` joined by ``op`` (``&`` or ``|``), each quoted as tsquery input
    wants it (quotes doubled, backslashes escaped), so no lexeme is ever read as an operator."""
    quoted = ("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)
    return f" {op} ".join(quoted)


class PgSearch(PgBase):
    """BM25-like ranked search over the PostgreSQL store's text indexes."""

    def query_lexemes(self, query: str) -> list[str]:
        """The distinct lexemes of ``query`` under the ``english`` configuration, in order."""
        rows = self._query(
            "SELECT word FROM ts_debug('english'::regconfig, %s) d, unnest(d.lexemes) word "
            "WHERE d.lexemes IS NOT NULL",
            (pg_text(query),),
        )
        return list(dict.fromkeys(str(r[0]) for r in rows if r[0]))

    def rank_text(
        self,
        query: str,
        *,
        kinds: Sequence[str],
        projects: Sequence[str] | None = None,
        levels: Sequence[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        session_id: str | None = None,
        role: str | None = None,
        candidates: int = 30,
    ) -> list[ScoredRow]:
        """Up to ``candidates`` rows per index matching ``query`` under the filters, scored 0..1
        (see the module doc), best first per index."""
        lexemes = self.query_lexemes(query)
        if not lexemes or candidates <= 0:
            return []
        scope = _Scope(projects, levels, since_ms, until_ms, session_id, role)
        out: list[ScoredRow] = []
        doc_kinds = [k for k in kinds if k in DOC_KINDS]
        if doc_kinds:
            w = self._weights("docs", lexemes)
            out += self._and_then_or(
                w, candidates, lambda q, n: self._docs(q, n, doc_kinds, scope, w)
            )
        if "event" in kinds:
            w = self._weights("event_search", lexemes)
            out += self._and_then_or(w, candidates, lambda q, n: self._events(q, n, scope, w))
        return out

    def _and_then_or(self, w: _Weights, cap: int, ranked: Any) -> list[ScoredRow]:
        """The AND pass, then (when it found fewer than ``cap``) the OR pass — over the rarer
        lexemes only (those matching at most ``SCAN_CAP`` rows) when there are any, as SQLite's
        teleport does, so a rare term's rows are all ranked, not just the newest matches of a
        common one."""
        rows: list[tuple[Any, ...]] = []
        seen: set[tuple[str, str]] = set()
        rare = [lex for lex, df in zip(w.lexemes, w.dfs, strict=True) if df <= SCAN_CAP]
        passes = [(tsquery_text(w.lexemes, "&"), 1.0)]
        if len(w.lexemes) > 1:
            passes.append((tsquery_text(rare or w.lexemes, "|"), OR_ONLY_FACTOR))
        for tsq, factor in passes:
            for r in ranked(tsq, cap):
                if (r[1], r[2]) in seen:
                    continue
                seen.add((r[1], r[2]))
                rows.append((*r, factor))
            if len(rows) >= cap:
                break
        rows = rows[:cap]
        best = max((float(r[4]) for r in rows), default=0.0)
        return [
            (r[0], r[1], r[2], int(r[3]), min(1.0, r[5] * (float(r[4]) / best if best > 0 else 1.0)),
             float(r[4]))
            for r in rows
        ]  # fmt: skip

    def _docs(
        self, tsq: str, limit: int, kinds: Sequence[str], s: _Scope, w: _Weights
    ) -> list[tuple[Any, ...]]:
        params: list[Any] = [tsq, list(kinds)]
        where = "d.kind = ANY(%s)"
        if s.projects is not None:
            where += " AND d.project = ANY(%s)"
            params.append(list(s.projects))
        if s.levels is not None:
            where += " AND (d.kind <> 'node' OR split_part(d.doc_id, ':', 2) = ANY(%s))"
            params.append(list(s.levels))
        span = (
            "(SELECT n.{c} FROM toc_nodes n WHERE n.project = d.project AND n.node_id = d.doc_id)"
        )
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
        return self._query(
            "SELECT m.kind, m.project, m.doc_id, m.ts_ms, r FROM (SELECT d.kind, d.project, "
            "d.doc_id, d.ts_ms, d.doc_seq, d.tsv FROM docs d, CAST(%s AS tsquery) q "
            f"WHERE d.tsv @@ q AND {where} ORDER BY d.doc_seq DESC LIMIT {SCAN_CAP}) m, "
            f"LATERAL ({_BM25}) s ORDER BY r DESC, m.doc_seq LIMIT %s",
            [*params, w.avgdl, w.lexemes, w.idf, limit],
        )

    def _events(self, tsq: str, limit: int, s: _Scope, w: _Weights) -> list[tuple[Any, ...]]:
        params: list[Any] = [tsq]
        where = "TRUE"
        for cond, value in (
            ("e.project = ANY(%s)", list(s.projects) if s.projects is not None else None),
            ("e.ts_ms >= %s", s.since_ms),
            ("e.ts_ms < %s", s.until_ms),
            ("e.session_id = %s", s.session_id),
            ("e.role = %s", s.role),
        ):
            if value is not None:
                where += f" AND {cond}"
                params.append(value)
        return self._query(
            "SELECT 'event', m.project, m.event_id, m.ts_ms, r FROM (SELECT e.project, "
            "e.event_id, e.ts_ms, x.seq, x.tsv FROM event_search x JOIN events e ON e.seq = x.seq, "
            f"CAST(%s AS tsquery) q WHERE x.tsv @@ q AND {where} ORDER BY x.seq DESC "
            f"LIMIT {SCAN_CAP}) m, LATERAL ({_BM25}) s ORDER BY r DESC, m.seq LIMIT %s",
            [*params, w.avgdl, w.lexemes, w.idf, limit],
        )

    def _weights(self, table: str, lexemes: list[str]) -> _Weights:
        """The query's BM25 weights over ``table``.

        IDF is FTS5's ``ln((N - df + 0.5) / (df + 0.5) + 1)``; N and the average length (distinct
        lexemes per document) are cached for ``STATS_TTL_S``; document frequencies are counted per
        query (GIN lookups), up to ``DF_CAP`` (beyond it a term is common and its IDF small)."""
        now = time.monotonic()
        cached = self._bm25_stats.get(table)
        if cached is None or now - cached[0] > STATS_TTL_S:
            row = self._query(f"SELECT COUNT(*), COALESCE(AVG(length(tsv)), 1) FROM {table}")[0]
            cached = (now, int(row[0]), max(1.0, float(row[1])))
            self._bm25_stats[table] = cached
        _, n, avgdl = cached
        rows = self._query(
            f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ CAST(t AS tsquery) "
            f"LIMIT {DF_CAP}) c) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i",
            ([tsquery_text([lex], "&") for lex in lexemes],),
        )
        dfs = [int(r[0]) for r in rows]
        idf = [math.log((max(n, df) - df + 0.5) / (df + 0.5) + 1.0) for df in dfs]
        return _Weights(lexemes, dfs, idf, avgdl)

    def keep_keys(
        self,
        keys: Sequence[Key],
        *,
        kinds: Sequence[str],
        projects: Sequence[str] | None = None,
        levels: Sequence[str] | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        session_id: str | None = None,
        role: str | None = None,
    ) -> set[Key]:
        """The keys among ``keys`` (found another way: vectors) that pass the same filters."""
        out: set[Key] = set()
        scope = _Scope(projects, levels, since_ms, until_ms, session_id, role)
        events = [k[2] for k in keys if k[0] == "event" and "event" in kinds]
        if events:
            params: list[Any] = [events]
            where = "e.event_id = ANY(%s)"
            for cond, value in (
                ("e.project = ANY(%s)", list(projects) if projects is not None else None),
                ("e.ts_ms >= %s", since_ms),
                ("e.ts_ms < %s", until_ms),
                ("e.session_id = %s", session_id),
                ("e.role = %s", role),
            ):
                if value is not None:
                    where += f" AND {cond}"
                    params.append(value)
            rows = self._query(f"SELECT e.project, e.event_id FROM events e WHERE {where}", params)
            out.update(("event", r[0], r[1]) for r in rows)
        for kind, project, item_id in keys:
            if kind == "event" or kind not in kinds:
                continue
            # one doc: rank it against a query that always matches is pointless; test the filters
            found = self._docs_filtered(kind, project, item_id, scope)
            if found:
                out.add((kind, project, item_id))
        return out

    def _docs_filtered(self, kind: str, project: str, item_id: str, s: _Scope) -> bool:
        rows = self._query(
            "SELECT d.kind, d.project, d.doc_id, d.ts_ms, 0.0 FROM docs d "
            "WHERE d.kind = %s AND d.project = %s AND d.doc_id = %s",
            (kind, project, item_id),
        )
        if not rows:
            return False
        ts = int(rows[0][3])
        if s.projects is not None and project not in s.projects:
            return False
        if kind == "node":
            if s.levels is not None and item_id.split(":")[1] not in s.levels:
                return False
            span = self._query(
                "SELECT start_ms, end_ms FROM toc_nodes WHERE project = %s AND node_id = %s",
                (project, item_id),
            )
            start, end = (int(span[0][0]), int(span[0][1])) if span else (ts, ts)
            if s.since_ms is not None and not end > s.since_ms:
                return False
            if s.until_ms is not None and not start < s.until_ms:
                return False
        else:
            if s.since_ms is not None and ts < s.since_ms:
                return False
            if s.until_ms is not None and ts >= s.until_ms:
                return False
        if s.session_id is not None:
            if kind == "grip":
                sql = "SELECT 1 FROM grips WHERE grip_id = %s AND session_id = %s"
                return bool(self._query(sql, (item_id, s.session_id)))
            if kind == "node":
                sql = ("SELECT 1 FROM segments WHERE project = %s AND node_id = %s "
                       "AND session_id = %s")  # fmt: skip
                return bool(self._query(sql, (project, item_id, s.session_id)))
            return False
        return True


@dataclass(frozen=True, slots=True)
class _Weights:
    """A query's lexemes with their document frequency and IDF in one index, and the index's
    average document length."""

    lexemes: list[str]
    dfs: list[int]
    idf: list[float]
    avgdl: float


class _Scope:
    """The filters of one search, as plain values."""

    __slots__ = ("levels", "projects", "role", "session_id", "since_ms", "until_ms")

    def __init__(
        self,
        projects: Sequence[str] | None,
        levels: Sequence[str] | None,
        since_ms: int | None,
        until_ms: int | None,
        session_id: str | None,
        role: str | None,
    ) -> None:
        self.projects = projects
        self.levels = levels
        self.since_ms = since_ms
        self.until_ms = until_ms
        self.session_id = session_id
        self.role = role
