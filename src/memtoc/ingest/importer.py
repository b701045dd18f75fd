"""The ingest orchestrator: files in, events stored exactly once, a report out.

For each file it picks the source format (given, or sniffed), resumes from the file's watermark,
and turns the source's records into events: project and agent resolved, secrets redacted, huge
texts capped, ids assigned. Events are written in batches; each batch commits together with its
outbox entry and the file's new watermark, so a crash at any point loses nothing acknowledged and a
re-run re-reads nothing already stored.

Idempotency: an event keeps the id its input gives it; otherwise its id is derived from the file's
identity (a hash of its first line, so a moved file keeps it) and the record's byte position. Either
way, storing it twice is a no-op counted as a duplicate.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memtoc.clock import Clock, SystemClock
from memtoc.errors import IngestError
from memtoc.ids import derived_ulid
from memtoc.ingest.sources import get_source, sniff_format
from memtoc.ingest.sources.base import EventDraft, RawRecord, Source, SourceOptions
from memtoc.model import (
    DEFAULT_ROLE_FOR_TYPE,
    DEFAULT_TYPE_FOR_ROLE,
    EVENT_TYPES,
    ROLES,
    Event,
    IngestReport,
    JsonValue,
    Rejection,
)
from memtoc.store.base import Store

if TYPE_CHECKING:
    from memtoc.ingest.redact import Redactor

CHECKPOINT_PREFIX = "ingest:"
TRUNCATION_MARKER = "\n[… truncated by memtoc: {size} bytes in the original]"
_SUFFIXES = {".jsonl", ".json", ".ndjson"}
_IDENTITY_BYTES = 65_536


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Told to ``on_commit`` after each batch is durably stored."""

    source: str
    event_ids: tuple[str, ...]
    """Every event of the batch (new and duplicate): all are now in the store."""
    inserted: int
    duplicates: int
    watermark: int


@dataclass(frozen=True, slots=True)
class IngestOptions:
    format: str = "auto"
    project: str | None = None
    """Overrides the project of every event (``--project``)."""
    default_project: str = "default"
    """Project of events whose input names none."""
    include_thinking: bool = False
    follow_symlinks: bool = False
    max_event_bytes: int = 1_000_000
    batch_size: int = 2_000
    rescan: bool = False
    """Ignore watermarks and re-read every file (what is already stored counts as duplicates)."""


_Pending = tuple[
    str,
    str,
    str,
    str,
    int,
    str,
    str,
    str,
    Mapping[str, JsonValue],
    "str | None",
    "str | None",
    "int | None",
]
"""A validated event awaiting redaction: ``Event``'s fields in order, then the original text size
when the text was already cut (:func:`_prefix_bytes`)."""


@dataclass(slots=True)
class _Batch:
    pending: list[_Pending] = field(default_factory=list)
    watermark: int | None = None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector around a bulk loop.

    Ingest allocates millions of short-lived, acyclic objects (tuples, dicts, strings); with GC on,
    every few hundred allocations trigger a generation scan over all live objects, which measured
    as more than half of redaction's cost in the ingest benchmark. Reference counting still frees
    everything; cycles (none are made here) are collected when the pause ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


ProgressFn = Callable[[int], None]
"""Called with the number of bytes just consumed."""


def discover(
    paths: Iterable[Path], *, follow_symlinks: bool = False
) -> Iterator[tuple[Path, Path]]:
    """Yield ``(file, root)`` for every transcript file under ``paths``, sorted, once each.

    Symbolic links that resolve outside the root they were found under are skipped unless
    ``follow_symlinks``.
    """
    seen: set[Path] = set()
    for given in paths:
        root = given.expanduser()
        if not root.exists():
            raise IngestError("no such file or directory", source=str(given))
        if root.is_file():
            real = root.resolve()
            if real not in seen:
                seen.add(real)
                yield root, root.parent
            continue
        real_root = root.resolve()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=follow_symlinks):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.suffix.lower() not in _SUFFIXES:
                    continue
                real = path.resolve()
                if not follow_symlinks and path.is_symlink() and not real.is_relative_to(real_root):
                    continue
                if real in seen or not real.is_file():
                    continue
                seen.add(real)
                yield path, root


