"""Commands over the table of contents: process, rollup, toc, expand, timeline."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.tree import Tree

from memtoc.memory import Memory
from memtoc.model import TocNode, iso_ms
from memtoc.pipeline.worker import ProcessReport
from memtoc.retrieval.navigate import ExpandView, NodeView
from memtoc.surfaces.cli.app import (
    JsonOpt,
    ProjectOpt,
    app,
    console,
    emit_json,
    open_memory,
    project_scope,
)
from memtoc.surfaces.cli.time_option import SinceOpt, UntilOpt, time_option
from memtoc.surfaces.mcp_text import short_reason


@app.command()
def process(
    ctx: typer.Context,
    until_idle: Annotated[
        bool, typer.Option("--until-idle/--once", help="Drain everything, or one round.")
    ] = True,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Put quarantined entries back first.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Drain the outbox: segments, summaries, grips, search indexes, then due rollups."""
    with open_memory(ctx) as memory:
        fell_back = _fallbacks(memory)
        if json_out:
            report = memory.process(until_idle=until_idle, retry_failed=retry_failed)
        else:
            columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
            with Progress(*columns, console=console, transient=True) as bar:
                task = bar.add_task("processing", total=None)

                def show(r: ProcessReport) -> None:
                    bar.update(
                        task,
                        description=f"processing: {r.events:,} events filed, "
                        f"{r.segments_built:,} segments built",
                    )

                report = memory.process(
                    until_idle=until_idle, retry_failed=retry_failed, progress=show
                )
        counts = memory.store.outbox_counts()
        notes = _degraded_notes(memory, report, fell_back)
    if json_out:
        emit_json({**report.to_dict(), "outbox": counts, "degraded": notes})
        return
    console.print(
        f"filed [bold]{report.events:,}[/] events from {report.entries:,} outbox entries; "
        f"built {report.segments_built:,} segments; wrote {report.nodes_written:,} node versions "
        f"in {report.seconds:.1f}s"
    )
    for note in notes:
        console.print(f"[yellow]degraded:[/] {escape(note)}", highlight=False)
    if report.failures:
        console.print(f"[red]{report.failures} failures quarantined[/] (see `memtoc stats`)")
        for item in [*report.failed_entries, *report.failed_segments][:10]:
            console.print(f"  [red]✗[/] {escape(item)}", highlight=False)
    if counts.get("pending"):
        console.print(f"{counts['pending']} outbox entries still pending")


def _fallbacks(memory: Memory) -> int:
    """Nodes the extractive fallback built for a failing LLM summariser (0 when none is set)."""
    if memory.summarizer.name.startswith("extractive"):
        return 0
    summaries = memory.status().get("summaries")
    count = summaries.get("degraded") if isinstance(summaries, dict) else 0
    return count if isinstance(count, int) else 0


def _degraded_notes(memory: Memory, report: ProcessReport, before: int) -> list[str]:
    """What this run could not do as configured: summaries the extractive fallback wrote for a
    failing LLM (a run against an unreachable API took 38 s and printed only its counts) and
    events left without vectors (no embedder: search is BM25 only)."""
    notes = []
    if report.nodes_written and not memory.summarizer.name.startswith("extractive"):
        fell_back = _fallbacks(memory) - before
        if fell_back > 0:
            summaries = memory.status().get("summaries")
            why = summaries.get("degraded_reason") if isinstance(summaries, dict) else None
            notes.append(
                f"{fell_back:,} summaries built by the extractive fallback: {why}; "
                "`memtoc rebuild --summaries` re-summarises them"
            )
    if report.events and memory.semantic.embedder is None:
        why = short_reason(memory.semantic.degraded)
        notes.append(
            f"{report.events:,} events filed without vectors ({why}; memtoc status says why)"
        )
    return notes


