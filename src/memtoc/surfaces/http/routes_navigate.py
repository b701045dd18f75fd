"""``/v1`` routes that browse the memory: status, projects, toc, nodes, grips, timeline."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from memtoc.retrieval.node_view import MAX_CHILD_LIMIT
from memtoc.surfaces.http.deps import MemoryDep, api_state
from memtoc.surfaces.http.models import ERRORS, JsonObject, Level, NodeTier
from memtoc.surfaces.http.params import one_project, time_param

router = APIRouter(prefix="/v1", tags=["navigate"], responses=ERRORS)

ProjectQ = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Project name or id; default: the store's only project (unknown: 404).",
    ),
]


@router.get("/status", summary="Health, queue depth, backends, daemon")
def status(request: Request, memory: MemoryDep) -> JsonObject:
    """Store counts, the outbox (pending, failed), recent failures, the last rollup of each
    level, the backends in use with their degraded modes and — under ``memtoc serve`` — the
    daemon: worker state, pid holding the store lock."""
    data: JsonObject = dict(memory.status())
    daemon = api_state(request).daemon
    data["daemon"] = daemon() if daemon is not None else None
    return data


@router.get("/projects", summary="Projects: id, name, root folders and event counts")
def projects(memory: MemoryDep) -> JsonObject:
    return {"projects": memory.projects()}


@router.get("/toc", summary="The roots (years) of a project's table of contents")
def toc(memory: MemoryDep, project: ProjectQ = None) -> JsonObject:
    """The project's year nodes, oldest first (full node dicts: title, bullets, children)."""
    name = one_project(memory, project)
    nodes = [n.to_dict() for n in memory.toc(name)]
    data: JsonObject = {"project": name, "nodes": nodes}
    if not nodes:
        data["hint"] = memory.toc_hint(name)
    return data


@router.get("/nodes/{node_id}", summary="A node with its children's summaries")
def node(
    memory: MemoryDep,
    node_id: Annotated[
        str, Path(min_length=1, max_length=300, description="toc:day:2024-01-18, …")
    ],
    project: ProjectQ = None,
    tier: Annotated[NodeTier, Query(description="L0 abstract; L1 adds the overview.")] = "L0",
    focus: Annotated[
        str | None,
        Query(max_length=2_000, description="A question: children most about it first"),
    ] = None,
    offset: Annotated[int, Query(ge=0, description="Children to skip")] = 0,
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_CHILD_LIMIT, description="Children to list (8; 5 focused)")
    ] = None,
) -> JsonObject:
    """The node, a page of its children (``offset``, ``limit``; ``more`` says how many follow)
    and, with ``focus``, the children most about it first."""
    scoped = one_project(memory, project) if project is not None else None
    view = memory.node(node_id, project=scoped, tier=tier, focus=focus, offset=offset, limit=limit)
    return view.to_dict()


@router.get("/grips/{grip_id}", summary="The events behind a bullet (or an event), with neighbours")
def grip(
    memory: MemoryDep,
    grip_id: Annotated[str, Path(min_length=1, max_length=300, description="grip:…")],
    before: Annotated[int, Query(ge=0, le=50)] = 3,
    after: Annotated[int, Query(ge=0, le=50)] = 3,
    focus: Annotated[
        str | None,
        Query(max_length=2_000, description="A question: long events shown by passages about it"),
    ] = None,
) -> JsonObject:
    return memory.expand(grip_id, before=before, after=after, focus=focus).to_dict()


@router.get("/timeline", summary="Nodes of one level over a time range")
def timeline(
    memory: MemoryDep,
    project: ProjectQ = None,
    level: Level = "day",
    since: Annotated[
        str | None, Query(max_length=100, description="ISO 8601, epoch ms, 7d, 'last week'…")
    ] = None,
    until: Annotated[str | None, Query(max_length=100, description="Default: now.")] = None,
) -> JsonObject:
    """Default range: everything up to now."""
    name = one_project(memory, project)
    since_ms = time_param(memory, since, name="since", edge="start")
    until_ms = time_param(memory, until, name="until", edge="end")
    return memory.timeline(since_ms, until_ms, level=level, project=name).to_dict()
