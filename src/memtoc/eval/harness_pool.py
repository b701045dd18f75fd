"""Evaluating projects in worker processes (``run_projects(..., workers=N)``).

Projects are independent — each its own store, its own questions — so N spawned workers evaluate
N of them at a time. A worker receives the project's builder (pickled: a ``functools.partial`` of
a module-level function; the ``ModeContext`` inside pickles as its spec and is loaded once per
worker), builds the run's modes afresh by name, and returns the project's ``QuestionScore``s plus
the modes' tallies (``TalliedMode``) and other notes. The parent adds the scores in project order,
question order, mode order — exactly the order of a serial run — so the report does not depend on
which worker finished first; only latencies differ (two workers share the machine).

``pool_blocker`` says why a run cannot go to workers (a hand-built context, a mode not in the
registry, a builder that does not pickle); the harness then runs serially and the report says so.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtoc.errors import ConfigError
from memtoc.eval.modes import Mode, ModeContext, NotedMode, TalliedMode, build_modes, load_modes

if TYPE_CHECKING:
    from memtoc.eval.harness import EvalProject, EvalResults, ProgressFn, QuestionScore, RunConfig

Builder = Callable[[Path], "EvalProject"]
Scorer = Callable[..., dict[str, float]]

_progress_queue: Any = None
"""In a worker: where question progress goes (set by ``_init``)."""


def pool_blocker(
    builders: Sequence[Builder], modes: Sequence[Mode], ctx: ModeContext
) -> str | None:
    """Why these projects cannot be evaluated in workers, or ``None`` when they can."""
    if ctx.spec is None:
        return "the mode context was not made by ModeContext.load (nothing to reload it from)"
    registry = load_modes()
    for mode in modes:
        if mode.name not in registry:
            return f"mode {mode.name!r} is not in the registry (a worker could not rebuild it)"
    try:
        pickle.dumps(list(builders))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        return f"a project builder cannot be sent to a worker ({exc})"
    return None


@dataclass(frozen=True, slots=True)
class _Done:
    index: int
    scores: list[QuestionScore]
    tallies: dict[str, dict[str, int]]
    notes: dict[str, list[str]]
    build_s: float
    questions_s: float


def _init(progress: Any) -> None:
    global _progress_queue
    _progress_queue = progress


def _task(
    index: int,
    build: Builder,
    names: list[str],
    ctx: ModeContext,
    scorer: Scorer,
    cfg: RunConfig,
    root: Path,
) -> _Done:
    """One project in a worker: build it, evaluate it with freshly built modes, close it."""
    from memtoc.eval.harness import EvalResults, drop_eval_database, evaluate_project

    modes, skipped = build_modes(names, ctx)
    if skipped:
        raise ConfigError(f"modes unavailable in a worker: {skipped}", setting="--workers")
    t0 = time.perf_counter()
    project = build(root)
    t1 = time.perf_counter()
    sink = _progress_queue

    def report(stage: str, done: int, total: int) -> None:
        if sink is not None:
            sink.put((index, done, total))

    results = EvalResults()
    try:
        evaluate_project(project, modes, scorer, cfg, results, progress=report)
    finally:
        project.memory.close()
        drop_eval_database(project.memory)
        ctx.release(project.project)
    tallies = {m.name: m.tally() for m in modes if isinstance(m, TalliedMode)}
    notes = {
        m.name: m.notes()
        for m in modes
        if isinstance(m, NotedMode) and not isinstance(m, TalliedMode)
    }
    return _Done(index, results.scores, tallies, notes, t1 - t0, time.perf_counter() - t1)


def run_pooled(
    builders: Sequence[Builder],
    modes: Sequence[Mode],
    ctx: ModeContext,
    scorer: Scorer,
    cfg: RunConfig,
    root: Path,
    workers: int,
    results: EvalResults,
    *,
    progress: ProgressFn | None = None,
) -> tuple[dict[str, float], list[str]]:
    """Evaluate every project in ``workers`` spawned processes, adding the scores to ``results``
    in project order and each worker's tallies to ``modes``. Returns the summed seconds per
    stage and the notes of modes without a tally (prefixed with their project index)."""
    names = [m.name for m in modes]
    spawn = multiprocessing.get_context("spawn")
    sink = spawn.Queue()
    done: dict[int, _Done] = {}
    asked: dict[int, tuple[int, int]] = {}
    with ProcessPoolExecutor(workers, mp_context=spawn, initializer=_init, initargs=(sink,)) as ex:
        pending: set[Future[_Done]] = {
            ex.submit(_task, i, build, names, ctx, scorer, cfg, root)
            for i, build in enumerate(builders)
        }
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    out = future.result()  # a worker's exception is raised here
                    done[out.index] = out
                    if progress is not None:
                        progress("ingest+process", len(done), len(builders))
                _drain(sink, asked, progress)
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    _drain(sink, asked, progress)
    by_name = {m.name: m for m in modes}
    stages = {"ingest_process": 0.0, "questions": 0.0}
    notes: list[str] = []
    for index in range(len(builders)):
        out = done[index]
        for score in out.scores:
            results.add(score)
        for name, tally in out.tallies.items():
            mode = by_name[name]
            assert isinstance(mode, TalliedMode)
            mode.absorb(tally)
        notes += [f"project {index + 1}: {n}" for lines in out.notes.values() for n in lines]
        stages["ingest_process"] += out.build_s
        stages["questions"] += out.questions_s
    return stages, notes


def _drain(sink: Any, asked: dict[int, tuple[int, int]], progress: ProgressFn | None) -> None:
    """Fold the workers' question progress into one ``questions`` bar."""
    changed = False
    while True:
        try:
            index, n, total = sink.get_nowait()
        except queue_module.Empty:
            break
        asked[index] = (n, total)
        changed = True
    if changed and progress is not None:
        progress("questions", sum(n for n, _ in asked.values()), sum(t for _, t in asked.values()))
