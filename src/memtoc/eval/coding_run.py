"""``memtoc eval coding``: every question of a real coding corpus, every method, every budget.

For each question (asked at its reference time, ``coding.reference_ms``) and each method
(``coding_methods``), the method's answer within each budget is scored (``coding_score``): which
gold quotes it holds (the 1-based item holding each), whether the question is answered, the
context's tokens, the call's latency — plus where the events holding each quote stood in the
method's ranking, so a miss can be told apart: *ranked low* (the ranking's fault), *ranked high
but not packed* (the packing's), or *gold not in store* (the importer's). Every answer is checked:
the joined context never over budget, every cited event id resolving in the store; a failure is a
``Violation`` in the report, never an exception that stops the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memtoc.eval.coding import CATEGORIES, CodingQuestion, Corpus, GoldIndex, reference_ms
from memtoc.eval.coding_browse import BROWSE_METHODS, browse_methods
from memtoc.eval.coding_methods import Answer, RecallMethod, baselines
from memtoc.eval.coding_score import (
    Violation,
    budget_violation,
    context_tokens,
    is_answered,
    quote_positions,
    unresolved,
)
from memtoc.eval.coding_store import BuiltStore
from memtoc.eval.metrics import mean, percentile
from memtoc.eval.modes import ModeContext
from memtoc.model import JsonValue, iso_ms

OVERALL = "overall"
GOLD_SHOWN = 5
"""Events shown per gold quote in the per-question output (all of them count for ranks)."""
ProgressFn = Callable[[str, int, int], None]


class Method(Protocol):
    name: str

    def answer(self, q: CodingQuestion, ref_ms: int, budget: int) -> Answer: ...

    def ranking(self, q: CodingQuestion, ref_ms: int) -> list[str]: ...


@dataclass
class CodingRun:
    """Everything one run produced: per-question rows, violations, and what the report needs."""

    corpus: Corpus
    command: str
    embedder: str
    counter: str
    timezone: str
    budgets: tuple[int, ...]
    methods: list[str]
    skipped_methods: dict[str, str]
    store_events: int
    rows: list[dict[str, JsonValue]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    latencies: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    truncated: dict[tuple[str, int], int] = field(default_factory=dict)
    degraded: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    time_limit: str = "product default"
    """Recall's time limit in this run."""
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%d"))

    def categories(self) -> list[str]:
        seen = {str(r["category"]) for r in self.rows}
        return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))

    def answered(self, method: str, budget: int, category: str = OVERALL) -> tuple[int, int]:
        """``(answered, asked)`` for a method, budget and category (or overall)."""
        hits = asked = 0
        for r in self.rows:
            if category != OVERALL and r["category"] != category:
                continue
            asked += 1
            cell = _cell(r, method, budget)
            hits += bool(cell and cell["answered"])
        return hits, asked

    def mean_tokens(self, method: str, budget: int) -> float:
        return mean([float(c["tokens"]) for r in self.rows
                     if (c := _cell(r, method, budget)) is not None])  # fmt: skip

    def latency(self, method: str, budget: int | None = None) -> dict[str, float]:
        values = [v for (m, b), vs in self.latencies.items() if m == method
                  and (budget is None or b == budget) for v in vs]  # fmt: skip
        return {"p50_ms": percentile(values, 50), "p95_ms": percentile(values, 95),
                "mean_ms": mean(values)}  # fmt: skip

    def gold_not_in_store(self) -> list[dict[str, JsonValue]]:
        out: list[dict[str, JsonValue]] = []
        for r in self.rows:
            gold = r["gold"]
            assert isinstance(gold, list)
            in_store = r["gold_in_store"]
            assert isinstance(in_store, list)
            out += [{"id": r["id"], "quote": n, "text": gold[n]}
                    for n, ok in enumerate(in_store) if not ok]  # fmt: skip
        return out

    def summary(self) -> dict[str, JsonValue]:
        cats = self.categories()
        table: dict[str, JsonValue] = {}
        for m in self.methods:
            per_budget: dict[str, JsonValue] = {}
            for b in self.budgets:
                cell: dict[str, JsonValue] = {}
                for c in [OVERALL, *cats]:
                    hits, asked = self.answered(m, b, c)
                    cell[c] = {"answered": round(hits / asked, 4) if asked else 0.0,
                               "n_answered": hits, "n": asked}  # fmt: skip
                cell["mean_tokens"] = round(self.mean_tokens(m, b), 1)
                cell["latency"] = {k: round(v, 2) for k, v in self.latency(m, b).items()}
                cell["truncated"] = self.truncated.get((m, b), 0)
                per_budget[str(b)] = cell
            table[m] = per_budget
        missing = self.gold_not_in_store()
        return {
            "benchmark": "coding",
            "corpus": self.corpus.name,
            "dataset": str(self.corpus.root),
            "command": self.command,
            "date": self.date,
            "embedder": self.embedder,
            "token_counter": self.counter,
            "timezone": self.timezone,
            "recall_time_limit": self.time_limit,
            "budgets": list(self.budgets),
            "methods": list(self.methods),
            "skipped_methods": dict(self.skipped_methods),
            "questions": len(self.rows),
            "categories": cats,
            "store_events": self.store_events,
            "answered": table,
            "latency": {
                m: {k: round(v, 2) for k, v in self.latency(m).items()} for m in self.methods
            },
            "violations": {
                "budget": sum(v.kind == "budget" for v in self.violations),
                "citation": sum(v.kind == "citation" for v in self.violations),
                "examples": [vars_of(v) for v in self.violations[:20]],
            },
            "gold_not_in_store": {"quotes": len(missing), "list": missing},
            "degraded": dict(self.degraded),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "notes": list(self.notes),
        }


