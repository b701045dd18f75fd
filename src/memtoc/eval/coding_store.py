"""The store ``memtoc eval coding`` asks: a corpus ingested through memtoc's importers, processed
and rolled up (forced), built once and reused while nothing it depends on changed.

The store is built as a user's would be — ``Memory.ingest`` on the corpus folder (format
auto-detected), redaction as configured, the run's embedder for vectors, the extractive
summariser — with every event in one project named after the corpus and the days cut in the
developer's time zone (``Corpus.timezone``). The clock stands one minute after the last event.

With a store folder (``--store``) the build is kept in ``<folder>/<corpus>/`` beside a
``build.json`` manifest: the corpus's files (names, sizes, mtimes), the embedder, the time zone,
redaction, and a fingerprint of the code that builds a store (ingest, pipeline, store, text, the
model, the facade, bookmark detection). A later run reuses it only when all of these match, so
recall can be iterated on in seconds while an importer or pipeline change rebuilds.

With a PostgreSQL server (``--db``, team mode) the store is instead a fresh database on it,
``memtoc_eval_coding_<corpus>`` (any leftover dropped first), built every run and dropped once the
run is over (``drop_store``): the same build, read through the same store protocol.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.clock import ManualClock
from memtoc.errors import StoreError
from memtoc.eval.coding import Corpus
from memtoc.eval.harness import drop_eval_database, fresh_eval_database
from memtoc.eval.modes import ModeContext
from memtoc.ids import UlidFactory
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.services import store_timezone
from memtoc.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from memtoc.store.postgres import PostgresStore

_BUILD_CODE = ("ingest", "pipeline", "store", "text")
_BUILD_FILES = ("model.py", "memory.py", "services.py", "retrieval/bookmark_step.py",
                "retrieval/bookmarks.py", "retrieval/bookmarks_llm.py",
                "retrieval/bookmark_cues.py", "retrieval/bookmark_gist.py",
                "retrieval/bookmark_terms.py")  # fmt: skip
_MINUTE = 60_000


@dataclass
class BuiltStore:
    memory: Memory
    clock: ManualClock
    project: str
    events: int
    last_event_ms: int
    reused: bool
    seconds: float
    notes: list[str]


def code_fingerprint() -> str:
    """A hash of the source files that decide what a built store holds."""
    import memtoc

    base = Path(memtoc.__file__).parent
    paths = sorted(p for d in _BUILD_CODE for p in (base / d).rglob("*.py"))
    paths += [base / f for f in _BUILD_FILES if (base / f).is_file()]
    digest = hashlib.blake2b(digest_size=12)
    for p in paths:
        digest.update(str(p.relative_to(base)).encode())
        digest.update(p.read_bytes())
    return digest.hexdigest()


def corpus_fingerprint(corpus: Corpus) -> str:
    """A hash of the corpus's session files: names, sizes and modification times."""
    digest = hashlib.blake2b(digest_size=12)
    for p in sorted(corpus.data.rglob("*")):
        if p.is_file():
            st = p.stat()
            digest.update(f"{p.relative_to(corpus.data)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _manifest(corpus: Corpus, ctx: ModeContext, tz: str, redact: bool) -> dict[str, JsonValue]:
    return {
        "corpus": str(corpus.root),
        "corpus_files": corpus_fingerprint(corpus),
        "code": code_fingerprint(),
        "embedder": ctx.embedder_label,
        "timezone": tz,
        "redact": redact,
    }


def _memory(
    path: Path, ctx: ModeContext, tz: str, redact: bool, pg_url: str | None = None
) -> tuple[Memory, ManualClock]:
    from memtoc.ingest.redact import Redactor

    clock = ManualClock(0)
    store: SqliteStore | PostgresStore
    if pg_url is not None:
        from memtoc.store.postgres import PostgresStore

        store = PostgresStore(
            fresh_eval_database(pg_url, "coding_" + path.parent.name), clock=clock, pool_size=2
        )
    else:
        store = SqliteStore(path, durability="off", clock=clock)
    ids = UlidFactory(clock, random.Random(zlib.crc32(path.parent.name.encode("utf-8"))))
    semantic = SemanticIndex(store, embedder=ctx.embedder) if ctx.embedder else None
    memory = Memory(
        store,
        clock=clock,
        ids=ids,
        counter=ctx.counter,
        redactor=Redactor() if redact else None,
        tz=store_timezone(store, tz),
        semantic=semantic or SemanticIndex(store, kind="none"),
    )
    return memory, clock


def _last_event_ms(memory: Memory, project: str) -> tuple[int, int]:
    """The project's event count and its newest event's time."""
    events = memory.events(project=project)
    return len(events), max((e.ts_ms for e in events), default=0)


def drop_store(built: BuiltStore) -> None:
    """Close the store; a PostgreSQL one (``--db``) is dropped too (a SQLite file stays where
    ``open_store`` put it: a temporary folder or the kept ``--store``)."""
    built.memory.close()
    drop_eval_database(built.memory)


def open_store(
    corpus: Corpus,
    ctx: ModeContext,
    *,
    folder: Path,
    keep: bool,
    tz: str | None = None,
    redact: bool = True,
    rebuild: bool = False,
    pg_url: str | None = None,
) -> BuiltStore:
    """The corpus's store in ``folder``: reused when ``keep`` and its manifest matches (and not
    ``rebuild``), else built fresh there; with ``pg_url`` built in a fresh PostgreSQL database on
    that server instead (never reused; ``drop_store`` drops it). Any rejected record is noted,
    never silent."""
    zone = tz or corpus.timezone
    home = folder / corpus.name
    db = home / "memtoc.db"
    manifest = _manifest(corpus, ctx, zone, redact)
    notes: list[str] = []
    started = time.perf_counter()
    if pg_url is not None:
        return _build(corpus, ctx, home, zone, redact, manifest, notes, started, pg_url)
    if keep and not rebuild and db.is_file() and (home / "build.json").is_file():
        try:
            old = json.loads((home / "build.json").read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        stale = sorted(k for k in manifest if old.get(k) != manifest[k])
        if not stale:
            memory, clock = _memory(db, ctx, zone, redact)
            events, last = _last_event_ms(memory, corpus.name)
            clock.set(last + _MINUTE)
            built_notes = old.get("notes")
            notes.append(f"store reused from {home} (built {old.get('built_at', '?')})")
            notes.extend(str(n) for n in (built_notes if isinstance(built_notes, list) else []))
            return BuiltStore(memory, clock, corpus.name, events, last, True,
                              time.perf_counter() - started, notes)  # fmt: skip
        notes.append(f"store in {home} rebuilt: {', '.join(stale)} changed")
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    return _build(corpus, ctx, home, zone, redact, manifest, notes, started, None)


def _build(
    corpus: Corpus,
    ctx: ModeContext,
    home: Path,
    zone: str,
    redact: bool,
    manifest: dict[str, JsonValue],
    notes: list[str],
    started: float,
    pg_url: str | None,
) -> BuiltStore:
    """Ingest, process and roll up the corpus into a new store (``home``'s SQLite file, or a
    fresh PostgreSQL database with ``pg_url``); the SQLite build leaves its manifest."""
    memory, clock = _memory(home / "memtoc.db", ctx, zone, redact, pg_url)
    try:
        return _fill(corpus, memory, clock, manifest, home, notes, started, pg_url)
    except BaseException:
        memory.close()
        drop_eval_database(memory)  # a half-built PostgreSQL store is not left on the server
        raise


def _fill(
    corpus: Corpus,
    memory: Memory,
    clock: ManualClock,
    manifest: dict[str, JsonValue],
    home: Path,
    notes: list[str],
    started: float,
    pg_url: str | None,
) -> BuiltStore:
    # a corpus folder may link to transcripts kept elsewhere (../shared): the user chose them
    report = memory.ingest([corpus.data], project=corpus.name, follow_symlinks=True)
    events, last = _last_event_ms(memory, corpus.name)
    if events == 0:
        raise StoreError(f"{corpus.data}: no events imported ({report.rejected} rejected)")
    if report.rejected:
        first = report.rejections[0]
        notes.append(f"ingest rejected {report.rejected} records (first: {first.source} "
                     f"line {first.line}: {first.reason})")  # fmt: skip
    if report.redacted:
        notes.append(f"ingest redacted {report.redacted} secrets")
    clock.set(last + _MINUTE)
    processed = memory.process()
    rolled = memory.rollup(force=True)
    if processed.failures or rolled.failures:
        notes.append(f"pipeline failures: {processed.failures} while processing, "
                     f"{len(rolled.failures)} in the forced rollup")  # fmt: skip
    if processed.events < events:
        notes.append(f"only {processed.events:,} of {events:,} events filed into segments")
    seconds = time.perf_counter() - started
    notes.append(f"store built in {seconds:.1f} s: {report.files} files, {events:,} events "
                 f"({report.skipped:,} parts skipped: thinking, bookkeeping)")  # fmt: skip
    if pg_url is not None:
        notes.append(f"PostgreSQL store {memory.store.location} (dropped after the run)")
        return BuiltStore(memory, clock, corpus.name, events, last, False, seconds, notes)
    (home / "build.json").write_text(
        json.dumps({**manifest, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "notes": notes},
                   indent=2) + "\n", encoding="utf-8",
    )  # fmt: skip
    return BuiltStore(memory, clock, corpus.name, events, last, False, seconds, notes)
