"""Row codecs shared by both stores: rows to ``Event``, ``TocNode``, ``Grip``, ``Bookmark`` and
``SegmentRecord`` and back, and the JSON text the stores write.

A node's content is one JSON document (``node_data``) on both backends; grips, bookmarks and
segments have the same columns on both (``GRIP_COLS``, ``SEGMENT_COLS``), so one decoder each
serves both. Only the placeholders (``?`` / ``%s``) and the statements differ, and those stay in
``store/sqlite/`` and ``store/postgres/``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memtoc.errors import StoreError
from memtoc.model import Bookmark, Bullet, Event, Grip, JsonValue, OutboxEntry, TocNode
from memtoc.store.base import SegmentRecord

if TYPE_CHECKING:
    from memtoc.store.capabilities import EmbedderIdentity

GRIP_COLS = (
    "grip_id, project, excerpt, event_id_start, event_id_end, ts_ms, source, toc_node_id, "
    "session_id"
)
OUTBOX_COLS = "entry_id, kind, payload, created_ms, attempts, status, error"
SEGMENT_COLS = (
    "project, node_id, session_id, start_ms, end_ms, first_seq, last_seq, event_count, "
    "token_count, first_event_id, last_event_id, closed, built, error"
)

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
json_text = _ENCODER.encode
"""JSON text of a value, keys in their given order (metadata is kept verbatim)."""


def json_sorted(value: JsonValue) -> str:
    """Compact JSON text with sorted keys (payloads, checkpoints, audit records: compared as text)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def event_from_row(row: Sequence[Any]) -> Event:
    """An event from a row of ``seq, event_id, ts_ms, project, session_id, agent, event_type,
    role, text, metadata, source, source_pos`` and, on PostgreSQL, ``text_exact`` (the exact text
    as JSON where it held NUL, which ``text`` cannot)."""
    exact = row[12] if len(row) > 12 else None
    return Event(
        event_id=row[1],
        ts_ms=row[2],
        project=row[3],
        session_id=row[4],
        agent=row[5],
        event_type=row[6],
        role=row[7],
        text=json.loads(exact) if exact is not None else row[8],
        metadata=json.loads(row[9]) if row[9] != "{}" else {},
        source=row[10],
        source_pos=row[11],
    )


def outbox_entry_from_row(row: Sequence[Any], attempts_add: int = 0) -> OutboxEntry:
    """An outbox entry from a row of ``OUTBOX_COLS`` (``attempts_add``: a claim just counted)."""
    return OutboxEntry(
        int(row[0]),
        row[1],
        json.loads(row[2]),
        int(row[3]),
        int(row[4]) + attempts_add,
        row[5],
        row[6],
    )


def node_from_row(project: str, node_id: str, version: int, data: str) -> TocNode:
    d = json.loads(data)
    return TocNode(
        node_id=node_id,
        project=project,
        level=d["level"],
        title=d["title"],
        start_ms=d["start_ms"],
        end_ms=d["end_ms"],
        bullets=tuple(Bullet(b["text"], tuple(b["grip_ids"])) for b in d["bullets"]),
        keywords=tuple(d["keywords"]),
        child_node_ids=tuple(d["child_node_ids"]),
        abstract=d["abstract"],
        overview=d["overview"],
        version=version,
        parent_id=d.get("parent_id"),
        session_id=d.get("session_id"),
        event_count=d.get("event_count", 0),
        token_count=d.get("token_count", 0),
        summarizer=d.get("summarizer", "extractive"),
        degraded=d.get("degraded"),
        created_ms=d.get("created_ms", 0),
        parent_ids=tuple(d.get("parent_ids", ())),
    )


def node_data(node: TocNode, created_ms: int) -> str:
    return json_text(
        {
            "level": node.level,
            "title": node.title,
            "start_ms": node.start_ms,
            "end_ms": node.end_ms,
            "bullets": [b.to_dict() for b in node.bullets],
            "keywords": list(node.keywords),
            "child_node_ids": list(node.child_node_ids),
            "abstract": node.abstract,
            "overview": node.overview,
            "parent_id": node.parent_id,
            "parent_ids": list(node.parent_ids),
            "session_id": node.session_id,
            "event_count": node.event_count,
            "token_count": node.token_count,
            "summarizer": node.summarizer,
            "degraded": node.degraded,
            "created_ms": created_ms,
        }
    )


def grip_from_row(row: Sequence[Any]) -> Grip:
    return Grip(
        grip_id=row[0],
        project=row[1],
        excerpt=row[2],
        event_id_start=row[3],
        event_id_end=row[4],
        ts_ms=row[5],
        source=row[6],
        toc_node_id=row[7],
        session_id=row[8],
    )


def bookmark_from_row(row: Sequence[Any]) -> Bookmark:
    return Bookmark(
        bookmark_id=row[0],
        project=row[1],
        content=row[2],
        event_ids=tuple(json.loads(row[3])),
        importance=row[4],
        type=row[5],
        created_ms=row[6],
        last_relevant_ms=row[7],
    )


def segment_from_row(row: Sequence[Any]) -> SegmentRecord:
    return SegmentRecord(
        project=row[0],
        node_id=row[1],
        session_id=row[2],
        start_ms=row[3],
        end_ms=row[4],
        first_seq=row[5],
        last_seq=row[6],
        event_count=row[7],
        token_count=row[8],
        first_event_id=row[9],
        last_event_id=row[10],
        closed=bool(row[11]),
        built=bool(row[12]),
        error=row[13],
    )


def segment_row(r: SegmentRecord) -> tuple[Any, ...]:
    return (
        r.project,
        r.node_id,
        r.session_id,
        r.start_ms,
        r.end_ms,
        r.first_seq,
        r.last_seq,
        r.event_count,
        r.token_count,
        r.first_event_id,
        r.last_event_id,
        int(r.closed),
        int(r.built),
        r.error,
    )


def node_fields(node: TocNode) -> dict[str, Any]:
    return {f: getattr(node, f) for f in node.__dataclass_fields__}


def embedder_meta_key(name: str) -> str:
    """The ``meta`` key recording which model embedder ``name``'s vectors came from."""
    return f"embedder:{name}"


def identity_json(embedder: EmbedderIdentity) -> str:
    """The ``meta`` value recording an embedder's dimension and version."""
    return json.dumps({"dim": int(embedder.dim), "version": embedder.version}, sort_keys=True)


def identity_from_json(raw: str | None, location: str, name: str) -> tuple[int, str] | None:
    """``(dim, version)`` from an ``embedder:<name>`` value (None when there is none)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return int(data["dim"]), str(data["version"])
    except (ValueError, KeyError, TypeError) as exc:
        key = embedder_meta_key(name)
        raise StoreError(f"{location}: meta {key} is unreadable: {raw!r}") from exc
