"""``memtoc demo``: the embedded default end to end on a generated sample history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from memtoc.config import Settings
from memtoc.eval.synth import SynthConfig, generate_with_facts, write_claude_code
from memtoc.surfaces.cli.app import app, console, open_memory, state
from memtoc.surfaces.cli.search_cmds import _render as render_search
from memtoc.surfaces.cli.store_cmds import print_ingest_report
from memtoc.surfaces.cli.toc_cmds import _node_tree, print_expand
from memtoc.surfaces.http.auth import ensure_token
from memtoc.surfaces.invocation import memtoc_argv, shell_command
from memtoc.surfaces.serve import DEFAULT_HOST, DEFAULT_PORT, base_url


@app.command()
def demo(
    ctx: typer.Context,
    events: Annotated[
        int, typer.Option("--events", "-n", help="Size of the sample history.")
    ] = 5_000,
    seed: Annotated[int, typer.Option("--seed")] = 7,
    fresh: Annotated[
        bool, typer.Option("--fresh/--keep", help="Start from an empty store.")
    ] = True,
) -> None:
    """Generate months of sample agent sessions, ingest them as Claude Code transcripts, show the result."""
    settings = state(ctx).settings
    home = settings.home
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{settings.db}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(home / "sample-transcripts", ignore_errors=True)
    transcripts = home / "sample-transcripts"
    remember_backends(settings)
    console.rule("[bold]1. sample history")
    # 50 planted questions in the default 5,000 events; fewer in a smaller history (they need room)
    planted = min(50, max(2, events // 100))
    stream, facts = generate_with_facts(
        SynthConfig(seed=seed, events=events, planted_facts=planted)
    )
    files = write_claude_code(stream, transcripts)
    console.print(f"wrote {len(files)} Claude Code transcripts under {transcripts}")
    console.rule("[bold]2. ingest")
    with open_memory(ctx) as memory:
        report = memory.ingest([transcripts])
        print_ingest_report(report)
        again = memory.ingest([transcripts])
        console.print(
            f"re-ingest of the same files: {again.ingested} new, {again.duplicates} duplicates, "
            f"{again.read} records re-read (watermarks)"
        )
        console.rule("[bold]3. stats")
        stats = memory.stats()
        for key in ("events", "projects", "sessions", "outbox", "bytes"):
            console.print(f"{key:>10}: {stats[key]}")
        console.rule("[bold]4. process: segments, summaries, grips, rollups")
        processed = memory.process()
        roll = memory.rollup(force=True)
        console.print(
            f"filed {processed.events:,} events into {processed.segments_built:,} segments; "
            f"{processed.nodes_written + roll.written:,} node versions written "
            f"in {processed.seconds:.1f}s"
        )
        project = memory.store.projects()[0]
        console.rule(f"[bold]5. the table of contents of project {project!r}")
        roots = memory.toc(project)
        for root in roots:
            console.print(_node_tree(memory.node(root.node_id, project=project)))
        weeks = memory.store.list_nodes(project, level="week")
        if weeks:
            week = weeks[len(weeks) // 2]
            console.rule(f"[bold]6. one week: memtoc toc {week.node_id} --project {project}")
            view = memory.node(week.node_id, project=project)
            console.print(_node_tree(view))
            grip_id = next((g for b in view.node.bullets for g in b.grip_ids), None)
            if grip_id:
                console.rule(f"[bold]7. one grip: memtoc expand {grip_id}")
                print_expand(memory.expand(grip_id))
        for fact in facts[:2]:
            console.rule(f"[bold]8. answer a question: memtoc search {fact.query!r}")
            result = memory.search(fact.query, limit=5)
            render_search(result)
            # The transcripts carry their own ids (Claude Code uuids), so match the fact's text.
            hit = any(fact.text[:60] in item.text for item in result.items)
            console.print(
                f"[dim]the planted answer ({fact.text[:70]}…) is "
                f"{'[green]among[/]' if hit else '[red]not among[/]'} the results[/]"
            )
        console.rule(f"[bold]9. session-start context: memtoc context --project {project}")
        context = memory.context(project=project, budget=400)
        console.print(escape(context.text), highlight=False)
        console.print(f"[dim]{context.tokens} tokens (budget 400)[/]")
    try_it = shell_command("--home", str(home), "toc", "--project", project)
    console.print(f"\nStore: {settings.db}  (try: {try_it})", highlight=False, soft_wrap=True)
    print_web_url(home)
    print_mcp_config(home)


def remember_backends(settings: Settings) -> None:
    """Keep the embedder the demo was given (``make demo`` passes ``MEMTOC_EMBED_MODEL`` to a
    local model) in the demo home's ``config.toml``: the commands the demo then suggests run from
    a shell without that variable, and would find the store's vectors unusable (BM25 only, a
    degraded note on every search). A config file the user wrote is left alone."""
    config = settings.home / "config.toml"
    given = {"embedder": settings.embedder, "embed_model": settings.embed_model}
    chosen = {
        name: value
        for name, value in given.items()
        if value and settings.sources.get(name) in ("env", "argument")
    }
    if not chosen or config.exists():
        return
    settings.home.mkdir(parents=True, exist_ok=True)
    # a JSON string is a TOML basic string (same quotes and escapes)
    lines = [f"{name} = {json.dumps(str(value))}" for name, value in chosen.items()]
    config.write_text(
        "# written by `memtoc demo`: the backends it ran with\n" + "\n".join(lines) + "\n",
        encoding="utf-8",
    )


def print_web_url(home: Path) -> None:
    """How to browse the memory: the ``memtoc serve`` command and the URL it will print.

    The URL carries the store's bearer token (``#token=…``, created here if missing, exactly as
    ``memtoc serve`` would), so it opens the web TOC browser signed in once the daemon runs.
    """
    console.rule("[bold]10. browse it: the web TOC browser")
    token = ensure_token(home)
    url = base_url(DEFAULT_HOST, DEFAULT_PORT)
    console.print(
        f"Run:   {shell_command('--home', str(home), 'serve')}", highlight=False, soft_wrap=True
    )
    console.print(f"Open:  {url}/#token={token}", highlight=False, soft_wrap=True)
    console.print(
        "[dim]timeline years → segments, bullets expand into their events, search, recall, "
        "status; the token is also what `memtoc token` prints.[/]"
    )


def print_mcp_config(home: Path) -> None:
    """How to give an agent this memory: the MCP server command and the hooks."""
    console.rule("[bold]11. connect an agent (MCP)")
    console.print("Claude Code:", highlight=False)
    mcp = shell_command("--home", str(home), "mcp")
    console.print(f"  claude mcp add memtoc -- {mcp}", highlight=False, soft_wrap=True)
    console.print("or in .mcp.json (project) / ~/.claude.json:", highlight=False)
    command, *args = memtoc_argv()
    snippet = {
        "mcpServers": {"memtoc": {"command": command, "args": [*args, "--home", str(home), "mcp"]}}
    }
    console.print(json.dumps(snippet, indent=2), highlight=False, markup=False, soft_wrap=True)
    hooks = shell_command("--home", str(home), "hooks", "install", "claude-code")
    console.print(
        f"Session-start context and automatic ingest: {hooks}", highlight=False, soft_wrap=True
    )
