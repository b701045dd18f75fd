"""``memtoc bench team --db postgresql://…``: team mode under load — concurrent writers, shared
workers, query latency — on a PostgreSQL server.

For each size N, in a fresh database ``memtoc_bench_team_<N>`` on the server (dropped after):

1. **Ingest**: ``writers`` processes (``spawn``) append the synthetic history (``synth``, seed
   fixed) at once, each its own share of the sessions (as agents on several machines would), in
   batches of ``batch`` events straight into ``PostgresStore.append_events`` (events + outbox entry
   per batch, one transaction). Timed from a barrier to the last commit: events/s overall.
2. **Process**: ``workers`` processes drain the one outbox together (segments, extractive
   summaries, grips, full text; no embedder), then one ``rollup(force=True)``. Timed the same way.
3. **Query**, after an ``ANALYZE`` (timed: the planner statistics autovacuum would have gathered
   a minute or so after the load; full-text frequencies of common lexemes come from them, see
   ``store/postgres/text_stats.py``): the planted facts' questions, cycled to ``queries``, through
   ``Memory.search(q, mode="bm25", limit=10)`` over all projects: p50/p95 latency (wall clock, and
   this process's CPU time per query) and the hit rate (the fact's event among the items' events or
   cites).
4. **Vectors** (with ``embedder``): the embed step in this process (every event and doc, timed),
   the approximate index built when the store has enough vectors (``postgres/ann``, timed), then
   the same questions through ``mode="hybrid"`` — and the first ``EXACT_QUERIES`` again with exact
   vectors (``PostgresStore.use_ann = False``) for comparison.

The machine's 1-minute load average is recorded at the start of each phase (``load``): on a
shared machine it says how much the wall-clock figures are worth.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from memtoc.clock import SystemClock
from memtoc.errors import StoreError
from memtoc.eval.synth import SynthConfig, generate_with_facts
from memtoc.model import Event, JsonValue

DB_PREFIX = "memtoc_bench_team_"
EXACT_QUERIES = 50
"""Hybrid queries also timed with exact vectors when the approximate index exists."""
BARRIER_S = 1_800
"""How long processes wait for each other at the start line (writers first generate the history)."""
Progress = Callable[[str, int, int], None]


def _db_url(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def _admin(url: str, sql: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)
    except psycopg.Error as exc:
        raise StoreError(f"bench team: {exc}") from exc


def _share(event: Event, index: int, writers: int) -> bool:
    """Whether ``event``'s session belongs to writer ``index`` (stable across processes)."""
    return sum(event.session_id.encode()) % writers == index


def _writer(url: str, n: int, seed: int, index: int, writers: int, batch: int, start: Any) -> int:
    """One writer process: append its sessions' events in batches; return how many it stored."""
    from memtoc.store.postgres import PostgresStore

    stream, _ = generate_with_facts(SynthConfig(seed=seed, events=n))
    mine = [e for e in stream if _share(e, index, writers)]
    store = PostgresStore(url, pool_size=1)
    try:
        start.wait(timeout=BARRIER_S)
        stored = 0
        for i in range(0, len(mine), batch):
            stored += store.append_events(mine[i : i + batch]).inserted
        return stored
    finally:
        store.close()


def _worker(url: str, worker_id: str, start: Any) -> int:
    """One pipeline worker process: drain the shared outbox until idle; return entries done."""
    from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
    from memtoc.pipeline.worker import PipelineConfig, Processor
    from memtoc.store.postgres import PostgresStore
    from memtoc.text.tokens import default_counter

    store = PostgresStore(url, pool_size=2)
    try:
        counter = default_counter()
        proc = Processor(store, ExtractiveSummarizer(counter), counter, PipelineConfig(),
                         SystemClock(), ZoneInfo("UTC"), worker_id=worker_id)  # fmt: skip
        start.wait(timeout=BARRIER_S)
        return proc.run(rollup=False).entries
    finally:
        store.close()


