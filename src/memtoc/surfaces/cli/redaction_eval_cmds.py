"""``memtoc eval redaction``: detection and false-positive rates of secret redaction, per place a
secret can be stored (``memtoc.eval.redaction_eval``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memtoc.surfaces.cli.app import JsonOpt, console, emit_json
from memtoc.surfaces.cli.eval_cmds import eval_app


@eval_app.command("redaction")
def eval_redaction(
    seed: Annotated[int, typer.Option("--seed", help="Corpus seed (the secrets are random).")] = (
        20241124
    ),
    show: Annotated[
        int, typer.Option("--show", min=0, help="Misses and false positives listed, at most.")
    ] = 20,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Where the scratch store goes (a temp dir).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Plant every kind of secret in the text, metadata values and keys, session ids, projects and
    file paths, ingest them through memtoc's importer into a scratch store, and report how many
    were stored (misses) and how many clean look-alikes were redacted (false positives)."""
    from memtoc.eval.redaction_eval import run

    report = run(seed=seed, workdir=workdir)
    if json_out:
        emit_json(report.to_dict())
        return
    table = Table(
        "placement", "detected", "rate", "n/a", "false positives", "rate",
        title=f"Redaction: {report.kinds} kinds, {report.samples} secrets, "
        f"{report.clean_lines} clean look-alikes, in every placement",
        title_justify="left",
    )  # fmt: skip
    for name, s in [*report.placements.items(), ("total", report.total)]:
        judged = s.planted - s.not_applicable
        table.add_row(
            name,
            f"{s.detected}/{judged}",
            f"{s.detection:.1%}",
            str(s.not_applicable),
            f"{s.flagged}/{s.clean}",
            f"{s.false_positive_rate:.2%}",
            end_section=name == "path",
        )
    console.print(table)
    total = report.total
    for label, items in (("missed", total.misses), ("false positive", total.false_positives)):
        for item in items[:show]:
            console.print(
                f"{label}: {item}", highlight=False, markup=False, emoji=False, soft_wrap=True
            )
        if len(items) > show:
            console.print(f"… and {len(items) - show} more {label} (--show, --json)")
    console.print(f"({report.seconds:.1f} s)")
