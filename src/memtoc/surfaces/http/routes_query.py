"""``/v1`` routes that query and write the memory: search, recall, bookmarks, context, remember."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from memtoc.retrieval.context import DEFAULT_BUDGET, ContextView
from memtoc.surfaces.http.deps import MemoryDep
from memtoc.surfaces.http.models import (
    ERRORS,
    JsonObject,
    Kind,
    Level,
    RecallBody,
    RememberBody,
    Tier,
)
from memtoc.surfaces.http.params import scope, time_param

router = APIRouter(prefix="/v1", responses=ERRORS)

ProjectQ = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Project name or id; default: the store's only project (several: 400).",
    ),
]
AllQ = Annotated[bool, Query(alias="all", description="Every project (instead of one).")]
TimeQ = Annotated[
    str | None, Query(max_length=100, description="ISO 8601, epoch ms, 7d, 'last week'…")
]


@router.get("/search", tags=["query"], summary="Teleport: BM25 + vectors over the memory")
def search(
    memory: MemoryDep,
    q: Annotated[str, Query(min_length=1, max_length=2_000, description="Any text.")],
    project: ProjectQ = None,
    all_projects: AllQ = False,
    level: Level | None = None,
    kind: Annotated[Kind | None, Query(description="Only items of this kind.")] = None,
    since: TimeQ = None,
    until: TimeQ = None,
    depth: Annotated[Tier, Query(description="L0 abstracts, L1 overviews, L2 events.")] = "L0",
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> JsonObject:
    """Items (nodes, grips, bookmarks, events) with scores 0..1, their text at ``depth`` and
    the events they include or cite (DESIGN §6)."""
    found = scope(memory, project, all_projects)
    result = memory.search(
        q,
        projects=found.projects,
        level=level,
        kinds=(kind,) if kind is not None else None,
        since_ms=time_param(memory, since, name="since", edge="start"),
        until_ms=time_param(memory, until, name="until", edge="end"),
        limit=limit,
        depth=depth,
    )
    return result.to_dict()


@router.post(
    "/recall", tags=["query"], summary="The best context for a question within a token budget"
)
def recall(memory: MemoryDep, body: RecallBody) -> JsonObject:
    """Bookmarks first, then the best grips and segments, then plain retrieval to fill; items in
    time order with citations, ``tokens`` ≤ ``budget`` (DESIGN §6)."""
    at_ms = time_param(memory, body.at, name="at", edge="start")
    found = scope(memory, body.project, body.all_projects)
    result = memory.recall(body.query, budget=body.budget, projects=found.projects, at_ms=at_ms)
    data = result.to_dict()
    # who spoke, for each event item: one at L1 (a passage) carries no event to say it
    ids = [item.id for item in result.items if item.kind == "event"]
    roles = {e.event_id: e.role for e in memory.store.get_events(ids)} if ids else {}
    items = data["items"]
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("kind") == "event":
                item["role"] = roles.get(str(item.get("id")))
    return data


@router.get("/bookmarks", tags=["query"], summary="Salient moments, most important first")
def bookmarks(
    memory: MemoryDep,
    project: ProjectQ = None,
    all_projects: AllQ = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> JsonObject:
    found = scope(memory, project, all_projects)
    marks = memory.bookmarks(found.project, limit)
    return {"project": found.project, "bookmarks": [b.to_dict() for b in marks]}


@router.get("/context", tags=["query"], summary="Session-start context within a token budget")
def context(
    memory: MemoryDep,
    project: ProjectQ = None,
    budget: Annotated[int, Query(ge=0, le=20_000)] = DEFAULT_BUDGET,
) -> JsonObject:
    """Where the latest session left off, recent days and top bookmarks of a project (default:
    the store's only one)."""
    found = scope(memory, project)
    if found.project is None:  # an empty store: nothing to say yet
        return {**ContextView(None, budget, (), "", 0).to_dict(), "note": found.note}
    return memory.context(found.project, budget=budget).to_dict()


@router.post("/remember", tags=["write"], summary="Record a note or decision now")
def remember(memory: MemoryDep, body: RememberBody) -> JsonObject:
    """Stored as an event (filed into the TOC by the next processing round); returns it."""
    event = memory.remember(
        body.text,
        project=memory.project_for_write(body.project),
        session_id=body.session_id or "memtoc-notes",
        role=body.role,
        agent="http",
        metadata={"kind": body.kind, "via": "http"},
    )
    return {"event": event.to_dict(), "tokens": memory.counter.count(event.text)}
