"""``memtoc bench``: speed and memory at scale, each beside a baseline measured in the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json

bench_app = typer.Typer(help="Benchmarks (speed, memory, growth with history size).")
app.add_typer(bench_app, name="bench")


def _progress(label: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


@bench_app.command("ingest")
def bench_ingest(
    events: Annotated[
        list[int], typer.Option("--events", "-n", help="Event counts (repeatable).")
    ] = [100_000],  # noqa: B006 (typer reads the default)
    batch_size: Annotated[int, typer.Option("--batch-size")] = 2_000,
    durability: Annotated[str, typer.Option("--durability", help="full, normal or off.")] = "full",
    seed: Annotated[int, typer.Option("--seed")] = 7,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Where the temporary stores go.")
    ] = None,
    redact: Annotated[
        bool, typer.Option("--redact/--no-redact", help="Secret redaction on the memtoc side.")
    ] = True,
    redact_helper: Annotated[
        str,
        typer.Option(
            "--redact-helper",
            help="auto (the default setting: with a second core), on or off: redaction's "
            "prefilter in a helper process.",
        ),
    ] = "auto",
    out: Annotated[
        Path, typer.Option("--out", help="Where the chart (ingest_throughput.png) goes.")
    ] = Path("artifacts/bench"),
    json_out: JsonOpt = False,
) -> None:
    """Ingest throughput (events/s, MB/s, peak RSS) against raw SQLite inserts; events/s against
    N charted to OUT/ingest_throughput.png."""
    from memtoc.eval.bench_charts import ingest_chart
    from memtoc.eval.bench_ingest import run_ingest_bench

    if redact_helper not in ("auto", "on", "off"):
        raise typer.BadParameter("expected auto, on or off", param_hint="--redact-helper")

    results = []
    for n in events:
        if json_out:
            result = run_ingest_bench(n, batch_size=batch_size, durability=durability, seed=seed,
                                      workdir=workdir, redact=redact,
                                      redact_helper=redact_helper)  # fmt: skip
        else:
            with _progress(f"ingest {n:,}") as bar:
                task = bar.add_task("ingest", total=n)
                result = run_ingest_bench(
                    n,
                    batch_size=batch_size,
                    durability=durability,
                    seed=seed,
                    workdir=workdir,
                    redact=redact,
                    redact_helper=redact_helper,
                    progress=lambda k: bar.advance(task, k),  # noqa: B023 (called within this iteration)
                )
        results.append(result.to_dict())
    chart = ingest_chart(results, out)
    if json_out:
        emit_json({"bench": "ingest", "chart": str(chart), "results": results})
        return
    table = Table(
        title=f"bench ingest (durability={durability}, batch={batch_size}, "
        f"redaction {'on' if redact else 'off'}, helper {redact_helper})"
    )
    for col in ("events", "MB", "baseline ev/s", "memtoc ev/s", "memtoc MB/s", "ratio",
                "peak RSS MB", "db MB"):  # fmt: skip
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            f"{r['events']:,}",
            str(r["mb"]),
            f"{r['baseline']['events_per_s']:,}",
            f"{r['memtoc']['events_per_s']:,}",
            str(r["memtoc"]["mb_per_s"]),
            f"{r['ratio_vs_baseline']:.2f}",
            str(r["peak_rss_mb"]),
            f"{r['memtoc']['db_bytes'] / 1e6:.0f}",
        )
    console.print(table)
    console.print(f"chart: {chart}")


@bench_app.command("process")
def bench_process(
    events: Annotated[
        list[int], typer.Option("--events", "-n", help="Event counts (repeatable).")
    ] = [100_000],  # noqa: B006 (typer reads the default)
    seed: Annotated[int, typer.Option("--seed")] = 7,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Where the temporary stores go.")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Where the chart (process_throughput.png) goes.")
    ] = Path("artifacts/bench"),
    json_out: JsonOpt = False,
) -> None:
    """Pipeline throughput (process + forced rollup) against a plain scan of the same events;
    events/s against N charted to OUT/process_throughput.png."""
    from memtoc.eval.bench_charts import process_chart
    from memtoc.eval.bench_process import run_process_bench

    def one(n: int) -> dict[str, Any]:
        if json_out:
            return run_process_bench(n, seed=seed, workdir=workdir)
        with _progress(f"process {n:,}") as bar:
            tasks = {s: bar.add_task(s, total=n) for s in ("ingest", "process")}
            return run_process_bench(
                n, seed=seed, workdir=workdir, progress=lambda s, k: bar.advance(tasks[s], k)
            )

    results = [one(n) for n in events]
    chart = process_chart(results, out)
    if json_out:
        emit_json({"bench": "process", "chart": str(chart), "results": results})
        return
    table = Table(title="bench process (ingest untimed; process + rollup --force vs. scan)")
    for col in ("events", "scan ev/s", "pipe ev/s", "µs/ev", "CPU µs/ev", "ratio", "process s",
                "rollup s", "segs", "nodes", "grips", "bookmarks", "RSS MB"):  # fmt: skip
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            f"{r['events']:,}", f"{r['scan_events_per_s']:,}", f"{r['events_per_s']:,}",
            str(r["us_per_event"]), str(r["cpu_us_per_event"]), f"{r['ratio_vs_scan']}x",
            str(r["process_s"]),
            str(r["rollup_s"]), f"{r['segments']:,}", f"{r['nodes']:,}", f"{r['grips']:,}",
            f"{r['bookmarks']:,}", str(r["peak_rss_mb"]),
        )  # fmt: skip
    console.print(table)
    console.print(f"chart: {chart}")


# -- bench query (memtoc.eval.bench_query) ---------------------------------------------------------
@bench_app.command("query")
def bench_query(
    events: Annotated[
        list[int], typer.Option("--events", "-n", help="Event counts (repeatable).")
    ] = [10_000, 100_000],  # noqa: B006 (typer reads the default)
    queries: Annotated[int, typer.Option("--queries", help="Queries timed per mode.")] = 200,
    seed: Annotated[int, typer.Option("--seed")] = 7,
    out: Annotated[
        Path, typer.Option("--out", help="Where the chart (query_latency.png) goes.")
    ] = Path("artifacts/bench"),
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Where the temporary stores go.")
    ] = None,
    store_dir: Annotated[
        Path | None,
        typer.Option(
            "--store-dir",
            help="Keep each size's built store here and reuse it in later runs (setup skipped).",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="A PostgreSQL server (postgresql://…): each size in a database "
            "memtoc_bench_query_<N>_seed<S> on it (team mode), dropped after unless --keep-db.",
        ),
    ] = None,
    keep_db: Annotated[
        bool,
        typer.Option(
            "--keep-db",
            help="With --db: keep each size's database and reuse it in later runs (setup skipped).",
        ),
    ] = False,
    mode: Annotated[
        list[str] | None,
        typer.Option("--mode", help="Time only these modes (repeatable; default: all)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Query latency (p50/p95), throughput and planted-fact hit rate@10 per mode, against a flat
    scan of the events; p95 latency against N charted to OUT/query_latency.png."""
    from memtoc.eval.bench_query import run_query_bench, write_chart

    if keep_db and db is None:
        raise typer.BadParameter(
            "--keep-db needs --db (a PostgreSQL server)", param_hint="--keep-db"
        )
    if store_dir is not None and db is not None:
        raise typer.BadParameter("--store-dir keeps SQLite stores; with --db use --keep-db",
                                 param_hint="--store-dir")  # fmt: skip
    options: dict[str, Any] = {"queries": queries, "seed": seed, "workdir": workdir,
                               "store_dir": store_dir, "pg_url": db, "keep_db": keep_db,
                               "modes": mode or None}  # fmt: skip

    def one(n: int) -> dict[str, Any]:
        if json_out:
            return run_query_bench(n, **options)
        with _progress(f"query {n:,}") as bar:
            tasks = {s: bar.add_task(s, total=n) for s in ("ingest", "process")}
            tasks["query"] = bar.add_task("query", total=None)
            return run_query_bench(n, **options, progress=lambda s, k: bar.advance(tasks[s], k))

    results = [one(n) for n in events]
    chart = write_chart(results, out)
    if json_out:
        emit_json({"bench": "query", "chart": str(chart), "results": results})
        return
    table = Table(title=f"bench query ({queries} planted-fact queries per mode; setup untimed)")
    table.add_column("events", justify="right")
    table.add_column("mode", no_wrap=True)
    for col in ("p50 ms", "p95 ms", "cpu p95 ms", "server cpu p50 ms", "q/s", "hit@10"):
        table.add_column(col, justify="right")
    sizes = Table(title="per size (one spawned child each)")
    for col in ("events", "store", "setup s", "peak RSS MB", "db MB", "embedder", "load 1m"):
        sizes.add_column(col, justify="right")
    for r in results:
        for i, (name, m) in enumerate(r["modes"].items()):
            hit = m["hit_rate_at_10"]
            table.add_row(
                "" if i else f"{r['events']:,}", name, f"{m['p50_ms']:.2f}", f"{m['p95_ms']:.2f}",
                f"{m['cpu_p95_ms']:.2f}",
                "—" if m.get("server_cpu_p50_ms") is None else f"{m['server_cpu_p50_ms']:.2f}",
                f"{m['qps']:,.0f}", "—" if hit is None else f"{hit:.2f}",
            )  # fmt: skip
        for name, why in r["skipped"].items():
            table.add_row("", name, "", "", "", "", "", f"skipped ({why})")
        sizes.add_row(
            f"{r['events']:,}", str(r["backend"]),
            "reused" if r.get("store_reused") else str(r["setup_s"]), str(r["peak_rss_mb"]),
            f"{r['db_bytes'] / 1e6:.0f}", str(r["embedder"]),
            " → ".join(map(str, r["load_avg_1m"])),
        )  # fmt: skip
    console.print(table)
    console.print(sizes)
    console.print(f"chart: {chart}")


