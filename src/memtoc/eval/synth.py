"""A deterministic synthetic history of a coding agent, for the demo, the benchmarks and tests.

``generate(SynthConfig(events=100_000))`` streams months of realistic sessions of a coding agent
working on a few projects: each session is one task thread (an issue of a recurring topic such as
JWT refresh, flaky CI or data backfills) made of user asks, decisions, corrections and
confirmations, assistant explanations, tool calls (``Bash: pytest tests/test_auth.py -x``) and their
results (test output, stack traces, diffs, sometimes a few KB). The same seed always gives the
same events, ids included (``derived_ulid(ts_ms, f"synth:{seed}:{n}")``).

Planted facts ("Project KESTREL-42 uses port 7311 for its admin endpoint") are hidden in ordinary
messages spread over the span, each with a question that needs it; ``SynthHistory.facts`` lists them
with the id of the event that holds them, for retrieval benchmarks.

Everything streams: a 1M-event history is never held in memory (only the session plan is).
See ``synth_schedule`` (when), ``synth_text`` and ``synth_tools`` (what is said), ``synth_facts``.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property

from memtoc.errors import ConfigError
from memtoc.eval import synth_text as st
from memtoc.eval.synth_facts import ASSISTANT_FRAMES, USER_FRAMES, FactText, make_facts
from memtoc.eval.synth_schedule import (
    DAY_MS,
    PlannedSession,
    default_months,
    plan_sessions,
    sub_seed,
)
from memtoc.eval.synth_tools import Item
from memtoc.eval.synth_writers import write_claude_code, write_jsonl
from memtoc.ids import derived_ulid
from memtoc.model import Event

__all__ = [
    "PlantedFact",
    "SynthConfig",
    "SynthHistory",
    "generate",
    "generate_with_facts",
    "write_claude_code",
    "write_jsonl",
]

_RAW_GAP_S: dict[str, tuple[float, float]] = {
    "session_start": (0.0, 0.0),
    "user_message": (15.0, 120.0),
    "assistant_message": (3.0, 25.0),
    "tool_call": (1.0, 6.0),
    "tool_result": (0.3, 9.0),
    "system": (0.2, 2.0),
    "session_end": (1.0, 5.0),
}
"""Relative thinking/typing/running time before each kind of event; scaled to the session length."""


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What history to generate. ``months=None`` grows the span with ``events``."""

    seed: int = 7
    events: int = 10_000
    projects: tuple[str, ...] = ("webapp", "infra", "mlpipe")
    start: datetime = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)  # a Monday
    """The first session starts at or soon after this instant; its time of day is the workday start."""
    months: float | None = None
    agent: str = "claude-code"
    planted_facts: int = 50

    def __post_init__(self) -> None:
        if self.events < 1:
            raise ConfigError(f"must be at least 1, got {self.events}", setting="events")
        if not self.projects or len(set(self.projects)) != len(self.projects):
            raise ConfigError(
                f"need distinct project names, got {self.projects!r}", setting="projects"
            )
        if self.start.tzinfo is None:
            raise ConfigError("must be time-zone aware", setting="start")
        if self.months is not None and self.months <= 0:
            raise ConfigError(f"must be positive, got {self.months}", setting="months")
        if self.planted_facts < 0:
            raise ConfigError(f"must be >= 0, got {self.planted_facts}", setting="planted_facts")

    @property
    def span_months(self) -> float:
        return self.months if self.months is not None else default_months(self.events)


@dataclass(frozen=True, slots=True)
class PlantedFact:
    """A unique fact hidden in one event, and a question that needs it."""

    fact_id: str
    event_id: str
    project: str
    ts_ms: int
    text: str
    """The fact sentence, contained verbatim in the event's text."""
    query: str
    """A natural question sharing one to three key terms with ``text``."""
    session_id: str = ""


