"""Summary coverage: how much of an independent reference summary the TOC's nodes hold, and how
the nodes read (``memtoc eval summaries``).

**Units.** A *unit* pairs a reference summary written without memtoc with the node text memtoc
built for the same stretch of history:

- ``session``: one session — the reference is its summary (LoCoMo's ``session_N_summary``;
  context-evaluator's checkpoint summaries of that session: intent, outcome and learnings), the
  candidate the text of every segment of that session;
- ``day`` / ``week`` / ``month``: one period node — the reference joins the summaries of every
  session with a segment under it, the candidate is that one node's text.

A node's **text** is what an agent reads of it at L0 without its children: title, L0 abstract,
bullets and keywords (``node_text``). Its tokens are reported beside the scores, so coverage
bought with length shows.

**Scores**, per unit, then averaged over the units of a level:

- ``recall``: key-term recall — the share of the reference's key terms (``key_terms``:
  lowercased, lightly stemmed content words; identifiers whole and split; stopwords and bare
  numbers out) that the candidate's key terms contain;
- ``weighted``: the same with each term weighted by ``ln(N / df)`` over the N references of that
  level (df: how many hold the term), so words every reference uses ("added", "tests") count for
  nothing and a unit's own names for much — the share of its *distinctive* terms (units whose
  reference has no weighted term are left out of this mean);
- ``ceiling``: ``weighted`` for all the text stored for the unit (every event of the session or
  period): what any summary drawn from it could reach.

**Health** of the nodes, per level (every node of every project): how many, how many
``(empty)``, L0 tokens (median, 10th/90th percentile, share in 60-140), bullets per node, parents
repeating a child's text verbatim (title, L0 or a bullet), and keywords that are no search term
(a flag, URL scheme or address, ``REDACTED``, markup, an absolute path, a bare hash).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from memtoc.errors import ConfigError
from memtoc.eval.metrics import percentile
from memtoc.model import Event, JsonValue, TocNode
from memtoc.store.base import Store
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TokenCounter

REFERENCE_FILE = Path("reference") / "checkpoints.jsonl"
LEVEL_ORDER = ("session", "day", "week", "month", "year")
L0_RANGE = (60, 140)
EMPTY_TITLE = "(empty)"
_JUNK_KEYWORD = re.compile(
    r"^-|://|^https?$|^www\.|redacted|^<|[<>]|^/|^~/|^[0-9a-f]{7,40}$|^\d+$", re.IGNORECASE
)


def node_text(node: TocNode) -> str:
    """What an agent reads of a node at L0, without its children: title, abstract, bullets,
    keywords."""
    parts = [node.title, node.abstract, *(b.text for b in node.bullets)]
    if node.keywords:
        parts.append(", ".join(node.keywords))
    return "\n".join(p for p in parts if p)


def is_junk_keyword(keyword: str) -> bool:
    """A keyword nobody would search for: a CLI flag, a URL scheme or address, ``REDACTED``,
    markup, an absolute path, a bare hash or number."""
    return _JUNK_KEYWORD.search(keyword.strip()) is not None


@dataclass(frozen=True, slots=True)
class Unit:
    """One reference summary and the node text built for the same history."""

    corpus: str
    level: str
    unit: str
    reference: str
    candidate: str
    source: str
    """All the text stored for the unit (the ceiling's candidate)."""


@dataclass(frozen=True, slots=True)
class UnitScore:
    unit: Unit
    recall: float
    weighted: float | None
    ceiling: float | None
    tokens: int
    missed: tuple[str, ...]


def _weights(references: Sequence[set[str]]) -> dict[str, float]:
    df: dict[str, int] = defaultdict(int)
    for terms in references:
        for t in terms:
            df[t] += 1
    n = len(references)
    return {t: math.log(n / d) for t, d in df.items()}


def _weighted(ref: set[str], got: set[str], w: dict[str, float]) -> float | None:
    total = math.fsum(w.get(t, 0.0) for t in ref)
    if total <= 0:
        return None
    return math.fsum(w.get(t, 0.0) for t in ref & got) / total


def score_units(units: Sequence[Unit], counter: TokenCounter) -> list[UnitScore]:
    """Every unit scored (IDF over the references of its corpus and level)."""
    groups: dict[tuple[str, str], list[Unit]] = defaultdict(list)
    for u in units:
        groups[(u.corpus, u.level)].append(u)
    out: list[UnitScore] = []
    for group in groups.values():
        refs = [key_terms(u.reference) for u in group]
        w = _weights(refs)
        for u, ref in zip(group, refs, strict=True):
            if not ref:
                continue
            got = key_terms(u.candidate)
            source = key_terms(u.source) if u.source else set()
            missed = sorted(ref - got, key=lambda t: (-w.get(t, 0.0), t))[:8]
            out.append(
                UnitScore(
                    u,
                    len(ref & got) / len(ref),
                    _weighted(ref, got, w),
                    _weighted(ref, source, w) if u.source else None,
                    counter.count(u.candidate),
                    tuple(missed),
                )
            )
    return out


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def summarise_scores(scores: Sequence[UnitScore]) -> dict[str, JsonValue]:
    """Per corpus and level: units, mean recall, weighted recall, ceiling, candidate tokens."""
    groups: dict[tuple[str, str], list[UnitScore]] = defaultdict(list)
    for s in scores:
        groups[(s.unit.corpus, s.unit.level)].append(s)
    out: dict[str, JsonValue] = {}
    for (corpus, level), group in sorted(
        groups.items(), key=lambda kv: (kv[0][0], LEVEL_ORDER.index(kv[0][1]))
    ):
        entry = out.setdefault(corpus, {})
        assert isinstance(entry, dict)
        entry[level] = {
            "units": len(group),
            "recall": _r(_mean(s.recall for s in group)),
            "weighted": _r(_mean(s.weighted for s in group)),
            "ceiling": _r(_mean(s.ceiling for s in group)),
            "tokens": _r(_mean(float(s.tokens) for s in group), 1),
        }
    return out


# -- node health ---------------------------------------------------------------------------------


@dataclass(slots=True)
class LevelHealth:
    nodes: int = 0
    empty: int = 0
    l0_tokens: list[int] = field(default_factory=list)
    bullets: int = 0
    keywords: int = 0
    junk_keywords: list[str] = field(default_factory=list)
    verbatim_parents: int = 0
    """Parents whose title, L0 or one bullet repeats a child's verbatim."""

    def to_dict(self) -> dict[str, JsonValue]:
        l0 = [float(x) for x in self.l0_tokens]
        lo, hi = L0_RANGE
        return {
            "nodes": self.nodes,
            "empty": self.empty,
            "l0_median": _r(median(l0) if l0 else 0.0, 1),
            "l0_p10": _r(percentile(l0, 10), 1),
            "l0_p90": _r(percentile(l0, 90), 1),
            "l0_in_range": _r(sum(lo <= x <= hi for x in l0) / len(l0) if l0 else 0.0),
            "bullets_per_node": _r(self.bullets / self.nodes if self.nodes else 0.0, 2),
            "junk_keyword_share": _r(
                len(self.junk_keywords) / self.keywords if self.keywords else 0.0
            ),
            "junk_keyword_examples": list(dict.fromkeys(self.junk_keywords))[:10],
            "verbatim_parents": self.verbatim_parents,
        }


def _repeats_child(node: TocNode, children: Sequence[TocNode]) -> bool:
    titles = {c.title for c in children}
    abstracts = {c.abstract for c in children}
    bullets = {b.text for c in children for b in c.bullets}
    return (
        node.title in titles
        or node.abstract in abstracts
        or any(b.text in bullets for b in node.bullets)
    )


def node_health(
    store: Store, projects: Iterable[str], counter: TokenCounter
) -> dict[str, LevelHealth]:
    """Health of every node of ``projects``, per level (segment first)."""
    out: dict[str, LevelHealth] = {}
    for project in projects:
        nodes = store.list_nodes(project)
        by_parent: dict[str, list[TocNode]] = defaultdict(list)
        for n in nodes:
            if n.parent_id:
                by_parent[n.parent_id].append(n)
        for n in nodes:
            h = out.setdefault(n.level, LevelHealth())
            h.nodes += 1
            h.empty += n.title == EMPTY_TITLE
            h.l0_tokens.append(counter.count(n.abstract))
            h.bullets += len(n.bullets)
            h.keywords += len(n.keywords)
            h.junk_keywords += [k for k in n.keywords if is_junk_keyword(k)]
            kids = by_parent.get(n.node_id, [])
            h.verbatim_parents += bool(kids) and _repeats_child(n, kids)
    order = ("segment", "day", "week", "month", "year")
    return {lvl: out[lvl] for lvl in order if lvl in out}


# -- units from a built store --------------------------------------------------------------------


def period_units(
    corpus: str,
    store: Store,
    project: str,
    references: dict[str, str],
    events_of: dict[str, list[Event]],
) -> list[Unit]:
    """Session units (a session's segments) and period units (a day/week/month node) for every
    session with a reference (``references``: session id → reference text)."""
    nodes = store.list_nodes(project)
    by_id = {n.node_id: n for n in nodes}
    segments = [n for n in nodes if n.level == "segment"]
    units: list[Unit] = []
    by_session: dict[str, list[TocNode]] = defaultdict(list)
    for s in segments:
        if s.session_id:
            by_session[s.session_id].append(s)
    for sid, segs in sorted(by_session.items()):
        if sid not in references:
            continue
        units.append(
            Unit(
                corpus,
                "session",
                sid,
                references[sid],
                "\n".join(node_text(s) for s in segs),
                "\n".join(e.text for e in events_of.get(sid, [])),
            )
        )
    # every period node above a referenced session's segments, with the sessions under it
    sessions_under: dict[str, set[str]] = defaultdict(set)
    for s in segments:
        if not s.session_id or s.session_id not in references:
            continue
        parent = s.parent_id
        while parent and parent in by_id:
            sessions_under[parent].add(s.session_id)
            parent = by_id[parent].parent_id
    for node_id, sids in sorted(sessions_under.items()):
        node = by_id[node_id]
        if node.level not in LEVEL_ORDER or node.level == "year":
            continue
        ordered = sorted(sids)
        source = [
            e.text
            for sid in ordered
            for e in events_of.get(sid, [])
            if node.start_ms <= e.ts_ms < node.end_ms
        ]
        units.append(
            Unit(
                corpus,
                node.level,
                node_id,
                "\n".join(references[sid] for sid in ordered),
                node_text(node),
                "\n".join(source),
            )
        )
    return units


def checkpoint_references(path: Path) -> dict[str, str]:
    """Session id → the text of its checkpoint summaries (intent, outcome, learnings: repo,
    code findings, workflow), from a ``reference/checkpoints.jsonl``."""
    if not path.is_file():
        raise ConfigError(f"no reference summaries at {path}", setting="PATH")
    out: dict[str, list[str]] = defaultdict(list)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path} line {n}: not JSON ({exc})", setting="PATH") from exc
        summary = row.get("summary") if isinstance(row, dict) else None
        sid = row.get("session_id") if isinstance(row, dict) else None
        if not isinstance(summary, dict) or not isinstance(sid, str):
            continue
        out[sid].append(_checkpoint_text(summary))
    return {sid: "\n".join(texts) for sid, texts in out.items() if any(texts)}


