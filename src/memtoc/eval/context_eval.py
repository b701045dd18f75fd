"""``memtoc eval context``: does the session-start context say where we left off?

A replay of a real project's history as a user's store would have seen it. Sessions are taken in
the order they started; before session *S* (starting at *t*), every transcript line written
before *t* is appended to a working copy of its file (a line without a timestamp goes with the
line before it), the copies are ingested incrementally (the watermarks a hook would keep),
processed and rolled up with the clock standing at *t*, and ``Memory.context`` is asked for the
project, as the SessionStart hook would at *t*. Lines of sessions still running at *t* count up
to *t* only.

The context is scored against the **previous session's reference summary** — the checkpoint
summaries another tool wrote (``reference/checkpoints.jsonl``: ``intent`` and ``outcome``): the
previous session is the latest one, other than *S*, with a summarised checkpoint created before
*t*, and its summaries created before *t* are joined. Scores:

- ``recall``: the share of the reference's key terms (``text.keyphrases.key_terms``: lowercased,
  lightly stemmed content words, identifiers whole and split, stopwords and bare numbers out)
  found among the context's key terms;
- ``weighted_recall``: the same, each term weighted by its inverse document frequency over all
  the reference summaries (``ln(N / df)``), so words every summary uses ("added", "tests")
  count for little and the session's own names for much — no threshold to tune;
- ``ceiling``: ``weighted_recall`` of *all* the text the previous session had stored by *t*
  against its reference — what any context drawn from that session could reach;
- ``tokens``: the context's token count (within the budget asked).

The replay uses the extractive summariser and no embedder (the context reads neither vectors
nor an LLM), so it is deterministic and needs no model.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

from memtoc.clock import ManualClock
from memtoc.errors import ConfigError
from memtoc.ingest.sources._lines import parse_timestamp
from memtoc.memory import Memory
from memtoc.model import JsonValue, iso_ms
from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.store.sqlite import SqliteStore
from memtoc.text.keyphrases import key_terms

ProgressFn = Callable[[str, int, int], None]
REFERENCE = Path("reference") / "checkpoints.jsonl"


@dataclass(frozen=True, slots=True)
class _Line:
    ts_ms: int
    raw: bytes


@dataclass(slots=True)
class _Transcript:
    """One session's file: its lines with the instant each becomes visible."""

    path: Path
    lines: list[_Line]
    written: int = 0
    """Lines already appended to the working copy."""

    @property
    def start_ms(self) -> int:
        return self.lines[0].ts_ms

    @property
    def session_id(self) -> str:
        return self.path.stem


@dataclass(frozen=True, slots=True)
class _Reference:
    session_id: str
    created_ms: int
    text: str


@dataclass(frozen=True, slots=True)
class SessionScore:
    session_id: str
    start_ms: int
    previous: str
    recall: float
    weighted_recall: float
    ceiling: float
    tokens: int
    missed: tuple[str, ...]
    """The reference's heaviest key terms the context lacks (for reading misses)."""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "session_id": self.session_id,
            "start": iso_ms(self.start_ms),
            "previous_session": self.previous,
            "recall": round(self.recall, 4),
            "weighted_recall": round(self.weighted_recall, 4),
            "ceiling": round(self.ceiling, 4),
            "tokens": self.tokens,
            "missed": list(self.missed),
        }


@dataclass(slots=True)
class ContextEvalReport:
    dataset: str
    budget: int
    sessions: int = 0
    """Sessions replayed."""
    scores: list[SessionScore] = field(default_factory=list)
    wall_seconds: float = 0.0

    def _mean(self, attr: str) -> float:
        values = [getattr(s, attr) for s in self.scores]
        return sum(values) / len(values) if values else 0.0

    def summary(self) -> dict[str, JsonValue]:
        return {
            "dataset": self.dataset,
            "budget": self.budget,
            "sessions": self.sessions,
            "scored": len(self.scores),
            "recall": round(self._mean("recall"), 4),
            "weighted_recall": round(self._mean("weighted_recall"), 4),
            "ceiling": round(self._mean("ceiling"), 4),
            "tokens_mean": round(self._mean("tokens"), 1),
            "tokens_max": max((s.tokens for s in self.scores), default=0),
            "wall_seconds": round(self.wall_seconds, 1),
        }

    def to_dict(self) -> dict[str, JsonValue]:
        return {**self.summary(), "per_session": [s.to_dict() for s in self.scores]}


def _read_transcript(path: Path) -> _Transcript | None:
    """The file's lines, each stamped with its own timestamp or the previous line's."""
    lines: list[_Line] = []
    pending: list[bytes] = []
    last: int | None = None
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                raw += b"\n"
            ts = _timestamp(raw)
            if ts is None and last is None:
                pending.append(raw)  # before the first stamped line: goes with it
                continue
            if ts is not None:
                last = ts if last is None else max(last, ts)
            assert last is not None
            for early in pending:
                lines.append(_Line(last, early))
            pending.clear()
            lines.append(_Line(last, raw))
    if last is None:
        return None
    for early in pending:
        lines.append(_Line(last, early))
    return _Transcript(path, lines)