@app.command()
def rollup(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option("--force", help="Ignore minimum ages.")] = False,
    level: Annotated[
        str | None, typer.Option("--level", help="Only this level: day, week, month or year.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Roll segments up into days, weeks, months and years (when old enough, or --force)."""
    with open_memory(ctx) as memory:
        report = memory.rollup(force=force, level=level)
    if json_out:
        emit_json(report.to_dict())
    else:
        console.print(f"rollup: {report.to_dict()}", highlight=False)


def _where(node: TocNode, tz: tzinfo) -> str:
    """Whose and when, under a node's title: its project, a segment's local time span and
    session, the events it files (the title and id alone said neither project nor session)."""
    parts = [node.project]
    if node.level == "segment":
        start = datetime.fromtimestamp(node.start_ms / 1000, tz)
        end = datetime.fromtimestamp(max(node.start_ms, node.end_ms - 1) / 1000, tz)
        last = end.strftime("%H:%M") if end.date() == start.date() else f"{end:%Y-%m-%d %H:%M}"
        parts.append(f"{start:%Y-%m-%d %H:%M} to {last} {start.tzname() or ''}".rstrip())
    if node.session_id:
        parts.append(f"session {node.session_id}")
    parts.append(f"{node.event_count:,} event{'s' if node.event_count != 1 else ''}")
    return "[dim]" + escape(" · ".join(parts)) + "[/]"


def _node_tree(view: NodeView, tz: tzinfo = UTC) -> Tree:
    node = view.node
    head = f"[bold]{escape(node.title)}[/]  [dim]{node.node_id} · v{node.version}[/]"
    if view.provisional:
        head += "  [yellow](provisional: the period is running or has newer children)[/]"
    head += "\n" + _where(node, tz)
    tree = Tree(head)
    if node.abstract:
        tree.add(f"[italic]{escape(node.abstract)}[/]")
    bullets = tree.add("[bold]bullets[/]")
    for b in view.bullets:
        grips = ", ".join(b.grip_ids[:2]) + ("…" if len(b.grip_ids) > 2 else "")
        bullets.add(f"{escape(b.text)}  [dim]{grips}[/]")
    if node.keywords:
        tree.add("[bold]keywords[/] " + escape(", ".join(node.keywords)))
    if view.tier == "L1" and node.overview:
        tree.add(escape(node.overview))
    if len(view.bullets) < len(node.bullets):
        bullets.add(f"[dim]{len(node.bullets) - len(view.bullets)} more, less about the focus[/]")
    if view.children:
        first, last = view.offset + 1, view.offset + len(view.children)
        order = ", most about the focus first" if view.focus is not None else ""
        more = f"; --offset {last} for the next {view.more}" if view.more else ""
        kids = tree.add(f"[bold]children[/] ({first}-{last} of {last + view.more}{order}{more})")
        for c in view.children:
            new = "  [yellow](new)[/]" if c.new else ""
            kid = kids.add(f"[cyan]{c.node_id}[/]  {escape(c.title)}{new}")
            if c.match is not None:  # the segment's bullet over its best hit for the focus
                grip = f"  [dim]{c.match.grip_ids[0]}[/]" if c.match.grip_ids else ""
                kid.add(f"{escape(c.match.text)}{grip}")
    degraded = f"  [yellow]degraded: {escape(node.degraded)}[/]" if node.degraded else ""
    tree.add(f"[dim]{view.tokens} tokens · summariser {node.summarizer}[/]{degraded}")
    return tree


@app.command()
def toc(
    ctx: typer.Context,
    node_id: Annotated[
        str | None, typer.Argument(help="A node id (toc:week:2024-W03); none: the years.")
    ] = None,
    project: ProjectOpt = None,
    depth: Annotated[str, typer.Option("--depth", help="L0 (abstracts) or L1 (overview).")] = "L0",
    focus: Annotated[
        str | None,
        typer.Option("--focus", help="A question: children most about it first, bullets about it."),
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Children to skip.")] = 0,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=500, help="Children listed (8; 5 with --focus)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Browse the table of contents: the years, or one node with a page of its children."""
    with open_memory(ctx, read_only=True) as memory:
        scope = project_scope(memory, project, all_option=False)
        if node_id is None:
            roots = memory.toc(scope.project) if scope.project is not None else []
            views = [
                memory.node(r.node_id, project=r.project, tier=depth, focus=focus, limit=limit)
                for r in roots
            ]
            hint = None if views else memory.toc_hint(scope.project or project)
            if json_out:
                data: dict[str, object] = {
                    "project": scope.project,
                    "roots": [v.to_dict() for v in views],
                    "tokens": sum(v.tokens for v in views),
                }
                if hint:
                    data["hint"] = hint
                emit_json(data)
                return
            if hint and scope.project is not None:
                console.print(f"The TOC has no years yet: {escape(hint)}.")
            for view in views:
                console.print(_node_tree(view, memory.tz))
            return
        view = memory.node(
            node_id,
            project=scope.project or project,
            tier=depth,
            focus=focus,
            offset=offset,
            limit=limit,
        )
        tz = memory.tz
    if json_out:
        emit_json(view.to_dict())
    else:
        console.print(_node_tree(view, tz))


@app.command()
def expand(
    ctx: typer.Context,
    grip_id: Annotated[
        str, typer.Argument(help="A grip id from a node's bullets, or an event id (search hit).")
    ],
    before: Annotated[int, typer.Option("--before", min=0)] = 3,
    after: Annotated[int, typer.Option("--after", min=0)] = 3,
    focus: Annotated[
        str | None,
        typer.Option("--focus", help="A question: long events shown by their passages about it."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a grip's events (or one event's), with neighbours before and after in the same
    session."""
    with open_memory(ctx, read_only=True) as memory:
        view = memory.expand(grip_id, before=before, after=after, focus=focus)
    if json_out:
        emit_json(view.to_dict())
    else:
        print_expand(view)


def print_expand(view: ExpandView) -> None:
    g = view.grip
    if g is not None:
        console.print(f"[bold]{g.grip_id}[/]  [dim]{g.toc_node_id} · session {g.session_id}[/]")
        console.print(f"[italic]“{escape(g.excerpt)}”[/]")
    else:
        where = f"{view.toc_node_id} · " if view.toc_node_id else ""
        console.print(
            f"[bold]{view.event_id}[/]  [dim]{where}session {view.events[0].session_id}[/]"
        )
    table = Table("", "time (UTC)", "role", show_lines=False)
    # fold: a text without spaces (a tool call's JSON, a path) was cut at the column's width
    table.add_column("text", overflow="fold")
    for i, e in enumerate(view.events):
        inside = view.range_start <= i <= view.range_end
        text = view.shown(i).replace("\n", " ")
        table.add_row(
            "▶" if inside else "",
            iso_ms(e.ts_ms)[:19],
            e.role,
            escape(text[:160] + ("…" if len(text) > 160 else "")),
            style=None if inside else "dim",
        )
    console.print(table)
    quiet = f" · {view.left_out} agent notices left out" if view.left_out else ""
    console.print(f"[dim]{view.tokens} tokens{quiet}[/]")


@app.command()
def timeline(
    ctx: typer.Context,
    since: SinceOpt = None,
    until: UntilOpt = None,
    level: Annotated[
        str, typer.Option("--level", help="year, month, week, day or segment.")
    ] = "day",
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Nodes of one level (day by default) over a time range (default: everything up to now)."""
    with open_memory(ctx, read_only=True) as memory:
        since_ms = time_option(memory, since, option="--since", edge="start")
        until_ms = time_option(memory, until, option="--until", edge="end")
        scope = project_scope(memory, project, all_option=False)
        if scope.project is None:
            if json_out:
                emit_json({"project": None, "level": level, "nodes": []})
            return
        view = memory.timeline(since_ms, until_ms, level=level, project=scope.project)
    if json_out:
        emit_json(view.to_dict())
        return
    # the id whole: it is what `memtoc toc` takes, and it was cut ('toc:segment:2026-06-22T1…')
    # on an 80-column terminal; a segment's id says its local start, a start column its UTC date
    segments = level == "segment"
    table = Table() if segments else Table("start")
    table.add_column("node", no_wrap=True)
    table.add_column("title")
    table.add_column("events", justify="right")
    for n in view.nodes:
        row = [n.node_id, escape(n.title), str(n.event_count)]
        table.add_row(*(row if segments else [iso_ms(n.start_ms)[:10], *row]))
    console.print(table)
