"""One step of the crash-loop soak, run as ``python -m memtoc.eval.soak_child OP DB [ARG]``.

The soak driver (``memtoc.eval.soak``) starts this program, waits for its ``ready`` line, and
SIGKILLs it at a random moment. Every step uses the real facade on the real SQLite store with a
fixed clock far after the history (so every segment is closed and every rollup is due) and no
embedder (vectors are not what the soak is about, and loading a model would dominate the time).

Steps:

- ``ingest DB TRANSCRIPT``: import the transcript (resuming from its watermark); after each durable
  commit print ``ack <json list of event ids>`` — the acknowledgement log the driver checks.
- ``process DB``: drain the outbox (segments, summaries, grips, FTS, bookmarks, due rollups).
- ``rollup DB``: force every rollup.
- ``rebuild DB``: re-index the full-text search tables from events and docs.
- ``rebuild-all DB``: ``memtoc rebuild --all`` (segments, summaries, grips, bookmarks, docs, FTS;
  no embedder, so no vectors).
- ``backup DB DEST``: online backup to DEST.

Each prints ``done`` when it finished on its own.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC

from memtoc.clock import ManualClock
from memtoc.ingest.importer import CommitInfo
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore

SOAK_NOW_MS = 1_893_456_000_000  # 2030-01-01T00:00:00Z: after every synthetic event
"""The children's clock: every segment has closed and every rollup is due."""


def open_memory(db: str) -> Memory:
    """The facade the soak steps use: full durability, fixed clock, UTC, no embedder."""
    clock = ManualClock(SOAK_NOW_MS)
    store = SqliteStore(db, durability="full", clock=clock)
    return Memory(store, clock=clock, tz=UTC, semantic=SemanticIndex(store, kind="none"))


def _ack(info: CommitInfo) -> None:
    sys.stdout.write("ack " + json.dumps(list(info.event_ids)) + "\n")
    sys.stdout.flush()


def run(op: str, db: str, arg: str | None) -> None:
    """Run one step to completion (unless killed), then print ``done``."""
    with open_memory(db) as memory:
        print("ready", flush=True)
        if op == "ingest" and arg:
            memory.ingest([arg], on_commit=_ack)
        elif op == "process":
            memory.process()
        elif op == "rollup":
            memory.rollup(force=True)
        elif op == "rebuild":
            memory.rebuild_fts()
        elif op == "rebuild-all":
            memory.rebuild()
        elif op == "backup" and arg:
            memory.backup(arg)
        else:
            raise SystemExit(f"soak_child: unknown step {op!r} (or missing argument)")
    print("done", flush=True)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
