"""The forget log: which events were forgotten, kept *beside* the store so a restore cannot undo it.

A backup holds the events that were alive when it was taken. Restoring one used to bring back
every event forgotten since (and its ``forget_audit``), silently. The store's own tables cannot
prevent that — the restore replaces them — so every forget is also recorded in a file next to the
database, ``<db>-forget.jsonl``, which ``restore`` (it replaces ``<db>``, ``-wal`` and ``-shm``)
leaves alone.

**What it holds.** One JSON line per forget: when, and for each event its id, time, project and
session — what the store's tombstone row keeps, never text, metadata or a query. The file is
created with mode 0600 (it names sessions and projects).

**How it is kept in step.** A forget appends its line (and syncs it) *before* its purge commits,
and the purge transaction records the log's size in ``meta`` (:data:`APPLIED_KEY`). So the file is
never behind the store; a crash between the two leaves the log ahead, which the next open repairs
by forgetting again (what the user asked for).

**Reconciling** (:func:`reconcile`, run by ``Memory.open`` on every writable open, and by
``memtoc restore``): when the log's size differs from the recorded one — a backup restored, the
file copied over, a forget cut short — every logged event that is alive in the store is forgotten
again (the full forget: purge, re-derived summaries, scrub; audited as re-applied from the log),
every logged event the store does not hold at all becomes a tombstone row (so re-importing the
transcript cannot bring it back: ``INSERT OR IGNORE`` sees its id), and every tombstone the log
lacks (a deleted log file) is appended to it. A read-only open cannot forget: if a logged event is
alive there it refuses to open and says why (:func:`check_read_only`). The check costs a ``stat``
and one ``meta`` read per open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memtoc.errors import StoreError
from memtoc.model import JsonValue
from memtoc.store.capabilities import EventRef, LoggedForgetStore

SUFFIX = "-forget.jsonl"
APPLIED_KEY = "forget_log_bytes"
"""``meta`` key: the size of the forget log this store has applied."""


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One forgotten event as the log records it (no content)."""

    event_id: str
    ts_ms: int
    project: str
    session_id: str


@dataclass(slots=True)
class ReconcileReport:
    """What :func:`reconcile` found and did."""

    logged: int = 0
    """Events in the log."""
    reforgotten: list[str] | None = None
    """Logged events that were alive in the store and were forgotten again."""
    tombstoned: int = 0
    """Logged events the store did not hold, recorded as tombstones."""
    appended: int = 0
    """Tombstones of the store the log lacked, appended to it."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "logged": self.logged,
            "reforgotten": list(self.reforgotten or []),
            "tombstoned": self.tombstoned,
            "appended": self.appended,
        }


def log_path(db: Path) -> Path:
    """The forget log of the SQLite store at ``db``."""
    return Path(f"{db}{SUFFIX}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def append(path: Path, forgotten_ms: int, events: Sequence[EventRef | LoggedEvent]) -> int:
    """Append one forget (synced) and return the log's new size."""
    line = json.dumps(
        {
            "forgotten_ms": forgotten_ms,
            "events": [[e.event_id, e.ts_ms, e.project, e.session_id] for e in events],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
            os.fsync(fd)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreError(f"cannot write the forget log {path}: {exc}") from exc


def read(path: Path) -> list[LoggedEvent]:
    """Every event in the log, in order (a torn last line, from a crash mid-append, is skipped;
    any other unreadable line is an error naming it)."""
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot read the forget log {path}: {exc}") from exc
    out: list[LoggedEvent] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
            out.extend(
                LoggedEvent(str(e[0]), int(e[1]), str(e[2]), str(e[3])) for e in entry["events"]
            )
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            if number == len(lines) or (number == len(lines) - 1 and not lines[-1]):
                continue  # the last line, torn by a crash before its sync
            raise StoreError(f"{path}: line {number}: not a forget log entry ({exc})") from exc
    return out


def lagging(store: LoggedForgetStore) -> bool:
    """Whether the log and the store disagree (cheap: a stat and a meta read)."""
    recorded = store.get_meta(APPLIED_KEY)
    return _size(log_path(store.path)) != (int(recorded) if recorded else 0)


def alive(store: LoggedForgetStore, logged: Iterable[LoggedEvent]) -> list[EventRef]:
    """The logged events that are alive in the store."""
    ids = list(dict.fromkeys(e.event_id for e in logged))
    if not ids:
        return []
    return [r for r in store.select_events(event_ids=ids) if not r.forgotten]


def check_read_only(store: LoggedForgetStore) -> None:
    """Refuse a read-only store in which a logged event is alive (it cannot be forgotten here)."""
    if not lagging(store):
        return
    found = alive(store, read(log_path(store.path)))
    if found:
        raise StoreError(
            f"{store.path}: {len(found)} events recorded as forgotten in {log_path(store.path)} "
            "are back in this store (was an older backup restored?); open it read-write once "
            "(e.g. `memtoc process`) to forget them again"
        )
