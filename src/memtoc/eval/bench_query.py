"""``memtoc bench query``: query latency, throughput and recall at scale, beside a flat scan.

For each size N, in a fresh ``spawn`` child process (so peak RSS is that size's alone), on
SQLite or, with ``pg_url`` (``--db``), on a PostgreSQL server (``eval/bench_query_store``: where
the store lives, how it is kept, analysed and warmed):

1. generate N synthetic events with their planted facts (``generate_with_facts``), ingest them,
   then ``Memory.process()`` + ``Memory.rollup(force=True)`` — *not* timed, reported as
   ``setup_s`` (embedding included when an embedder loads);
2. read the store once (the OS page cache then holds it, as it does for a memory in use;
   untimed, reported as ``warm_read_s``), and build the workload: the
   planted facts' questions, cycled until there are ``queries`` of them;
3. time every query in every mode (one untimed warm-up query per mode first):

   - ``teleport-bm25``: ``memory.search(q, mode="bm25", limit=10)``;
   - ``teleport-hybrid``: ``memory.search(q, mode="hybrid", limit=10)``, only when the configured
     embedder loads (else the mode is listed under ``skipped`` with the reason);
   - ``nav-context``: ``memory.context(project)`` — the session-start context of the fact's project;
   - ``nav-year``: ``memory.node(year)`` — the year node covering the fact, with its children;
   - ``scan-baseline``: the baseline, measured in the same run — ``store.scan_events(project=…)``
     over the fact's project, each event's lower-cased text tested for the query's terms
     (substring), the top 10 by number of distinct terms present (ties: earliest first); each
     planted fact asked once (its cost is a full read of the project, repeats teach it nothing);
   - ``recall``: ``memory.recall(q, budget=1000)`` (no time limit, so the figure is its real
     cost); its hit is the fact's event among the context's included events.

``modes`` (``--mode``) limits the modes timed. The machine's 1-minute load average at the start
and the end of the timed queries is reported (``load_avg_1m``): on a shared machine it says what
the wall-clock figures are worth.

Per mode: p50 and p95 latency (wall clock, and the CPU time of the process per query — on a
shared machine the wall clock also counts waiting for a core — and on PostgreSQL, when the server
runs on this machine, the CPU time of the store's server processes per query:
``bench_query_store.ServerCpu``), throughput (queries per second of
summed latency) and, for the
modes that retrieve events, the planted-fact hit rate@10: a hit when the fact's event is among the
returned items' ``events`` or ``cites`` (for the scan, among the 10 returned events). Teleport is
asked over *all* projects, the scan reads only the fact's project (about a third of the events),
which favours the baseline.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memtoc.config import Settings, load_settings
from memtoc.errors import MemtocError
from memtoc.eval.bench_charts import line_chart
from memtoc.eval.bench_child import run_in_child
from memtoc.eval.bench_ingest import _draft
from memtoc.eval.bench_query_store import bench_store, read_through
from memtoc.eval.synth import PlantedFact, SynthConfig, generate_with_facts
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.memory import Memory
from memtoc.model import Event, JsonValue
from memtoc.store.capabilities import MemoryStore

__all__ = ["measure_query", "query_terms", "read_through", "run_query_bench", "scan_top"]

MODES: tuple[str, ...] = (
    "teleport-bm25",
    "teleport-hybrid",
    "nav-context",
    "nav-year",
    "scan-baseline",
    "recall",
)
RECALL_BUDGET = 1_000
INGEST_BATCH = 5_000
LIMIT = 10
_TERM = re.compile(r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]")
_STOPWORD_TEXT = (
    "a an and are as at be by did do does for from had has have how i in is it its of on or our "
    "the this to was we were what when where which who why with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

Progress = Callable[[str, int], None]
"""``progress(stage, n)``: ``n`` more units done in ``stage`` (ingest, process, query)."""


def query_terms(query: str) -> list[str]:
    """The scan baseline's terms: lower-cased words of ``query`` (2+ characters, stopwords
    dropped), deduplicated."""
    words = _TERM.findall(query.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in _STOPWORDS))


def scan_top(events: Iterator[Event], terms: list[str], k: int = LIMIT) -> list[Event]:
    """The ``k`` events holding the most distinct ``terms`` (at least one; ties: earliest first)."""
    best: list[tuple[int, int, Event]] = []
    for i, event in enumerate(events):
        text = event.text.lower()
        score = sum(1 for t in terms if t in text)
        if score:
            best.append((score, -i, event))
            if len(best) > 8 * k:  # keep memory bounded: trim to the best k now and then
                best = sorted(best, key=lambda r: (r[0], r[1]), reverse=True)[:k]
    best.sort(key=lambda r: (r[0], r[1]), reverse=True)
    return [e for _, _, e in best[:k]]


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` (its own address space's high-water
    mark; ``ru_maxrss`` can carry the spawning parent's peak across ``exec``), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _percentile(sorted_s: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (``q`` in 0..100)."""
    rank = max(1, min(len(sorted_s), round(q / 100 * len(sorted_s) + 0.5)))
    return sorted_s[rank - 1]


