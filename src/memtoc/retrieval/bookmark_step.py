"""Generating bookmarks: the pipeline step, the full refresh, and the merge rule.

**When.** ``BookmarkStep.after_events`` is called by the pipeline worker after each outbox batch
of events is filed. Per ``(project, session)`` it keeps a checkpoint (``bookmarks:{project}:
{session}`` → the last scanned event's ``(ts_ms, event_id)``) and looks at the session's *tail*,
the events after it. A **pass** runs when the tail holds ``every_messages`` user/assistant messages
(default 20) or ``every_tokens`` tokens (default 4,000), or when it contains a ``session_end``.
A pass detects bookmarks over the tail plus the ``context_events`` events before it (default 12,
so a confirmation at the start of the tail still sees the statement it confirms), merges them into
the store and moves the checkpoint to the tail's last event — in one transaction, so a pass is
all or nothing and re-delivering the same outbox entry changes nothing (ids are deterministic,
identical bookmarks are not rewritten). An event arriving later but *older* than the checkpoint
is not scanned by a pass; ``refresh`` picks it up.

``refresh(project)`` re-scans every event of a project (or all), session by session, in windows
of ``REFRESH_WINDOW`` events overlapping by ``context_events``, and moves every checkpoint to the
session's end. With ``rebuild`` it first deletes the project's bookmarks. Running it twice writes
nothing the second time.

**Merge.** A candidate and a stored bookmark are *the same moment* when more than half of the
smaller one's source events are shared, or when they have the same type and identical or nearly
identical content (a restatement: key-term Jaccard ≥ ``RESTATED``, common words left out — the
same decision restated in a later session — or a statement that says nothing the other does not:
every content word of the smaller one, by stem, and every number in the other). Between the
two, the **newer wins** (later ``created_ms``; at the same instant the one citing more source
events — a stated cause with its fix over the fix alone; then the larger id): its id, content, sources and importance replace the older one,
which is deleted. ``created_ms`` stays what it always is — the time of the kept bookmark's last
source event — and ``last_relevant_ms`` becomes the latest of the two bookmarks' values, so a
moment that was restated or used recently does not decay. (Keeping the older ``created_ms``
instead would make ``created_ms`` mean two different things.) A candidate older than a stored
rival is dropped. Overlap is looked up among the bookmarks created within ``MERGE_SPAN_MS``
(7 days) of the candidate's events — restatements too (a restatement weeks apart stays a bookmark
of its own unless its content is identical: looking further would mean reading every bookmark of
the type per candidate, which does not scale with the store).

Bookmarks are mirrored into the ``docs`` search table (kind ``bookmark``) so teleport's BM25
finds them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memtoc.clock import Clock
from memtoc.config import DEFAULTS, Settings
from memtoc.model import Bookmark, Event, JsonValue
from memtoc.retrieval.bookmark_terms import stems
from memtoc.retrieval.bookmarks import BookmarkDetector, Detection, ExtractiveDetector
from memtoc.store.base import DocRow, PipelineStore
from memtoc.text.fts_text import search_text
from memtoc.text.tokens import TokenCounter

MERGE_SPAN_MS = 7 * 86_400_000
RESTATED = 0.6
"""Key-term Jaccard at which two bookmarks of one type are the same moment restated."""
REFRESH_WINDOW = 400
_MESSAGES = {"user_message", "assistant_message"}


@dataclass(frozen=True, slots=True)
class BookmarkConfig:
    """When the pipeline runs a bookmark pass (per project + session)."""

    every_messages: int = DEFAULTS["bookmark_every_messages"]
    every_tokens: int = DEFAULTS["bookmark_every_tokens"]
    context_events: int = 12
    enabled: bool = DEFAULTS["bookmarks"]

    @classmethod
    def from_settings(cls, settings: Settings) -> BookmarkConfig:
        """The settings' ``bookmark_every_messages`` / ``bookmark_every_tokens`` / ``bookmarks``."""
        return cls(
            every_messages=settings.bookmark_every_messages,
            every_tokens=settings.bookmark_every_tokens,
            enabled=settings.bookmarks,
        )


