"""LoCoMo (``locomo10.json``) for ``memtoc eval locomo``: loading, ingesting, questions.

Loading follows ``shared/datasets/locomo/README.md``:

- each turn becomes one event: text ``"<speaker>: <text>"`` plus ``" [image: <blip_caption>]"``
  when the turn shared a photo; metadata ``dia_id``, ``speaker``, ``session`` (its number);
  ``speaker_a`` speaks as role ``user`` and ``speaker_b`` as ``assistant``; the session id is
  ``"<sample_id>:session_<n>"``;
- a session starts at its ``session_<n>_date_time`` (``"1:56 pm on 8 May, 2023"``, read as UTC)
  and its turns follow one minute apart;
- ``session_<n>_date_time`` keys without a session (16 in ``conv-26``) are ignored and counted;
- evidence ids are extracted with ``D(\\d+):(\\d+)`` (which splits ``"D8:6; D9:17"`` and
  space-separated lists, drops the unparseable ``"D"`` and ``"D:11:26"``, and reads ``D30:05`` as
  ``D30:5``); ids naming no turn are dropped; a question left with no evidence is skipped;
- categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (the repo's
  code mapping, not the paper's prose order);
- every question is asked "just after" the conversation: one minute after its last turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memtoc.errors import IngestError
from memtoc.model import JsonValue

CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_EVIDENCE = re.compile(r"D(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_KEY = re.compile(r"session_(\d+)_date_time")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_MINUTE = 60_000


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    ts_ms: int

    @property
    def event_text(self) -> str:
        """The text the turn is stored under (what retrieval sees and budgets count)."""
        text = f"{self.speaker}: {self.text}"
        return f"{text} [image: {self.caption}]" if self.caption else text


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    date_time: str
    start_ms: int
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    question: str
    category: int
    evidence: tuple[str, ...]
    """Resolved dia ids of the gold turns (distinct, in the order given)."""
    dropped: tuple[str, ...] = ()
    """Evidence ids that name no turn of the conversation."""

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, f"category-{self.category}")


@dataclass(slots=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    questions: list[Question]
    skipped_questions: list[tuple[str, str]] = field(default_factory=list)
    """``(qid, reason)`` for questions not asked (no evidence, or none that names a turn)."""
    dangling_dates: list[str] = field(default_factory=list)

    @property
    def turns(self) -> Iterator[Turn]:
        for session in self.sessions:
            yield from session.turns

    @property
    def ref_ms(self) -> int:
        """When the questions are asked: one minute after the last turn."""
        return max(t.ts_ms for t in self.turns) + _MINUTE

    def session_id(self, number: int) -> str:
        return f"{self.sample_id}:session_{number}"

    def records(self) -> Iterator[dict[str, JsonValue]]:
        """The conversation as generic event records (``Memory.ingest_records``)."""
        for session in self.sessions:
            for turn in session.turns:
                yield {
                    "session_id": self.session_id(session.number),
                    "timestamp": turn.ts_ms,
                    "role": "user" if turn.speaker == self.speaker_a else "assistant",
                    "text": turn.event_text,
                    "metadata": {
                        "dia_id": turn.dia_id,
                        "speaker": turn.speaker,
                        "session": session.number,
                    },
                }


def parse_session_time(value: str, *, where: str) -> int:
    """``"1:56 pm on 8 May, 2023"`` as epoch ms (UTC)."""
    try:
        dt = datetime.strptime(value.strip(), _DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise IngestError(f"unreadable session date {value!r} ({exc})", source=where) from exc
    return int(dt.timestamp() * 1000)


def parse_evidence(evidence: Any) -> list[str]:
    """Dia ids from a LoCoMo evidence list, normalised (``D30:05`` → ``D30:5``), distinct."""
    items = evidence if isinstance(evidence, list) else [evidence]
    found: list[str] = []
    for item in items:
        for a, b in _EVIDENCE.findall(str(item)):
            dia = f"D{int(a)}:{int(b)}"
            if dia not in found:
                found.append(dia)
    return found


def _conversation(sample: dict[str, Any], where: str) -> Conversation:
    sample_id = str(sample["sample_id"])
    conv = sample["conversation"]
    here = f"{where} ({sample_id})"
    speaker_a, speaker_b = str(conv["speaker_a"]), str(conv["speaker_b"])
    numbers = sorted(
        int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key)) is not None
    )
    sessions: list[Session] = []
    for n in numbers:
        date_key = f"session_{n}_date_time"
        if date_key not in conv:
            raise IngestError(f"session_{n} has no {date_key}", source=here)
        start = parse_session_time(str(conv[date_key]), where=here)
        turns = tuple(
            Turn(
                dia_id=str(t["dia_id"]),
                speaker=str(t["speaker"]),
                text=str(t["text"]),
                caption=str(t["blip_caption"]) if t.get("blip_caption") else None,
                session=n,
                ts_ms=start + i * _MINUTE,
            )
            for i, t in enumerate(conv[f"session_{n}"])
        )
        sessions.append(Session(n, str(conv[date_key]), start, turns))
    dangling = sorted(
        (k for k in conv if (m := _DATE_KEY.fullmatch(k)) and int(m.group(1)) not in numbers),
        key=lambda k: int(k.split("_")[1]),
    )
    out = Conversation(sample_id, speaker_a, speaker_b, sessions, [], dangling_dates=dangling)
    known = {t.dia_id for t in out.turns}
    for i, qa in enumerate(sample.get("qa", []), start=1):
        qid = f"{sample_id}:q{i}"
        ids = parse_evidence(qa.get("evidence", []))
        kept = tuple(d for d in ids if d in known)
        dropped = tuple(d for d in ids if d not in known)
        if not kept:
            reason = "no evidence" if not ids else f"evidence names no turn ({', '.join(dropped)})"
            out.skipped_questions.append((qid, reason))
            continue
        out.questions.append(Question(qid, str(qa["question"]), int(qa["category"]), kept, dropped))
    return out


def load_locomo(path: str | Path) -> list[Conversation]:
    """Every conversation of a ``locomo10.json`` file (see the module docstring for the rules)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IngestError(f"cannot read LoCoMo file: {exc}", source=str(p)) from exc
    if not isinstance(data, list):
        raise IngestError("expected a JSON list of samples", source=str(p))
    out: list[Conversation] = []
    for n, sample in enumerate(data):
        try:
            out.append(_conversation(sample, str(p)))
        except (KeyError, TypeError, ValueError) as exc:
            raise IngestError(f"sample {n}: malformed ({type(exc).__name__}: {exc})",
                              source=str(p)) from exc  # fmt: skip
    return out
