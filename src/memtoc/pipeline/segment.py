"""Segmentation: file each event into exactly one segment of its (project, session).

The segmentation of a session is a pure function of its events, ordered by ``(ts_ms, event_id)``:
a greedy left-to-right scan that starts a new segment when

- the gap since the previous event is at least ``gap_ms``, or
- adding the event would push the segment past ``max_tokens`` — unless the segment holds tool
  outputs alone: it takes the event past the cap, so an output is never a segment by itself
  (it goes with what the agent made of it). A large output used to sit in a segment of its own:
  on real Codex and Claude Code histories 80 of 465 segments were a lone tool output ("Tool
  output (410 lines)"), listed among a day's work with nothing saying what it was for. Any
  other event larger than the cap still sits in a segment of its own.

Because the scan is greedy, appending events after the session's last one continues from the
tail segment's state and gives exactly what a scan from scratch would. An event that sorts
*before* the session's last one (an importer back-filling, or a batch that arrived late) makes the
``Segmenter`` re-scan the session from the segment holding that event's predecessor — every
boundary before that segment is untouched by the insertion. Either way the result depends only
on the set of events, never on batch boundaries or arrival order, which is what makes the TOC
reproducible after crashes and re-imports.

A segment's node id is ``toc:segment:{local start minute}:{suffix}`` where the suffix hashes
``(project, session_id, first event id)``: a segment keeps its id while it grows, and gets a new
one (the old one is retired) only if an earlier event joins it at the front.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memtoc.model import MAX_TS_MS, MIN_TS_MS, Event
from memtoc.pipeline.periods import Calendar
from memtoc.store.base import PipelineStore, SegmentRecord
from memtoc.text.tokens import TokenCounter


def fileable(ev: Event) -> bool:
    """Whether an event can be filed: its instant within ``MIN_TS_MS..MAX_TS_MS``. Nothing
    outside gets in now, but a store written by an older memtoc can hold such events (one at year
    10889 used to stop its whole batch being filed); they are left out of every segment, and
    ``verify`` and ``status`` name them."""
    return MIN_TS_MS <= ev.ts_ms <= MAX_TS_MS


def segment_suffix(project: str, session_id: str, first_event_id: str) -> str:
    """Six hex characters, stable for a segment's (project, session, first event)."""
    key = f"{project}\x1f{session_id}\x1f{first_event_id}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(key, digest_size=3).hexdigest()


@dataclass(slots=True)
class _Open:
    """A segment under construction during a scan."""

    seqs: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    tokens: int = 0
    first_seq: int = 0
    last_seq: int = 0
    prior_count: int = 0
    """Events already in the segment before this scan continued it (tail continuation)."""
    outputs_only: bool = False
    """Whether the segment holds tool outputs alone: it takes the next event past the cap."""
    base: SegmentRecord | None = None


@dataclass(slots=True)
class SegmentationResult:
    """What one ``Segmenter.assign`` call decided, ready for ``PipelineStore.write_segments``."""

    upserts: list[SegmentRecord] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    membership: list[tuple[int, str]] = field(default_factory=list)
    index_events: list[tuple[int, str]] = field(default_factory=list)
    events: int = 0