# -- bench soak (memtoc.eval.soak; docs/reliability.md) --------------------------------------------
@bench_app.command("soak")
def bench_soak(
    kills: Annotated[int, typer.Option("--kills", help="SIGKILLs that must land mid-work.")] = 200,
    lines: Annotated[
        int, typer.Option("--lines", help="Transcript lines appended before each ingest step.")
    ] = 1_200,
    seed: Annotated[int, typer.Option("--seed")] = 7,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Where the store goes (default: a temp dir).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Crash loop: SIGKILL ingest, process, rollup, rebuild (FTS, --all) and backup at random
    points; after every restart verify, check acknowledged events (none lost or duplicated), and
    at the end compare the TOC with a crash-free build. Exits 1 when anything was broken."""
    import tempfile

    from memtoc.eval.soak import SoakConfig, SoakReport, run_soak

    config = SoakConfig(kills=kills, lines_per_append=lines, seed=seed)
    with tempfile.TemporaryDirectory(prefix="memtoc-soak-") as tmp:
        where = workdir or Path(tmp)
        if json_out:
            report = run_soak(where, config)
        else:
            with _progress("soak: kills") as bar:
                task = bar.add_task("kills", total=kills)

                def show(r: SoakReport) -> None:
                    bar.update(task, completed=min(r.kills, kills))

                report = run_soak(where, config, progress=show)
    if json_out:
        emit_json({"bench": "soak", **report.to_dict()})
    else:
        table = Table(title=f"bench soak ({report.seconds:.0f} s)")
        for col in ("step", "runs", "killed", "completed"):
            table.add_column(col, justify="right")
        for step in sorted(report.runs_by_step):
            table.add_row(
                step, str(report.runs_by_step[step]), str(report.kills_by_step.get(step, 0)),
                str(report.completed_by_step.get(step, 0)),
            )  # fmt: skip
        console.print(table)
        console.print(
            f"kills {report.kills}; verify runs {report.verifies}, problems "
            f"{len(report.problems)}; events {report.events:,} (acknowledged {report.acknowledged:,},"
            f" checked after every run); backups verified "
            f"{report.backups_verified}; TOC equal to the crash-free build: {report.toc_equal}"
            f" ({report.toc_nodes} nodes), and after rebuild --all: {report.rebuilt_equal}"
        )
        for problem in report.problems:
            console.print(f"[red]problem:[/] {problem}", highlight=False)
    if not report.ok:
        raise typer.Exit(1)


# -- team mode (PostgreSQL): memtoc.eval.bench_team ---------------------------------------------
@bench_app.command("team")
def bench_team(
    ctx: typer.Context,
    events: Annotated[
        list[int], typer.Option("--events", "-n", help="Event counts (repeatable).")
    ] = [10_000],  # noqa: B006 (typer reads the default)
    db: Annotated[
        str | None, typer.Option("--db", help="postgresql://… (default: the global --db).")
    ] = None,
    writers: Annotated[int, typer.Option("--writers", help="Concurrent writer processes.")] = 4,
    workers: Annotated[int, typer.Option("--workers", help="Pipeline worker processes.")] = 2,
    queries: Annotated[int, typer.Option("--queries")] = 200,
    seed: Annotated[int, typer.Option("--seed")] = 7,
    embed_model: Annotated[
        str | None,
        typer.Option("--embed-model", help="Also embed (this model) and time hybrid search."),
    ] = None,
    embedder: Annotated[
        str, typer.Option("--embedder", help="Embedder kind for --embed-model.")
    ] = "static",
    json_out: JsonOpt = False,
) -> None:
    """Team mode on PostgreSQL: ingest with concurrent writers, process with shared workers,
    query p95 (BM25; hybrid too with --embed-model) — per size, each in a fresh database on the
    server (dropped after)."""
    from memtoc.eval.bench_team import run_team_bench
    from memtoc.surfaces.cli.app import fail, state

    url = db or state(ctx).settings.db
    if not url.startswith(("postgresql://", "postgres://")):
        raise fail(f"bench team needs --db postgresql://… (got {url!r})")
    kind_model = (embedder, embed_model) if embed_model else None
    results = run_team_bench(url, events, writers=writers, workers=workers, queries=queries,
                             seed=seed, embedder=kind_model)  # fmt: skip
    if json_out:
        emit_json({"bench": "team", "results": results})
        return
    table = Table(title="bench team (PostgreSQL)")
    cols = ("events", "ingest_events_per_s", "process_events_per_s", "rollup_s", "query_p50_ms",
            "query_p95_ms", "hit_at_10")  # fmt: skip
    for col in (*cols, *(("hybrid p50/p95 ms", "hybrid hit@10") if embed_model else ())):
        table.add_column(col, justify="right")
    for r in results:
        hybrid = r.get("hybrid")
        extra = (
            (f"{hybrid.get('p50_ms')}/{hybrid.get('p95_ms')}", str(hybrid.get("hit_at_10")))
            if isinstance(hybrid, dict)
            else ()
        )
        table.add_row(*(str(r.get(c)) for c in cols), *extra)
    console.print(table)


@bench_app.command("startup")
def bench_startup(
    ctx: typer.Context,
    project: Annotated[
        str, typer.Option("--project", "-p", help="The project `memtoc context` briefs.")
    ],
    runs: Annotated[int, typer.Option("--runs", "-r", help="Timed runs per command.")] = 15,
    baseline_src: Annotated[
        Path | None,
        typer.Option(
            "--baseline-src",
            help="Another checkout's src/ to time beside this code, run for run (e.g. main's).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Wall and CPU time of the commands agents' hooks run (`memtoc context`, `memtoc hook
    session-start`) as fresh processes, against `python -c pass`, on the
    store of --home (e.g. the demo store)."""
    from memtoc.eval.bench_startup import run_startup_bench
    from memtoc.surfaces.cli.app import state

    home = state(ctx).settings.home
    report = run_startup_bench(home, project, runs=runs, baseline_src=baseline_src)
    if json_out:
        emit_json(report.to_dict())
        return
    table = Table("command", "code", "wall median", "wall p90", "CPU median", "modules", "fails")
    for t in report.timings:
        d = t.to_dict()
        table.add_row(
            t.command,
            t.code,
            f"{d['wall_median_s']:.3f} s",
            f"{d['wall_p90_s']:.3f} s",
            f"{d['cpu_median_s']:.3f} s",
            str(t.modules),
            str(t.failures),
        )
    console.print(table)
    console.print(
        f"[dim]{runs} runs each, interleaved; load average {report.load[0]:.1f} → "
        f"{report.load[1]:.1f}[/]"
    )
