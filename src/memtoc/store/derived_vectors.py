"""Verify's vector checks, shared by both stores: counts in, ``Finding``s out.

Each store counts one embedder's vectors its own way (``SqliteDerived`` / ``PgDerived``) into a
``VectorCounts``; ``vector_findings`` turns the counts into problems:

- vectors without a recorded model (``embedder:<name>`` in ``meta``), or of another dimension;
- events the embedder has passed (its ``embed:<name>`` checkpoint) without a vector, or more event
  vectors than such events;
- documents whose vector was recorded but is gone, vectors of documents that no longer exist;
- for the *configured* embedder: vectors computed by another version of the model (stale), none
  at all while another embedder's exist, documents with no vector once the pipeline is idle.

Work a running pipeline will do (events not embedded yet) is reported as pending, not a problem.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memtoc.store.capabilities import EmbedderIdentity
from memtoc.store.derived import Finding

FIX = "memtoc rebuild --vectors"


def recorded_identity(raw: str | None) -> tuple[int, str] | None:
    """``(dim, version)`` from an ``embedder:<name>`` meta value (None when absent or unreadable)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return int(data["dim"]), str(data["version"])
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(slots=True)
class VectorCounts:
    """What one store counted about one embedder's vectors."""

    name: str
    recorded: tuple[int, str] | None
    dims: dict[int, int] = field(default_factory=dict)
    """Vectors per stored dimension."""
    bad_length: int = 0
    """Vectors whose stored value does not have their stored dimension."""
    event_vectors: int = 0
    doc_vectors: int = 0
    checkpoint: int = 0
    """The last event seq the embedder has passed."""
    expected_events: int = 0
    """Live events up to the checkpoint: each should have one vector."""
    missing_events: list[str] = field(default_factory=list)
    lost_docs: tuple[int, list[str]] = (0, [])
    orphans: tuple[int, list[str]] = (0, [])
    unembedded_docs: int = 0

    @classmethod
    def of(cls, name: str, rows: Sequence[Sequence[Any]], recorded_raw: str | None) -> VectorCounts:
        """From ``(embedder, kind, dim, count, bad_length)`` rows (every embedder's)."""
        out = cls(name, recorded_identity(recorded_raw))
        for embedder, kind, dim, count, bad in rows:
            if embedder != name:
                continue
            out.dims[int(dim)] = out.dims.get(int(dim), 0) + int(count)
            out.bad_length += int(bad or 0)
            if kind == "event":
                out.event_vectors += int(count)
            else:
                out.doc_vectors += int(count)
        return out

    @property
    def total(self) -> int:
        return self.event_vectors + self.doc_vectors


def vector_findings(
    c: VectorCounts,
    configured: EmbedderIdentity | None,
    *,
    quiet: bool,
    others: Sequence[str],
    pending: list[str],
) -> list[Finding | None]:
    """The problems in ``c`` (see the module docstring); pending work is appended to ``pending``.
    ``others``: the other embedders that have vectors; ``quiet``: no pipeline work in flight."""
    check = f"vectors {c.name}"
    out: list[Finding | None] = []
    if c.total and c.recorded is None:
        out.append(
            Finding(
                check, f"{c.total} vectors of {c.name} have no recorded model", c.total, (), FIX
            )
        )
    wrong = sum(n for dim, n in c.dims.items() if c.recorded and dim != c.recorded[0])
    if wrong or c.bad_length:
        n = wrong + c.bad_length
        want = c.recorded[0] if c.recorded else "?"
        out.append(
            Finding(check, f"{n} vectors of {c.name} are not {want}-d like its model", n, (), FIX)
        )
    if c.event_vectors < c.expected_events:
        n = c.expected_events - c.event_vectors
        out.append(
            Finding(
                check,
                f"{n} of the {c.expected_events} events {c.name} has embedded have no vector",
                n,
                tuple(c.missing_events),
                FIX,
            )
        )
    elif c.event_vectors > c.expected_events:
        n = c.event_vectors - c.expected_events
        out.append(
            Finding(
                check,
                f"{n} event vectors of {c.name} are of events it has not embedded or that do not "
                "exist",
                n,
                (),
                FIX,
            )
        )
    if c.lost_docs[0]:
        n, shown = c.lost_docs
        out.append(
            Finding(check, f"{n} search documents lost their {c.name} vector", n, tuple(shown), FIX)
        )
    if c.orphans[0]:
        n, shown = c.orphans
        out.append(
            Finding(
                check,
                f"{n} vectors of {c.name} are of documents that do not exist",
                n,
                tuple(shown),
                FIX,
            )
        )
    if configured is None or configured.name != c.name:
        return out
    now = (int(configured.dim), configured.version)
    if c.recorded is not None and c.recorded != now:
        out.append(
            Finding(
                check,
                f"stale: the vectors of {c.name} came from model version {c.recorded[1]} "
                f"({c.recorded[0]}-d); the configured model is version {now[1]} ({now[0]}-d), so "
                "search cannot use them",
                c.total,
                (),
                FIX,
            )
        )
    elif not c.total and others:
        out.append(
            Finding(
                check,
                f"no vectors of the configured embedder {c.name} (the store's vectors are from "
                f"{', '.join(others)}): search runs BM25-only",
                0,
                (),
                FIX,
            )
        )
    elif c.unembedded_docs - c.lost_docs[0] > 0 and quiet and c.checkpoint:
        n = c.unembedded_docs - c.lost_docs[0]  # those that lost their vector are counted above
        out.append(Finding(check, f"{n} search documents have no {c.name} vector", n, (), FIX))
    elif c.unembedded_docs:
        pending.append(f"{c.name}: vectors not computed yet (memtoc process computes them)")
    return out
