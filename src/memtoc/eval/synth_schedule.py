"""When the synthetic sessions happen, how long they are, and what each one is about.

The plan is computed up front and is small (one record per session, about 90 events each):

1. Session lengths are drawn (20 to 200 events, skewed towards short sessions) until they add up to
   exactly the requested number of events.
2. Sessions are dealt to projects by weight (the first project is the busiest).
3. Each project's sessions are spread over the days of the span: workdays mostly, weekends a
   little, busy and quiet days. Within a day they start around the configured start time of day,
   one after another with gaps of at least 31 minutes (so a 30-minute segment gap always
   separates two sessions), spilling into the evening when a day is crowded; a few lone sessions
   happen in the evening. A project never runs two sessions at once.
4. Each project works on topics in streaks (a topic tends to continue for a few sessions), and which
   issue of a topic is current changes every three weeks, so topics recur with different specifics.
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass

from memtoc.eval.synth_vocab import TOPIC_GROUPS, Topic

DAY_MS = 86_400_000
MINUTE_MS = 60_000
MIN_GAP_MS = 31 * MINUTE_MS
"""Gap between two sessions of one project: more than the 30-minute segment gap."""
MEAN_EVENT_GAP_MS = 12_000
"""Mean time between two events of a session."""
ISSUE_PERIOD_WEEKS = 3
WORKDAY_MS = 9 * 60 * MINUTE_MS


@dataclass(frozen=True, slots=True)
class PlannedSession:
    """One session of the plan."""

    index: int
    """Position among all sessions, by start time."""
    session_id: str
    project: str
    start_ms: int
    duration_ms: int
    """The events fit in ``[start_ms, start_ms + duration_ms]``."""
    length: int
    first_n: int
    """Number of the session's first event among all events (``synth:{seed}:{n}`` keys)."""
    topic: Topic
    issue_index: int
    phase: int
    seed: int


