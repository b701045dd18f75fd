"""Parameter helpers of the HTTP routes: time arguments and the default project.

Times are read as on every surface (``memtoc.retrieval.timeparse.parse_bound``): ISO 8601, epoch
ms, an age (``7d``) or a phrase (``last week``). Anything unparseable, or an instant outside what
the store can hold, is a ``QueryError`` (400) naming the parameter — never a 500.
"""

from __future__ import annotations

from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.projects import Scope
from memtoc.retrieval.timeparse import Edge, parse_bound


def time_param(memory: Memory, value: str | None, *, name: str, edge: Edge) -> int | None:
    """``value`` as epoch ms at ``memory``'s clock and time zone (None stays None)."""
    if value is None:
        return None
    return parse_bound(
        value, reference_ms=memory.clock.now_ms(), tz=memory.tz, edge=edge, name=name
    )


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