def _parallel(target: Callable[..., int], args: list[tuple[Any, ...]]) -> tuple[list[int], float]:
    """Run ``target`` in one spawned process per args tuple, started together at a barrier;
    return the results and the seconds from the barrier to the last one's end."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(len(args)) as pool:
        start = manager.Barrier(len(args) + 1)
        pending = pool.starmap_async(target, [(*a, start) for a in args])
        start.wait(timeout=BARRIER_S)
        t0 = time.perf_counter()
        results = pending.get(timeout=7_200)
        return list(results), time.perf_counter() - t0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))] if s else 0.0


def _ask(memory: Any, asked: list[Any], mode: str) -> dict[str, JsonValue]:
    """Time ``asked`` through ``Memory.search`` in ``mode``: wall and CPU p50/p95, hit@10."""
    latencies: list[float] = []
    cpu: list[float] = []
    hits = 0
    if asked:  # warm-up, untimed
        memory.search(asked[0].query, mode=mode, limit=10)
    for fact in asked:
        t, c = time.perf_counter(), time.process_time()
        result = memory.search(fact.query, mode=mode, limit=10)
        latencies.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        ids = {e.event_id for i in result.items for e in i.events}
        hits += fact.event_id in ids | {c for i in result.items for c in i.cites}
    return {
        "queries": len(latencies),
        "p50_ms": round(_pct(latencies, 50), 2),
        "p95_ms": round(_pct(latencies, 95), 2),
        "cpu_p50_ms": round(_pct(cpu, 50), 2),
        "cpu_p95_ms": round(_pct(cpu, 95), 2),
        "hit_at_10": round(hits / len(latencies), 3) if latencies else None,
        "load": _load(),
    }


def _vectors(store: Any, embedder: tuple[str, str], asked: list[Any]) -> dict[str, JsonValue]:
    """Embed everything (one process, the embed step), build the approximate index when the
    store is big enough for it, then hybrid search through it and (``EXACT_QUERIES``) without."""
    from memtoc.memory import Memory
    from memtoc.pipeline.embed_step import EmbedStep
    from memtoc.retrieval.embedding_index import SemanticIndex
    from memtoc.store.postgres.ann import ANN_MIN_ROWS

    semantic = SemanticIndex(store, kind=embedder[0], model=embedder[1])
    emb = semantic.embedder
    if emb is None:
        raise StoreError(f"bench team: no embedder ({semantic.degraded})")
    out: dict[str, JsonValue] = {"embedder": emb.name, "load_embed": _load()}
    t0 = time.perf_counter()
    report = EmbedStep(store, emb, ann_min_rows=2**62).run()  # the index is timed apart
    embed_s = time.perf_counter() - t0
    vectors = report.events + report.docs
    out.update(embed_s=round(embed_s, 3), vectors=vectors,
               embed_vectors_per_s=round(vectors / embed_s, 1) if embed_s else None)  # fmt: skip
    t0 = time.perf_counter()
    built = store.ensure_vector_index(emb.name, int(emb.dim), min_rows=ANN_MIN_ROWS)
    out.update(ann_build_s=round(time.perf_counter() - t0, 3) if built else None,
               ann_indexes=store.vector_indexes())  # fmt: skip
    hybrid_memory = Memory(store, tz=ZoneInfo("UTC"), semantic=semantic)
    out["hybrid"] = _ask(hybrid_memory, asked, "hybrid")
    if built:
        store.use_ann = False
        try:
            out["hybrid_exact"] = _ask(hybrid_memory, asked[:EXACT_QUERIES], "hybrid")
        finally:
            store.use_ann = True
    return out


def measure_team(
    url: str,
    n: int,
    *,
    writers: int = 4,
    workers: int = 2,
    queries: int = 200,
    batch: int = 100,
    seed: int = 7,
    embedder: tuple[str, str] | None = None,
    progress: Progress | None = None,
) -> dict[str, JsonValue]:
    """Ingest, process and query ``n`` events in a fresh database on the server at ``url``;
    with ``embedder`` (kind, model), also embed and measure hybrid search."""
    from memtoc.memory import Memory
    from memtoc.store.postgres import PostgresStore

    name = f"{DB_PREFIX}{n}"
    _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(url, f'CREATE DATABASE "{name}"')
    db = _db_url(url, name)
    load: dict[str, JsonValue] = {}
    steps = 4 if embedder else 3
    try:
        PostgresStore(db, pool_size=1).close()  # schema first, not inside the timings
        if progress:
            progress(f"{n:,}: ingest", 0, steps)
        load["ingest"] = _load()
        stored, ingest_s = _parallel(
            _writer, [(db, n, seed, i, writers, batch) for i in range(writers)]
        )
        if progress:
            progress(f"{n:,}: process", 1, steps)
        load["process"] = _load()
        entries, process_s = _parallel(_worker, [(db, f"worker-{i}") for i in range(workers)])
        store = PostgresStore(db, pool_size=2)
        memory = Memory(store, tz=ZoneInfo("UTC"))
        try:
            load["rollup"] = _load()
            t0 = time.perf_counter()
            rolled = memory.rollup(force=True)
            rollup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            store._exec("ANALYZE")  # what autovacuum does within a minute or so of a bulk load
            analyze_s = time.perf_counter() - t0
            if progress:
                progress(f"{n:,}: query", 2, steps)
            _, facts = generate_with_facts(SynthConfig(seed=seed, events=n))
            asked = [facts[i % len(facts)] for i in range(queries)] if facts else []
            bm25 = _ask(memory, asked, "bm25")
            vectors: dict[str, JsonValue] = {}
            if embedder:
                if progress:
                    progress(f"{n:,}: vectors", 3, steps)
                vectors = _vectors(store, embedder, asked)
            stats = store.stats()
        finally:
            memory.close()
        load["query"] = bm25["load"]
        return {
            "events": n,
            "stored": sum(stored),
            "writers": writers,
            "workers": workers,
            "ingest_s": round(ingest_s, 3),
            "ingest_events_per_s": round(sum(stored) / ingest_s, 1) if ingest_s else None,
            "process_s": round(process_s, 3),
            "process_events_per_s": round(sum(stored) / process_s, 1) if process_s else None,
            "outbox_entries": sum(entries),
            "entries_per_worker": list(entries),
            "rollup_s": round(rollup_s, 3),
            "rollup_written": rolled.written,
            "analyze_s": round(analyze_s, 3),
            "queries": bm25["queries"],
            "query_p50_ms": bm25["p50_ms"],
            "query_p95_ms": bm25["p95_ms"],
            "query_cpu_p50_ms": bm25["cpu_p50_ms"],
            "query_cpu_p95_ms": bm25["cpu_p95_ms"],
            "hit_at_10": bm25["hit_at_10"],
            "nodes": stats.get("nodes"),
            "bytes": stats.get("bytes"),
            "load": load,
            **vectors,
        }
    finally:
        _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_team_bench(
    url: str,
    sizes: list[int],
    *,
    writers: int = 4,
    workers: int = 2,
    queries: int = 200,
    batch: int = 100,
    seed: int = 7,
    embedder: tuple[str, str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, JsonValue]]:
    """``measure_team`` for every size, smallest first."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise StoreError(f"bench team needs a postgresql:// URL (got {url!r})")
    return [
        measure_team(
            url,
            n,
            writers=writers,
            workers=workers,
            queries=queries,
            batch=batch,
            seed=seed,
            embedder=embedder,
            progress=progress,
        )
        for n in sorted(sizes)
    ]
