"""``memtoc eval bookmarks``: precision, recall and F1 of a bookmark detector on labelled moments.

The labelled set (``tests/fixtures/bookmarks/moments.jsonl``, its README says how it was cut and
labelled) holds short windows of real coding sessions. Each window has a *focus* turn and a label:
``none`` or a bookmark type, with the turns that make the moment (``moment``).

Each window is turned into events of one session (a minute apart) and given to the detector as is.
A window is **predicted** a moment when some bookmark the detector returns cites one of its
moment turns (a labelled moment) or its focus turn (a ``none`` window); bookmarks that cite only
context turns are not the window's business. From the counts: precision, recall and F1 per corpus
and overall, recall per label, and how often a found moment got the labelled type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memtoc.errors import ConfigError
from memtoc.model import Event, JsonValue
from memtoc.retrieval.bookmarks import BookmarkDetector

LABELS = ("none", "conclusion", "resolution", "validated", "foundational")
_ROLES = {"user": "user_message", "assistant": "assistant_message"}
_BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: any fixed instant will do


@dataclass(frozen=True, slots=True)
class LabelledWindow:
    """One labelled window of the set."""

    id: str
    corpus: str
    source: str
    label: str
    focus: int
    moment: tuple[int, ...]
    turns: tuple[tuple[str, str], ...]
    """``(role, text)`` in order."""

    def events(self) -> list[Event]:
        return [
            Event(
                event_id=f"{self.id}-{i}",
                session_id=self.id,
                project="eval-bookmarks",
                agent="eval",
                ts_ms=_BASE_MS + i * 60_000,
                event_type=_ROLES[role],
                role=role,
                text=text,
            )
            for i, (role, text) in enumerate(self.turns)
        ]


def load_windows(path: Path) -> list[LabelledWindow]:
    """Read the labelled set; a malformed line is an error naming the file and line."""
    out: list[LabelledWindow] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the labelled set {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            turns = tuple((str(t["role"]), str(t["text"])) for t in d["turns"])
            window = LabelledWindow(
                id=str(d["id"]),
                corpus=str(d["corpus"]),
                source=str(d.get("source", "")),
                label=str(d["label"]),
                focus=int(d["focus"]),
                moment=tuple(int(i) for i in d.get("moment", ())),
                turns=turns,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: not a labelled window ({exc})") from exc
        problems = _check(window)
        if problems:
            raise ConfigError(f"{path}:{n}: {problems}")
        out.append(window)
    if not out:
        raise ConfigError(f"{path}: no labelled windows")
    return out


def _check(w: LabelledWindow) -> str | None:
    if w.label not in LABELS:
        return f"unknown label {w.label!r} (one of {', '.join(LABELS)})"
    if not 0 <= w.focus < len(w.turns):
        return f"focus {w.focus} outside the {len(w.turns)} turns"
    if any(role not in _ROLES for role, _ in w.turns):
        return "a turn's role is neither user nor assistant"
    if (w.label == "none") != (not w.moment):
        return "a moment needs its turns, a 'none' window has none"
    if any(not 0 <= i < len(w.turns) for i in w.moment):
        return "a moment turn index is outside the window"
    return None


@dataclass(slots=True)
class Counts:
    """Confusion counts of one slice (a corpus, or all)."""

    windows: int = 0
    moments: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    typed: int = 0
    """Found moments whose bookmark had the labelled type."""
    by_label: dict[str, list[int]] = field(default_factory=dict)
    """Label → [found, labelled]."""

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "windows": self.windows,
            "moments": self.moments,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "type_agreement": round(self.typed / self.tp, 4) if self.tp else None,
            "recall_by_label": {
                k: {"found": v[0], "labelled": v[1]} for k, v in sorted(self.by_label.items())
            },
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """The detector's verdict on one window."""

    window: LabelledWindow
    predicted: bool
    types: tuple[str, ...]
    """Types of the bookmarks that counted."""
    contents: tuple[str, ...]

    @property
    def error(self) -> str | None:
        moment = self.window.label != "none"
        if moment and not self.predicted:
            return "missed"
        if self.predicted and not moment:
            return "false"
        return None


@dataclass(slots=True)
class BookmarkEvalReport:
    """Counts per corpus and overall, and every window's outcome."""

    detector: str
    path: str
    corpora: dict[str, Counts]
    overall: Counts
    outcomes: list[Outcome]
    degraded: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "detector": self.detector,
            "labelled_set": self.path,
            "overall": self.overall.to_dict(),
            "corpora": {k: v.to_dict() for k, v in sorted(self.corpora.items())},
            "degraded": list(self.degraded),
        }


def judge(window: LabelledWindow, detector: BookmarkDetector) -> tuple[Outcome, str | None]:
    """Run ``detector`` on one window; return the outcome and why it degraded (if it did)."""
    events = window.events()
    detection = detector.detect(events)
    wanted = {events[i].event_id for i in (window.moment or (window.focus,))}
    hits = [b for b in detection.bookmarks if wanted & set(b.event_ids)]
    outcome = Outcome(
        window,
        bool(hits),
        tuple(b.type for b in hits),
        tuple(b.content for b in hits),
    )
    return outcome, detection.degraded


def evaluate(
    windows: Iterable[LabelledWindow],
    detector: BookmarkDetector,
    *,
    path: str = "",
    corpora: Sequence[str] | None = None,
) -> BookmarkEvalReport:
    """Score ``detector`` on ``windows`` (only those of ``corpora`` when given)."""
    per: dict[str, Counts] = {}
    overall = Counts()
    outcomes: list[Outcome] = []
    degraded: list[str] = []
    for window in windows:
        if corpora and window.corpus not in corpora:
            continue
        outcome, why = judge(window, detector)
        if why:
            degraded.append(f"{window.id}: {why}")
        outcomes.append(outcome)
        for counts in (per.setdefault(window.corpus, Counts()), overall):
            _count(counts, outcome)
    return BookmarkEvalReport(detector.name, path, per, overall, outcomes, degraded)


def _count(c: Counts, o: Outcome) -> None:
    c.windows += 1
    label = o.window.label
    if label == "none":
        c.fp += int(o.predicted)
        return
    c.moments += 1
    slot = c.by_label.setdefault(label, [0, 0])
    slot[1] += 1
    if o.predicted:
        c.tp += 1
        slot[0] += 1
        c.typed += int(label in o.types)
    else:
        c.fn += 1