def file_identity(path: Path) -> str | None:
    """A stable identity for a transcript: the hash of its first line (None while it is empty)."""
    with path.open("rb") as fh:
        head = fh.read(_IDENTITY_BYTES)
    if not head.strip():
        return None
    first = head.split(b"\n", 1)[0]
    return hashlib.blake2b(first, digest_size=12).hexdigest()


def cap_text(
    text: str, max_bytes: int, *, original_size: int | None = None
) -> tuple[str, int | None]:
    """``text`` cut to ``max_bytes`` UTF-8 bytes plus a marker, and the original size if it was cut.

    ``original_size`` names the size to report when ``text`` is itself a cut of a larger original.
    """
    if len(text) * 4 <= max_bytes and original_size is None:  # cheap exit: cannot be over
        return text, None
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes and original_size is None:
        return text, None
    size = original_size if original_size is not None else len(raw)
    cut = raw[:max_bytes].decode("utf-8", "ignore")
    return cut + TRUNCATION_MARKER.format(size=size), size


def _prefix_bytes(text: str, max_bytes: int) -> tuple[str, int | None]:
    """At most ``max_bytes`` of ``text`` (no marker), and the full size when it was longer."""
    if len(text) * 4 <= max_bytes:
        return text, None
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, None
    return raw[:max_bytes].decode("utf-8", "ignore"), len(raw)


