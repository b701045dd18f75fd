"""``memtoc eval locomo``: every LoCoMo conversation through the real pipeline, every question
through every mode (see ``memtoc.eval.locomo`` for how the dataset is read)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from memtoc.eval.harness import (
    EvalProject,
    EvalQuery,
    ProgressFn,
    RunConfig,
    build_memory,
    ingest_and_process,
    run_projects,
)
from memtoc.eval.locomo import CATEGORIES, Conversation, load_locomo
from memtoc.eval.modes import Mode, ModeContext, mode_notes
from memtoc.eval.report import EvalReport
from memtoc.eval.scoring import score_locomo


def locomo_project(
    conv: Conversation, workdir: Path, *, ctx: ModeContext, pg_url: str | None = None
) -> EvalProject:
    """Ingest and process one conversation into its own fresh store (a PostgreSQL database on
    ``pg_url`` when given); its questions resolved."""
    memory = build_memory(workdir / f"{conv.sample_id}.db", conv.ref_ms, ctx, pg_url=pg_url)
    ingest_and_process(memory, conv.records(), conv.sample_id)
    events = memory.events(project=conv.sample_id)
    by_dia = {str(e.metadata["dia_id"]): e for e in events}
    queries = []
    for q in conv.questions:
        gold = tuple(by_dia[d].event_id for d in q.evidence)
        sessions = tuple(dict.fromkeys(by_dia[d].session_id for d in q.evidence))
        queries.append(EvalQuery(q.qid, q.question, q.category_name, gold, sessions, conv.ref_ms))
    return EvalProject(
        conv.sample_id,
        memory,
        queries,
        {e.event_id: e.text for e in events},
        {e.event_id: e.session_id for e in events},
    )


def dataset_notes(convs: Sequence[Conversation]) -> list[str]:
    """What loading had to work around (README quirks), for the report."""
    notes: list[str] = []
    for c in convs:
        if c.dangling_dates:
            notes.append(f"{c.sample_id}: {len(c.dangling_dates)} session dates without a session")
        for q in c.questions:
            if q.dropped:
                notes.append(f"{q.qid}: evidence {', '.join(q.dropped)} names no turn (dropped)")
        for qid, reason in c.skipped_questions:
            notes.append(f"{qid}: not asked ({reason})")
    return notes


def run_locomo(
    path: str | Path,
    modes: Sequence[Mode],
    ctx: ModeContext,
    cfg: RunConfig,
    *,
    skipped_modes: dict[str, str] | None = None,
    conversations: int | None = None,
    workdir: Path | None = None,
    command: str = "",
    progress: ProgressFn | None = None,
    pg_url: str | None = None,
    workers: int = 1,
) -> EvalReport:
    """Evaluate ``modes`` on the LoCoMo file at ``path`` (the first ``conversations`` only, if
    given). Stores go to ``workdir`` (kept) or a temporary directory (removed); with ``pg_url``,
    to one PostgreSQL database per conversation on that server (dropped after). ``workers`` > 1
    evaluates that many conversations at a time in worker processes (same scores)."""
    started = time.perf_counter()
    convs = load_locomo(path)[:conversations]
    builders = [partial(locomo_project, conv, ctx=ctx, pg_url=pg_url) for conv in convs]
    results, stages = run_projects(
        builders, modes, ctx, score_locomo, cfg, workdir=workdir, progress=progress,
        workers=workers,
    )  # fmt: skip
    return EvalReport(
        benchmark="locomo",
        dataset=str(path),
        command=command,
        embedder=ctx.embedder_label,
        counter=ctx.counter.name,
        config=cfg,
        categories=list(CATEGORIES.values()),
        results=results,
        skipped_modes=dict(skipped_modes or {}),
        notes=[*results.notes, *mode_notes(modes), *dataset_notes(convs)],
        wall_seconds=time.perf_counter() - started,
        stage_seconds=stages,
        projects=len(convs),
    )
