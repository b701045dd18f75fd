"""``memtoc eval``: retrieval quality on public benchmarks (LoCoMo, LongMemEval), every mode side by
side in one run."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from memtoc.errors import ConfigError
from memtoc.eval.harness import RunConfig, default_workers
from memtoc.eval.modes import Mode, ModeContext, build_modes
from memtoc.eval.report import EvalReport, rich_table, write_outputs
from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.surfaces.cli.app import (
    JsonOpt,
    SortedGroup,
    app,
    console,
    emit_json,
    err_console,
    fail,
    state,
)

eval_app = typer.Typer(
    cls=SortedGroup, help="Retrieval quality on public benchmarks (LoCoMo, LongMemEval)."
)
app.add_typer(eval_app, name="eval")

ModesOpt = Annotated[
    str | None,
    typer.Option("--modes", help="Comma-separated modes (default: every registered mode)."),
]
KOpt = Annotated[str, typer.Option("--k", help="Comma-separated k for recall@k.")]
BudgetsOpt = Annotated[str, typer.Option("--budgets", help="Comma-separated token budgets.")]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Write report.md, recall_vs_budget.png, results.json here."),
]
EmbedderOpt = Annotated[
    str | None,
    typer.Option("--embedder", help="static, onnx or none (default: the MEMTOC_EMBEDDER setting)."),
]
EmbedModelOpt = Annotated[
    str | None,
    typer.Option("--embed-model", help="Model folder or hub name (default: MEMTOC_EMBED_MODEL)."),
]
WorkdirOpt = Annotated[
    Path | None,
    typer.Option("--workdir", help="Keep the per-project stores here (default: a temp dir)."),
]


def _pg_url(ctx: typer.Context, db: str | None) -> str | None:
    """The PostgreSQL server an eval builds its stores on: ``--db``, else the ``db`` setting when
    it is a PostgreSQL URL; None for SQLite."""
    pg_url = db or state(ctx).settings.db
    if pg_url.startswith(("postgresql://", "postgres://")):
        return pg_url
    if db is not None:
        raise fail(f"--db must be a postgresql:// URL here (got {db!r})")
    return None


def _ints(value: str, option: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise ConfigError(
            f"expected comma-separated integers, got {value!r}", setting=option
        ) from None
    if not out or min(out) <= 0:
        raise ConfigError(f"expected positive integers, got {value!r}", setting=option)
    return tuple(sorted(set(out)))


def _context(ctx: typer.Context, embedder: str | None, model: str | None) -> ModeContext:
    settings = state(ctx).settings
    return ModeContext.load(embedder or settings.embedder, model or settings.embed_model)


def _modes(names: str | None, mctx: ModeContext) -> tuple[list[Mode], dict[str, str]]:
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    modes, skipped = build_modes(wanted, mctx)
    if not modes:
        raise ConfigError("no mode can run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()),
                          setting="--modes")  # fmt: skip
    return modes, skipped


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    if quiet:
        yield None
        return
    columns = (TextColumn("[bold]{task.description:<14}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def show(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield show


def _finish(report: EvalReport, out: Path | None, json_out: bool) -> None:
    paths = write_outputs(report, out) if out is not None else {}
    if json_out:
        emit_json({**report.to_dict(), "outputs": {k: str(v) for k, v in paths.items()}})
        return
    console.print(rich_table(report))
    for mode, why in report.skipped_modes.items():
        console.print(f"[yellow]not run[/] {mode}: {why}", highlight=False)
    console.print(
        f"{len(report.results.modes())} modes, {report.projects} projects, "
        f"embedder {report.embedder}, {report.wall_seconds:.1f} s"
    )
    for kind, path in paths.items():
        console.print(f"{kind}: {path}", highlight=False)


def _command_line() -> str:
    return "memtoc " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@eval_app.command("locomo")
def eval_locomo(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="locomo10.json", exists=True, dir_okay=False)],
    modes: ModesOpt = None,
    k: KOpt = "5,10,25,50",
    budgets: BudgetsOpt = "500,1000,2000",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    conversations: Annotated[
        int | None, typer.Option("--conversations", help="Only the first N conversations.")
    ] = None,
    embedder: EmbedderOpt = None,
    embed_model: EmbedModelOpt = None,
    workdir: WorkdirOpt = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="postgresql://… : one database per conversation (team mode)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Conversations evaluated at a time, in worker processes (default: one per "
            "CPU, at most 4).",
        ),
    ] = None,
) -> None:
    """Evidence recall@k, recall within token budgets, tokens and latency per mode on LoCoMo."""
    from memtoc.eval.locomo_run import run_locomo

    pg_url = _pg_url(ctx, db)
    cfg = RunConfig(ks=_ints(k, "--k"), budgets=_ints(budgets, "--budgets"))
    mctx = _context(ctx, embedder, embed_model)
    chosen, skipped = _modes(modes, mctx)
    with _progress(json_out) as progress:
        report = run_locomo(path, chosen, mctx, cfg, skipped_modes=skipped,
                            conversations=conversations, workdir=workdir,
                            command=_command_line(), progress=progress,
                            pg_url=pg_url,
                            workers=workers or default_workers())  # fmt: skip
    _finish(report, out, json_out)


@eval_app.command("longmemeval")
def eval_longmemeval(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="LongMemEval JSON", exists=True, dir_okay=False)],
    modes: ModesOpt = None,
    k: KOpt = "1,5,10,25,50",
    budgets: BudgetsOpt = "500,1000,2000",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    items: Annotated[int | None, typer.Option("--items", help="Only the first N items.")] = None,
    embedder: EmbedderOpt = None,
    embed_model: EmbedModelOpt = None,
    workdir: WorkdirOpt = None,
) -> None:
    """Session recall_any/recall_all/NDCG@k and turn recall per mode on LongMemEval."""
    from memtoc.eval.longmemeval import run_longmemeval

    cfg = RunConfig(ks=_ints(k, "--k"), budgets=_ints(budgets, "--budgets"))
    mctx = _context(ctx, embedder, embed_model)
    chosen, skipped = _modes(modes, mctx)
    with _progress(json_out) as progress:
        report = run_longmemeval(path, chosen, mctx, cfg, skipped_modes=skipped, limit=items,
                                 workdir=workdir, command=_command_line(),
                                 progress=progress)  # fmt: skip
    _finish(report, out, json_out)


@eval_app.command("context")
def eval_context(
    path: Annotated[
        Path,
        typer.Argument(
            help="A dataset folder: transcripts/ and reference/checkpoints.jsonl.",
            exists=True,
            file_okay=False,
        ),
    ],
    budget: Annotated[int, typer.Option("--budget", min=1, help="Context budget (tokens).")] = (
        DEFAULT_BUDGET
    ),
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="First N sessions.")] = None,
    workdir: WorkdirOpt = None,
    show: Annotated[
        int, typer.Option("--show", min=0, help="Print the N worst-scored sessions' misses.")
    ] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Session-start context against the previous session's reference summary: key-term recall
    and tokens, replaying the sessions in time order (see memtoc.eval.context_eval)."""
    from memtoc.eval.context_eval import run_context_eval

    with _progress(json_out) as progress:
        report = run_context_eval(
            path, budget=budget, limit=limit, workdir=workdir, progress=progress
        )
    if json_out:
        emit_json(report.to_dict())
        return
    summary = report.summary()
    console.print(
        f"{summary['scored']} of {summary['sessions']} session starts scored (budget "
        f"{summary['budget']}): key-term recall {summary['recall']:.3f}, IDF-weighted "
        f"{summary['weighted_recall']:.3f} (ceiling {summary['ceiling']:.3f}); tokens mean "
        f"{summary['tokens_mean']}, max {summary['tokens_max']}; {summary['wall_seconds']} s",
        highlight=False,
    )
    for score in sorted(report.scores, key=lambda s: s.weighted_recall)[:show]:
        console.print(
            f"{score.session_id} (after {score.previous}): {score.weighted_recall:.2f} of "
            f"{score.ceiling:.2f}; missed {', '.join(score.missed)}",
            highlight=False,
        )