class SynthHistory:
    """A generated history: ``events()`` streams it, ``facts`` lists the planted facts.

    Iterating twice gives the same events; the plan (one record per session) is the only state.
    """

    def __init__(self, config: SynthConfig) -> None:
        self.config = config
        start_ms = int(config.start.timestamp() * 1000)
        span_ms = int(config.span_months * 30.44 * DAY_MS)
        self.plan: list[PlannedSession] = plan_sessions(
            seed=config.seed,
            events=config.events,
            projects=config.projects,
            start_ms=start_ms,
            span_ms=span_ms,
        )
        self._fact_slots = self._place_facts()

    # -- facts ---------------------------------------------------------------------------------

    def _place_facts(self) -> dict[int, list[tuple[int, FactText]]]:
        """Which session holds which facts: spread evenly over the sessions in time order.

        A session holds at most as many facts as it has messages; extra facts go to the nearest
        session with room.
        """
        count = self.config.planted_facts
        if count == 0:
            return {}
        texts = make_facts(count, random.Random(sub_seed(self.config.seed, "facts")))
        slots: dict[int, list[tuple[int, FactText]]] = {}
        room: dict[int, int] = {}
        n_sessions = len(self.plan)
        for i, fact in enumerate(texts):
            target = min(n_sessions - 1, int((i + 0.5) * n_sessions / count))
            for d in range(2 * n_sessions):
                s = target + (d + 1) // 2 * (1 if d % 2 else -1)
                if not 0 <= s < n_sessions:
                    continue
                if s not in room:
                    room[s] = len(_fact_candidates(self._base_items(self.plan[s])[0]))
                if room[s] > len(slots.get(s, ())):
                    slots.setdefault(s, []).append((i, fact))
                    break
            else:
                raise ConfigError(
                    f"{self.config.events} events have too few messages for {count} facts",
                    setting="planted_facts",
                )
        return slots

    @cached_property
    def facts(self) -> list[PlantedFact]:
        """The planted facts, in time order, with the ids of the events holding them."""
        out: list[PlantedFact] = []
        for s, slot in sorted(self._fact_slots.items()):
            session = self.plan[s]
            events = list(self._session_events(session))
            for fact_i, pos in self._fact_positions(session, self._base_items(session)[0], slot):
                ev = events[pos]
                fact = slot[fact_i][1]
                out.append(
                    PlantedFact(
                        fact_id=f"fact-{slot[fact_i][0]:04d}",
                        event_id=ev.event_id,
                        project=ev.project,
                        ts_ms=ev.ts_ms,
                        text=fact.text,
                        query=fact.query,
                        session_id=ev.session_id,
                    )
                )
        return sorted(out, key=lambda f: (f.ts_ms, f.fact_id))

    def _fact_positions(
        self, session: PlannedSession, items: list[Item], slot: list[tuple[int, FactText]]
    ) -> list[tuple[int, int]]:
        """(index in slot, event position) for each fact of the session: distinct messages."""
        rng = random.Random(sub_seed(self.config.seed, "fact-pos", session.index))
        candidates = _fact_candidates(items)
        users = [i for i in candidates if items[i][0] == "user_message"]
        others = [i for i in candidates if items[i][0] != "user_message"]
        rng.shuffle(users)
        rng.shuffle(others)
        chosen = []
        for _ in slot:  # about half the facts come from the user, when the session allows
            pool = users if users and (rng.random() < 0.5 or not others) else others
            chosen.append(pool.pop())
        return list(enumerate(sorted(chosen)))

    # -- events --------------------------------------------------------------------------------

    def _base_items(self, session: PlannedSession) -> tuple[list[Item], random.Random]:
        """The session's events before facts, times and ids: exactly ``session.length``."""
        rng = random.Random(session.seed)
        topic = session.topic
        ctx = st.make_context(
            session.project, topic, topic.issues[session.issue_index], session.phase, rng
        )
        n = session.length
        items: list[Item] = [st.session_start(ctx)]
        if n >= 3:
            items.append(st.opening(ctx, rng))
        if n >= 5:
            body = st.body(ctx, rng)
            items.extend(next(body) for _ in range(n - 4))
            items.append(st.summary(ctx, rng))
        elif n == 4:
            items.append(st.summary(ctx, rng))
        if n >= 2:
            items.append(st.session_end(ctx, n))
        return items, rng

    def _items(self, session: PlannedSession) -> tuple[list[Item], random.Random]:
        """The session's events with its planted facts, before times and ids."""
        items, rng = self._base_items(session)
        slot = self._fact_slots.get(session.index)
        if slot:
            for fact_i, pos in self._fact_positions(session, items, slot):
                kind, role, _, meta = items[pos]
                frames = USER_FRAMES if kind == "user_message" else ASSISTANT_FRAMES
                text = rng.choice(frames).format(
                    fact=slot[fact_i][1].text, topic=session.topic.name
                )
                items[pos] = (kind, role, text, meta)
        return items, rng

    def _session_events(self, session: PlannedSession) -> Iterator[Event]:
        items, rng = self._items(session)
        uniform = rng.uniform
        raws = [uniform(*_RAW_GAP_S[it[0]]) for it in items]
        n = len(items)
        total = sum(raws) or 1.0
        scale = max(0, session.duration_ms - n * 200) / total
        ts = session.start_ms
        cfg = self.config
        key = f"synth:{cfg.seed}:"
        sid, project, agent = session.session_id, session.project, cfg.agent
        number = session.first_n
        for j, (kind, role, text, meta) in enumerate(items):
            if j:
                ts += int(raws[j] * scale) + 200
            yield Event(
                derived_ulid(ts, key + str(number + j)),
                sid,
                project,
                agent,
                ts,
                kind,
                role,
                text,
                meta,
            )

    def _project_events(self, project: str) -> Iterator[Event]:
        for session in self.plan:
            if session.project == project:
                yield from self._session_events(session)

    def events(self) -> Iterator[Event]:
        """All events, in time order across projects (each project's sessions never overlap)."""
        streams = [self._project_events(p) for p in self.config.projects]
        if len(streams) == 1:
            return streams[0]
        return heapq.merge(*streams, key=_ts)

    def __iter__(self) -> Iterator[Event]:
        return self.events()


def _fact_candidates(items: list[Item]) -> list[int]:
    """Positions of the messages that can carry a planted fact (not the opening ask)."""
    return [i for i, it in enumerate(items) if i > 1 and it[0] in _MESSAGES]


_MESSAGES = frozenset(("user_message", "assistant_message"))


def _ts(event: Event) -> int:
    return event.ts_ms


def generate(config: SynthConfig | None = None) -> Iterator[Event]:
    """Stream the synthetic history described by ``config`` (default: 10k events, seed 7)."""
    return SynthHistory(config or SynthConfig()).events()


def generate_with_facts(
    config: SynthConfig | None = None,
) -> tuple[Iterator[Event], list[PlantedFact]]:
    """The event stream and the planted facts it holds."""
    history = SynthHistory(config or SynthConfig())
    return history.events(), history.facts
