"""Parameter helpers of the HTTP routes: time arguments and the default project.

Times take the forms the MCP tools accept (``memtoc.surfaces.mcp_time``): ISO 8601, epoch ms,
an age (``7d``) or a phrase (``last week``). Anything unparseable, or an instant outside what the
store can hold, is a ``QueryError`` (400) naming the parameter — never a 500.
"""

from __future__ import annotations

from typing import Literal

from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.projects import Scope
from memtoc.surfaces.mcp_time import parse_when

MAX_ABS_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest instant a time parameter may name (and minus it)."""


def time_param(
    memory: Memory, value: str | None, *, name: str, edge: Literal["start", "end"]
) -> int | None:
    """``value`` as epoch ms at ``memory``'s clock and time zone (None stays None)."""
    if value is None:
        return None
    try:
        ms = parse_when(value, now_ms=memory.clock.now_ms(), tz=memory.tz, edge=edge, name=name)
    except (ValueError, OverflowError) as exc:
        raise QueryError(f"{name}={value!r}: not a time ({exc})") from exc
    if not -MAX_ABS_MS <= ms <= MAX_ABS_MS:
        raise QueryError(f"{name}={value!r}: out of range (years 1-9999)")
    return ms


def scope(memory: Memory, project: str | None, all_projects: bool = False) -> Scope:
    """The projects a request reads, by memtoc's one rule (``memtoc.projects``): the named one
    (id or name; unknown: 404 naming the known ones), every one with ``all``, else — the API has
    no working directory — the store's only project (several: 400 naming them)."""
    return memory.scope(project, all_projects=all_projects)


def one_project(memory: Memory, project: str | None) -> str:
    """The one project a navigation request is about (``scope``); 400 on an empty store."""
    found = scope(memory, project)
    if found.project is None:
        raise QueryError(found.note or "no project")
    return found.project
