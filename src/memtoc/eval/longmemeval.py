"""LongMemEval (Wu et al., ICLR 2025) for ``memtoc eval longmemeval``: the official JSON format.

The file is a list of items: ``question_id``, ``question_type``, ``question``, ``answer``,
``question_date``, ``haystack_dates``, ``haystack_session_ids``, ``haystack_sessions`` (each a list
of turns ``{role, content, has_answer?}``) and ``answer_session_ids``. Each item is its own project
in its own fresh store:

- a session starts at its ``haystack_dates`` entry (``"2023/05/20 (Sat) 02:21"``, read as UTC) and
  its turns follow one minute apart; empty turns are skipped; each turn's metadata keeps the
  haystack session id (``lme_session``), its index (``turn``) and ``has_answer``;
- gold sessions are ``answer_session_ids``; gold turns are the turns marked ``has_answer``;
- the question is asked at ``question_date``;
- abstention items (``question_id`` ending in ``_abs``) and items without answer sessions are not
  scored, as in LongMemEval's own retrieval evaluation; they are listed in the report's notes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from memtoc.errors import IngestError
from memtoc.eval.harness import (
    EvalProject,
    EvalQuery,
    ProgressFn,
    RunConfig,
    build_memory,
    ingest_and_process,
    run_projects,
)
from memtoc.eval.modes import Mode, ModeContext, mode_notes
from memtoc.eval.report import EvalReport
from memtoc.eval.scoring import score_longmemeval
from memtoc.model import JsonValue

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})")
_MINUTE = 60_000


def parse_lme_date(value: str, *, where: str) -> int:
    """``"2023/05/20 (Sat) 02:21"`` as epoch ms (UTC)."""
    m = _DATE.fullmatch(value.strip())
    if m is None:
        raise IngestError(f"unreadable date {value!r}", source=where)
    y, mo, d, h, mi = (int(g) for g in m.groups())
    try:
        return int(datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp() * 1000)
    except ValueError as exc:
        raise IngestError(f"impossible date {value!r} ({exc})", source=where) from exc


@dataclass(frozen=True, slots=True)
class LmeItem:
    """One LongMemEval question with its haystack, as read from the file."""

    question_id: str
    question_type: str
    question: str
    question_ms: int
    sessions: tuple[tuple[str, int, tuple[dict[str, Any], ...]], ...]
    """``(haystack session id, start ms, turns)`` in file order."""
    answer_session_ids: tuple[str, ...]

    @property
    def scored(self) -> bool:
        """False for abstention items and items without answer sessions (not scored)."""
        return not self.question_id.endswith("_abs") and bool(self.answer_session_ids)

    def session_key(self, index: int) -> str:
        """The event ``session_id`` of the ``index``-th haystack session (unique per item)."""
        return f"{self.question_id}:{index}:{self.sessions[index][0]}"

    def records(self) -> Iterator[dict[str, JsonValue]]:
        for i, (sid, start, turns) in enumerate(self.sessions):
            for j, turn in enumerate(turns):
                text = str(turn.get("content") or "")
                if not text.strip():
                    continue
                role = str(turn.get("role", "user"))
                yield {
                    "session_id": self.session_key(i),
                    "timestamp": start + j * _MINUTE,
                    "role": role if role in ("user", "assistant") else "user",
                    "text": text,
                    "metadata": {
                        "lme_session": sid,
                        "turn": j,
                        "has_answer": bool(turn.get("has_answer", False)),
                    },
                }


def _item(raw: dict[str, Any], where: str) -> LmeItem:
    qid = str(raw["question_id"])
    here = f"{where} ({qid})"
    ids = [str(s) for s in raw["haystack_session_ids"]]
    dates = [str(d) for d in raw["haystack_dates"]]
    sessions = raw["haystack_sessions"]
    if not (len(ids) == len(dates) == len(sessions)):
        raise IngestError(
            f"{len(ids)} session ids, {len(dates)} dates, {len(sessions)} sessions", source=here
        )
    return LmeItem(
        question_id=qid,
        question_type=str(raw["question_type"]),
        question=str(raw["question"]),
        question_ms=parse_lme_date(str(raw["question_date"]), where=here),
        sessions=tuple(
            (sid, parse_lme_date(date, where=here), tuple(turns))
            for sid, date, turns in zip(ids, dates, sessions, strict=True)
        ),
        answer_session_ids=tuple(str(s) for s in raw.get("answer_session_ids") or ()),
    )


def load_longmemeval(path: str | Path) -> list[LmeItem]:
    """Every item of a LongMemEval JSON file; malformed items are an ``IngestError``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IngestError(f"cannot read LongMemEval file: {exc}", source=str(p)) from exc
    if not isinstance(data, list):
        raise IngestError("expected a JSON list of items", source=str(p))
    try:
        return [_item(raw, str(p)) for raw in data]
    except (KeyError, TypeError) as exc:
        raise IngestError(f"malformed item ({type(exc).__name__}: {exc})", source=str(p)) from exc


def lme_project(item: LmeItem, workdir: Path, *, ctx: ModeContext) -> EvalProject:
    """Ingest and process one item's haystack into a fresh store; its question resolved."""
    safe = re.sub(r"[^\w.-]", "_", item.question_id)
    memory = build_memory(workdir / f"lme-{safe}.db", item.question_ms, ctx)
    ingest_and_process(memory, item.records(), item.question_id)
    events = memory.events(project=item.question_id)
    answer = set(item.answer_session_ids)
    gold_sessions = tuple(
        item.session_key(i) for i, (sid, _, _) in enumerate(item.sessions) if sid in answer
    )
    gold_turns = tuple(e.event_id for e in events if e.metadata.get("has_answer"))
    query = EvalQuery(
        item.question_id,
        item.question,
        item.question_type,
        gold_turns,
        gold_sessions,
        item.question_ms,
    )
    return EvalProject(
        item.question_id,
        memory,
        [query],
        {e.event_id: e.text for e in events},
        {e.event_id: e.session_id for e in events},
    )


def run_longmemeval(
    path: str | Path,
    modes: Sequence[Mode],
    ctx: ModeContext,
    cfg: RunConfig,
    *,
    skipped_modes: dict[str, str] | None = None,
    limit: int | None = None,
    workdir: Path | None = None,
    command: str = "",
    progress: ProgressFn | None = None,
) -> EvalReport:
    """Evaluate ``modes`` on the scored items of a LongMemEval file (the first ``limit`` items)."""
    started = time.perf_counter()
    items = load_longmemeval(path)[:limit]
    scored = [i for i in items if i.scored]
    notes = [
        f"{i.question_id}: not scored ({'abstention' if i.question_id.endswith('_abs') else 'no answer sessions'})"
        for i in items
        if not i.scored
    ]
    builders = [partial(lme_project, item, ctx=ctx) for item in scored]
    results, stages = run_projects(
        builders, modes, ctx, score_longmemeval, cfg, workdir=workdir, progress=progress
    )
    return EvalReport(
        benchmark="longmemeval",
        dataset=str(path),
        command=command,
        embedder=ctx.embedder_label,
        counter=ctx.counter.name,
        config=cfg,
        categories=list(QUESTION_TYPES),
        results=results,
        skipped_modes=dict(skipped_modes or {}),
        notes=[*mode_notes(modes), *notes],
        wall_seconds=time.perf_counter() - started,
        stage_seconds=stages,
        projects=len(scored),
    )