class Segmenter:
    """Assigns newly stored events to segments, keeping ``segments``/``segment_events`` canonical."""

    def __init__(
        self,
        store: PipelineStore,
        counter: TokenCounter,
        calendar: Calendar,
        *,
        gap_ms: int,
        max_tokens: int,
    ) -> None:
        self.store = store
        self.counter = counter
        self.calendar = calendar
        self.gap_ms = gap_ms
        self.max_tokens = max_tokens

    def assign(self, batch: Sequence[tuple[int, Event]]) -> dict[str, SegmentationResult]:
        """Segment the not-yet-assigned events of ``batch``; one result per project.

        Reads only; the caller writes each result (in one transaction with the outbox completion).
        """
        assigned = self.store.assigned_seqs([seq for seq, _ in batch])
        groups: dict[tuple[str, str], list[tuple[int, Event]]] = defaultdict(list)
        for seq, ev in batch:
            if seq not in assigned and fileable(ev):
                groups[(ev.project, ev.session_id)].append((seq, ev))
        results: dict[str, SegmentationResult] = {}
        for (project, session_id), items in sorted(groups.items()):
            items.sort(key=lambda it: (it[1].ts_ms, it[1].event_id))
            result = results.setdefault(project, SegmentationResult())
            self._assign_session(project, session_id, items, result)
        return results

    def scan(
        self, project: str, session_id: str, items: Sequence[tuple[int, Event]]
    ) -> SegmentationResult:
        """A session's segmentation from scratch, from all its events (sorted by ``(ts_ms,
        event_id)``): what ``assign`` converges to. Pure — reads and writes nothing (``rebuild
        --segments`` compares it with what is stored)."""
        out = SegmentationResult()
        items = [item for item in items if fileable(item[1])]
        self._scan(project, session_id, items, None, out)
        out.events = len(items)
        return out

    # -- one session ----------------------------------------------------------------------------
    def _assign_session(
        self,
        project: str,
        session_id: str,
        items: list[tuple[int, Event]],
        out: SegmentationResult,
    ) -> None:
        tail = self.store.session_tail(project, session_id)
        first = items[0][1]
        if tail is None or (first.ts_ms, first.event_id) > (tail.end_ms - 1, tail.last_event_id):
            # The common case: everything comes after the session's last event.
            self._scan(project, session_id, items, tail, out)
            for seq, ev in items:
                out.index_events.append((seq, ev.text))
            out.events += len(items)
            return
        # A late event: re-scan from the segment holding its predecessor.
        anchor = self.store.segment_before(project, session_id, first.ts_ms, first.event_id)
        if anchor is None:
            start_ts, start_id = -(1 << 62), ""
        else:
            start_ts, start_id = anchor.start_ms, anchor.first_event_id
        old = self.store.segments_from(project, session_id, start_ts, start_id)
        stored = [
            item
            for item in self.store.session_events_from(project, session_id, start_ts, start_id)
            if fileable(item[1])
        ]
        previously = self.store.members_of(project, [s.node_id for s in old])
        produced = self._scan(project, session_id, stored, None, out)
        out.deleted.extend(s.node_id for s in old if s.node_id not in produced)
        for seq, ev in stored:
            if seq not in previously:
                out.index_events.append((seq, ev.text))
                out.events += 1

    def _scan(
        self,
        project: str,
        session_id: str,
        items: Iterable[tuple[int, Event]],
        tail: SegmentRecord | None,
        out: SegmentationResult,
    ) -> set[str]:
        """Greedy scan of ``items`` (sorted), continuing ``tail`` if given; return node ids made."""
        made: set[str] = set()
        cur: _Open | None = None
        last_ts = 0
        if tail is not None:
            cur = _Open(
                tokens=tail.token_count,
                first_seq=tail.first_seq,
                last_seq=tail.last_seq,
                prior_count=tail.event_count,
                base=tail,
                outputs_only=self._outputs_only(tail),
            )
            last_ts = tail.end_ms - 1
        for seq, ev in items:
            tokens = self.counter.count(ev.text)
            if cur is not None and (
                ev.ts_ms - last_ts >= self.gap_ms
                or (cur.tokens + tokens > self.max_tokens and not cur.outputs_only)
            ):
                made.add(self._emit(project, session_id, cur, out, closed=True))
                cur = None
            if cur is None:
                cur = _Open(first_seq=seq, last_seq=seq)
            fresh = not (cur.seqs or cur.prior_count)
            cur.outputs_only = (fresh or cur.outputs_only) and ev.event_type == "tool_result"
            cur.seqs.append(seq)
            cur.events.append(ev)
            cur.tokens += tokens
            cur.first_seq = min(cur.first_seq, seq)
            cur.last_seq = max(cur.last_seq, seq)
            last_ts = ev.ts_ms
        if cur is not None and cur.events:
            made.add(self._emit(project, session_id, cur, out, closed=False))
        return made

    def _outputs_only(self, tail: SegmentRecord) -> bool:
        """Whether a stored segment holds tool outputs alone (read only when its first does)."""
        first = self.store.get_events([tail.first_event_id])
        if not first or first[0].event_type != "tool_result":
            return False
        members = self.store.segment_member_events(tail.project, tail.node_id)
        return all(e.event_type == "tool_result" for e in members)

    def _emit(
        self, project: str, session_id: str, seg: _Open, out: SegmentationResult, *, closed: bool
    ) -> str:
        base = seg.base
        if base is not None:
            node_id = base.node_id
            start_ms, first_id = base.start_ms, base.first_event_id
        else:
            first = seg.events[0]
            start_ms, first_id = first.ts_ms, first.event_id
            suffix = segment_suffix(project, session_id, first_id)
            node_id = self.calendar.segment_node_id(start_ms, suffix)
        if not seg.events:  # a tail that got nothing new: it is closed now, nothing else changes
            if base is not None and closed and not base.closed:
                out.upserts.append(dataclasses.replace(base, closed=True))
            return node_id
        last = seg.events[-1]
        out.upserts.append(
            SegmentRecord(
                project=project,
                node_id=node_id,
                session_id=session_id,
                start_ms=start_ms,
                end_ms=last.ts_ms + 1,
                first_seq=seg.first_seq,
                last_seq=seg.last_seq,
                event_count=seg.prior_count + len(seg.events),
                token_count=seg.tokens,
                first_event_id=first_id,
                last_event_id=last.event_id,
                closed=closed,
                built=False,
            )
        )
        out.membership.extend((seq, node_id) for seq in seg.seqs)
        return node_id
