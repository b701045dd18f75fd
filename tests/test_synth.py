"""The synthetic coding-agent history: determinism, shape, time, facts and the two writers."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from memtoc.errors import ConfigError
from memtoc.eval.synth import (
    SynthConfig,
    SynthHistory,
    generate,
    generate_with_facts,
    write_claude_code,
    write_jsonl,
)
from memtoc.eval.synth_schedule import default_months
from memtoc.ids import derived_ulid, is_ulid, ulid_timestamp
from memtoc.model import EVENT_TYPES, Event

MINUTE_MS = 60_000
CFG = SynthConfig(seed=11, events=4_000)
_STOP = {"the", "and", "for", "our", "does", "what", "when", "how", "who", "why", "with", "old"}


@pytest.fixture(scope="module")
def history() -> SynthHistory:
    return SynthHistory(CFG)


@pytest.fixture(scope="module")
def events(history: SynthHistory) -> list[Event]:
    return list(history.events())


def _sessions(events: list[Event]) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        out[ev.session_id].append(ev)
    return out


def _terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3 and w not in _STOP}


def test_same_seed_same_events_and_other_seed_differs(events: list[Event]) -> None:
    again = list(generate(CFG))
    assert again == events
    other = list(generate(SynthConfig(seed=12, events=4_000)))
    assert len(other) == len(events)
    assert {e.event_id for e in other}.isdisjoint({e.event_id for e in events})
    assert [e.text for e in other[:200]] != [e.text for e in events[:200]]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 19, 21, 201, 1_234])
def test_exact_count(count: int) -> None:
    assert sum(1 for _ in generate(SynthConfig(events=count, planted_facts=0))) == count


@settings(max_examples=20, deadline=None)
@given(seed=hs.integers(0, 2**32), count=hs.integers(1, 700))
def test_any_seed_and_size_keeps_count_and_time_order(seed: int, count: int) -> None:
    evs = list(generate(SynthConfig(seed=seed, events=count, planted_facts=0)))
    assert len(evs) == count
    assert all(a.ts_ms <= b.ts_ms for a, b in itertools.pairwise(evs))
    assert len({e.event_id for e in evs}) == count


def test_ids_are_derived_ulids_in_time_order(events: list[Event]) -> None:
    assert len({e.event_id for e in events}) == len(events)
    assert all(is_ulid(e.event_id) and ulid_timestamp(e.event_id) == e.ts_ms for e in events)
    first = events[0]
    assert first.event_type == "session_start"
    assert first.event_id == derived_ulid(first.ts_ms, f"synth:{CFG.seed}:0")
    assert all(a.ts_ms <= b.ts_ms for a, b in itertools.pairwise(events))


def test_time_order_and_gaps(events: list[Event]) -> None:
    by_project: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        by_project[ev.project].append(ev)
    assert set(by_project) == set(CFG.projects)
    for evs in by_project.values():
        # Strictly increasing per project: its sessions never overlap.
        assert all(a.ts_ms < b.ts_ms for a, b in itertools.pairwise(evs))
        for a, b in itertools.pairwise(evs):
            if a.session_id == b.session_id:
                assert b.ts_ms - a.ts_ms < 30 * MINUTE_MS, "sessions are one sitting"
            else:
                assert b.ts_ms - a.ts_ms >= 30 * MINUTE_MS, "sessions are 30+ minutes apart"
    for sess in _sessions(events).values():
        assert 20 <= len(sess) <= 200
        assert sess[0].event_type == "session_start" and sess[-1].event_type == "session_end"
        assert len({(e.project, e.agent) for e in sess}) == 1


def test_sessions_mostly_in_working_hours_over_months(history: SynthHistory) -> None:
    starts = [datetime.fromtimestamp(s.start_ms / 1000, tz=UTC) for s in history.plan]
    weekday = sum(1 for t in starts if t.weekday() < 5) / len(starts)
    office = sum(1 for t in starts if 9 <= t.hour < 18) / len(starts)
    assert weekday > 0.85 and office > 0.75
    assert starts[0] >= CFG.start
    span_days = (starts[-1] - starts[0]).days
    assert 0.8 * CFG.span_months * 30 <= span_days <= 1.1 * CFG.span_months * 31
    assert default_months(10_000) == pytest.approx(6.0)
    assert default_months(1_000_000) >= 12


def test_topics_recur_with_issue_changing_by_period(history: SynthHistory) -> None:
    weeks: dict[tuple[str, str], set[int]] = defaultdict(set)
    issues: dict[tuple[str, str], set[int]] = defaultdict(set)
    for s in history.plan:
        key = (s.project, s.topic.key)
        weeks[key].add(datetime.fromtimestamp(s.start_ms / 1000, tz=UTC).isocalendar()[1])
        issues[key].add(s.issue_index)
    assert max(len(w) for w in weeks.values()) >= 5
    assert sum(1 for i in issues.values() if len(i) >= 2) >= 5


def test_every_event_type_and_realistic_turns(events: list[Event]) -> None:
    assert {e.event_type for e in events} == set(EVENT_TYPES)
    texts = [e.text for e in events]
    assert any(t.startswith("No, the bug is in") for t in texts)
    assert any(t == "Yes, exactly." for t in texts)
    decisions = {e.text for e in events if e.event_type == "user_message" and "Let's " in e.text}
    assert len(decisions) >= 5
    calls: dict[str, Event] = {}
    for ev in events:
        if ev.event_type == "tool_call":
            tool = ev.metadata["tool_name"]
            assert ev.text.startswith(f"{tool}: ") and isinstance(ev.metadata["input"], dict)
            calls[ev.metadata["tool_use_id"]] = ev
        elif ev.event_type == "tool_result":
            call = calls[ev.metadata["tool_use_id"]]
            assert call.session_id == ev.session_id and call.ts_ms < ev.ts_ms
            assert ev.metadata["tool_name"] == call.metadata["tool_name"]
    assert any(e.event_type == "tool_result" and e.metadata["is_error"] for e in events)
    assert any("Traceback" in t or "FAILURES" in t for t in texts)


def test_text_lengths_have_a_long_tail(events: list[Event]) -> None:
    sizes = sorted(len(e.text.encode()) for e in events)
    mean = sum(sizes) / len(sizes)
    assert 200 <= mean <= 350
    assert sizes[len(sizes) // 2] < mean < sizes[int(len(sizes) * 0.95)]
    assert sizes[-1] > 2_000


def test_planted_facts(history: SynthHistory, events: list[Event]) -> None:
    facts = history.facts
    assert len(facts) == CFG.planted_facts
    assert len({f.fact_id for f in facts}) == len({f.text for f in facts}) == len(facts)
    assert len({f.query for f in facts}) == len(facts)
    by_id = {e.event_id: e for e in events}
    for f in facts:
        ev = by_id[f.event_id]
        assert f.text in ev.text
        assert ev.event_type in ("user_message", "assistant_message")
        assert (ev.project, ev.ts_ms, ev.session_id) == (f.project, f.ts_ms, f.session_id)
        assert 1 <= len(_terms(f.query) & _terms(f.text)) <= 4, f
        assert f.query.lower() not in f.text.lower()
    assert {by_id[f.event_id].event_type for f in facts} == {"user_message", "assistant_message"}
    # Spread over the whole span.
    span = events[-1].ts_ms - events[0].ts_ms
    assert facts[0].ts_ms - events[0].ts_ms < 0.1 * span
    assert events[-1].ts_ms - facts[-1].ts_ms < 0.1 * span
    stream, listed = generate_with_facts(CFG)
    assert listed == facts
    assert sum(1 for _ in stream) == CFG.events


def test_many_facts_spill_to_neighbouring_sessions() -> None:
    h = SynthHistory(SynthConfig(events=600, planted_facts=40))
    evs = {e.event_id: e for e in h.events()}
    assert len({f.event_id for f in h.facts}) == 40
    assert all(f.text in evs[f.event_id].text for f in h.facts)
    with pytest.raises(ConfigError, match="planted_facts"):
        SynthHistory(SynthConfig(events=100, planted_facts=50))


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"events": 0}, "events"),
        ({"projects": ()}, "projects"),
        ({"projects": ("a", "a")}, "projects"),
        ({"months": 0}, "months"),
        ({"planted_facts": -1}, "planted_facts"),
        ({"start": datetime(2024, 1, 8, 9)}, "start"),
    ],
)
def test_bad_config(kwargs: dict[str, Any], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        SynthConfig(**kwargs)
    assert info.value.setting == setting


def test_custom_projects_and_span() -> None:
    cfg = SynthConfig(events=2_000, projects=("alpha", "beta"), months=2.0, agent="codex")
    evs = list(generate(cfg))
    assert {e.project for e in evs} == {"alpha", "beta"} and {e.agent for e in evs} == {"codex"}
    assert evs[-1].ts_ms - evs[0].ts_ms < 2.3 * 30.44 * 86_400_000


def test_generation_streams() -> None:
    stream = generate(SynthConfig(events=1_000_000, planted_facts=0))
    assert isinstance(stream, Iterator)
    assert next(stream).event_type == "session_start"


def test_jsonl_writer_round_trips(tmp_path: Path, events: list[Event]) -> None:
    path = tmp_path / "out" / "history.jsonl"
    assert write_jsonl(iter(events[:500]), path) == 500
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 500
    keys = {"event_id", "session_id", "timestamp", "role", "event_type", "text", "project"}
    keys |= {"agent", "metadata"}
    for line, ev in zip(lines, events, strict=False):
        rec = json.loads(line)
        assert set(rec) == keys
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["timestamp"])
        when = datetime.strptime(rec["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert int(when.timestamp() * 1000) == ev.ts_ms
        assert (rec["event_id"], rec["text"], rec["role"]) == (ev.event_id, ev.text, ev.role)
        assert rec["metadata"] == dict(ev.metadata)


def test_claude_code_writer(tmp_path: Path, events: list[Event]) -> None:
    paths = write_claude_code(iter(events), tmp_path / "projects")
    sessions = _sessions(events)
    assert len(paths) == len(sessions)
    written = 0
    for path in paths:
        assert path.parent.parent == tmp_path / "projects"
        project = path.parent.name.removeprefix("-home-dev-")
        assert project in CFG.projects and path.stem in sessions
        parent = None
        tool_ids: set[str] = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            written += 1
            common = {"type", "uuid", "parentUuid", "sessionId", "timestamp", "cwd", "version"}
            assert common | {"gitBranch", "isSidechain"} <= set(rec)
            assert rec["parentUuid"] == parent and rec["sessionId"] == path.stem
            assert rec["cwd"] == f"/home/dev/{project}" and rec["isSidechain"] is False
            parent = rec["uuid"]
            if rec["type"] == "system":
                assert isinstance(rec["content"], str)
                continue
            msg = rec["message"]
            assert rec["type"] in ("user", "assistant") and msg["role"] == rec["type"]
            for block in msg["content"]:
                if block["type"] == "tool_use":
                    assert set(block) == {"type", "id", "name", "input"}
                    tool_ids.add(block["id"])
                elif block["type"] == "tool_result":
                    assert set(block) == {"type", "tool_use_id", "content", "is_error"}
                    assert block["tool_use_id"] in tool_ids
                else:
                    assert block["type"] == "text" and block["text"]
    skipped = sum(1 for e in events if e.event_type in ("session_start", "session_end"))
    assert written == len(events) - skipped
    # Deterministic: a second write gives the same bytes.
    again = write_claude_code(iter(events), tmp_path / "again")
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]