def _ingest(store: MemoryStore, events: Iterator[Event], progress: Progress | None) -> None:
    importer = Importer(
        store, redactor=None, options=IngestOptions(format="jsonl", batch_size=INGEST_BATCH)
    )
    chunk = []
    for event in events:
        chunk.append(_draft(event))
        if len(chunk) >= INGEST_BATCH:
            importer.ingest_drafts(chunk, source="bench")
            if progress:
                progress("ingest", len(chunk))
            chunk = []
    if chunk:
        importer.ingest_drafts(chunk, source="bench")
        if progress:
            progress("ingest", len(chunk))


def _build(
    memory: Memory, store: MemoryStore, stream: Iterator[Event], progress: Progress | None
) -> None:
    """Ingest ``stream``, process it (segments, summaries, indexes, embeddings) and roll up."""
    _ingest(store, stream, progress)
    seen = 0

    def on_process(report: object) -> None:
        nonlocal seen
        done = int(getattr(report, "events", 0))
        if progress and done > seen:
            progress("process", done - seen)
            seen = done

    memory.process(progress=on_process)
    memory.rollup(force=True)


def _mode_runners(
    memory: Memory, store: MemoryStore, facts: list[PlantedFact]
) -> dict[str, Callable[[PlantedFact], set[str] | None]]:
    """One function per mode: run the fact's query, return the event ids it retrieved (or None
    for navigation, which retrieves no events by query)."""

    def teleport(mode: str) -> Callable[[PlantedFact], set[str] | None]:
        def run(fact: PlantedFact) -> set[str]:
            result = memory.search(fact.query, mode=mode, limit=LIMIT)
            if result.mode != mode:
                raise MemtocError(f"bench asked for {mode} search, {result.mode} ran")
            return {e.event_id for it in result.items for e in it.events} | {
                c for it in result.items for c in it.cites
            }

        return run

    years = {p: memory.toc(p) for p in {f.project for f in facts}}

    def nav_context(fact: PlantedFact) -> None:
        memory.context(fact.project)

    def nav_year(fact: PlantedFact) -> None:
        nodes = years[fact.project]
        year = next((n for n in nodes if n.start_ms <= fact.ts_ms <= n.end_ms), nodes[0])
        memory.node(year.node_id, project=fact.project)

    def scan(fact: PlantedFact) -> set[str]:
        found = scan_top(store.scan_events(project=fact.project), query_terms(fact.query))
        return {e.event_id for e in found}

    runners: dict[str, Callable[[PlantedFact], set[str] | None]] = {
        "teleport-bm25": teleport("bm25")
    }
    if memory.semantic.degraded is None:
        runners["teleport-hybrid"] = teleport("hybrid")
    runners.update({"nav-context": nav_context, "nav-year": nav_year, "scan-baseline": scan})

    # -- recall (memtoc.retrieval.recall): budgeted context, 1,000 tokens ---------------------
    def recall(fact: PlantedFact) -> set[str]:
        result = memory.recall(fact.query, budget=RECALL_BUDGET, time_limit_ms=None)
        return {e.event_id for it in result.items for e in it.events}

    runners["recall"] = recall
    return runners


