"""The evaluation loop shared by the benchmark adapters (LoCoMo, LongMemEval).

An adapter turns its dataset into ``EvalProject``s — one fresh store per project, filled through
the real ``Memory`` facade and processed by the real pipeline (``build_memory`` /
``ingest_and_process``) — and hands them, with the modes and a scorer, to ``evaluate_project``.
Every mode is prepared once per project, then asked every question once (``k`` = the retrieval
depth: enough turns for the largest ``k`` and budget); each call is timed, its items scored, and
the scores go into an ``EvalResults`` that aggregates per mode and category. A ``BudgetedMode``
(recall) is also asked once per budget, and its budget metrics are scored on those answers.
"""

from __future__ import annotations

import os
import random
import re
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from memtoc.clock import ManualClock
from memtoc.errors import StoreError
from memtoc.eval.metrics import budget_cut, mean, percentile
from memtoc.eval.modes import BudgetedMode, Mode, ModeContext, PreparedMode, RetrievedItem
from memtoc.ids import UlidFactory
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.services import store_timezone
from memtoc.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from memtoc.store.postgres import PostgresStore

OVERALL = "overall"
ProgressFn = Callable[[str, int, int], None]
"""``(stage, done, total)``: called as a stage advances."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    ks: tuple[int, ...] = (5, 10, 25, 50)
    budgets: tuple[int, ...] = (500, 1_000, 2_000)
    depth: int = 200
    """Turns asked of every mode per question (at least the largest ``k``)."""

    @property
    def request_k(self) -> int:
        return max(self.depth, *self.ks)


@dataclass(frozen=True, slots=True)
class EvalQuery:
    qid: str
    text: str
    category: str
    gold: tuple[str, ...]
    """Event ids of the gold turns."""
    gold_sessions: tuple[str, ...]
    ref_ms: int


@dataclass
class EvalProject:
    """One project's store and questions, plus the lookups scorers need."""

    project: str
    memory: Memory
    queries: list[EvalQuery]
    event_text: dict[str, str]
    session_of: dict[str, str]


Scorer = Callable[[EvalQuery, Sequence[RetrievedItem], EvalProject, RunConfig], dict[str, float]]


@dataclass(frozen=True, slots=True)
class QuestionScore:
    mode: str
    project: str
    qid: str
    category: str
    metrics: Mapping[str, float]
    latency_ms: float

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "mode": self.mode,
            "project": self.project,
            "qid": self.qid,
            "category": self.category,
            "latency_ms": round(self.latency_ms, 3),
            **{k: round(v, 6) for k, v in self.metrics.items()},
        }


