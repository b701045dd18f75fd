"""``memtoc eval summaries``: how much of LoCoMo's reference session summaries the TOC bullets hold.

Each LoCoMo conversation is ingested as its own project: every session is a session of the
store, starting at its ``session_N_date_time``, one event per turn ("<speaker>: <text>") a
minute apart. After ``process`` (segments, summaries, grips) and a forced rollup, each
session's bullets — those of all its segments — are compared with the dataset's
``session_N_summary``:

- **key-term recall**: the share of the reference's key terms (``keyphrases.key_terms``:
  lowercased, lightly stemmed content words, identifiers whole) found in the bullets;
- **ROUGE-1 recall**: clipped unigram overlap over the reference's unigrams, after lowercasing and
  stopword removal (a plain re-implementation, no stemming);
- mean **L0** (abstract) and **L1** (overview) sizes in tokens, per segment;
- **coverage** of every node's text (title, L0, bullets, keywords) at the session, day and week
  levels, and the nodes' health (``summary_coverage``).

Extractive bullets quote the conversation and references paraphrase it, so recall is the honest
figure (precision would mostly measure the wording of the reference).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtoc.errors import ConfigError
from memtoc.eval.summary_coverage import (
    LevelHealth,
    Unit,
    node_health,
    period_units,
    score_units,
    summarise_scores,
)
from memtoc.ids import derived_ulid
from memtoc.ingest.importer import Importer, IngestOptions
from memtoc.ingest.sources.base import EventDraft
from memtoc.memory import Memory
from memtoc.model import Event, JsonValue
from memtoc.store.sqlite import SqliteStore
from memtoc.text.keyphrases import STOPWORDS, key_terms
from memtoc.text.tokens import TokenCounter, default_counter

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")
TURN_MS = 60_000


def rouge1_recall(reference: str, candidate: str) -> float:
    """Clipped unigram recall of ``candidate`` against ``reference`` (lowercased, no stopwords)."""
    ref = Counter(w for w in _WORD.findall(reference.lower()) if w not in STOPWORDS)
    if not ref:
        return 0.0
    got = Counter(w for w in _WORD.findall(candidate.lower()) if w not in STOPWORDS)
    return sum(min(n, got[w]) for w, n in ref.items()) / sum(ref.values())


def key_term_recall(reference: str, candidate: str) -> float:
    """Share of the reference's key terms that the candidate contains."""
    ref = key_terms(reference)
    return len(ref & key_terms(candidate)) / len(ref) if ref else 0.0