class Importer:
    """Turns files and records into stored events. One instance per ingest run."""

    def __init__(
        self,
        store: Store,
        *,
        redactor: Redactor | None,
        options: IngestOptions | None = None,
        clock: Clock | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
    ) -> None:
        self.store = store
        self.redactor = redactor
        self.options = options or IngestOptions()
        self.clock = clock or SystemClock()
        self.on_commit = on_commit
        self._slack_bytes = self.options.max_event_bytes + 4096

    # -- files ------------------------------------------------------------------------------------
    def ingest_paths(
        self, paths: Iterable[Path], progress: ProgressFn | None = None
    ) -> IngestReport:
        report = IngestReport()
        try:
            files = list(discover(paths, follow_symlinks=self.options.follow_symlinks))
        except IngestError as exc:
            report.rejections.append(Rejection(exc.source or "?", None, exc.reason))
            return report
        with gc_paused():
            for path, _root in files:
                report.merge(self.ingest_file(path, progress=progress))
        return report

    def ingest_file(self, path: Path, progress: ProgressFn | None = None) -> IngestReport:
        report = IngestReport(files=1)
        where = str(path)
        try:
            identity = file_identity(path)
            if identity is None:
                return report  # empty (or blank) file: nothing to import, nothing wrong
            source = self._source_for(path)
            size = path.stat().st_size
        except (OSError, IngestError) as exc:
            reason = exc.reason if isinstance(exc, IngestError) else f"cannot read: {exc}"
            report.rejections.append(Rejection(where, None, reason))
            return report
        job = f"{CHECKPOINT_PREFIX}{identity}"
        start = self._resume_offset(job, size, source)
        if start >= size:
            if progress:
                progress(size)
            return report
        if progress and start:
            progress(start)
        options = SourceOptions(include_thinking=self.options.include_thinking)
        batch = _Batch()
        consumed = start
        try:
            for record in source.read(path, start, options):
                if record.error is not None:
                    report.rejections.append(Rejection(where, record.line, record.error))
                    if not record.complete:
                        break  # a growing last line: retried next time, watermark stays
                else:
                    report.skipped += record.skipped
                    for draft in record.drafts:
                        pending = self._event_from(
                            draft, identity, record, where, report, source.agent
                        )
                        if pending is not None:
                            batch.pending.append(pending)
                report.read += 1
                batch.watermark = record.end_offset
                if progress:
                    progress(record.end_offset - consumed)
                consumed = record.end_offset
                if len(batch.pending) >= self.options.batch_size:
                    self._flush(batch, job, where, source, report)
        except (OSError, IngestError) as exc:
            reason = exc.reason if isinstance(exc, IngestError) else f"read failed: {exc}"
            report.rejections.append(Rejection(where, None, reason))
        self._flush(batch, job, where, source, report)
        report.bytes_read += max(0, consumed - start)
        return report

    def _source_for(self, path: Path) -> Source:
        if self.options.format != "auto":
            return get_source(self.options.format)
        found = sniff_format(path)
        if found is None:
            raise IngestError("unrecognised format (not a known transcript or JSONL file)")
        return found

    def _resume_offset(self, job: str, size: int, source: Source) -> int:
        mark = self.store.get_checkpoint(job)
        if self.options.rescan or not isinstance(mark, dict):
            return 0
        offset = int(mark.get("offset", 0))
        if not source.incremental:
            # A whole-document format: unchanged size means nothing new; otherwise re-read it all
            # (every event already stored is a no-op duplicate).
            return size if offset == size else 0
        return offset if offset <= size else 0

    def _flush(
        self, batch: _Batch, job: str, where: str, source: Source, report: IngestReport
    ) -> None:
        if batch.watermark is None and not batch.pending:
            return
        checkpoints: dict[str, JsonValue] = {}
        if batch.watermark is not None:
            checkpoints[job] = {"offset": batch.watermark, "path": where, "format": source.name}
        events = self._finish(batch.pending, report)
        result = self.store.append_events(events, checkpoints)
        report.ingested += result.inserted
        report.duplicates += result.duplicates
        if self.on_commit is not None and (events or batch.watermark is not None):
            self.on_commit(
                CommitInfo(
                    where,
                    tuple(e.event_id for e in events),
                    result.inserted,
                    result.duplicates,
                    batch.watermark or 0,
                )
            )
        batch.pending = []
        batch.watermark = None

    # -- records ----------------------------------------------------------------------------------
    def _event_from(
        self,
        draft: EventDraft,
        identity: str,
        record: RawRecord,
        where: str,
        report: IngestReport,
        agent: str,
    ) -> _Pending | None:
        position = f"line:{record.line}@{record.offset}" + (f"#{draft.part}" if draft.part else "")
        try:
            event_id = draft.event_id or derived_ulid(
                draft.ts_ms, f"{identity}:{record.offset}:{draft.part}"
            )
            return self._validate(draft, event_id, where, position, agent)
        except IngestError as exc:
            report.rejections.append(Rejection(where, record.line, exc.reason))
            return None

    def make_event(
        self,
        draft: EventDraft,
        event_id: str,
        report: IngestReport,
        *,
        source: str | None = None,
        source_pos: str | None = None,
        agent: str = "unknown",
    ) -> Event:
        """Validate, cap and redact one draft into an ``Event`` (counting into ``report``)."""
        return self._finish([self._validate(draft, event_id, source, source_pos, agent)], report)[0]

    def _validate(
        self,
        draft: EventDraft,
        event_id: str,
        source: str | None,
        source_pos: str | None,
        agent: str,
    ) -> _Pending:
        """Check one draft and resolve its defaults; redaction and capping wait for the batch."""
        role = draft.role or DEFAULT_ROLE_FOR_TYPE.get(draft.event_type, "")
        event_type = draft.event_type or DEFAULT_TYPE_FOR_ROLE.get(role, "")
        if role not in ROLES:
            raise IngestError(f"invalid role {role!r}", event_id=event_id)
        if event_type not in EVENT_TYPES:
            raise IngestError(f"invalid event_type {event_type!r}", event_id=event_id)
        if not draft.session_id:
            raise IngestError("missing session_id", event_id=event_id)
        # Cut with slack first (so a huge text is not redacted in full), redact, then cut to the
        # cap: a secret straddling the cap is still seen whole by the redactor.
        text, original = _prefix_bytes(draft.text, self._slack_bytes)
        return (
            event_id,
            draft.session_id,
            self.options.project or draft.project or self.options.default_project,
            draft.agent or agent,
            draft.ts_ms,
            event_type,
            role,
            text,
            draft.metadata,
            source,
            source_pos,
            original,
        )

    def _finish(self, pending: list[_Pending], report: IngestReport) -> list[Event]:
        """Redact a batch of validated events, cap their texts and build the ``Event`` objects.

        The redactor's batch prefilter (:meth:`Redactor.suspects`) reads every text and every
        metadata value's JSON once; only the suspects are redacted one by one, so a batch of
        clean events costs a few C-level passes rather than a gate per event.
        """
        texts: list[str] = [p[7] for p in pending]
        metas: list[Mapping[str, JsonValue]] = [p[8] for p in pending]
        redactor = self.redactor
        if redactor is not None and pending:
            self._redact_batch(redactor, texts, metas, report)
        cap = self.options.max_event_bytes
        quick = cap // 4
        events: list[Event] = []
        append = events.append
        for i, p in enumerate(pending):
            text, metadata, original = texts[i], metas[i], p[11]
            if original is not None or len(text) > quick:
                text, cut_from = cap_text(text, cap, original_size=original)
                if cut_from is not None:
                    metadata = {**metadata, "truncated_from_bytes": cut_from}
                    report.truncated += 1
            append(Event(p[0], p[1], p[2], p[3], p[4], p[5], p[6], text, metadata, p[9], p[10]))
        return events

    @staticmethod
    def _redact_batch(
        redactor: Redactor,
        texts: list[str],
        metas: list[Mapping[str, JsonValue]],
        report: IngestReport,
    ) -> None:
        """Redact ``texts`` and ``metas`` in place (only the prefilter's suspects are touched)."""
        n = len(texts)
        probes = list(texts)
        opaque: list[int] = []  # metadata the prefilter cannot read: always redacted
        for i, meta in enumerate(metas):
            if meta:
                probe = redactor.metadata_probe(meta)
                if probe is None:
                    opaque.append(n + i)
                probes.append(probe or "")
            else:
                probes.append("")
        counts: dict[str, int] = {}
        for k in sorted(redactor.suspects(probes).union(opaque)):
            if k < n:
                texts[k], found = redactor.redact(texts[k])
            else:
                value, found = redactor.redact_json(dict(metas[k - n]))
                if found and isinstance(value, dict):
                    metas[k - n] = value
            for kind, c in found.items():
                counts[kind] = counts.get(kind, 0) + c
        if counts:
            report.redacted += sum(counts.values())
            for kind, c in counts.items():
                report.redactions_by_kind[kind] = report.redactions_by_kind.get(kind, 0) + c

    # -- records given directly (API, MCP remember, hooks) -----------------------------------------
    def ingest_drafts(
        self, drafts: Iterable[tuple[EventDraft, str]], *, source: str = "api"
    ) -> IngestReport:
        """Store drafts with the ids given beside them, in batches; bad ones are rejected."""
        report = IngestReport()
        batch = _Batch()
        with gc_paused():
            for n, (draft, event_id) in enumerate(drafts, start=1):
                report.read += 1
                try:
                    batch.pending.append(self._validate(draft, event_id, None, None, "unknown"))
                except IngestError as exc:
                    report.rejections.append(Rejection(source, n, exc.reason))
                if len(batch.pending) >= self.options.batch_size:
                    self._flush_api(batch, report, source)
            self._flush_api(batch, report, source)
        return report

    def _flush_api(self, batch: _Batch, report: IngestReport, source: str) -> None:
        if not batch.pending:
            return
        events = self._finish(batch.pending, report)
        result = self.store.append_events(events)
        report.ingested += result.inserted
        report.duplicates += result.duplicates
        if self.on_commit is not None:
            self.on_commit(
                CommitInfo(
                    source,
                    tuple(e.event_id for e in events),
                    result.inserted,
                    result.duplicates,
                    0,
                )
            )
        batch.pending = []