def _checkpoint_text(summary: dict[str, object]) -> str:
    parts: list[str] = []
    for key in ("intent", "outcome"):
        value = summary.get(key)
        if isinstance(value, str):
            parts.append(value)
    learnings = summary.get("learnings")
    if isinstance(learnings, dict):
        for key in ("repo", "workflow"):
            items = learnings.get(key)
            if isinstance(items, list):
                parts += [str(i) for i in items if isinstance(i, str)]
        code = learnings.get("code")
        if isinstance(code, list):
            parts += [str(c["finding"]) for c in code if isinstance(c, dict) and "finding" in c]
    return "\n".join(parts)


@dataclass(slots=True)
class CorpusSummaries:
    """``memtoc eval summaries`` on a coding corpus: coverage (when it has references) and
    health."""

    corpus: str
    events: int
    scores: list[UnitScore] = field(default_factory=list)
    health: dict[str, LevelHealth] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self, *, per_unit: bool = False) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "corpus": self.corpus,
            "events": self.events,
            "coverage": summarise_scores(self.scores),
            "health": {lvl: h.to_dict() for lvl, h in self.health.items()},
            "notes": list(self.notes),
        }
        if per_unit:
            out["units"] = [
                {
                    "level": s.unit.level,
                    "unit": s.unit.unit,
                    "recall": round(s.recall, 4),
                    "weighted": _r(s.weighted),
                    "ceiling": _r(s.ceiling),
                    "tokens": s.tokens,
                    "missed": list(s.missed),
                }
                for s in self.scores
            ]
        return out


def corpus_summaries(
    store: Store, project: str, events: Sequence[Event], counter: TokenCounter, root: Path
) -> CorpusSummaries:
    """Coverage of a built coding corpus's nodes against its ``reference/checkpoints.jsonl``
    (when it has one) and the health of its nodes."""
    report = CorpusSummaries(root.name, len(events))
    ref_path = root / REFERENCE_FILE
    if ref_path.is_file():
        references = checkpoint_references(ref_path)
        by_session: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            by_session[e.session_id].append(e)
        units = period_units(root.name, store, project, references, by_session)
        report.scores = score_units(units, counter)
        report.notes.append(
            f"{len(references)} sessions have a reference summary ({REFERENCE_FILE})"
        )
    else:
        report.notes.append(f"no {REFERENCE_FILE}: node health only, no coverage")
    report.health = node_health(store, [project], counter)
    return report