def _timestamp(raw: bytes) -> int | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    value = obj.get("timestamp") if isinstance(obj, dict) else None
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def load_references(path: Path) -> list[_Reference]:
    """Checkpoints with a summary: ``intent`` and ``outcome`` joined, by creation time."""
    refs: list[_Reference] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            summary = row.get("summary") or {}
            text = " ".join(
                str(summary.get(k) or "") for k in ("intent", "outcome") if summary.get(k)
            )
            if text:
                refs.append(_Reference(row["session_id"], parse_timestamp(row["created_at"]), text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{path}:{n}: not a checkpoint record ({exc})") from None
    return sorted(refs, key=lambda r: r.created_ms)


def idf_weights(texts: list[str]) -> dict[str, float]:
    """``ln(N / df)`` of every key term over ``texts``."""
    df: dict[str, int] = {}
    for text in texts:
        for term in key_terms(text):
            df[term] = df.get(term, 0) + 1
    n = len(texts)
    return {t: math.log(n / d) for t, d in df.items()}


def score_terms(
    reference: set[str], found: set[str], idf: dict[str, float]
) -> tuple[float, float, list[str]]:
    """(recall, IDF-weighted recall, missed terms heaviest first)."""
    if not reference:
        return 0.0, 0.0, []
    hit = reference & found
    total = sum(idf.get(t, 0.0) for t in reference)
    weighted = sum(idf.get(t, 0.0) for t in hit) / total if total else 0.0
    missed = sorted(reference - found, key=lambda t: (-idf.get(t, 0.0), t))
    return len(hit) / len(reference), weighted, missed


@contextmanager
def _workdir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        if given.exists():
            shutil.rmtree(given)
        given.mkdir(parents=True)
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="memtoc-eval-context-") as tmp:
        yield Path(tmp)


def run_context_eval(
    dataset: Path,
    *,
    budget: int = DEFAULT_BUDGET,
    project: str | None = None,
    limit: int | None = None,
    workdir: Path | None = None,
    progress: ProgressFn | None = None,
) -> ContextEvalReport:
    """Replay ``dataset`` (``transcripts/`` and ``reference/checkpoints.jsonl``) and score the
    context at every session start against the previous session's reference summary."""
    folder = dataset / "transcripts" if (dataset / "transcripts").is_dir() else dataset
    ref_path = dataset / REFERENCE
    if not ref_path.is_file():
        raise ConfigError(f"{ref_path}: no reference summaries (reference/checkpoints.jsonl)")
    refs = load_references(ref_path)
    idf = idf_weights([r.text for r in refs])
    transcripts = [t for p in sorted(folder.glob("*.jsonl")) if (t := _read_transcript(p))]
    if not transcripts:
        raise ConfigError(f"{folder}: no JSONL transcripts")
    transcripts.sort(key=lambda t: (t.start_ms, t.session_id))
    if limit is not None:
        transcripts = transcripts[:limit]
    name = project or dataset.resolve().name
    report = ContextEvalReport(dataset=str(dataset), budget=budget)
    started = time.perf_counter()
    with _workdir(workdir) as work:
        copies = work / "transcripts"
        copies.mkdir()
        clock = ManualClock(transcripts[0].start_ms)
        store = SqliteStore(work / "memtoc.db", durability="off", clock=clock)
        semantic = SemanticIndex(store, kind="none")
        with Memory(store, clock=clock, tz=UTC, semantic=semantic) as memory:
            for n, session in enumerate(transcripts, start=1):
                at = session.start_ms
                clock.set(at)
                _append_until(transcripts, copies, at)
                memory.ingest([copies], project=name)
                memory.process()
                view = memory.context(name, budget=budget)
                score = _score(memory, session, refs, idf, view.text, view.tokens, name, at)
                if score is not None:
                    report.scores.append(score)
                report.sessions = n
                if progress is not None:
                    progress("sessions", n, len(transcripts))
    report.wall_seconds = time.perf_counter() - started
    return report


def _append_until(transcripts: list[_Transcript], copies: Path, at_ms: int) -> None:
    """Append to each working copy the lines written before ``at_ms``."""
    for t in transcripts:
        end = t.written
        while end < len(t.lines) and t.lines[end].ts_ms < at_ms:
            end += 1
        if end > t.written:
            with (copies / t.path.name).open("ab") as fh:
                fh.writelines(line.raw for line in t.lines[t.written : end])
            t.written = end


def _score(
    memory: Memory,
    session: _Transcript,
    refs: list[_Reference],
    idf: dict[str, float],
    context: str,
    tokens: int,
    project: str,
    at_ms: int,
) -> SessionScore | None:
    before = [r for r in refs if r.created_ms < at_ms and r.session_id != session.session_id]
    if not before:
        return None
    previous = before[-1].session_id
    reference = " ".join(r.text for r in before if r.session_id == previous)
    wanted = key_terms(reference)
    recall, weighted, missed = score_terms(wanted, key_terms(context), idf)
    stored = " ".join(
        e.text for e in memory.events(project=project, session_id=previous, until_ms=at_ms)
    )
    _, ceiling, _ = score_terms(wanted, key_terms(stored), idf)
    return SessionScore(
        session.session_id, at_ms, previous, recall, weighted, ceiling, tokens, tuple(missed[:8])
    )
