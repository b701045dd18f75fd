"""``memtoc eval summaries``: the TOC's summaries against LoCoMo's reference session summaries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memtoc.surfaces.cli.app import JsonOpt, console, emit_json
from memtoc.surfaces.cli.eval_cmds import eval_app


@eval_app.command("summaries")
def eval_summaries(
    path: Annotated[Path, typer.Argument(help="LoCoMo JSON (locomo10.json).")],
    conversations: Annotated[
        int | None, typer.Option("--conversations", help="Only the first N conversations.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Key-term and ROUGE-1 recall of each session's segment bullets, mean L0/L1 token sizes."""
    from memtoc.eval.summary_quality import run_summary_quality

    if json_out:
        emit_json(run_summary_quality(path, conversations=conversations).to_dict())
        return
    with console.status("ingesting and processing LoCoMo conversations") as status:
        quality = run_summary_quality(
            path, conversations=conversations, progress=lambda c: status.update(f"done {c}")
        )
    table = Table(title=f"summary quality vs. LoCoMo session summaries ({path.name})")
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