@dataclass
class EvalResults:
    """Every question's scores, and their aggregation per mode and category."""

    scores: list[QuestionScore] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """How the run went (worker processes, or why it ran serially), for the report."""

    def add(self, score: QuestionScore) -> None:
        self.scores.append(score)

    def modes(self) -> list[str]:
        return list(dict.fromkeys(s.mode for s in self.scores))

    def categories(self, order: Sequence[str] = ()) -> list[str]:
        seen = set(s.category for s in self.scores)
        return [c for c in order if c in seen] + sorted(seen - set(order))

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{mode: {category | "overall": {metric: mean}}}`` (plus ``n``, the question count)."""
        groups: dict[tuple[str, str], list[QuestionScore]] = {}
        for s in self.scores:
            groups.setdefault((s.mode, s.category), []).append(s)
            groups.setdefault((s.mode, OVERALL), []).append(s)
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (mode, cat), rows in groups.items():
            metrics = list(dict.fromkeys(m for r in rows for m in r.metrics))
            agg = {m: mean([r.metrics[m] for r in rows if m in r.metrics]) for m in metrics}
            agg["n"] = float(len(rows))
            out.setdefault(mode, {})[cat] = agg
        return out

    def latency(self) -> dict[str, dict[str, float]]:
        """``{mode: {"p50_ms", "p95_ms", "mean_ms"}}`` over every retrieval call."""
        out: dict[str, dict[str, float]] = {}
        for mode in self.modes():
            values = [s.latency_ms for s in self.scores if s.mode == mode]
            out[mode] = {
                "p50_ms": percentile(values, 50),
                "p95_ms": percentile(values, 95),
                "mean_ms": mean(values),
            }
        return out


def build_memory(path: Path, ref_ms: int, ctx: ModeContext, *, pg_url: str | None = None) -> Memory:
    """A fresh store at ``path`` (any old one is removed) whose clock stands at ``ref_ms`` and
    whose time zone is UTC, whose ids come from a generator seeded by the path's stem (so a
    rerun mints the same ids and ranks ties the same); throwaway durability, the run's counter.

    With ``pg_url`` (team mode) the store is instead a fresh PostgreSQL database on that server,
    ``memtoc_eval_<path stem>``, dropped by ``run_projects`` once the project is evaluated."""
    clock = ManualClock(ref_ms)
    store: SqliteStore | PostgresStore
    if pg_url is not None:
        from memtoc.store.postgres import PostgresStore

        store = PostgresStore(fresh_eval_database(pg_url, path.stem), clock=clock, pool_size=2)
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        store = SqliteStore(path, durability="off", clock=clock)
    # ids from a generator seeded by the project's name: event ids break BM25 and cosine ties,
    # so random ids made two runs of the same code differ in a few tied rankings
    ids = UlidFactory(clock, random.Random(zlib.crc32(path.stem.encode("utf-8"))))
    tz = store_timezone(store, "UTC")
    return Memory(store, clock=clock, ids=ids, counter=ctx.counter, tz=tz)


EVAL_DB_PREFIX = "memtoc_eval_"


def _database_url(pg_url: str, name: str) -> str:
    parts = urlsplit(pg_url)
    return urlunsplit(parts._replace(path="/" + name))


def fresh_eval_database(pg_url: str, stem: str) -> str:
    """Create (dropping any leftover) the database ``memtoc_eval_<stem>`` on ``pg_url``'s server;
    return its URL (``drop_eval_database`` drops it)."""
    import psycopg

    name = EVAL_DB_PREFIX + re.sub(r"[^a-z0-9_]+", "_", stem.lower())[:40]
    try:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        raise StoreError(f"cannot create eval database {name}: {exc}") from exc
    return _database_url(pg_url, name)


def drop_eval_database(memory: Memory) -> None:
    """Drop the PostgreSQL database ``build_memory`` made for ``memory`` (after it is closed)."""
    url = getattr(memory.store, "url", None)
    if not isinstance(url, str):
        return
    name = urlsplit(url).path.lstrip("/")
    if not name.startswith(EVAL_DB_PREFIX):
        return
    import psycopg

    with psycopg.connect(_database_url(url, "postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ingest_and_process(
    memory: Memory, records: Iterable[Mapping[str, JsonValue]], project: str
) -> int:
    """Ingest ``records`` into ``project``, run the pipeline and force every rollup.

    Returns the number of events stored; any rejected record or pipeline failure is a
    ``StoreError`` (an evaluation over a partly built store would measure the wrong thing).
    """
    report = memory.ingest_records(records, project=project, agent="eval")
    if report.rejections:
        raise StoreError(f"{project}: {report.rejected} records rejected: {report.rejections[0]}")
    processed = memory.process()
    rolled = memory.rollup(force=True)
    if processed.failures or rolled.failures:
        failures = [*processed.failed_entries, *processed.failed_segments, *rolled.failures]
        raise StoreError(f"{project}: pipeline failures: {failures[:3]}")
    return report.ingested


def _budgeted(
    mode: BudgetedMode,
    query: EvalQuery,
    project: EvalProject,
    cfg: RunConfig,
    metrics: dict[str, float],
) -> float:
    """Score ``budget_*@B`` on the mode's own context for each budget ``B`` (overwriting what the
    scorer derived from the ranked list); the largest budget's call time in ms."""
    gold = set(query.gold)
    latency_ms = 0.0
    for budget in sorted(cfg.budgets):
        start = time.perf_counter()
        items = mode.retrieve_budget(query.text, project.project, query.ref_ms, budget)
        latency_ms = (time.perf_counter() - start) * 1000.0
        if gold:  # LongMemEval questions without gold turns have no turn metrics
            cut = budget_cut(items, budget, project.memory.counter, project.event_text)
            metrics[f"budget_recall@{budget}"] = len(gold & set(cut.event_ids)) / len(gold)
            metrics[f"budget_tokens@{budget}"] = float(cut.tokens)
    return latency_ms


