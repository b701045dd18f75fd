"""What ``verify`` and ``rebuild`` need from a store, beyond the pipeline's own capability.

Everything derived from events — segments, TOC nodes and their versions, grips, bookmarks, search
documents, the BM25 indexes and vectors — can be checked against the events and rebuilt from them
(DESIGN §3). The logic lives above the store (``memtoc.derived``); the SQL lives here, behind the
narrow ``DerivedStore`` protocol, mirrored by ``SqliteDerived`` (``sqlite/audit.py``: verify's
checks, ``sqlite/derived.py``: rebuild's repairs) and ``PgDerived`` (``postgres/audit.py``,
``postgres/derived.py``); each store's ``derived()`` returns its own.

``audit`` runs the checks that are plain SQL (coverage of every event by exactly one segment,
membership and segment rows, nodes of built segments, grips' event ranges, bookmarks' events,
search documents of existing items, FTS row counts and a probe query, vector counts and the
embedder's recorded version). Each problem is a ``Finding``: the check, what is wrong, how many,
a few examples (ids, so a user can look) and the command that repairs it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from memtoc.model import Grip, JsonValue, TocNode
from memtoc.store.base import SegmentRecord

if TYPE_CHECKING:
    from memtoc.store.capabilities import EmbedderIdentity

EXAMPLES = 3
"""Examples listed per finding."""
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{3,30}")
PROBES = 4
"""Stored texts tried per BM25 probe (the newest and oldest filed ones)."""


def probe_words(text: str) -> list[str]:
    """Plain words of ``text`` a BM25 index of it must find (letters and digits, 4+ chars)."""
    return list(dict.fromkeys(m.group() for m in _WORD.finditer(text[:4000])))[:3]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem ``verify`` found: the check, what is wrong, how many, where, and the fix."""

    check: str
    problem: str
    """What is wrong, with its count (``"3 events are in no segment"``)."""
    count: int
    examples: tuple[str, ...] = ()
    """Where: a few of the affected items (ids, times, projects)."""
    fix: str | None = None
    """The command that repairs it (``"memtoc rebuild --segments"``)."""

    def message(self) -> str:
        text = self.problem
        if self.examples:
            text += f" (e.g. {'; '.join(self.examples)})"
        if self.fix:
            text += f" — run `{self.fix}`"
        return text

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "check": self.check,
            "problem": self.problem,
            "count": self.count,
            "examples": list(self.examples),
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True)
class Audit:
    """What ``DerivedStore.audit`` checked and found (plus what is merely pending)."""

    checks: tuple[str, ...]
    findings: tuple[Finding, ...]
    pending: tuple[str, ...] = ()
    """Work in flight that is not a problem (events waiting in the outbox, vectors not yet
    computed by a running pipeline)."""


@dataclass(slots=True)
class VerifyReport:
    """What ``verify`` checked, every problem it found (``findings``: what, how many, where, the
    fix) and the work in flight it saw (``pending``: not problems)."""

    checks: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def problems(self) -> list[str]:
        """Each finding as one line, ``check: message``."""
        return [f"{f.check}: {f.message()}" for f in self.findings]

    def check(self, name: str, problem: str | None, fix: str | None = None) -> None:
        self.checks.append(name)
        if problem:
            self.findings.append(Finding(name, problem, 1, fix=fix))

    def add(self, audit: Audit) -> None:
        """Take over an audit's checks, findings and pending work."""
        self.checks.extend(c for c in audit.checks if c not in self.checks)
        self.findings.extend(audit.findings)
        self.pending.extend(audit.pending)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "ok": self.ok,
            "checks": list(self.checks),
            "problems": list(self.problems),
            "findings": [f.to_dict() for f in self.findings],
            "pending": list(self.pending),
        }


class DerivedStore(Protocol):
    """Reads and repairs of derived data (see the module docstring)."""

    # -- verify -------------------------------------------------------------------------------------
    def audit(self, embedder: EmbedderIdentity | None, *, examples: int = EXAMPLES) -> Audit:
        """The SQL checks of derived data; ``embedder`` is the configured one (None: none)."""
        ...

    def scan_nodes(self, after: tuple[str, str], limit: int) -> list[TocNode]:
        """Latest nodes ordered by ``(project, node_id)``, the first ``limit`` after ``after``."""
        ...

    def scan_grips(self, after: str, limit: int) -> list[Grip]:
        """Grips ordered by id, the first ``limit`` after ``after``."""
        ...

    def doc_texts(self, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The stored search-document text of each ``(project, item id)`` of ``kind`` that has one."""
        ...

    def existing_grips(self, grip_ids: Sequence[str]) -> set[str]:
        """Which of ``grip_ids`` exist."""
        ...

    def pending_segments(self) -> list[SegmentRecord]:
        """Segments queued for a build (``built = 0``) or quarantined (``error`` set)."""
        ...

    def summary_backends(self) -> list[tuple[str, bool, int, str | None]]:
        """``(summarizer, degraded, nodes, a degraded reason)`` over every latest node: which
        backend built the TOC, and how much of it the LLM fallback built (``status``)."""
        ...

    # -- rebuild ------------------------------------------------------------------------------------
    def sessions(self, project: str | None = None) -> list[tuple[str, str]]:
        """``(project, session_id)`` of every session with events or segments, sorted."""
        ...

    def repair_session_spans(self) -> int:
        """Widen each session's recorded span to cover its events (SQLite's ``sessions``, which
        session reads search within; PostgreSQL keeps none); return the spans written."""
        ...

    def repair_node_pointers(self) -> int:
        """Point every node row at its latest version and copy that version's level, span and
        parent (children are looked up by the row's parent); return the rows repaired."""
        ...

    def filing_of(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        """``seq → (project, segment node id)`` for those of ``seqs`` filed in a segment."""
        ...

    def members_by_node(self, project: str, node_ids: Sequence[str]) -> dict[str, set[int]]:
        """The event seqs filed under each of ``node_ids`` (absent ids: none)."""
        ...

    def stray_members(self) -> list[int]:
        """Seqs of membership rows that point at no live event or at no segment row."""
        ...

    def unfile(self, seqs: Sequence[int]) -> int:
        """Drop membership rows (the BM25 index is left to ``rebuild_text_index``)."""
        ...

    def indexed_seqs(self, seqs: Sequence[int]) -> set[int]:
        """Which of ``seqs`` have a row in the events' BM25 index."""
        ...

    def segments_without_node(self, project: str | None = None) -> list[tuple[str, str]]:
        """``(project, node_id)`` of built segments whose node has no latest version."""
        ...

    def nodes_without_segment(self, project: str | None = None) -> list[tuple[str, str]]:
        """``(project, node_id)`` of segment-level nodes whose segment row does not exist."""
        ...

    def queue_segments(self, project: str | None = None) -> int:
        """Mark segments for a (re)build (``built = 0``, error cleared); return how many."""
        ...

    def queue_segment_ids(self, project: str, node_ids: Sequence[str]) -> int: ...

    def filed_ranges(self) -> list[tuple[int, int]]:
        """``(first_seq, last_seq)`` of the ``events`` outbox entries already processed, in
        order: the batches the pipeline filed (bookmark passes are replayed over them)."""
        ...

    def delete_checkpoints(self, jobs: Sequence[str]) -> int:
        """Delete the named checkpoints; return how many existed."""
        ...

    def drop_stale_docs(self) -> int:
        """Delete search documents whose node, grip or bookmark does not exist; return how many."""
        ...

    def rebuild_text_index(self, *, events: bool = True, docs: bool = True) -> dict[str, int]:
        """Re-index filed events and every document for BM25 with the current ``search_text``."""
        ...