def measure_query(
    events: int,
    *,
    queries: int = 200,
    seed: int = 7,
    workdir: Path | None = None,
    store_dir: Path | None = None,
    pg_url: str | None = None,
    keep_db: bool = False,
    modes: Sequence[str] | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> dict[str, JsonValue]:
    """Build an N-event store (untimed; with ``store_dir``, or ``keep_db`` on PostgreSQL, kept
    and reused by later runs), then time ``queries`` queries per mode (in-process); ``modes``
    limits the modes timed (default: all of ``MODES``)."""
    if queries < 1:
        raise MemtocError(f"--queries must be at least 1 (got {queries})")
    unknown = sorted(set(modes or ()) - set(MODES))
    if unknown:
        raise MemtocError(
            f"unknown bench query mode(s) {', '.join(unknown)} (known: {', '.join(MODES)})"
        )
    settings = settings or load_settings()
    with bench_store(
        events, seed, workdir=workdir, store_dir=store_dir, pg_url=pg_url, keep=keep_db
    ) as bench:
        store = bench.store
        memory = Memory(store, settings=settings)
        try:
            stream, facts = generate_with_facts(SynthConfig(events=events, seed=seed))
            if not facts:
                raise MemtocError(f"the {events:,}-event synthetic history holds no planted facts")
            t0 = time.perf_counter()
            reused = bench.reused
            if not reused:
                _build(memory, store, stream, progress)
                bench.analyze()
                bench.mark_ready(f"{events} events, seed {seed}\n")
            setup_s = time.perf_counter() - t0
            warm_s = bench.warm()
            load = [round(os.getloadavg()[0], 2)]
            runners = {
                k: v
                for k, v in _mode_runners(memory, store, facts).items()
                if modes is None or k in modes
            }
            workload = [facts[i % len(facts)] for i in range(queries)]
            figures: dict[str, JsonValue] = {}
            for name, run in runners.items():
                run(workload[0])  # warm-up (caches, first-use loads), not timed
                latencies: list[float] = []
                cpu: list[float] = []
                server: list[float] = []
                hits = 0
                # the scan reads the whole project whatever it asks (no cache to warm), so each
                # fact is asked once: at a million events 200 scans would take most of an hour
                asked = workload[: len(facts)] if name == "scan-baseline" else workload
                for fact in asked:
                    s0 = bench.server_cpu()
                    c = time.process_time()
                    t = time.perf_counter()
                    found = run(fact)
                    latencies.append(time.perf_counter() - t)
                    cpu.append(time.process_time() - c)
                    s1 = bench.server_cpu()
                    if s0 is not None and s1 is not None:
                        server.append(s1 - s0)
                    hits += found is not None and fact.event_id in found
                    if progress:
                        progress("query", 1)
                latencies.sort()
                cpu.sort()
                server.sort()
                retrieves = name.startswith(("teleport", "scan", "recall"))
                figures[name] = {
                    "p50_ms": round(_percentile(latencies, 50) * 1e3, 3),
                    "p95_ms": round(_percentile(latencies, 95) * 1e3, 3),
                    "cpu_p50_ms": round(_percentile(cpu, 50) * 1e3, 3),
                    "cpu_p95_ms": round(_percentile(cpu, 95) * 1e3, 3),
                    "server_cpu_p50_ms": round(_percentile(server, 50) * 1e3, 3)
                    if server
                    else None,
                    "server_cpu_p95_ms": round(_percentile(server, 95) * 1e3, 3)
                    if server
                    else None,
                    "qps": round(len(latencies) / sum(latencies), 1) if sum(latencies) else 0.0,
                    "hit_rate_at_10": round(hits / len(asked), 3) if retrieves else None,
                    "queries": len(asked),
                }
            load.append(round(os.getloadavg()[0], 2))
            embedder = memory.semantic.embedder
            skipped: dict[str, JsonValue] = {}
            if "teleport-hybrid" not in runners and (modes is None or "teleport-hybrid" in modes):
                skipped["teleport-hybrid"] = memory.semantic.degraded
            return {
                "events": events,
                "backend": bench.backend,
                "queries": queries,
                "facts": len(facts),
                "setup_s": round(setup_s, 3),
                "warm_read_s": round(warm_s, 3),
                "store_reused": reused,
                "embedder": embedder.name if embedder is not None else None,
                "db_bytes": bench.size(),
                "load_avg_1m": load,
                "peak_rss_mb": peak_rss_mb(),
                "modes": figures,
                "skipped": skipped,
            }
        finally:
            memory.close()


def _child(
    events: int,
    options: dict[str, Any],
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    def report(stage: str, n: int) -> None:
        out.put(("progress", stage, n))

    try:
        out.put(("done", measure_query(events, **options, progress=report), 0))
    except Exception as exc:  # reported to the parent, which raises it
        out.put(("error", f"{type(exc).__name__}: {exc}", 0))


def run_query_bench(
    events: int,
    *,
    queries: int = 200,
    seed: int = 7,
    workdir: Path | None = None,
    store_dir: Path | None = None,
    pg_url: str | None = None,
    keep_db: bool = False,
    modes: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, JsonValue]:
    """``measure_query`` in a fresh spawned child (its own peak RSS; settings from its
    environment); returns its figures."""
    options: dict[str, Any] = {
        "queries": queries,
        "seed": seed,
        "workdir": workdir,
        "store_dir": store_dir,
        "pg_url": pg_url,
        "keep_db": keep_db,
        "modes": list(modes) if modes is not None else None,
    }
    return run_in_child("query", events, _child, (events, options), progress)


def write_chart(results: list[dict[str, JsonValue]], out_dir: Path) -> Path:
    """Plot p95 latency against N, one line per mode (log-log), wall clock solid and CPU time
    dashed, to ``out_dir/query_latency.png``."""
    series: dict[str, list[tuple[float, float]]] = {}
    cpu: dict[str, list[tuple[float, float]]] = {}
    for mode in MODES:
        for r in results:
            figures = r["modes"]
            if isinstance(figures, dict) and isinstance(figures.get(mode), dict):
                stats = figures[mode]
                assert isinstance(stats, dict)
                n = float(str(r["events"]))
                series.setdefault(mode, []).append((n, float(str(stats["p95_ms"]))))
                if "cpu_p95_ms" in stats:
                    cpu.setdefault(mode, []).append((n, float(str(stats["cpu_p95_ms"]))))
    return line_chart(
        out_dir / "query_latency.png",
        series,
        title="memtoc bench query: p95 latency per mode",
        ylabel="p95 latency (ms)",
        log_y=True,
        dashed=cpu,
        dashed_label="CPU time p95 (dashed)",
    )
