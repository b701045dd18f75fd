"""Verify the TOC's structure against itself and its search documents (``memtoc verify``).

The store's ``audit`` (``memtoc.store.derived``) checks what SQL can; this module checks what
needs the derivation code, streaming every latest node and grip once:

- **node tree**: every node below a year has its parents (a week: each month it has days in); a
  period lists every child that names it as a parent, and each listed child exists;
- **bullet grips**: every bullet's grips exist, and every grip is cited by its segment's latest
  version (a grip no bullet cites is left over);
- **search document text**: each node's, grip's and bookmark's document holds the text the
  pipeline derives for it (``node_text``, the excerpt, ``bookmark_text``; the identifier forms
  indexed with it are derived from that text).

Work in flight is not a problem: a period marked dirty (its rollup is not due yet), a segment
queued for a build, and every period overlapping them, may cite grips a rebuilt child no longer
has or miss a new child until the rollup runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from memtoc.errors import QueryError
from memtoc.model import TocNode
from memtoc.pipeline.periods import PERIOD_LEVELS, Calendar
from memtoc.pipeline.toc import node_text
from memtoc.retrieval.bookmark_step import bookmark_text
from memtoc.store.base import PipelineStore
from memtoc.store.derived import EXAMPLES, Audit, DerivedStore, Finding
from memtoc.text.fts_text import EXTRAS_MARK, original_text

BATCH = 1_000


@dataclass(slots=True)
class _Problem:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str, limit: int) -> None:
        self.count += 1
        if len(self.examples) < limit:
            self.examples.append(example)


@dataclass(slots=True)
class _Shape:
    level: str
    parents: tuple[str, ...]
    children: tuple[str, ...]
    start_ms: int
    end_ms: int


class _Pending:
    """Periods and segments with work in flight (dirty marks, queued or quarantined builds)."""

    def __init__(self, store: PipelineStore, ops: DerivedStore, calendar: Calendar) -> None:
        self.spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.segments: set[tuple[str, str]] = set()
        for level in PERIOD_LEVELS:
            for mark in store.dirty_periods(level):
                try:
                    period = calendar.from_node_id(mark.node_id)
                except QueryError:
                    continue
                self.spans[mark.project].append((period.start_ms, period.end_ms))
        for seg in ops.pending_segments():
            self.segments.add((seg.project, seg.node_id))
            self.spans[seg.project].append((seg.start_ms, seg.end_ms))

    def covers(self, project: str, node_id: str, shape: _Shape, *, own: bool = False) -> bool:
        """Whether the node's content may lag: a queued segment, or (unless ``own``: the node's
        own build only) any node overlapping a dirty period or a queued segment."""
        if (project, node_id) in self.segments:
            return True
        if own and shape.level == "segment":
            return False
        return any(s < shape.end_ms and shape.start_ms < e for s, e in self.spans.get(project, ()))


def _nodes(ops: DerivedStore) -> Iterator[list[TocNode]]:
    after = ("", "")
    while batch := ops.scan_nodes(after, BATCH):
        yield batch
        after = (batch[-1].project, batch[-1].node_id)


def verify_structure(
    store: PipelineStore, ops: DerivedStore, calendar: Calendar, *, examples: int = EXAMPLES
) -> Audit:
    """The structural checks of the module docstring (one pass over nodes, grips, bookmarks)."""
    pending = _Pending(store, ops, calendar)
    shapes: dict[tuple[str, str], _Shape] = {}
    cited: dict[str, tuple[str, str]] = {}
    """Grip id → the segment node whose latest version cites it."""
    missing_grips = _Problem()
    doc_text = _Problem()
    differ: set[str] = set()
    """The rebuild parts that derive the items whose documents differ."""
    for batch in _nodes(ops):
        wanted = {g for n in batch for b in n.bullets for g in b.grip_ids}
        present = ops.existing_grips(sorted(wanted))
        stored = ops.doc_texts("node", [(n.project, n.node_id) for n in batch])
        for node in batch:
            key = (node.project, node.node_id)
            shape = _Shape(
                node.level, node.parents, node.child_node_ids, node.start_ms, node.end_ms
            )
            shapes[key] = shape
            for bullet in node.bullets:
                for grip_id in bullet.grip_ids:
                    if node.level == "segment":
                        cited[grip_id] = key
                    if grip_id not in present and not pending.covers(*key, shape, own=True):
                        missing_grips.add(
                            f"{grip_id} of {node.node_id} in {node.project}", examples
                        )
            text = stored.get(key)
            if text is not None and not _same(text, node_text(node)):
                doc_text.add(f"node {node.node_id} in {node.project}", examples)
                differ.add("summaries")
    tree = _tree(shapes, pending, examples)
    uncited = _Problem()
    after = ""
    while grips := ops.scan_grips(after, BATCH):
        after = grips[-1].grip_id
        stored = ops.doc_texts("grip", [(g.project, g.grip_id) for g in grips])
        for grip in grips:
            owner = (grip.project, grip.toc_node_id)
            owner_shape = shapes.get(owner)
            if (
                owner_shape is not None
                and owner_shape.level == "segment"
                and cited.get(grip.grip_id) != owner
                and not pending.covers(*owner, owner_shape, own=True)
            ):
                uncited.add(f"{grip.grip_id} of {grip.toc_node_id} in {grip.project}", examples)
            text = stored.get((grip.project, grip.grip_id))
            if text is not None and not _same(text, grip.excerpt):
                doc_text.add(f"grip {grip.grip_id} in {grip.project}", examples)
                differ.add("grips")
    marks = store.list_bookmarks()
    stored = ops.doc_texts("bookmark", [(b.project, b.bookmark_id) for b in marks])
    for mark in marks:
        text = stored.get((mark.project, mark.bookmark_id))
        if text is not None and not _same(text, bookmark_text(mark)):
            doc_text.add(f"bookmark {mark.bookmark_id} in {mark.project}", examples)
            differ.add("bookmarks")
    grips_fix = "memtoc rebuild --grips"
    # the item or its document may be the damaged one: derive the item again, then its document
    docs_fix = "memtoc rebuild " + " ".join(f"--{p}" for p in (*sorted(differ), "docs"))
    findings = [
        *tree,
        _finding("bullet grips", missing_grips, "bullets cite grips that do not exist", grips_fix),
        _finding("bullet grips", uncited, "grips are cited by no bullet of their node", grips_fix),
        _finding(
            "search document text",
            doc_text,
            "search documents differ from the text derived from their item",
            docs_fix,
        ),
    ]
    return Audit(
        ("node tree", "bullet grips", "search document text"),
        tuple(f for f in findings if f is not None),
    )


def _tree(
    shapes: dict[tuple[str, str], _Shape], pending: _Pending, examples: int
) -> list[Finding | None]:
    orphans, lost, unlisted = _Problem(), _Problem(), _Problem()
    for (project, node_id), shape in shapes.items():
        if shape.level != "year" and not pending.covers(project, node_id, shape):
            if not shape.parents:
                orphans.add(f"{node_id} (no parent) in {project}", examples)
            for parent_id in shape.parents:  # a week lies in one or two months
                parent = shapes.get((project, parent_id))
                if parent is None:
                    orphans.add(f"{node_id} (parent {parent_id}) in {project}", examples)
                elif node_id not in parent.children and not pending.covers(
                    project, parent_id, parent
                ):
                    unlisted.add(f"{node_id} not listed by {parent_id} in {project}", examples)
        if shape.level == "segment" or pending.covers(project, node_id, shape):
            continue
        for child in shape.children:
            if (project, child) not in shapes:
                lost.add(f"{child} listed by {node_id} in {project}", examples)
    fix = "memtoc rebuild --summaries"
    return [
        _finding("node tree", orphans, "nodes have no parent node", fix),
        _finding("node tree", lost, "children listed by a period do not exist", fix),
        _finding("node tree", unlisted, "nodes are not listed by their parent", fix),
    ]


def _same(stored: str, plain: str) -> bool:
    """Whether a stored document holds ``plain`` (its identifier forms are derived from it, and
    are the BM25 index's business: ``rebuild --fts`` recomputes them)."""
    held, clean = original_text(stored), plain.replace(EXTRAS_MARK, " ")
    return held == clean or held == clean.replace("\x00", "\ufffd")  # PostgreSQL text: no NUL


def _finding(check: str, problem: _Problem, what: str, fix: str) -> Finding | None:
    if not problem.count:
        return None
    return Finding(check, f"{problem.count} {what}", problem.count, tuple(problem.examples), fix)
