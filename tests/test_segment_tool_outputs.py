"""A tool's output is never a segment by itself: it goes with what the agent made of it.

User trial 4, on the real Codex and Claude Code transcripts: the token cap cut before any output
that overflowed the segment, and again after it, so 80 of 465 segments were one tool output
alone — a day of a Codex history listed 71 segments, "Tool output (410 lines)", "Output of
`rg -n…`" among them, each titled by an output with nothing saying what it was for. On the real
fixtures (cut from those transcripts, MIT) with a cap small enough that outputs overflow: no
segment holds tool outputs alone, the segment past the cap is one of outputs plus the event they
took, and the same holds when the events arrive one at a time (the tail's state is read back).
"""

from __future__ import annotations

from pathlib import Path

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.model import Event

FIXTURES = Path(__file__).parent / "fixtures"
CAP = 300


def _segments(memory: Memory) -> list[list[Event]]:
    store = memory.store
    return [
        store.segment_member_events(project, node.node_id)
        for project in store.projects()
        for node in store.list_nodes(project, level="segment")
    ]


def _check(segments: list[list[Event]], count: object) -> int:
    """Assert the rule on every segment; how many went past the cap by taking an event."""
    took = 0
    for events in segments:
        kinds = [e.event_type for e in events]
        assert set(kinds) != {"tool_result"}, kinds  # never outputs alone
        tokens = sum(count(e.text) for e in events)  # type: ignore[operator]
        if tokens > CAP and len(events) > 1:
            assert set(kinds[:-1]) == {"tool_result"}, kinds  # outputs + the event they took
            took += 1
    return took


def test_outputs_go_with_what_follows_them(tmp_path: Path) -> None:
    config = {"embedder": "none", "segment_max_tokens": CAP}
    whole = load_settings({"home": str(tmp_path / "whole"), **config}, environ={})
    with Memory.open(whole) as memory:
        memory.ingest([FIXTURES / "codex-real", FIXTURES / "claude-code-real"])
        memory.process()
        segments = _segments(memory)
        results = sum(e.event_type == "tool_result" for s in segments for e in s)
        assert results >= 5 and _check(segments, memory.counter.count) >= 2  # it did overflow
        everything = sorted((e for s in segments for e in s), key=lambda e: e.event_id)
    one_by_one = load_settings({"home": str(tmp_path / "steps"), **config}, environ={})
    with Memory.open(one_by_one) as memory:  # the tail's state read back at every step
        for event in sorted(everything, key=lambda e: (e.ts_ms, e.event_id)):
            memory.store.append_events([event])
            memory.process()
        again = _segments(memory)
        _check(again, memory.counter.count)
        assert sorted([e.event_id for e in s] for s in again) == sorted(
            [e.event_id for e in s] for s in segments
        )
