"""``memtoc status``: queue depth, failures, last rollups, backends and degraded modes, daemon."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from memtoc.model import JsonValue, iso_ms
from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, open_memory, state
from memtoc.surfaces.serve_lock import lock_owner, lock_path


@app.command("status")
def status_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Health: the processing queue, failures, last rollup per level, the embedder, token counter
    and summariser in use (degraded modes named), and who processes the store (a `memtoc serve`
    daemon or an agent's `memtoc mcp` server, named by pid)."""
    settings = state(ctx).settings
    path = lock_path(settings)
    owner = lock_owner(path)
    with open_memory(ctx, read_only=True) as memory:
        data: dict[str, JsonValue] = dict(memory.status())
    data["daemon"] = (
        {"pid": owner.pid, "role": owner.role, "lock": str(path)} if owner is not None else None
    )
    if json_out:
        emit_json(data)
        return
    _print_status(data)


def _print_status(data: dict[str, Any]) -> None:
    table = Table(title="memtoc status", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    outbox = data.get("outbox") or {}
    daemon = data.get("daemon")
    table.add_row("store", f"{data.get('store')} {data.get('location')}")
    table.add_row("events", f"{data.get('events', 0):,} in {data.get('projects', 0)} projects")
    if data.get("events_out_of_range"):
        table.add_row(
            "events out of range",
            f"[red]{data['events_out_of_range']:,} not filed[/]: their instant is outside "
            "1970..9999 (stored by an older memtoc; `memtoc verify` names them)",
        )
    table.add_row(
        "queue (outbox)",
        f"{outbox.get('pending', 0)} pending, {outbox.get('failed', 0)} failed, "
        f"{outbox.get('done', 0)} done",
    )
    table.add_row(
        "processing",
        f"memtoc {daemon.get('role') or 'process'} running (pid {daemon['pid']})"
        if daemon
        else "[yellow]nobody: new events wait in the queue[/] (memtoc serve, memtoc mcp or "
        "memtoc process)",
    )
    rollups = data.get("rollups") or {}
    for level in ("day", "week", "month", "year"):
        run = rollups.get(level)
        if isinstance(run, dict) and isinstance(run.get("last_run_ms"), int):
            text = (
                f"{iso_ms(run['last_run_ms'])[:19]}Z: {run.get('rolled', 0)} rolled, "
                f"{run.get('pending', 0)} pending"
            )
        else:
            text = "[dim]never[/]"
        table.add_row(f"last {level} rollup", text)
    configured, used = data.get("summarizer_configured"), str(data.get("summarizer"))
    fell_back = configured not in (None, "extractive") and used.startswith("extractive")
    summarizer_note = f"{configured} configured, extractive in use" if fell_back else None
    table.add_row("summariser", _backend(data.get("summarizer"), summarizer_note))
    summaries = data.get("summaries") or {}
    if summaries.get("nodes"):
        built = ", ".join(f"{n:,} {escape(str(b))}" for b, n in summaries["by_backend"].items())
        notes = []
        if summaries.get("degraded"):
            notes.append(
                f"{summaries['degraded']:,} built by the extractive fallback: "
                f"{summaries.get('degraded_reason')}"
            )
        if summaries.get("other_backend"):
            notes.append(f"{summaries['other_backend']:,} not by the configured summariser")
        text = f"{summaries['nodes']:,} nodes ({built})"
        if notes:
            text += f" [yellow]({escape('; '.join(notes))}; {escape(str(summaries['hint']))})[/]"
        table.add_row("summaries", text)
    table.add_row("embedder", _backend(data.get("embedder"), data.get("embedder_degraded")))
    vectors = data.get("vectors") or {}
    if vectors.get("embedder"):
        state = str(vectors.get("state"))
        shown = escape(state) if state == "current" else f"[yellow]{escape(state)}[/]"
        table.add_row(
            "vectors",
            f"{shown}: embedded through seq {vectors.get('embedded_through_seq'):,}, filed through "
            f"{vectors.get('filed_through_seq'):,}",
        )
    counter_note = (
        "approximate (cl100k unavailable)" if data.get("token_counter_degraded") else None
    )
    table.add_row("token counter", _backend(data.get("token_counter"), counter_note))
    console.print(table)
    failures = data.get("failures") or {}
    for kind in ("outbox", "segments"):
        for item in failures.get(kind) or []:
            console.print(f"[red]✗[/] {kind}: {escape(str(item))}", highlight=False)


def _backend(name: object, degraded: object) -> str:
    shown = escape(str(name)) if name else "[dim]none[/]"
    return f"{shown} [yellow](degraded: {escape(str(degraded))})[/]" if degraded else shown