@dataclass(slots=True)
class BookmarkReport:
    """What a step call or a refresh did."""

    passes: int = 0
    events_scanned: int = 0
    written: int = 0
    """Bookmarks inserted or changed."""
    deleted: int = 0
    """Older bookmarks replaced by a newer overlapping one (or removed by ``rebuild``)."""
    backends: dict[str, int] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)

    def add(self, other: BookmarkReport) -> None:
        self.passes += other.passes
        self.events_scanned += other.events_scanned
        self.written += other.written
        self.deleted += other.deleted
        for k, v in other.backends.items():
            self.backends[k] = self.backends.get(k, 0) + v
        self.degraded.extend(other.degraded)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "passes": self.passes,
            "events_scanned": self.events_scanned,
            "written": self.written,
            "deleted": self.deleted,
            "backends": dict(self.backends),
            "degraded": list(self.degraded),
        }


def _key(e: Event) -> tuple[int, str]:
    return (e.ts_ms, e.event_id)


def _overlaps(a: Bookmark, b: Bookmark) -> bool:
    shared = len(set(a.event_ids) & set(b.event_ids))
    smaller = min(len(a.event_ids), len(b.event_ids))
    return smaller > 0 and shared * 2 > smaller


def _same_content(a: Bookmark, b: Bookmark) -> bool:
    """The same moment said again: same type and identical content, or a restatement — the same
    type, the same numbers and nearly the same other key terms (Jaccard ≥ ``RESTATED``, common
    words left out), e.g. a decision taken in one session and repeated in the next."""
    if a.type != b.type:
        return False
    if a.content == b.content:
        return True
    small, large = sorted((a.content, b.content), key=lambda c: len(stems(c)))
    # "Changed X to Y on line 79." said again inside "The cause was Z. Changed X to Y on line 79."
    if (
        len(stems(small)) >= 3
        and stems(small) <= stems(large)
        and _numbers(small) <= _numbers(large)
    ):
        return True
    ta, tb = _terms(a.content), _terms(b.content)
    # "retry 8 times" and "retry 5 times", "Go 1.25.6" and "Go 1.21" differ
    if _numbers(a.content) != _numbers(b.content):
        return False
    if min(len(ta), len(tb)) < 3:
        return False
    return len(ta & tb) / len(ta | tb) >= RESTATED


_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]")
_COMMON = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "go",
        "going",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "let's",
        "lets",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "use",
        "used",
        "using",
        "was",
        "we",
        "we'll",
        "were",
        "will",
        "with",
        "would",
        "you",
        "your",
        "just",
        "only",
        "all",
        "also",
        "not",
        "no",
        "yes",
        "ok",
        "okay",
        "now",
        "should",
        "must",
    ]
)


@lru_cache(maxsize=4096)
def _terms(text: str) -> frozenset[str]:
    """A bookmark's content words but the common ones (cached: every candidate of a pass is
    compared with its rivals and with the pass's other candidates)."""
    words = _WORD.findall(text.lower())
    return frozenset(
        w.strip(".-")
        for w in words
        if w not in _COMMON and (len(w) > 2 or any(c.isdigit() for c in w))
    )


@lru_cache(maxsize=4096)
def _numbers(text: str) -> frozenset[str]:
    """The terms of ``_terms`` holding a digit."""
    return frozenset(t for t in _terms(text) if any(c.isdigit() for c in t))


def _rank(b: Bookmark) -> tuple[int, int, str]:
    """Which of two same moments wins: the later, then (at the same instant) the one citing more
    of the moment — the stated cause with its fix over the fix alone — then the larger id."""
    return (b.created_ms, len(b.event_ids), b.bookmark_id)


def _newer(a: Bookmark, b: Bookmark) -> bool:
    return _rank(a) > _rank(b)


