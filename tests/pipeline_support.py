"""Helpers shared by the pipeline tests: a deterministic event generator, a TOC snapshot and the
store-consistency checks (every event in one segment, reachability, grips resolve, segment rules)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memtoc.ids import derived_ulid
from memtoc.model import Event, TocNode
from memtoc.pipeline.worker import PipelineConfig
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import TokenCounter

TOPICS = [
    ("auth", "login token refresh session cookie expiry jwt"),
    ("db", "postgres migration index vacuum query planner"),
    ("ui", "button layout css flexbox modal dropdown"),
    ("ci", "pipeline runner cache artifact flaky retry"),
    ("perf", "latency profile allocation flamegraph benchmark"),
    ("search", "bm25 ranking tokenizer stemming fts5 recall"),
]
_TOOLS = ["pytest tests/", "ruff check src", "git diff", "rg TODO src"]


def make_events(
    *,
    seed: int,
    sessions: int,
    per_session: tuple[int, int],
    start_ms: int,
    projects: Sequence[str] = ("alpha", "beta"),
    spread_ms: int = 40 * 86_400_000,
    big_every: int = 0,
) -> list[Event]:
    """Sessions of user/assistant/tool events about a topic, with occasional long pauses (new
    segments) and, every ``big_every`` events, a long tool result (token-cap splits)."""
    rng = random.Random(seed)
    out: list[Event] = []
    for s in range(sessions):
        project = projects[s % len(projects)]
        topic, words = TOPICS[rng.randrange(len(TOPICS))]
        vocab = words.split()
        t = start_ms + rng.randrange(spread_ms)
        sid = f"sess-{seed}-{s:04d}"
        for i in range(rng.randint(*per_session)):
            t += (
                rng.choice([5_000, 20_000, 90_000, 240_000]) if rng.random() > 0.04 else 45 * 60_000
            )
            kind = i % 3
            w = rng.sample(vocab, 3)
            if kind == 0:
                role, etype = "user", "user_message"
                text = (
                    f"Can you fix the {topic} {w[0]} issue? The {w[1]} breaks when {w[2]} changes."
                )
            elif kind == 1:
                role, etype = "assistant", "assistant_message"
                text = (
                    f"I updated {topic}/{w[0]}.py so the {w[1]} handles {w[2]}. "
                    f"Decision: keep {w[0]} {w[1]} behind a flag."
                )
            else:
                role, etype = "tool", "tool_result"
                text = f"$ {rng.choice(_TOOLS)}\n{w[0]} {w[1]} ok; {rng.randint(1, 99)} passed"
                if big_every and (len(out) + 1) % big_every == 0:
                    text += "\n" + " ".join(f"{w[i % 3]}{i}" for i in range(1200))
            out.append(
                Event(
                    event_id=derived_ulid(t, f"{sid}:{i}"),
                    session_id=sid,
                    project=project,
                    agent="test",
                    ts_ms=t,
                    event_type=etype,
                    role=role,
                    text=text,
                    metadata={"i": i},
                )
            )
    return out


def shuffled_batches(events: Sequence[Event], size: int, seed: int) -> list[list[Event]]:
    """Batches of ``size`` events in a random order (sessions arrive late and interleaved)."""
    order = list(events)
    random.Random(seed).shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


def node_content(node: TocNode) -> tuple[Any, ...]:
    return replace(node, version=0, created_ms=0).content_key()


def toc_snapshot(store: SqliteStore) -> dict[tuple[str, str], Any]:
    """Every latest node's content (no versions or timestamps) and the grips its bullets cite."""
    snap: dict[tuple[str, str], Any] = {}
    for project in store.projects():
        for node in store.list_nodes(project):
            grips = []
            for b in node.bullets:
                for gid in b.grip_ids:
                    g = store.get_grip(gid)
                    grips.append((g.grip_id, g.event_id_start, g.event_id_end, g.excerpt))
            snap[(project, node.node_id)] = (node_content(node), tuple(grips))
    return snap


def counts(store: SqliteStore) -> tuple[int, int, int]:
    c = store.connection
    return (
        c.execute("SELECT COUNT(*) FROM toc_node_versions").fetchone()[0],
        c.execute("SELECT COUNT(*) FROM grips").fetchone()[0],
        c.execute("SELECT COUNT(*) FROM docs").fetchone()[0],
    )