def sub_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed derived from the config seed and a path of labels (stable across runs)."""
    key = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(uuid.uuid5(uuid.NAMESPACE_OID, key).bytes[:8], "big")


def session_uuid(seed: int, index: int) -> str:
    """A deterministic UUID for a session (Claude Code names transcripts by session UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memtoc-synth:{seed}:session:{index}"))


def default_months(events: int) -> float:
    """History span for a number of events: 6 months at 10k, ~10 at 100k, ~18 at 1M."""
    return max(0.25, min(60.0, 6.0 * math.pow(max(events, 1) / 10_000, 0.24)))


def topics_for(project: str, position: int) -> tuple[Topic, ...]:
    """The topic bank of a project: by name, else by its position among the projects."""
    if project in TOPIC_GROUPS:
        return TOPIC_GROUPS[project]
    groups = list(TOPIC_GROUPS.values())
    return groups[position % len(groups)]


def _lengths(events: int, rng: random.Random) -> list[int]:
    out: list[int] = []
    remaining = events
    while remaining > 0:
        if remaining <= 200:
            n = remaining
        else:
            n = min(20 + int(180 * rng.random() ** 1.6), remaining - 20)
        out.append(n)
        remaining -= n
    return out


def _day_counts(sessions: int, days: int, day0_weekday: int, rng: random.Random) -> list[int]:
    """How many sessions each day gets: systematic sampling over jittered day weights."""
    weights = []
    for d in range(days):
        wd = (day0_weekday + d) % 7
        base = 1.0 if wd < 5 else (0.12 if wd == 5 else 0.08)
        weights.append(base * rng.uniform(0.4, 1.6))
    scale = sessions / sum(weights)
    counts, acc, offset = [], 0.0, rng.random()
    for w in weights:
        prev = math.floor(acc + offset)
        acc += w * scale
        counts.append(math.floor(acc + offset) - prev)
    # The total is exact up to floating-point error; settle any remainder on the busiest day.
    diff = sessions - sum(counts)
    if diff:
        busiest = max(range(days), key=counts.__getitem__)
        counts[busiest] = max(0, counts[busiest] + diff)
    return counts


def _project_times(
    durations: list[int], start_ms: int, span_ms: int, rng: random.Random
) -> list[int]:
    """Start instants for one project's sessions, in order, never overlapping."""
    day0 = start_ms - start_ms % DAY_MS
    tod = start_ms - day0
    days = max(1, math.ceil(span_ms / DAY_MS))
    weekday0 = (day0 // DAY_MS + 3) % 7  # 1970-01-01 was a Thursday
    counts = _day_counts(len(durations), days, weekday0, rng)
    starts: list[int] = []
    cursor = start_ms
    k = 0
    for d, m in enumerate(counts):
        if m == 0:
            continue
        weekend = (weekday0 + d) % 7 >= 5
        begin = day0 + d * DAY_MS + tod + (90 * MINUTE_MS if weekend else 0)
        window = WORKDAY_MS
        if m == 1 and rng.random() < 0.1:  # an evening session
            begin += WORKDAY_MS + 90 * MINUTE_MS
            window = 150 * MINUTE_MS
        day_durations = durations[k : k + m]
        # Share the day's free time (if any) at random between the start and the gaps, so
        # sessions spread over the working day; a crowded day runs late instead.
        slack = max(0, window - sum(day_durations) - m * MIN_GAP_MS)
        shares = [rng.expovariate(1.0) for _ in range(m + 1)]
        unit = slack / sum(shares)
        t = max(cursor, begin + int(shares[0] * unit))
        for dur, share in zip(day_durations, shares[1:], strict=True):
            starts.append(t)
            t += dur + MIN_GAP_MS + int(share * unit) + int(rng.uniform(0, 5) * MINUTE_MS)
        cursor = t
        k += m
    return starts


def plan_sessions(
    *, seed: int, events: int, projects: tuple[str, ...], start_ms: int, span_ms: int
) -> list[PlannedSession]:
    """The whole schedule, sorted by start time."""
    rng = random.Random(sub_seed(seed, "plan"))
    lengths = _lengths(events, rng)
    weights = [1.0 / (1 + 0.35 * i) for i in range(len(projects))]
    owners = rng.choices(range(len(projects)), weights=weights, k=len(lengths))
    drafts: list[tuple[int, int, int, int, Topic, int, int]] = []
    for p, project in enumerate(projects):
        prng = random.Random(sub_seed(seed, "project", p))
        mine = [lengths[i] for i in range(len(lengths)) if owners[i] == p]
        durations = [int(n * MEAN_EVENT_GAP_MS * prng.uniform(0.7, 1.3)) + n * 200 for n in mine]
        starts = _project_times(durations, start_ms, span_ms, prng)
        topics = topics_for(project, p)
        offsets = [prng.randrange(3) for _ in topics]
        topic_i, streak_key, streak_n = prng.randrange(len(topics)), (-1, -1), 0
        for n, dur, st in zip(mine, durations, starts, strict=True):
            if prng.random() > 0.6:
                topic_i = prng.randrange(len(topics))
            topic = topics[topic_i]
            period = (st - start_ms) // (ISSUE_PERIOD_WEEKS * 7 * DAY_MS)
            issue_i = (period + offsets[topic_i]) % len(topic.issues)
            key = (topic_i, issue_i)
            streak_n = streak_n + 1 if key == streak_key else 0
            streak_key = key
            drafts.append((st, p, n, dur, topic, issue_i, min(streak_n, 2)))
    drafts.sort(key=lambda d: (d[0], d[1]))
    plan: list[PlannedSession] = []
    first_n = 0
    for index, (st, p, n, dur, topic, issue_i, phase) in enumerate(drafts):
        plan.append(
            PlannedSession(
                index=index,
                session_id=session_uuid(seed, index),
                project=projects[p],
                start_ms=st,
                duration_ms=dur,
                length=n,
                first_n=first_n,
                topic=topic,
                issue_index=issue_i,
                phase=phase,
                seed=sub_seed(seed, "session", index),
            )
        )
        first_n += n
    return plan