def _same_fields(a: Bookmark, b: Bookmark) -> bool:
    return dataclasses.replace(a, last_relevant_ms=0) == dataclasses.replace(b, last_relevant_ms=0)


class BookmarkStep:
    """Runs bookmark passes for the pipeline and the CLI (one per store; not thread-safe)."""

    def __init__(
        self,
        store: PipelineStore,
        counter: TokenCounter,
        clock: Clock,
        *,
        detector: BookmarkDetector | None = None,
        config: BookmarkConfig | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.clock = clock
        self.detector: BookmarkDetector = detector or ExtractiveDetector()
        self.config = config or BookmarkConfig()

    # -- the pipeline hook ------------------------------------------------------------------------
    def after_events(self, events: Sequence[Event]) -> BookmarkReport:
        """Run a pass for every session of ``events`` whose tail crossed a threshold."""
        report = BookmarkReport()
        if not self.config.enabled:
            return report
        sessions = dict.fromkeys((e.project, e.session_id) for e in events)
        for project, session_id in sessions:
            report.add(self._maybe_pass(project, session_id))
        return report

    def _maybe_pass(self, project: str, session_id: str) -> BookmarkReport:
        job = checkpoint_job(project, session_id)
        pos = _position(self.store.get_checkpoint(job))
        since = pos[0] if pos else None
        tail = [
            e
            for e in self.store.scan_events(project=project, session_id=session_id, since_ms=since)
            if pos is None or _key(e) > pos
        ]
        if not tail or not self._due(tail):
            return BookmarkReport()
        context: list[Event] = []
        if pos is not None and self.config.context_events > 0:
            context, _ = self.store.session_neighbors(
                tail[0], before=self.config.context_events, after=0
            )
        with self.store.transaction():
            report = self._scan(project, [*context, *tail])
            last = tail[-1]
            self.store.set_checkpoint(job, {"ts_ms": last.ts_ms, "event_id": last.event_id})
        return report

    def _due(self, tail: Sequence[Event]) -> bool:
        messages = sum(1 for e in tail if e.event_type in _MESSAGES)
        if messages == 0:
            return False
        if messages >= self.config.every_messages:
            return True
        if any(e.event_type == "session_end" for e in tail):
            return True
        tokens = 0
        for e in tail:
            tokens += self.counter.count(e.text)
            if tokens >= self.config.every_tokens:
                return True
        return False

    # -- refresh ----------------------------------------------------------------------------------
    def refresh(self, project: str | None = None, *, rebuild: bool = False) -> BookmarkReport:
        """Re-scan all events of ``project`` (every project when None); checkpoints move to the
        end of each session."""
        report = BookmarkReport()
        projects = [project] if project is not None else self.store.projects()
        for name in projects:
            if rebuild:
                ids = [b.bookmark_id for b in self.store.find_bookmarks(name)]
                report.deleted += self.store.delete_bookmarks(ids)
            for session_id, window, last in self._windows(name):
                with self.store.transaction():
                    report.add(self._scan(name, window))
                    if last:
                        end = window[-1]
                        self.store.set_checkpoint(
                            checkpoint_job(name, session_id),
                            {"ts_ms": end.ts_ms, "event_id": end.event_id},
                        )
        return report

    def _windows(self, project: str) -> Iterator[tuple[str, list[Event], bool]]:
        """``(session, events, is_last)``: each session in windows of ``REFRESH_WINDOW`` events
        overlapping by ``context_events``, streamed in time order; a session's buffer is
        released at its ``session_end``, so memory holds only the sessions still open."""
        buffers: dict[str, list[Event]] = {}
        overlap = self.config.context_events
        for e in self.store.scan_events(project=project):
            buf = buffers.setdefault(e.session_id, [])
            buf.append(e)
            if e.event_type == "session_end":
                yield e.session_id, buffers.pop(e.session_id), True
            elif len(buf) >= REFRESH_WINDOW:
                yield e.session_id, list(buf), False
                buffers[e.session_id] = buf[-overlap:] if overlap else []
        for session_id, buf in buffers.items():
            if buf:
                yield session_id, buf, True

    # -- detection and merge ------------------------------------------------------------------------
    def _scan(self, project: str, window: Sequence[Event]) -> BookmarkReport:
        window = [e for e in window if not e.bookkeeping]  # an agent's notices are no moments
        report = BookmarkReport(passes=1, events_scanned=len(window))
        if not window:
            return report
        detection: Detection = self.detector.detect(window)
        report.backends[detection.backend] = 1
        if detection.degraded:
            report.degraded.append(detection.degraded)
        written, deleted = self.merge(project, detection.bookmarks)
        report.written += written
        report.deleted += deleted
        return report

    def merge(self, project: str, candidates: Iterable[Bookmark]) -> tuple[int, int]:
        """Merge ``candidates`` into the store (see the module docstring); return ``(written,
        deleted)``. Joins the caller's transaction."""
        written = deleted = 0
        for cand in _dedupe([b for b in candidates if b.project == project]):
            rivals = self._rivals(cand)
            if any(_newer(r, cand) for r in rivals):
                continue
            current = next((r for r in rivals if r.bookmark_id == cand.bookmark_id), None)
            older = [r for r in rivals if r.bookmark_id != cand.bookmark_id]
            last_relevant = max([cand.last_relevant_ms, *(r.last_relevant_ms for r in rivals)])
            new = dataclasses.replace(cand, last_relevant_ms=last_relevant)
            if older:
                deleted += self.store.delete_bookmarks([r.bookmark_id for r in older])
            if current is not None and _same_fields(current, new):
                if current.last_relevant_ms < last_relevant:
                    self.store.touch_bookmarks([new.bookmark_id], last_relevant)
                continue
            self.store.put_bookmark(new)
            self.store.put_docs([bookmark_doc(new)])
            written += 1
        return written, deleted

    def _rivals(self, cand: Bookmark) -> list[Bookmark]:
        """Stored bookmarks that are the same moment as ``cand`` (including ``cand``'s own id)."""
        near = self.store.find_bookmarks(
            cand.project,
            since_ms=cand.created_ms - MERGE_SPAN_MS,
            until_ms=cand.created_ms + MERGE_SPAN_MS,
        )
        same = self.store.find_bookmarks(cand.project, type=cand.type, content=cand.content)
        seen: dict[str, Bookmark] = {}
        for b in [*near, *same]:
            if b.bookmark_id == cand.bookmark_id or _overlaps(b, cand) or _same_content(b, cand):
                seen.setdefault(b.bookmark_id, b)
        return list(seen.values())


def _dedupe(candidates: Sequence[Bookmark]) -> list[Bookmark]:
    """The candidates of one detection without overlapping or restated ones: newest first, a
    candidate is kept unless it is the same moment as one already kept. The result depends only
    on the candidate set (not on the store), which keeps re-scans idempotent. Oldest first."""
    kept: list[Bookmark] = []
    for cand in sorted(candidates, key=_rank, reverse=True):
        if not any(
            k.bookmark_id == cand.bookmark_id or _overlaps(k, cand) or _same_content(k, cand)
            for k in kept
        ):
            kept.append(cand)
    return kept[::-1]


def bookmark_text(b: Bookmark) -> str:
    """What a bookmark's search document holds before indexing."""
    return f"{b.type}: {b.content}"


def bookmark_doc(b: Bookmark) -> DocRow:
    """The search document of a bookmark (``rebuild --docs`` and ``verify`` derive it too)."""
    return DocRow("bookmark", b.bookmark_id, b.project, b.created_ms, search_text(bookmark_text(b)))


def checkpoint_job(project: str, session_id: str) -> str:
    return f"bookmarks:{project}:{session_id}"


def _position(value: JsonValue | None) -> tuple[int, str] | None:
    if isinstance(value, dict):
        ts, eid = value.get("ts_ms"), value.get("event_id")
        if isinstance(ts, int) and isinstance(eid, str):
            return (ts, eid)
    return None
