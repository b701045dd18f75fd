"""The real coding-history corpora (``shared/datasets/coding/``) for ``memtoc eval coding``.

A corpus folder holds ``questions.jsonl`` and its sessions: ``transcripts/`` (Claude Code JSONL)
or ``history/`` (SpecStory Markdown) — memtoc's own importers read either (format auto-detected).
One question per line: ``id``, ``question``, ``category``, ``at`` (ISO 8601 "now" for questions
that say "yesterday"; null otherwise), ``gold`` (verbatim quotes), ``need`` (``any``/``all``).

A question without ``at`` is asked one minute after the corpus's last event (as LoCoMo's are asked
just after the conversation). ``GoldIndex`` finds, for every gold quote, the stored events whose
text holds it whole (the scoring rule's normalisation): a quote held by none is *gold not in
store* — the importer rewrote or split the text it came from, which no retrieval can make up for.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memtoc.errors import ConfigError, IngestError
from memtoc.eval.coding_score import norm
from memtoc.ingest.sources._lines import parse_timestamp
from memtoc.model import Event

CATEGORIES = ("decision", "fix", "time", "multi", "detail", "correction")
DATA_FOLDERS = ("transcripts", "history")
"""Where a corpus keeps its sessions (the first that exists), else the corpus folder itself."""
KNOWN_ZONES = {"context-evaluator": "Europe/Paris", "getspecstory": "America/New_York"}
"""The developer's time zone, as each corpus README states it (UTC+1; US Eastern): a user's store
computes days in the machine's zone, and "this afternoon" in a question is local time."""
_MINUTE = 60_000


@dataclass(frozen=True, slots=True)
class CodingQuestion:
    qid: str
    question: str
    category: str
    at_ms: int | None
    gold: tuple[str, ...]
    need: str

    def to_dict(self) -> dict[str, object]:
        return {"id": self.qid, "question": self.question, "category": self.category,
                "need": self.need, "gold": list(self.gold)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Corpus:
    name: str
    root: Path
    data: Path
    questions: tuple[CodingQuestion, ...]

    @property
    def timezone(self) -> str:
        return KNOWN_ZONES.get(self.name, "UTC")


def load_questions(path: Path) -> list[CodingQuestion]:
    """Every question of ``questions.jsonl``; a malformed line is an ``IngestError`` naming it."""
    out: list[CodingQuestion] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise IngestError(f"cannot read questions: {exc.strerror}", source=str(path)) from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            gold = tuple(str(g) for g in q["gold"])
            need = str(q.get("need", "any"))
            qid = str(q["id"])
            if not gold or need not in ("any", "all") or qid in seen:
                raise ValueError("gold must be a non-empty list, need 'any' or 'all', ids unique")
            at = q.get("at")
            out.append(
                CodingQuestion(
                    qid,
                    str(q["question"]),
                    str(q["category"]),
                    parse_timestamp(at) if at else None,
                    gold,
                    need,
                )
            )
            seen.add(qid)
        except (ValueError, KeyError, TypeError) as exc:
            raise IngestError(f"line {n}: bad question ({exc})", source=str(path)) from exc
    return out


def load_corpus(path: Path) -> Corpus:
    """The corpus at ``path`` (a folder with ``questions.jsonl``)."""
    root = path.expanduser().resolve()
    questions = root / "questions.jsonl"
    if not root.is_dir() or not questions.is_file():
        raise ConfigError(
            f"{path} is not a corpus folder (no questions.jsonl in it)", setting="PATH"
        )
    data = next((root / d for d in DATA_FOLDERS if (root / d).is_dir()), root)
    return Corpus(root.name, root, data, tuple(load_questions(questions)))


def select(questions: Sequence[CodingQuestion], wanted: str | None) -> list[CodingQuestion]:
    """The questions named by ``wanted``: comma-separated ids or categories (None: all)."""
    if not wanted:
        return list(questions)
    names = {w.strip() for w in wanted.split(",") if w.strip()}
    known = {q.qid for q in questions} | set(CATEGORIES)
    unknown = sorted(names - known)
    if unknown:
        raise ConfigError(f"unknown question ids or categories: {', '.join(unknown)}",
                          setting="--questions")  # fmt: skip
    return [q for q in questions if q.qid in names or q.category in names]


def reference_ms(question: CodingQuestion, last_event_ms: int) -> int:
    """When the question is asked: its ``at``, else one minute after the last event."""
    return question.at_ms if question.at_ms is not None else last_event_ms + _MINUTE


class GoldIndex:
    """Which stored events hold each gold quote (whole, after the scoring rule's normalisation)."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.ids: list[str] = []
        texts: list[str] = []
        self.starts: list[int] = []
        pos = 0
        for e in events:
            t = norm(e.text)
            self.ids.append(e.event_id)
            self.starts.append(pos)
            texts.append(t)
            pos += len(t) + 1
        self._all = "\x00".join(texts)  # \x00 never occurs in a normalised quote
        self._memo: dict[str, tuple[str, ...]] = {}

    def events_with(self, quote: str) -> tuple[str, ...]:
        """Ids of the events whose text holds ``quote`` (store order)."""
        q = norm(quote)
        if q in self._memo:
            return self._memo[q]
        found: list[str] = []
        start = 0
        while q:
            hit = self._all.find(q, start)
            if hit < 0:
                break
            n = bisect_right(self.starts, hit) - 1
            found.append(self.ids[n])
            start = self.starts[n + 1] if n + 1 < len(self.starts) else len(self._all)
        self._memo[q] = tuple(found)
        return self._memo[q]