def evaluate_project(
    project: EvalProject,
    modes: Sequence[Mode],
    scorer: Scorer,
    cfg: RunConfig,
    results: EvalResults,
    *,
    progress: ProgressFn | None = None,
) -> None:
    """Prepare every mode for ``project`` and score every question with each."""
    for mode in modes:
        if isinstance(mode, PreparedMode):
            mode.prepare(project.memory, project.project)
    total = len(project.queries)
    for n, query in enumerate(project.queries, start=1):
        for mode in modes:
            start = time.perf_counter()
            items = mode.retrieve(query.text, project.project, query.ref_ms, cfg.request_k)
            latency_ms = (time.perf_counter() - start) * 1000.0
            metrics = scorer(query, items, project, cfg)
            if isinstance(mode, BudgetedMode):
                # asked per budget (recall); latency is then that of the largest budget's call
                latency_ms = _budgeted(mode, query, project, cfg, metrics)
            results.add(
                QuestionScore(
                    mode.name, project.project, query.qid, query.category, metrics, latency_ms
                )
            )
        if progress is not None:
            progress("questions", n, total)


def default_workers() -> int:
    """Worker processes for an evaluation: one per CPU, at most 4."""
    return max(1, min(os.cpu_count() or 1, 4))


def run_projects(
    builders: Sequence[Callable[[Path], EvalProject]],
    modes: Sequence[Mode],
    ctx: ModeContext,
    scorer: Scorer,
    cfg: RunConfig,
    *,
    workdir: Path | None = None,
    progress: ProgressFn | None = None,
    workers: int = 1,
) -> tuple[EvalResults, dict[str, float]]:
    """Build each project (a builder gets the store folder), evaluate it, close it.

    Stores go to ``workdir`` (kept, for inspection) or a temporary folder (removed). With
    ``workers`` > 1 the projects are evaluated in that many worker processes
    (``memtoc.eval.harness_pool``; same scores in the same order), unless something cannot be
    sent to a worker — then serially, and ``results.notes`` says why. Returns the results and the
    seconds spent per stage (``ingest_process``, ``questions``; summed over workers).
    """
    results = EvalResults()
    workers = min(workers, len(builders))
    with tempfile.TemporaryDirectory(prefix="memtoc-eval-") as tmp:
        root = workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if workers > 1:
            from memtoc.eval.harness_pool import pool_blocker, run_pooled

            blocker = pool_blocker(builders, modes, ctx)
            if blocker is None:
                stages, notes = run_pooled(
                    builders, modes, ctx, scorer, cfg, root, workers, results, progress=progress
                )
                results.notes += [
                    f"{len(builders)} projects evaluated in {workers} worker processes "
                    "(latencies measured while the workers share the machine)",
                    *notes,
                ]
                return results, stages
            results.notes.append(f"evaluated serially: {blocker}")
        stages = {"ingest_process": 0.0, "questions": 0.0}
        for n, build in enumerate(builders, start=1):
            t0 = time.perf_counter()
            project = build(root)
            t1 = time.perf_counter()
            if progress is not None:
                progress("ingest+process", n, len(builders))
            try:
                evaluate_project(project, modes, scorer, cfg, results, progress=progress)
            finally:
                project.memory.close()
                drop_eval_database(project.memory)
                ctx.release(project.project)
            stages["ingest_process"] += t1 - t0
            stages["questions"] += time.perf_counter() - t1
    return results, stages