def check_consistency(
    store: SqliteStore, counter: TokenCounter, config: PipelineConfig | None = None
) -> None:
    """Assert the store's TOC is complete and consistent (see module docstring)."""
    cfg = config or PipelineConfig()
    conn = store.connection
    n_events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    assigned = conn.execute(
        "SELECT COUNT(*) FROM segment_events s JOIN segments g "
        "ON g.project = s.project AND g.node_id = s.node_id"
    ).fetchone()[0]
    assert assigned == n_events, f"{assigned} of {n_events} events are in a segment"
    assert conn.execute("SELECT COUNT(*) FROM events_fts").fetchone()[0] == n_events
    # The grips table holds exactly the grips the latest segment nodes cite (none left over).
    stored_grips = {r[0] for r in conn.execute("SELECT grip_id FROM grips")}
    cited = {
        gid
        for project in store.projects()
        for node in store.list_nodes(project, level="segment")
        for b in node.bullets
        for gid in b.grip_ids
    }
    assert stored_grips == cited, len(stored_grips ^ cited)
    gap_ms = cfg.segment_gap_minutes * 60_000
    for project in store.projects():
        nodes = {n.node_id: n for n in store.list_nodes(project)}
        segments = {k: n for k, n in nodes.items() if n.level == "segment"}
        assert set(segments) == {
            r[0] for r in conn.execute("SELECT node_id FROM segments WHERE project = ?", (project,))
        }
        # Reachability: years → ... → segments, with parent links agreeing.
        reached: dict[str, str] = {}
        stack: list[tuple[str, str | None]] = [
            (y.node_id, None) for y in store.list_nodes(project, level="year")
        ]
        while stack:
            node_id, parent = stack.pop()
            node = nodes[node_id]
            assert parent in node.parents if parent else not node.parents, (node_id, parent)
            reached[node_id] = node.level
            kids = [nodes[c] for c in node.child_node_ids]
            assert [(k.start_ms, k.node_id) for k in kids] == sorted(
                (k.start_ms, k.node_id) for k in kids
            )
            stack.extend((c, node_id) for c in node.child_node_ids)
        assert set(reached) == set(nodes), set(nodes) ^ set(reached)
        members = {sid: store.segment_member_events(project, sid) for sid in segments}
        # Bullets resolve: segments to their own events, periods to their subtree's segments.
        for node in nodes.values():
            assert node.bullets, node.node_id
            subtree = _subtree_segments(nodes, node.node_id)
            for bullet in node.bullets:
                assert bullet.grip_ids, (node.node_id, bullet.text)
                for gid in bullet.grip_ids:
                    g = store.get_grip(gid)
                    assert g.toc_node_id in subtree, (node.node_id, gid)
                    ids = [e.event_id for e in members[g.toc_node_id]]
                    assert g.event_id_start in ids and g.event_id_end in ids
                    assert ids.index(g.event_id_start) <= ids.index(g.event_id_end)
                    assert g.session_id == segments[g.toc_node_id].session_id
        # Segment rules: gaps inside < gap; token cap (unless a lone event, or the event that
        # joined tool outputs alone); boundaries justified.
        by_session: dict[str, list[TocNode]] = {}
        for seg in segments.values():
            evs = members[seg.node_id]
            assert seg.event_count == len(evs)
            assert {e.session_id for e in evs} == {seg.session_id}
            toks = [counter.count(e.text) for e in evs]
            assert seg.token_count == sum(toks)
            # past the cap only when one event, or tool outputs alone and the event they took
            assert (
                sum(toks) <= cfg.segment_max_tokens
                or len(evs) == 1
                or all(e.event_type == "tool_result" for e in evs[:-1])
            )
            assert all(b.ts_ms - a.ts_ms < gap_ms for a, b in itertools.pairwise(evs))
            by_session.setdefault(seg.session_id or "", []).append(seg)
        for segs in by_session.values():
            segs.sort(key=lambda n: (n.start_ms, members[n.node_id][0].event_id))
            for prev, nxt in itertools.pairwise(segs):
                last, first = members[prev.node_id][-1], members[nxt.node_id][0]
                assert (last.ts_ms, last.event_id) < (first.ts_ms, first.event_id)
                outputs_only = all(e.event_type == "tool_result" for e in members[prev.node_id])
                assert first.ts_ms - last.ts_ms >= gap_ms or (
                    prev.token_count + counter.count(first.text) > cfg.segment_max_tokens
                    and not outputs_only  # outputs alone take the next event
                )


def _subtree_segments(nodes: dict[str, TocNode], root: str) -> set[str]:
    out: set[str] = set()
    stack = [root]
    while stack:
        n = nodes[stack.pop()]
        if n.level == "segment":
            out.add(n.node_id)
        stack.extend(n.child_node_ids)
    return out