def vars_of(v: Violation) -> dict[str, JsonValue]:
    return {"kind": v.kind, "id": v.qid, "method": v.method, "budget": v.budget, "detail": v.detail}


def _cell(row: dict[str, JsonValue], method: str, budget: int) -> dict[str, JsonValue] | None:
    methods = row["methods"]
    assert isinstance(methods, dict)
    m = methods.get(method)
    if not isinstance(m, dict):
        return None
    budgets = m["budgets"]
    assert isinstance(budgets, dict)
    cell = budgets.get(str(budget))
    return cell if isinstance(cell, dict) else None


def _ranks(ranking: Sequence[str], gold_events: Sequence[Sequence[str]]) -> list[int | None]:
    """Per quote: the best 1-based position in ``ranking`` of an event holding it (None: absent)."""
    pos: dict[str, int] = {}
    for n, e in enumerate(ranking, start=1):
        pos.setdefault(e, n)
    return [min((pos[e] for e in events if e in pos), default=None) for events in gold_events]


def run_coding(
    corpus: Corpus,
    questions: Sequence[CodingQuestion],
    built: BuiltStore,
    ctx: ModeContext,
    *,
    methods: Sequence[str],
    budgets: Sequence[int],
    command: str = "",
    progress: ProgressFn | None = None,
    time_limit_ms: float | None = None,
) -> CodingRun:
    """Ask ``questions`` of every method in ``methods`` at every budget over ``built``
    (``time_limit_ms``: recall's, None for the product's)."""
    memory, project = built.memory, built.project
    started = time.perf_counter()
    events = memory.events(project=project)
    gold = GoldIndex(events)
    chosen: list[Method] = []
    skipped: dict[str, str] = {}
    if "recall" in methods:
        chosen.append(RecallMethod(memory, project, time_limit_ms))
    others = tuple(m for m in methods if m != "recall" and m not in BROWSE_METHODS)
    base, skipped = baselines(memory, project, ctx, others)
    chosen += base
    chosen += browse_methods(memory, project, ctx, methods)
    order = {m: n for n, m in enumerate(methods)}
    chosen.sort(key=lambda m: order[m.name])
    run = CodingRun(
        corpus, command, ctx.embedder_label, ctx.counter.name, str(memory.tz),
        tuple(sorted(budgets)), [m.name for m in chosen], skipped, len(events),
        notes=list(built.notes),
    )  # fmt: skip
    run.time_limit = (
        "product default"
        if time_limit_ms is None
        else ("off" if math.isinf(time_limit_ms) else f"{time_limit_ms:g} ms")
    )
    run.seconds["store"] = built.seconds
    run.seconds["prepare"] = time.perf_counter() - started
    store = memory.store

    def known(ids: Sequence[str]) -> set[str]:
        return {e.event_id for e in store.get_events(list(ids))}

    by_id = {e.event_id: e for e in events}

    def described(ids: Sequence[str]) -> list[JsonValue]:
        """The first few events holding a quote: id, type, session, time and size."""
        return [
            {"id": e.event_id, "type": e.event_type, "session": e.session_id,
             "at": iso_ms(e.ts_ms), "tokens": ctx.counter.count(e.text)}
            for e in (by_id[i] for i in ids[:GOLD_SHOWN])
        ]  # fmt: skip

    asked = time.perf_counter()
    for n, q in enumerate(questions, start=1):
        ref = reference_ms(q, built.last_event_ms)
        gold_events = [gold.events_with(g) for g in q.gold]
        row: dict[str, JsonValue] = {
            **q.to_dict(),
            "at": iso_ms(ref),
            "at_given": q.at_ms is not None,
            "gold_in_store": [bool(g) for g in gold_events],
            "gold_events": [described(g) for g in gold_events],
        }
        per_method: dict[str, JsonValue] = {}
        for method in chosen:
            ranks = _ranks(method.ranking(q, ref), gold_events)
            cells: dict[str, JsonValue] = {}
            for budget in run.budgets:
                answer = method.answer(q, ref, budget)
                positions = quote_positions(q.gold, answer.items)
                tokens = context_tokens(answer.items, ctx.counter)
                run.latencies.setdefault((method.name, budget), []).append(answer.latency_ms)
                if answer.truncated:
                    run.truncated[(method.name, budget)] = (
                        run.truncated.get((method.name, budget), 0) + 1
                    )
                if answer.degraded:
                    run.degraded.setdefault(method.name, answer.degraded)
                why = budget_violation(answer.items, budget, ctx.counter, answer.reported_tokens)
                if why is not None:
                    run.violations.append(Violation("budget", q.qid, method.name, budget, why))
                lost = unresolved(answer.items, known)
                if lost:
                    run.violations.append(Violation("citation", q.qid, method.name, budget,
                                                    f"unresolved: {', '.join(lost[:5])}"))  # fmt: skip
                cells[str(budget)] = {
                    "answered": is_answered(q.need, positions),
                    "found": positions,
                    "tokens": tokens,
                    "items": len(answer.items),
                    "latency_ms": round(answer.latency_ms, 2),
                    **({"truncated": True} if answer.truncated else {}),
                    **({"returned": list(answer.returned)} if answer.returned else {}),
                }
            per_method[method.name] = {"rank": ranks, "budgets": cells}
        row["methods"] = per_method
        run.rows.append(row)
        if progress is not None:
            progress("questions", n, len(questions))
    run.seconds["questions"] = time.perf_counter() - asked
    missing = run.gold_not_in_store()
    if missing:
        run.notes.append(f"{len(missing)} gold quotes are not inside any stored event's text "
                         "(gold not in store: an importer or redaction rewrote the text)")  # fmt: skip
    return run


def output_paths(out: Path) -> dict[str, Path]:
    return {
        "questions": out / "questions.jsonl",
        "summary": out / "summary.json",
        "report": out / "report.md",
        "by_question": out / "questions.md",
        "chart": out / "answered_vs_budget.png",
    }
