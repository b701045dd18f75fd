"""``memtoc eval summaries``: the TOC's summaries against independent reference summaries (LoCoMo's
session summaries; a coding corpus's checkpoint summaries), and how its nodes read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memtoc.model import JsonValue
from memtoc.surfaces.cli.app import JsonOpt, console, emit_json, state
from memtoc.surfaces.cli.eval_cmds import EmbedderOpt, EmbedModelOpt, _context, eval_app


@eval_app.command("summaries")
def eval_summaries(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="LoCoMo JSON (locomo10.json), or a coding corpus folder (questions.jsonl, "
            "transcripts/ or history/, optionally reference/checkpoints.jsonl).",
            exists=True,
        ),
    ],
    conversations: Annotated[
        int | None, typer.Option("--conversations", help="LoCoMo: only the first N conversations.")
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Coding corpus: keep the built store here and reuse it while the corpus and the "
            "store-building code are unchanged (shared with `memtoc eval coding --store`).",
        ),
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Build the store again even if it could be reused.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write summaries.json (with every unit's scores) here."),
    ] = None,
    embedder: EmbedderOpt = None,
    embed_model: EmbedModelOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Key-term recall of the TOC's node texts against independent reference summaries (per
    session and per day/week/month, plain and IDF-weighted, with the ceiling), and node health:
    empty nodes, L0 sizes, verbatim parents, junk keywords."""
    if path.is_dir():
        result = _coding(ctx, path, store, rebuild, embedder, embed_model)
    else:
        result = _locomo(path, conversations, json_out)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summaries.json").write_text(
            json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    if json_out:
        emit_json(result)
        return
    _print_coverage(result.get("coverage"))
    _print_health(result.get("health"))
    notes = result.get("notes")
    for note in notes if isinstance(notes, list) else []:
        console.print(f"note: {note}", highlight=False)


def _locomo(path: Path, conversations: int | None, quiet: bool) -> dict[str, JsonValue]:
    from memtoc.eval.summary_quality import run_summary_quality

    if quiet:
        return run_summary_quality(path, conversations=conversations).to_dict()
    with console.status("ingesting and processing LoCoMo conversations") as status:
        quality = run_summary_quality(
            path, conversations=conversations, progress=lambda c: status.update(f"done {c}")
        )
    table = Table(title=f"segment bullets vs. LoCoMo session summaries ({path.name})")
    for col in ("conversation", "sessions", "key-term recall", "ROUGE-1 recall"):
        table.add_column(col, justify="right")
    for name, q in sorted(quality.by_conversation().items()):
        table.add_row(name, str(len(q.sessions)), f"{q.mean('key_term_recall'):.3f}",
                      f"{q.mean('rouge1_recall'):.3f}")  # fmt: skip
    table.add_row("mean", str(len(quality.sessions)), f"{quality.mean('key_term_recall'):.3f}",
                  f"{quality.mean('rouge1_recall'):.3f}", style="bold")  # fmt: skip
    console.print(table)
    console.print(
        f"mean per segment: L0 {quality.mean('l0_tokens'):.1f} tokens, "
        f"L1 {quality.mean('l1_tokens'):.1f} tokens; "
        f"{quality.mean('bullets'):.1f} bullets per session"
    )
    return quality.to_dict()


def _coding(
    ctx: typer.Context,
    path: Path,
    store: Path | None,
    rebuild: bool,
    embedder: str | None,
    embed_model: str | None,
) -> dict[str, JsonValue]:
    import tempfile

    from memtoc.eval.coding import load_corpus
    from memtoc.eval.coding_store import open_store
    from memtoc.eval.summary_coverage import corpus_summaries

    corpus = load_corpus(path)
    mctx = _context(ctx, embedder, embed_model)
    settings = state(ctx).settings
    with tempfile.TemporaryDirectory(prefix="memtoc-eval-summaries-") as tmp:
        with console.status(f"building the {corpus.name} store"):
            built = open_store(corpus, mctx, folder=store or Path(tmp), keep=store is not None,
                               redact=settings.redact, rebuild=rebuild)  # fmt: skip
        try:
            events = built.memory.events(project=built.project)
            report = corpus_summaries(
                built.memory.store, built.project, events, mctx.counter, corpus.root
            )
        finally:
            built.memory.close()
    report.notes[:0] = built.notes
    return report.to_dict(per_unit=True)


def _print_coverage(coverage: JsonValue) -> None:
    if not isinstance(coverage, dict) or not coverage:
        return
    table = Table(title="node text vs. reference summaries (key-term recall)")
    for col in ("corpus", "level", "units", "recall", "IDF-weighted", "ceiling", "tokens"):
        table.add_column(col, justify="right")
    for corpus, levels in coverage.items():
        assert isinstance(levels, dict)
        for level, s in levels.items():
            assert isinstance(s, dict)
            table.add_row(corpus, level, str(s["units"]), _f(s["recall"]), _f(s["weighted"]),
                          _f(s["ceiling"]), _f(s["tokens"], 0))  # fmt: skip
    console.print(table)


def _print_health(health: JsonValue) -> None:
    if not isinstance(health, dict) or not health:
        return
    table = Table(title="node health")
    cols = ("level", "nodes", "(empty)", "L0 median", "L0 p10-p90", "L0 in 60-140",
            "bullets", "verbatim parents", "junk keywords")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right")
    for level, h in health.items():
        assert isinstance(h, dict)
        table.add_row(
            level, str(h["nodes"]), str(h["empty"]), _f(h["l0_median"], 0),
            f"{_f(h['l0_p10'], 0)}-{_f(h['l0_p90'], 0)}", _f(h["l0_in_range"]),
            _f(h["bullets_per_node"], 1), str(h["verbatim_parents"]),
            _f(h["junk_keyword_share"]),
        )  # fmt: skip
    console.print(table)
    examples = {lvl: h.get("junk_keyword_examples") for lvl, h in health.items()
                if isinstance(h, dict) and h.get("junk_keyword_examples")}  # fmt: skip
    for level, ex in examples.items():
        assert isinstance(ex, list)
        console.print(f"junk keywords ({level}): {', '.join(map(str, ex[:8]))}", highlight=False)


def _f(value: JsonValue, digits: int = 3) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.{digits}f}"
