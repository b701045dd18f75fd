"""expand keeps store order for events sharing a millisecond (multi-block transcript lines)."""

from __future__ import annotations

from memtoc.model import Event, Grip
from memtoc.retrieval.navigate import expand
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import HeuristicCounter


def test_grip_range_follows_append_order_within_a_millisecond(store: SqliteStore) -> None:
    # Ids that sort against the append order, all in one millisecond (like uuid#1, uuid#2 parts).
    ids = ["Z-first", "A-second", "M-third", "B-fourth"]
    store.append_events(
        [
            Event(i, "s1", "p", "a", 1_000, "assistant_message", "assistant", f"part {n}")
            for n, i in enumerate(ids)
        ]
    )
    store.put_grips([Grip("grip:1", "p", "x", "Z-first", "M-third", 1_000, "segment", "n", "s1")])
    view = expand(store, HeuristicCounter(), "grip:1", before=0, after=1)
    assert [e.event_id for e in view.events] == ids
    assert (view.range_start, view.range_end) == (0, 2)
