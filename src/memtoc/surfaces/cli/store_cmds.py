"""Commands over the event store: init, ingest, events, stats, verify, backup, restore, compact."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from memtoc.ingest.importer import IngestOptions, discover
from memtoc.ingest.sources.claude_code import SUMMARY_WAIT_S
from memtoc.memory import Memory
from memtoc.model import IngestReport, iso_ms
from memtoc.store.sqlite import maintenance
from memtoc.surfaces.cli.app import (
    JsonOpt,
    app,
    console,
    emit_json,
    fail,
    open_memory,
    state,
)
from memtoc.surfaces.cli.time_option import SinceOpt, UntilOpt, time_option
from memtoc.surfaces.http.auth import ensure_token, token_path

FORMATS = ["auto", "jsonl", "claude-code", "codex", "gemini", "openai-chat", "specstory"]


@app.command()
def init(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Create the data directory and an empty store (safe to run again)."""
    home = state(ctx).settings.home
    with open_memory(ctx) as memory:
        info = {"db": memory.store.location, "home": str(home)}
    ensure_token(home)  # the HTTP API's bearer token (memtoc token prints it)
    info["token_file"] = str(token_path(home))
    if json_out:
        emit_json(info)
    else:
        console.print(f"Store ready at [bold]{info['db']}[/]")


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or folders of transcripts.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="Put every event in this project.")
    ] = None,
    rescan: Annotated[
        bool, typer.Option("--rescan", help="Ignore watermarks; re-read whole files.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Import transcripts (Claude Code, Codex, Gemini CLI, generic JSONL, OpenAI chat JSON) exactly
    once."""
    if fmt not in FORMATS:
        raise fail(f"--format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    settings = state(ctx).settings
    total = 0
    for path in paths:
        if not path.exists():
            raise fail(f"{path}: no such file or directory")
    for file, _root in discover(paths, follow_symlinks=settings.follow_symlinks):
        total += file.stat().st_size
    with open_memory(ctx) as memory:
        before = _event_counts(memory)
        if json_out:
            report = memory.ingest(paths, fmt=fmt, project=project, rescan=rescan)
        else:
            columns = (
                TextColumn("[bold]ingest"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
            )
            with Progress(*columns, console=console, transient=True) as bar:
                task = bar.add_task("ingest", total=total or None)
                report = memory.ingest(
                    paths,
                    fmt=fmt,
                    project=project,
                    rescan=rescan,
                    progress=lambda n: bar.advance(task, n),
                )
        after = _event_counts(memory)
    into = {name: n - before.get(name, 0) for name, n in after.items() if n > before.get(name, 0)}
    if json_out:
        emit_json({**report.to_dict(), "projects": into})
    else:
        print_ingest_report(report)
        print_projects(into, IngestOptions().default_project if project is None else None)
    if report.unusable:
        raise fail(unusable_message(report.unusable))
    if report.not_transcripts and not report.files:
        raise fail(
            f"no transcript found under {', '.join(str(p) for p in paths)}: "
            f"{len(report.not_transcripts):,} file(s), none of a transcript format"
        )


def unusable_message(files: list[str]) -> str:
    """The error ``ingest`` ends with when some files gave nothing usable (after the report)."""
    named = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    noun = "file" if len(files) == 1 else "files"
    return f"{len(files)} {noun} yielded nothing usable: {named}"


def _event_counts(memory: Memory) -> dict[str, int]:
    counts = {}
    for p in memory.projects():
        name, events = p.get("name") or p.get("project"), p.get("events")
        if isinstance(name, str) and isinstance(events, int):
            counts[name] = events
    return counts


def print_projects(into: dict[str, int], default: str | None) -> None:
    """Which projects the new events went to: the real Gemini CLI sessions (no working directory
    in their files) landed in 'default' and the report did not say so."""
    if not into:
        return
    shown = ", ".join(f"{escape(name)} +{n:,}" for name, n in sorted(into.items()))
    console.print(f"into projects: {shown}", highlight=False)
    if default is not None and default in into:
        console.print(
            f"[yellow]note:[/] {into[default]:,} events named no working directory and went to "
            f"project {escape(default)!r}: `memtoc ingest --project NAME` files them under a "
            "name (`memtoc projects rename` renames it)",
            highlight=False,
        )


def print_ingest_report(report: IngestReport) -> None:
    table = Table(title="Ingest", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("files", str(report.files))
    table.add_row("records read", str(report.read))
    table.add_row("events ingested", f"[green]{report.ingested}[/]")
    table.add_row("duplicates (already stored)", str(report.duplicates))
    table.add_row("rejected", f"[red]{report.rejected}[/]" if report.rejected else "0")
    table.add_row("secrets redacted", str(report.redacted))
    table.add_row("truncated (too large)", str(report.truncated))
    table.add_row("skipped (thinking, bookkeeping)", str(report.skipped))
    if report.restarted:
        table.add_row("re-read from the start (changed)", str(report.restarted))
    if report.waiting:
        table.add_row("waiting (no time known yet: read again next time)", str(report.waiting))
    console.print(table)
    for where in report.waiting_at[:10]:
        console.print(
            f"[yellow]waiting[/] {escape(where)}: a summary line with no time, whose conversation "
            "is in no transcript beside it yet (skipped once the file has not changed for "
            f"{SUMMARY_WAIT_S / 3600:g} h: its conversation is gone)",
            highlight=False,
            soft_wrap=True,
        )
    if report.links_skipped:
        console.print(
            f"[yellow]note:[/] {len(report.links_skipped):,} symbolic links lead outside the "
            f"folder given and were not followed (first: {escape(report.links_skipped[0])}): "
            "set follow_symlinks (MEMTOC_FOLLOW_SYMLINKS=1) to import what they point to",
            highlight=False,
            soft_wrap=True,
        )
    if report.not_transcripts:
        shown = ", ".join(escape(Path(p).name) for p in report.not_transcripts[:4])
        more = len(report.not_transcripts) - 4
        n = len(report.not_transcripts)
        console.print(
            f"note: {n:,} {'file' if n == 1 else 'files'} in the folders given "
            f"{'is not a transcript' if n == 1 else 'are not transcripts'} and "
            f"{'was' if n == 1 else 'were'} left alone "
            f"({shown}{f' and {more} more' if more > 0 else ''})",
            highlight=False,
            soft_wrap=True,
        )
    if report.redactions_by_kind:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(report.redactions_by_kind.items()))
        console.print(f"redacted kinds: {kinds}", highlight=False)
    for rejection in report.rejections[:50]:
        console.print(f"[red]rejected[/] {rejection}", highlight=False)
    if report.rejected > 50:
        console.print(f"… and {report.rejected - 50} more (use --json for all)")


@app.command()
def events(
    ctx: typer.Context,
    project: Annotated[str | None, typer.Option("--project", "-p")] = None,
    session: Annotated[str | None, typer.Option("--session")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1)] = 50,
    json_out: JsonOpt = False,
) -> None:
    """List stored events in time order."""
    with open_memory(ctx, read_only=True) as memory:
        since_ms = time_option(memory, since, option="--since", edge="start")
        until_ms = time_option(memory, until, option="--until", edge="end")
        found = memory.events(
            project=project,
            session_id=session,
            since_ms=since_ms,
            until_ms=until_ms,
            limit=limit,
        )
    if json_out:
        emit_json({"events": [e.to_dict() for e in found], "count": len(found)})
        return
    # the time whole and the text on one line each (at 80 columns the time was cut to
    # "2025-07-19T23…" and the text folded a word a line); the project only when several
    several = len({e.project for e in found}) > 1
    table = Table(box=None, pad_edge=False)
    widths = [("time (UTC)", 19), *([("project", 16)] if several else []), ("session", 8),
              ("role", 9)]  # fmt: skip
    for name, width in widths:
        table.add_column(name, no_wrap=True, width=width, overflow="ellipsis")
    room = max(20, console.width - sum(w + 2 for _, w in widths) - 1)
    table.add_column("text", no_wrap=True, width=room)
    for e in found:
        when = iso_ms(e.ts_ms)
        text = " ".join(e.text.split())
        text = text if len(text) <= room else text[: room - 1] + "…"
        row = [f"{when[:10]} {when[11:19]}", *([e.project] if several else [])]
        table.add_row(*row, e.session_id[:8], e.role, escape(text))
    console.print(table)


@app.command()
def stats(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Counts: events, projects, sessions, outbox, TOC nodes, grips, size."""
    with open_memory(ctx, read_only=True) as memory:
        data = memory.stats()
    if json_out:
        emit_json(data)
        return
    table = Table(title="memtoc stats", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in data.items():
        if key.endswith("_event_ms") and isinstance(value, int):
            value = iso_ms(value)
        table.add_row(key, str(value))
    console.print(table)


@app.command()
def verify(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Check the store's integrity and memtoc's invariants (exit 1 on any problem)."""
    with open_memory(ctx) as memory:
        report = memory.verify()
    if json_out:
        emit_json(report.to_dict())
    else:
        for check in report.checks:
            bad = [f for f in report.findings if f.check == check]
            if not bad:
                console.print(f"[green]✓[/] {escape(check)}", highlight=False)
            for finding in bad:
                console.print(
                    f"[red]✗[/] {escape(check)}: {escape(finding.message())}", highlight=False
                )
        for note in report.pending:
            console.print(f"[dim]… pending: {escape(note)}[/]", highlight=False)
        if not report.ok:
            console.print(f"[red]{len(report.findings)} problems[/]", highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def backup(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Where to write the backup (must not exist).")],
    json_out: JsonOpt = False,
) -> None:
    """Write a consistent copy of the live store (safe while others write)."""
    with open_memory(ctx) as memory:
        size = memory.backup(path)
    if json_out:
        emit_json({"backup": str(path), "bytes": size})
    else:
        console.print(f"Backed up to [bold]{path}[/] ({size:,} bytes)")


@app.command()
def restore(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A backup written by `memtoc backup`.")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing store.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Replace the store with a backup (checked before anything is replaced); events forgotten
    since the backup was taken are forgotten again (the forget log beside the store)."""
    dest = Path(state(ctx).settings.db)
    maintenance.restore(path, dest, force=force)
    with open_memory(ctx) as memory:  # opening re-applies the forget log (memtoc.forget_log)
        reconciled = memory.reconciled
    if json_out:
        emit_json(
            {
                "restored": str(path),
                "db": str(dest),
                "forget_log": reconciled.to_dict() if reconciled else None,
            }
        )
        return
    console.print(f"Restored [bold]{dest}[/] from {path}")
    if reconciled is not None and (reconciled.reforgotten or reconciled.tombstoned):
        console.print(
            f"Re-applied the forget log: {len(reconciled.reforgotten or [])} events forgotten "
            f"since this backup were forgotten again, {reconciled.tombstoned} more recorded as "
            "tombstones (re-importing them is a duplicate)"
        )


@app.command()
def compact(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Reclaim space: checkpoint the WAL, optimise search indexes, VACUUM."""
    with open_memory(ctx) as memory:
        sizes = memory.compact()
    if json_out:
        emit_json(sizes)
    else:
        console.print(f"{sizes['bytes_before']:,} → {sizes['bytes_after']:,} bytes")