@eval_app.command("coding")
def eval_coding(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="A coding corpus folder: questions.jsonl and transcripts/ or history/.",
            exists=True,
            file_okay=False,
        ),
    ],
    methods: Annotated[
        str | None,
        typer.Option(
            "--methods",
            help="Comma-separated: recall, bm25, dense, rrf, recency, browse, teleport-browse "
            "(default: all).",
        ),
    ] = None,
    questions: Annotated[
        str | None,
        typer.Option("--questions", help="Comma-separated question ids or categories."),
    ] = None,
    budgets: BudgetsOpt = "500,1000,2000",
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Keep the built store here and reuse it while the corpus, "
            "embedder and store-building code are unchanged (default: a temp dir).",
        ),
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Build the store again even if it could be reused.")
    ] = False,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            help="The developer's time zone (default: the one the corpus README names, else UTC).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write questions.jsonl, summary.json, report.md and answered_vs_budget.png here.",
        ),
    ] = None,
    no_time_limit: Annotated[
        bool,
        typer.Option(
            "--no-time-limit",
            help="Ask recall without its time limit (reproducible on a loaded machine).",
        ),
    ] = False,
    embedder: EmbedderOpt = None,
    embed_model: EmbedModelOpt = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="postgresql://… : build the store in a fresh database on that server (team "
            "mode), dropped after the run.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Answered share within token budgets on a real coding history: recall against BM25, dense,
    RRF and recency over the same events and against agents browsing the table of contents, per
    category, with latency and contract checks."""
    import math
    import tempfile

    from memtoc.eval.coding import load_corpus, select
    from memtoc.eval.coding_methods import METHODS
    from memtoc.eval.coding_report import rich_table, write_outputs
    from memtoc.eval.coding_run import run_coding
    from memtoc.eval.coding_store import drop_store, open_store

    pg_url = _pg_url(ctx, db)
    if pg_url is not None and (store is not None or rebuild):
        raise ConfigError("--store and --rebuild are for a SQLite store; with a PostgreSQL "
                          "server the store is built fresh every run", setting="--db")  # fmt: skip
    corpus = load_corpus(path)
    chosen = select(corpus.questions, questions)
    names = [m.strip() for m in methods.split(",") if m.strip()] if methods else list(METHODS)
    unknown = sorted(set(names) - set(METHODS))
    if unknown or not names:
        raise ConfigError(f"unknown methods {unknown} (known: {', '.join(METHODS)})",
                          setting="--methods")  # fmt: skip
    cuts = _ints(budgets, "--budgets")
    mctx = _context(ctx, embedder, embed_model)
    settings = state(ctx).settings
    with tempfile.TemporaryDirectory(prefix="memtoc-eval-coding-") as tmp:
        built = open_store(corpus, mctx, folder=store or Path(tmp), keep=store is not None,
                           tz=tz, redact=settings.redact, rebuild=rebuild,
                           pg_url=pg_url)  # fmt: skip
        try:
            with _progress(json_out) as progress:
                run = run_coding(corpus, chosen, built, mctx, methods=names, budgets=cuts,
                                 command=_command_line(), progress=progress,
                                 time_limit_ms=math.inf if no_time_limit else None)  # fmt: skip
        finally:
            drop_store(built)
    paths = write_outputs(run, out) if out is not None else {}
    if json_out:
        emit_json({**run.summary(), "outputs": {k: str(v) for k, v in paths.items()}})
        return
    console.print(rich_table(run))
    summary = run.summary()
    checks = summary["violations"]
    assert isinstance(checks, dict)
    missing = summary["gold_not_in_store"]
    assert isinstance(missing, dict)
    console.print(
        f"checks: budget exceeded {checks['budget']}, unresolved citations {checks['citation']}, "
        f"gold quotes not in store {missing['quotes']}",
        highlight=False,
    )
    for m, why in run.skipped_methods.items():
        console.print(f"[yellow]not run[/] {m}: {why}", highlight=False)
    for note in run.notes:
        console.print(f"note: {note}", highlight=False)
    for kind, p in paths.items():
        console.print(f"{kind}: {p}", highlight=False)