def parse_session_time(text: str) -> int:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as epoch milliseconds (taken as UTC)."""
    for fmt in _DATE_FORMATS:
        try:
            return int(datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC).timestamp() * 1000)
        except ValueError:
            continue
    raise ConfigError(f"unrecognised LoCoMo session time {text!r}", setting="dataset")


@dataclass(slots=True)
class SessionScore:
    conversation: str
    session: int
    segments: int
    bullets: int
    key_term_recall: float
    rouge1_recall: float
    l0_tokens: float
    l1_tokens: float


@dataclass(slots=True)
class SummaryQuality:
    """Per-session scores and their means."""

    sessions: list[SessionScore] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    health: dict[str, LevelHealth] = field(default_factory=dict)
    coverage: dict[str, JsonValue] = field(default_factory=dict)

    def mean(self, attr: str) -> float:
        values = [float(getattr(s, attr)) for s in self.sessions]
        return sum(values) / len(values) if values else 0.0

    def by_conversation(self) -> dict[str, SummaryQuality]:
        out: dict[str, SummaryQuality] = {}
        for s in self.sessions:
            out.setdefault(s.conversation, SummaryQuality()).sessions.append(s)
        return out

    def to_dict(self) -> dict[str, JsonValue]:
        means: dict[str, JsonValue] = {
            "sessions": len(self.sessions),
            "key_term_recall": round(self.mean("key_term_recall"), 4),
            "rouge1_recall": round(self.mean("rouge1_recall"), 4),
            "l0_tokens": round(self.mean("l0_tokens"), 1),
            "l1_tokens": round(self.mean("l1_tokens"), 1),
            "bullets_per_session": round(self.mean("bullets"), 2),
            "segments_per_session": round(self.mean("segments"), 2),
        }
        per_conv: dict[str, JsonValue] = {
            name: {
                "sessions": len(q.sessions),
                "key_term_recall": round(q.mean("key_term_recall"), 4),
                "rouge1_recall": round(q.mean("rouge1_recall"), 4),
            }
            for name, q in sorted(self.by_conversation().items())
        }
        return {
            "mean": means,
            "conversations": per_conv,
            "coverage": self.coverage,
            "health": {lvl: h.to_dict() for lvl, h in self.health.items()},
        }


def load_conversations(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise ConfigError(f"LoCoMo file not found: {path}", setting="dataset")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a list of LoCoMo samples", setting="dataset")
    return data


def _sessions(conv: dict[str, Any]) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """(number, start ms, turns) of every session that has turns and a time."""
    body = conv["conversation"]
    n = 1
    while f"session_{n}" in body or f"session_{n}_date_time" in body:
        turns = body.get(f"session_{n}")
        when = body.get(f"session_{n}_date_time")
        if isinstance(turns, list) and turns and isinstance(when, str):
            yield n, parse_session_time(when), turns
        n += 1


def _drafts(sample_id: str, conv: dict[str, Any]) -> Iterator[tuple[EventDraft, str]]:
    for n, start, turns in _sessions(conv):
        for j, turn in enumerate(turns):
            ts = start + j * TURN_MS
            speaker = str(turn.get("speaker", "?"))
            draft = EventDraft(
                session_id=f"{sample_id}-s{n}",
                ts_ms=ts,
                event_type="user_message",
                role="user",
                text=f"{speaker}: {turn.get('text', '')}",
                metadata={"speaker": speaker, "dia_id": str(turn.get("dia_id", ""))},
                project=sample_id,
                agent="locomo",
            )
            yield draft, derived_ulid(ts, f"locomo:{sample_id}:{n}:{j}")


def score_conversation(
    memory: Memory, sample: dict[str, Any], counter: TokenCounter
) -> list[SessionScore]:
    """Ingest and process one LoCoMo sample into ``memory``; score each session's bullets."""
    sample_id = str(sample.get("sample_id") or "conv")
    importer = Importer(memory.store, redactor=None, options=IngestOptions(format="jsonl"))
    importer.ingest_drafts(_drafts(sample_id, sample), source="locomo")
    memory.process()
    memory.rollup(force=True)
    segments = memory.store.list_nodes(sample_id, level="segment")
    references: dict[str, str] = sample.get("session_summary") or {}
    out: list[SessionScore] = []
    for n, _, _ in _sessions(sample):
        reference = references.get(f"session_{n}_summary")
        if not reference:
            continue
        mine = [s for s in segments if s.session_id == f"{sample_id}-s{n}"]
        bullets = " ".join(b.text for s in mine for b in s.bullets)
        out.append(
            SessionScore(
                conversation=sample_id,
                session=n,
                segments=len(mine),
                bullets=sum(len(s.bullets) for s in mine),
                key_term_recall=key_term_recall(reference, bullets),
                rouge1_recall=rouge1_recall(reference, bullets),
                l0_tokens=_mean([counter.count(s.abstract) for s in mine]),
                l1_tokens=_mean([counter.count(s.overview) for s in mine]),
            )
        )
    return out


def locomo_units(memory: Memory, sample: dict[str, Any]) -> list[Unit]:
    """Coverage units of one processed sample: each session's segments and every period node
    above them against ``session_N_summary``."""
    sample_id = str(sample.get("sample_id") or "conv")
    references: dict[str, str] = {}
    for n, _, _ in _sessions(sample):
        text = (sample.get("session_summary") or {}).get(f"session_{n}_summary")
        if isinstance(text, str) and text.strip():
            references[f"{sample_id}-s{n}"] = text
    events: dict[str, list[Event]] = {}
    for e in memory.events(project=sample_id):
        events.setdefault(e.session_id, []).append(e)
    return period_units("locomo", memory.store, sample_id, references, events)


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def run_summary_quality(
    path: Path,
    *,
    conversations: int | None = None,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SummaryQuality:
    """Score the extractive TOC of the first ``conversations`` LoCoMo samples (all: None)."""
    samples = load_conversations(path)[:conversations]
    counter = default_counter()
    result = SummaryQuality()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        store = SqliteStore(Path(tmp) / "memtoc.db", durability="off")
        with Memory(store, counter=counter) as memory:
            for sample in samples:
                result.sessions.extend(score_conversation(memory, sample, counter))
                result.units.extend(locomo_units(memory, sample))
                if progress:
                    progress(str(sample.get("sample_id")))
            projects = [str(s.get("sample_id") or "conv") for s in samples]
            result.health = node_health(memory.store, projects, counter)
    result.coverage = summarise_scores(score_units(result.units, counter))
    return result
