"""The ingest orchestrator: files in, events stored exactly once, a report out.

For each file it picks the source format (given, or sniffed), resumes from the file's own
position (:mod:`memtoc.ingest.positions`: kept per path, verified by fingerprints, a changed file
is read again from the start), and turns the source's records into events: project and agent
resolved, everything bounded and validated, secrets redacted, huge texts and metadata capped, ids
assigned. Events are written in batches; each batch commits together with its outbox entry and
the file's new position, so a crash at any point loses nothing acknowledged and a re-run re-reads
nothing already stored.

Idempotency: an event keeps the id its input gives it; otherwise its id is derived from the hash
of the file's first line (so a moved file keeps it) and the record's byte position. Storing the
same event twice is a no-op counted as a duplicate. An id stored already with other content is a
conflict: a given id is rejected with the reason (the stored event is kept); a derived one is
another record at that position (another file with the same first line, or a changed file read
again) and is stored under an alternative id that adds the event's own content to the key.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memtoc.clock import Clock, SystemClock
from memtoc.config import DEFAULTS
from memtoc.errors import IngestError
from memtoc.ids import derived_ulid
from memtoc.ingest import redact_worker
from memtoc.ingest.compressed import default_cache, is_compressed, plain_copy
from memtoc.ingest.positions import (
    CHECKPOINT_PREFIX,
    Fingerprints,
    document_hash,
    first_line_hash,
    resume,
)
from memtoc.ingest.redact_gate import batch_blob, blob_suspects
from memtoc.ingest.sources import get_source, sniff_format
from memtoc.ingest.sources._lines import MAX_NESTING, nesting
from memtoc.ingest.sources.base import EventDraft, RawRecord, Source, SourceOptions
from memtoc.ingest.sources.specstory import is_specstory
from memtoc.model import (
    DEFAULT_ROLE_FOR_TYPE,
    DEFAULT_TYPE_FOR_ROLE,
    EVENT_TYPES,
    MAX_ID_CHARS,
    MAX_TS_MS,
    MIN_TS_MS,
    ROLES,
    AppendResult,
    Event,
    IngestReport,
    JsonValue,
    Rejection,
    ts_problem,
)
from memtoc.projects import ProjectRegistry
from memtoc.store.base import EventRow, ProjectStore, RowAppender, Store

if TYPE_CHECKING:
    from memtoc.ingest.redact import IdentifierRedactor, Redactor

MAX_PATH_CHARS = 4096
"""A session's working directory longer than this (Linux's PATH_MAX) is no usable path."""
TRUNCATION_MARKER = "\n[… truncated by memtoc: {size} bytes in the original]"
_SUFFIXES = {".jsonl", ".json", ".ndjson"}
_MARKDOWN = ".md"
"""Markdown files found in a folder are taken only when they are SpecStory exports."""
_META_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""The metadata's JSON exactly as the stores write it: the prefilter reads it and the row keeps it,
so each event's metadata is serialised once."""


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_encoder() -> Callable[[object, int], Sequence[str]] | None:
    """:data:`_META_JSON`'s C encoder made once, without its per-call set-up (half the cost);
    None without the C accelerator (not CPython).

    It skips the circular-reference check (a cycle raises ``RecursionError``): a caller treats
    any error as "not JSON" and serialises again with :data:`_META_JSON` for the real error.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    return cast(
        "Callable[[object, int], Sequence[str]]",
        make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True),
    )


def _joined(encode: Callable[[object, int], Sequence[str]] | None) -> Callable[[object], str]:
    if encode is None:
        return _META_JSON
    return lambda value: "".join(encode(value, 0))


_C_ENCODE = _c_encoder()
_FAST_META_JSON = _joined(_C_ENCODE)


def metadata_json(metas: Sequence[Mapping[str, JsonValue]]) -> list[str | None]:
    """Each metadata value's JSON as the store writes it (``"{}"`` for an empty one), or None
    for a value that is not JSON (it is redacted whole, and serialising it again raises).

    One comprehension of C calls for the batch; a batch holding a value that is not JSON is
    redone value by value."""
    encode, join = _C_ENCODE, "".join
    try:
        if encode is not None:
            return [
                join(encode(m if type(m) is dict else dict(m), 0)) if m else "{}" for m in metas
            ]
    except (TypeError, ValueError, RecursionError):
        pass
    js: list[str | None] = []
    for meta in metas:
        try:
            js.append(_FAST_META_JSON(meta if type(meta) is dict else dict(meta)) if meta else "{}")
        except (TypeError, ValueError, RecursionError):
            js.append(None)
    return js


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
    """Overrides the project of every event (``--project``: an id or name; a new one is created)."""
    default_project: str = "default"
    """Project of events whose input names no project and no working directory."""
    default_cwd: str | None = None
    """Working directory of sessions whose input names none (a hook's ``cwd``)."""
    include_thinking: bool = DEFAULTS["include_thinking"]
    follow_symlinks: bool = DEFAULTS["follow_symlinks"]
    max_event_bytes: int = DEFAULTS["max_event_bytes"]
    batch_size: int = DEFAULTS["ingest_batch"]
    rescan: bool = False
    """Ignore watermarks and re-read every file (what is already stored counts as duplicates)."""
    plain_cache: Path | None = None
    """Where compressed transcripts (``*.jsonl.zst``) are decompressed to be read
    (``ingest.compressed``; None: a per-user temporary folder)."""
    redact_helper: bool = False
    """Gate large batches' redaction prefilter in the helper process (``redact_worker``) while
    the store inserts (``redact_worker.helper_wanted`` turns the setting into this)."""


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
_TEXT = itemgetter(7)
_METADATA = itemgetter(8)


def _event(row: EventRow, metadata: Mapping[str, JsonValue]) -> Event:
    """The ``Event`` of a row (``metadata`` is the row's metadata before serialisation)."""
    return Event(row[0], row[3], row[2], row[4], row[1], row[5], row[6], row[7], metadata,
                 row[8], row[9])  # fmt: skip


@dataclass(slots=True)
class _Batch:
    pending: list[_Pending] = field(default_factory=list)
    watermark: int | None = None
    lines: list[int] = field(default_factory=list)
    """Each pending event's record number (records given through the API)."""


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


class _UnknownFormat(IngestError):
    """A file no source recognises (``sniff_format`` found none)."""


def discover(
    paths: Iterable[Path], *, follow_symlinks: bool = False, skipped: list[Path] | None = None
) -> Iterator[tuple[Path, Path]]:
    """Yield ``(file, root)`` for every transcript file under ``paths``, sorted, once each.

    Symbolic links that resolve outside the root they were found under are skipped unless
    ``follow_symlinks`` (a link in a shared folder must not import a file its owner never put
    there); each one skipped is appended to ``skipped``, so the report can say so.
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
                suffix = path.suffix.lower()
                if (
                    suffix not in _SUFFIXES
                    and not is_compressed(path)
                    and (suffix != _MARKDOWN or not _specstory_file(path))
                ):
                    continue
                real = path.resolve()
                if not follow_symlinks and path.is_symlink() and not real.is_relative_to(real_root):
                    if skipped is not None:
                        skipped.append(path)
                    continue
                if real in seen or not real.is_file():
                    continue
                seen.add(real)
                yield path, root


def _specstory_file(path: Path) -> bool:
    """Whether ``path`` starts like a SpecStory export (unreadable files are left to ingest)."""
    try:
        with path.open("rb") as fh:
            return is_specstory(fh.read(256))
    except OSError:
        return True


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


METADATA_MARKER_KEY = "metadata_truncated_from_bytes"


def cap_metadata(meta: Mapping[str, JsonValue], max_bytes: int, size: int) -> dict[str, JsonValue]:
    """Metadata whose JSON (``size`` bytes) is over ``max_bytes``, cut to fit like a text.

    Keys are kept in order while they fit; the value that does not fit becomes its text (a
    string's own, anything else's JSON) cut with the truncation marker, and later keys are
    dropped. ``metadata_truncated_from_bytes`` records the original size.
    """
    budget = max_bytes - 256
    out: dict[str, JsonValue] = {}
    for key, value in meta.items():
        piece = len(_META_JSON({key: value}).encode("utf-8", "surrogatepass"))
        if piece <= budget:
            out[key] = value
            budget -= piece
            continue
        room = budget - len(_META_JSON({key: ""}).encode("utf-8", "surrogatepass")) - 64
        if room > 0:
            text = value if isinstance(value, str) else _META_JSON(value)
            out[key] = cap_text(text, room)[0]
        break
    out[METADATA_MARKER_KEY] = size
    return out


def metadata_problem(meta: object) -> str | None:
    """Why ``meta`` cannot be an event's metadata (given through the API, not read from a
    file), or None: an object whose JSON can be written, nested at most ``MAX_NESTING`` deep."""
    if not isinstance(meta, Mapping):
        return f"metadata must be an object (got {type(meta).__name__})"
    if not meta:
        return None
    try:
        js = _META_JSON(meta if type(meta) is dict else dict(meta))
    except RecursionError:
        return f"metadata is nested deeper than {MAX_NESTING} levels"
    except (TypeError, ValueError) as exc:
        return f"metadata is not JSON: {exc}"
    if js.count("[") + js.count("{") > MAX_NESTING and nesting(meta) > MAX_NESTING:
        return f"metadata is nested deeper than {MAX_NESTING} levels"
    return None


_CHUNK = 400
"""Events per chunk when a batch's prefilter is shared with the helper process (a batch of
fewer than two chunks is gated in-process)."""
_IN_FLIGHT = 8
"""Chunks of one batch sent to the helper (later ones are gated here): all are sent before any
answer is read, so their answers (at most 8 x 6.4 kB) must fit the reply pipe even at its default
64 kB, or a very large batch of suspects could leave both processes waiting on a full pipe."""
_PATIENCE_S = 0.0005
"""How long the store's row iterator waits for the helper's answer for a chunk (after the first)
before gating the chunk itself: a fraction of what gating it takes here."""


class _Prepared:
    """One batch on its way to the store: metadata serialised once, texts and metadata redacted
    where the prefilter suspects a secret, texts capped, rows built.

    Each event's metadata is serialised once (:data:`_FAST_META_JSON`): the redactor's batch
    prefilter reads that JSON beside every text, and the row keeps it unless redaction or
    truncation changed the metadata. Only the suspects are redacted one by one, so clean events
    cost a few C-level passes over the batch rather than a gate each.

    With a helper (:mod:`memtoc.ingest.redact_worker`) the batch is cut into chunks, the first
    ``_IN_FLIGHT`` sent to it now (it gates the first while the others' blobs are made), and the rows of each chunk are
    produced as the store consumes them, so the helper gates chunk *k + 1* while the store
    inserts chunk *k*. A chunk whose answer is not back in time (the helper is behind, or the
    machine has no idle core) is gated here instead: the helper can make a batch faster, never
    slower by more than the wait. Results are identical either way.
    """

    def __init__(
        self,
        importer: Importer,
        pending: list[_Pending],
        report: IngestReport,
        worker: redact_worker.GateWorker | None,
        js: list[str | None] | None = None,
    ) -> None:
        self.pending = pending
        self.report = report
        self.redactor = importer.redactor
        self.cap = importer.options.max_event_bytes
        self.texts: list[str] = list(map(_TEXT, pending))
        self.metas: list[Mapping[str, JsonValue]] = list(map(_METADATA, pending))
        # None: not JSON, redacted whole; raises below (``js``: made already by the caller)
        self.js = js if js is not None else metadata_json(self.metas)
        self._cap_metadata()
        self.worker = worker
        n = len(pending)
        size = _CHUNK if worker is not None else max(n, 1)
        self.bounds = [(lo, min(lo + size, n)) for lo in range(0, n, size)]
        self.tickets: list[tuple[int, bytes, list[int]]] = []
        self.answered = 0
        """Chunks whose suspects came from the helper in time."""
        if worker is not None:
            try:
                for lo, hi in self.bounds[:_IN_FLIGHT]:
                    data, ends = batch_blob(self._probes(lo, hi))
                    self.tickets.append((worker.submit(data, ends), data, ends))
            except OSError:
                self._drop_worker()

    def _cap_metadata(self) -> None:
        """Cut every metadata whose JSON is over the cap (before redaction reads it)."""
        cap, js = self.cap, self.js
        if max(map(len, filter(None, js)), default=0) * 4 <= cap:
            return  # the common case, in C: none can be over
        for i, j in enumerate(js):
            if (
                j is not None
                and len(j) * 4 > cap
                and (size := len(j.encode("utf-8", "surrogatepass"))) > cap
            ):
                meta = cap_metadata(self.metas[i], cap, size)
                self.metas[i] = meta
                js[i] = _META_JSON(meta)
                self.report.truncated += 1

    def _probes(self, lo: int, hi: int) -> list[str]:
        return self.texts[lo:hi] + [j or "" for j in self.js[lo:hi]]

    def _drop_worker(self) -> None:
        if self.worker is not None:
            self.worker.broken = True
            self.worker.release()
            self.worker = None

    def close(self) -> None:
        """Hand the helper back (an abandoned batch's answers are skipped by ticket)."""
        if self.worker is not None:
            self.worker.note_batch(self.answered, len(self.tickets))
            self.worker.release()
            self.worker = None

    def _suspects(self, chunk: int, lo: int, hi: int) -> set[int]:
        """Chunk-relative indices of the probes to redact: texts ``0..hi-lo``, then metadata."""
        redactor = self.redactor
        assert redactor is not None
        count = hi - lo
        if redactor.all_suspect:
            return set(range(2 * count))
        if chunk >= len(self.tickets):
            return redactor.suspects(self._probes(lo, hi))
        number, data, ends = self.tickets[chunk]
        if self.worker is not None and self.worker.answered(number, _PATIENCE_S if chunk else 0):
            try:
                found = self.worker.result(number)
                self.answered += 1
                return found
            except OSError:  # the helper died: gate here, and not with it again
                self._drop_worker()
        # Not answered yet (the helper is behind, or not scheduled on a loaded machine): gated
        # here rather than waited for; its answer, when it comes, is skipped by ticket.
        return blob_suspects(data, ends)

    def _redact(self, chunk: int, lo: int, hi: int) -> None:
        """Redact the chunk's suspects in place (a redacted metadata's JSON is made again)."""
        redactor = self.redactor
        assert redactor is not None
        texts, metas, js, report = self.texts, self.metas, self.js, self.report
        count = hi - lo
        found_any: dict[str, int] = {}
        opaque = {count + i - lo for i in range(lo, hi) if js[i] is None}  # always redacted
        for k in sorted(self._suspects(chunk, lo, hi) | opaque):
            if k < count:
                texts[lo + k], found = redactor.redact(texts[lo + k])
            else:
                i = lo + k - count
                value, found = redactor.redact_json(dict(metas[i]))
                if found and isinstance(value, dict):
                    metas[i] = value
                    js[i] = None
            for kind, c in found.items():
                found_any[kind] = found_any.get(kind, 0) + c
        if found_any:
            report.redacted += sum(found_any.values())
            for kind, c in found_any.items():
                report.redactions_by_kind[kind] = report.redactions_by_kind.get(kind, 0) + c

    def rows(self) -> Iterator[EventRow]:
        """The batch's rows in order, each chunk redacted just before its rows are needed."""
        return chain.from_iterable(self._chunks())

    def _chunks(self) -> Iterator[list[EventRow]]:
        pending, texts, metas, js = self.pending, self.texts, self.metas, self.js
        cap = self.cap
        quick = cap // 4
        for chunk, (lo, hi) in enumerate(self.bounds):
            if self.redactor is not None:
                self._redact(chunk, lo, hi)
            part_texts, part_js = texts[lo:hi], js[lo:hi]
            if max(map(len, part_texts), default=0) <= quick and None not in part_js:
                # the common case: nothing to cut (a cut text is longer), all metadata serialised
                yield [
                    (p[0], p[4], p[2], p[1], p[3], p[5], p[6], text, p[9], p[10], meta_json)
                    for p, text, meta_json in zip(
                        pending[lo:hi], part_texts, cast("list[str]", part_js), strict=True
                    )
                ]
                continue
            rows: list[EventRow] = []
            for i in range(lo, hi):
                p = pending[i]
                text, original, meta_json = texts[i], p[11], js[i]
                if original is not None or len(text) > quick:
                    text, cut_from = cap_text(text, cap, original_size=original)
                    if cut_from is not None:
                        metas[i] = {**metas[i], "truncated_from_bytes": cut_from}
                        meta_json = None
                        self.report.truncated += 1
                if meta_json is None:
                    meta = metas[i]
                    meta_json = _META_JSON(meta if type(meta) is dict else dict(meta))
                rows.append(
                    (p[0], p[4], p[2], p[1], p[3], p[5], p[6], text, p[9], p[10], meta_json)
                )
            yield rows


def _id_problem(name: str, value: object) -> str:
    if type(value) is not str:
        return f"{name} must be a string (got {type(value).__name__})"
    if "\x00" in value:
        return f"{name} contains a NUL character"
    return f"{name} is longer than {MAX_ID_CHARS} characters ({len(value)})"


@dataclass(frozen=True, slots=True)
class _Position:
    """What a file's checkpoint is written from."""

    job: str
    path: Path
    fmt: str
    fingerprints: Fingerprints
    identity: str
    """The file's first-line hash: event ids without one of their own derive from it."""
    anchors: dict[str, int]
    """Where the file's time-less sessions are placed (``RawRecord.anchor``), kept with it."""

    def mark(self, offset: int) -> dict[str, JsonValue]:
        return self.fingerprints.mark(offset, self.path, self.fmt, self.anchors)

    def alternative_id(self, p: _Pending) -> str | None:
        """For an event whose id was derived from its position (``_event_from``), the id it
        takes when another event is stored under that one: the position's key with the
        event's session, type, role and a hash of its text (its instant is the id's time
        part), so a changed record read again is stored, and read once more is a duplicate.
        None for an id the input gave."""
        where = p[10] or ""
        offset, _, part = where.partition("@")[2].partition("#")
        key = f"{self.identity}:{offset}:{part or 0}"
        if derived_ulid(p[4], key) != p[0]:
            return None
        text = hashlib.blake2b(p[7].encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
        return derived_ulid(p[4], f"{key}:{p[1]}:{p[5]}:{p[6]}:{text}")


_COPY_FIELDS = frozenset({"session_id"})
"""An event given the id of one stored in another session, and nothing else different, is a copy:
Claude Code writes a cleared or resumed session's first lines again, uuids and all, into the new
session's file (the local-command caveat of the shared claude-code-log sessions). It is counted
as a duplicate (the first stays), not reported as a rejection every new session."""


def _line_of(source_pos: str | None) -> int | None:
    """The line number in a ``line:N@offset`` position."""
    if source_pos is None or not source_pos.startswith("line:"):
        return None
    number = source_pos[5:].partition("@")[0]
    return int(number) if number.isdigit() else None


def _guarded(source: Source, path: Path, start: int, options: SourceOptions) -> Iterator[RawRecord]:
    """``source.read`` with a net under it: a reader that fails unexpectedly on a line (a bug
    a hostile input found) costs that line, not the file. The line becomes a record with the
    error, and an incremental reader resumes after it; a whole-document reader stops."""
    pos = start
    while True:
        try:
            for record in source.read(path, pos, options):
                pos = record.end_offset
                yield record
            return
        except (OSError, IngestError, MemoryError):
            raise
        except Exception as exc:
            reason = f"reader error: {type(exc).__name__}: {exc}"[:500]
            line, end = _line_at(path, pos)
            if not resumable(source, path) or end <= pos:
                yield RawRecord(line, pos, pos, error=reason, complete=False)
                return
            yield RawRecord(line, pos, end, error=reason)
            pos = end


def resumable(source: Source, path: Path) -> bool:
    """Whether a read of ``path`` can resume from a byte offset: the format's ``incremental``,
    or, for a format with two layouts (Gemini CLI: a JSON document or a JSONL log), its
    ``resumable(path)``."""
    decide = getattr(source, "resumable", None)
    return bool(decide(path)) if callable(decide) else source.incremental


def _line_at(path: Path, pos: int) -> tuple[int, int]:
    """The 1-based number of the line starting at byte ``pos`` and the offset just past it."""
    with path.open("rb") as fh:
        count = 1
        remaining = pos
        while remaining:
            chunk = fh.read(min(1 << 20, remaining))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
        end = pos
        while chunk := fh.read(1 << 16):
            cut = chunk.find(b"\n")
            if cut >= 0:
                return count, end + cut + 1
            end += len(chunk)
    return count, pos


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
        # identifiers are redacted like text, here, before anything stores them: session ids,
        # projects (and the names and folders a project is registered under), agents, file paths
        # (events' source, files' checkpoints) — for files, records, hooks and remember alike
        self._ids: IdentifierRedactor | None = None
        if redactor is not None:
            from memtoc.ingest.redact import IdentifierRedactor  # loaded with the redactor

            self._ids = IdentifierRedactor(redactor)
        # which project (memtoc.projects): --project, else the record's own, else the project of
        # the session's starting directory, else the default — resolved once per name/session
        self.projects = ProjectRegistry(cast(ProjectStore, store), self.clock)
        self._project = (
            self.projects.for_write(self._id(self.options.project))
            if self.options.project
            else None
        )
        self._named: dict[str, str] = {}
        self._sessions: dict[str, str] = {}
        self._append_rows = store.append_rows if isinstance(store, RowAppender) else None

    def _id(self, value: str) -> str:
        """An identifier as it may be stored (:class:`IdentifierRedactor`)."""
        return self._ids(value) if self._ids is not None else value

    # -- files ------------------------------------------------------------------------------------
    def ingest_paths(
        self, paths: Iterable[Path], progress: ProgressFn | None = None
    ) -> IngestReport:
        report = IngestReport()
        links: list[Path] = []
        try:
            files = list(
                discover(paths, follow_symlinks=self.options.follow_symlinks, skipped=links)
            )
        except IngestError as exc:
            report.rejections.append(Rejection(exc.source or "?", None, exc.reason))
            report.unusable.append(exc.source or "?")
            return report
        report.links_skipped.extend(str(p) for p in links)
        named = {p.expanduser() for p in paths if p.expanduser().is_file()}
        with gc_paused():
            for path, _root in files:
                report.merge(self.ingest_file(path, progress=progress, in_folder=path not in named))
        return report

    def ingest_file(
        self, path: Path, progress: ProgressFn | None = None, *, in_folder: bool = False
    ) -> IngestReport:
        """Import one file from its saved position. ``in_folder``: found by walking a folder
        given, where a file of no known format is not a transcript (``not_transcripts``)."""
        report = IngestReport(files=1)
        where = str(path)
        try:
            if is_compressed(path):  # read through its plain copy; reported under its own name
                path = plain_copy(path, self.options.plain_cache or default_cache())
            identity = first_line_hash(path)
            if identity is None:
                return report  # empty (or blank) file: nothing to import, nothing wrong
            source = self._source_for(path)
            size = path.stat().st_size
            fingerprints = Fingerprints(path)
        except _UnknownFormat as exc:
            if not in_folder:
                report.rejections.append(Rejection(where, None, exc.reason))
                report.unusable.append(where)
                return report
            report.files = 0
            report.not_transcripts.append(where)
            return report
        except (OSError, IngestError) as exc:
            reason = exc.reason if isinstance(exc, IngestError) else f"cannot read: {exc}"
            report.rejections.append(Rejection(where, None, reason))
            report.unusable.append(where)
            return report
        with fingerprints:
            self._ingest_file(path, where, identity, source, size, fingerprints, report, progress)
        return report

    def _ingest_file(
        self,
        path: Path,
        where: str,
        identity: str,
        source: Source,
        size: int,
        fingerprints: Fingerprints,
        report: IngestReport,
        progress: ProgressFn | None,
    ) -> None:
        real = path.resolve()
        label = Path(self._id(str(real)))  # the path as checkpoints keep it
        if not resumable(source, path):  # a whole document: its first line changes as it grows
            identity = document_hash(label)
        start, job, anchors = self._resume_offset(
            identity, label, size, source, fingerprints, report
        )
        if start >= size:
            if progress:
                progress(size)
            return
        if progress and start:
            progress(start)
        options = SourceOptions(include_thinking=self.options.include_thinking, anchors=anchors)
        batch = _Batch()
        consumed = start
        position = _Position(job, label, source.name, fingerprints, identity, dict(anchors))
        failed = 0  # rejections that count against the file (not a last line still growing)
        try:
            for record in _guarded(source, path, start, options):
                if record.error is not None:
                    report.rejections.append(Rejection(where, record.line, record.error))
                    if not record.complete:
                        break  # a growing last line: retried next time, watermark stays
                    failed += 1
                elif not record.complete:  # not placeable yet: read again next time
                    report.waiting += 1
                    report.waiting_at.append(f"{where}:{record.line}")
                    break
                else:
                    report.skipped += record.skipped
                    if record.anchor is not None:
                        position.anchors[record.anchor[0]] = record.anchor[1]
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
                    self._flush(batch, position, where, report)
        except (OSError, IngestError) as exc:
            reason = exc.reason if isinstance(exc, IngestError) else f"read failed: {exc}"
            report.rejections.append(Rejection(where, None, reason))
            failed += 1
        self._flush(batch, position, where, report)
        report.bytes_read += max(0, consumed - start)
        if failed and report.ingested + report.duplicates == 0:
            report.unusable.append(where)

    def _source_for(self, path: Path) -> Source:
        if self.options.format != "auto":
            return get_source(self.options.format)
        found = sniff_format(path)
        if found is None:
            raise _UnknownFormat("unrecognised format (not a known transcript or JSONL file)")
        return found

    def _resume_offset(
        self,
        identity: str,
        real: Path,
        size: int,
        source: Source,
        fingerprints: Fingerprints,
        report: IngestReport,
    ) -> tuple[int, str, dict[str, int]]:
        """Where to start reading the file, its checkpoint key and where its time-less sessions
        were placed (:mod:`positions`)."""
        prefix = f"{CHECKPOINT_PREFIX}{identity}:"
        own = self.store.get_checkpoint(prefix + str(real))
        others = {} if own is not None else self.store.list_checkpoints(prefix)
        found = resume(others, own, first=identity, path=real, size=size, fingerprints=fingerprints)
        if self.options.rescan:
            return 0, found.job, found.anchors
        if not resumable(source, real):
            # A whole-document format: unchanged size means nothing new; otherwise re-read it all
            # (every event already stored is a no-op duplicate).
            return (size if found.start == size else 0), found.job, found.anchors
        report.restarted += found.restarted
        return found.start, found.job, found.anchors

    def _flush(self, batch: _Batch, position: _Position, where: str, report: IngestReport) -> None:
        if batch.watermark is None and not batch.pending:
            return
        checkpoints: dict[str, JsonValue] = {}
        if batch.watermark is not None:
            checkpoints[position.job] = position.mark(batch.watermark)
        ids, result = self._store(
            batch.pending, report, checkpoints, where=where, fallback=position.alternative_id
        )
        if self.on_commit is not None and (ids or batch.watermark is not None):
            self.on_commit(
                CommitInfo(
                    where,
                    tuple(ids),
                    result.inserted,
                    result.duplicates,
                    batch.watermark or 0,
                )
            )
        batch.pending = []
        batch.watermark = None
        batch.lines = []

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
        problem = metadata_problem(draft.metadata)
        if problem is not None:
            raise IngestError(problem, event_id=event_id)
        rows, metas = self._finish(
            [self._validate(draft, event_id, source, source_pos, agent)], report
        )
        return _event(rows[0], metas[0])

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
        ts = draft.ts_ms
        if type(ts) is not int or ts < MIN_TS_MS or ts > MAX_TS_MS:
            raise IngestError(str(ts_problem(ts)), event_id=event_id)
        named = self._project or draft.project or self.options.default_project
        agent_name = draft.agent or agent
        session_id = draft.session_id
        if (  # one expression: this runs for every event
            type(event_id) is not str
            or type(session_id) is not str
            or type(named) is not str
            or type(agent_name) is not str
            or len(event_id) > MAX_ID_CHARS
            or len(session_id) > MAX_ID_CHARS
            or len(named) > MAX_ID_CHARS
            or len(agent_name) > MAX_ID_CHARS
            or "\x00" in event_id
            or "\x00" in session_id
            or "\x00" in named
            or "\x00" in agent_name
        ):
            for name, value in (
                ("event_id", event_id),
                ("session_id", session_id),
                ("project", named),
                ("agent", agent_name),
            ):
                if type(value) is not str or len(value) > MAX_ID_CHARS or "\x00" in value:
                    raise IngestError(_id_problem(name, value), event_id=None)
        ids = self._ids
        if ids is not None:
            session_id, agent_name = ids(session_id), ids(agent_name)
            if source is not None:
                source = ids(source)
        if type(draft.text) is not str:
            raise IngestError(f"text must be a string (got {type(draft.text).__name__})")
        # Cut with slack first (so a huge text is not redacted in full), redact, then cut to the
        # cap: a secret straddling the cap is still seen whole by the redactor.
        text = draft.text
        original = None
        if len(text) * 4 > self._slack_bytes:  # else it cannot be over (the cheap common case)
            text, original = _prefix_bytes(text, self._slack_bytes)
        return (
            event_id,
            session_id,
            self._project or self._project_of(draft),
            agent_name,
            ts,
            event_type,
            role,
            text,
            draft.metadata,
            source,
            source_pos,
            original,
        )

    def _project_of(self, draft: EventDraft) -> str:
        """The project of a draft without ``--project``: the one its record names, else its
        session's (from the directory the session started in, else the default), memoised. A
        directory that is not a usable path (too long, NUL) counts as none."""
        if draft.project:
            found = self._named.get(draft.project)
            if found is None:
                found = self.projects.for_write(self._id(draft.project))
                self._named[draft.project] = found
            return found
        found = self._sessions.get(draft.session_id)
        if found is None:
            cwd = draft.cwd or self.options.default_cwd
            if type(cwd) is str and cwd and len(cwd) <= MAX_PATH_CHARS and "\x00" not in cwd:
                # a folder whose path holds a secret is keyed by the redacted path (never found
                # on disk, so it is a project of its own, stable across sessions)
                project, _ = self.projects.for_directory(self._id(cwd))
                found = project.project if project is not None else None
            if found is None:
                found = self.projects.for_write(self._id(self.options.default_project))
            self._sessions[draft.session_id] = found
        return found

    def _finish(
        self, pending: list[_Pending], report: IngestReport, js: list[str | None] | None = None
    ) -> tuple[list[EventRow], list[Mapping[str, JsonValue]]]:
        """Redact, cap and serialise a batch: its rows and each row's metadata (for events)."""
        batch = _Prepared(self, pending, report, worker=None, js=js)
        try:
            return list(batch.rows()), batch.metas
        finally:
            batch.close()

    def _store(
        self,
        pending: list[_Pending],
        report: IngestReport,
        checkpoints: Mapping[str, JsonValue] | None = None,
        *,
        where: str,
        lines: Sequence[int] | None = None,
        fallback: Callable[[_Pending], str | None] | None = None,
        js: list[str | None] | None = None,
    ) -> tuple[list[str], AppendResult]:
        """Finish ``pending`` and append it (with ``checkpoints``) in one transaction; returns
        the ids of the batch's events now stored and what the store did.

        An id stored already with other content (:func:`_settle`) is a conflict: an id the
        input gave is rejected (the stored event is kept), an id derived from the record's
        position (``fallback`` gives its alternative, or None for a given id) is another
        record at that position — a changed file read again, or another file with the same
        first line — stored under the alternative id, in the same transaction.
        """
        with self.store.transaction():
            result = self._append(pending, report, checkpoints, js)
            ids = [p[0] for p in pending]
            if result.conflicts or result.refused:
                ids = self._settle(pending, result, report, where, lines, fallback)
        report.ingested += result.inserted
        report.duplicates += result.duplicates
        if self._ids is not None and self._ids.found:
            for kind, n in self._ids.take_found().items():
                report.redacted += n
                report.redactions_by_kind[kind] = report.redactions_by_kind.get(kind, 0) + n
        return ids, result

    def _append(
        self,
        pending: list[_Pending],
        report: IngestReport,
        checkpoints: Mapping[str, JsonValue] | None,
        js: list[str | None] | None = None,
    ) -> AppendResult:
        """Finish ``pending`` (``js``: its metadata's JSON, when made already) and hand it to
        the store.

        A store that takes rows (:class:`~memtoc.store.base.RowAppender`) gets them lazily,
        chunk by chunk (:class:`_Prepared`), so redaction's prefilter for the next chunk runs in
        the helper process while the store inserts this one.
        """
        if self._append_rows is None:
            rows, metas = self._finish(pending, report, js)
            events = [_event(r, m) for r, m in zip(rows, metas, strict=True)]
            return self.store.append_events(events, checkpoints)
        helper = None
        if self.redactor is not None and self.options.redact_helper and len(pending) >= 2 * _CHUNK:
            helper = redact_worker.worker()
        batch = _Prepared(self, pending, report, worker=helper, js=js)
        try:
            return self._append_rows(batch.rows(), checkpoints, count=len(pending))
        finally:
            batch.close()

    def _settle(
        self,
        pending: list[_Pending],
        result: AppendResult,
        report: IngestReport,
        where: str,
        lines: Sequence[int] | None,
        fallback: Callable[[_Pending], str | None] | None,
    ) -> list[str]:
        """Report refused rows and conflicts, store the moved ones; the ids now stored."""
        dropped: set[int] = set()
        moved: list[_Pending] = []

        def reject(i: int, reason: str) -> None:
            line = lines[i] if lines is not None else _line_of(pending[i][10])
            report.rejections.append(Rejection(where, line, reason))

        for i, reason in result.refused:
            dropped.add(i)
            reject(i, reason)
        for i, differs in result.conflicts:
            p = pending[i]
            alternative = fallback(p) if fallback is not None else None
            if alternative is None and set(differs) <= _COPY_FIELDS:
                result.duplicates += 1  # the same message copied into another session's file
            elif alternative is None:
                reject(i, f"event_id {p[0]!r} is stored already with another "
                          f"{', '.join(differs)}; the stored event is kept")  # fmt: skip
            else:
                dropped.add(i)
                moved.append((alternative, *p[1:]))
        ids = [p[0] for i, p in enumerate(pending) if i not in dropped]
        if moved:
            again = self._append(moved, IngestReport(), None)  # counted in the first pass
            result.inserted += again.inserted
            result.duplicates += again.duplicates
            for i, differs in again.conflicts:
                report.rejections.append(
                    Rejection(
                        where,
                        _line_of(moved[i][10]),
                        f"another record is stored at this position ({', '.join(differs)} "
                        "differ) and under its alternative id",
                    )
                )
            for i, reason in again.refused:
                report.rejections.append(Rejection(where, _line_of(moved[i][10]), reason))
            bad = {i for i, _ in again.conflicts} | {i for i, _ in again.refused}
            ids += [p[0] for i, p in enumerate(moved) if i not in bad]
        return ids

    def _checked_metadata(
        self, batch: _Batch, report: IngestReport, source: str
    ) -> list[str | None]:
        """The batch's metadata as JSON (serialised once, in C, for the store too), after
        dropping, with the reason, each one that is not JSON or is nested too deep (records
        given through the API: a file's are checked as its lines are decoded)."""
        js = metadata_json([p[8] for p in batch.pending])
        bad = [
            i for i, j in enumerate(js) if j is None or j.count("[") + j.count("{") > MAX_NESTING
        ]
        dropped = set()
        for i in bad:
            problem = metadata_problem(batch.pending[i][8])
            if problem is not None:
                dropped.add(i)
                report.rejections.append(Rejection(source, batch.lines[i], problem))
        if dropped:
            keep = [i for i in range(len(js)) if i not in dropped]
            batch.pending = [batch.pending[i] for i in keep]
            batch.lines = [batch.lines[i] for i in keep]
            js = [js[i] for i in keep]
        return js

    # -- records given directly (API, MCP remember, hooks) -----------------------------------------
    def ingest_drafts(
        self, drafts: Iterable[tuple[EventDraft | str, str]], *, source: str = "api"
    ) -> IngestReport:
        """Store drafts with the ids given beside them, in batches; bad ones are rejected.

        A reason in place of a draft (a record its caller could not read) is counted and
        rejected at its place, so every rejection names its record's number."""
        report = IngestReport()
        batch = _Batch()
        validate, size = self._validate, self.options.batch_size
        pending = batch.pending
        with gc_paused():
            n = 0
            for n, (draft, event_id) in enumerate(drafts, start=1):
                try:
                    if isinstance(draft, str):
                        raise IngestError(draft)
                    if type(draft.metadata) is not dict:  # dicts are checked by the batch
                        problem = metadata_problem(draft.metadata)
                        if problem is not None:
                            raise IngestError(problem, event_id=event_id)
                    pending.append(validate(draft, event_id, None, None, "unknown"))
                    batch.lines.append(n)
                except IngestError as exc:
                    report.rejections.append(Rejection(source, n, exc.reason))
                if len(pending) >= size:
                    report.read = n
                    self._flush_api(batch, report, source)
                    pending = batch.pending
            report.read = n
            self._flush_api(batch, report, source)
        return report

    def _flush_api(self, batch: _Batch, report: IngestReport, source: str) -> None:
        if not batch.pending:
            return
        js = self._checked_metadata(batch, report, source)
        if not batch.pending:
            return
        ids, result = self._store(batch.pending, report, where=source, lines=batch.lines, js=js)
        if self.on_commit is not None:
            self.on_commit(
                CommitInfo(
                    source,
                    tuple(ids),
                    result.inserted,
                    result.duplicates,
                    0,
                )
            )
        batch.pending = []
        batch.lines = []
