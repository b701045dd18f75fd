"""memtoc's MCP server: the ``Memory`` facade as tools, a context resource and a prompt.

``build_server(memory, processing)`` returns an ``MCPServer`` (the official ``mcp`` SDK, 2.x) over
one ``Memory``: one store connection opened once per server process, read by every tool, written
by ``memory_remember`` and ``memory_forget``. ``memtoc mcp`` runs it over stdio (what agents
spawn) or streamable HTTP, beside a background worker on a connection of its own that files new
events into the table of contents (``processing``; ``memory_status`` says who processes).

Every tool result is a JSON object that carries ``tokens`` — what its content costs an agent, as
counted by the store's one token counter — so an agent can budget its reads. Failures (an unknown
node or grip id, a malformed time, a bad level) come back as tool errors (``isError``) with the
reason; they never crash the server. Tool names are stable (``memory_*``); their descriptions say
when to use each, what ids look like and what a call costs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memtoc.errors import MemtocError, QueryError
from memtoc.memory import Memory
from memtoc.model import JsonValue, TocNode, iso_ms
from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.surfaces.mcp_time import parse_when
from memtoc.surfaces.processing import Processing

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = """\
memtoc is this user's long-term memory of past agent sessions, filed as a table of contents over
time (year > month > week > day > segment). Each summary bullet cites grip ids (grip:...) that
expand to the exact conversation events behind it. Every result states its token cost in `tokens`.
- memory_context: call first in a session (where work left off, recent days, top bookmarks).
- memory_recall(query, budget): "what do we know about X, within N tokens" - the best context for
  a question, packed into the budget, in time order, with the events it cites. Prefer it when you
  need an answer's context rather than pointers.
- memory_search(query): find things by any text (teleport); returns ids to open.
- memory_toc / memory_timeline: browse (node ids look like toc:year:2024, toc:week:2024-W03,
  toc:day:2024-01-18); memory_expand(grip_id): the exact events behind a bullet.
- memory_bookmarks: the salient moments kept (conclusions, resolutions, validated facts).
- memory_remember(text, kind): record a decision or note a future session must know; it is filed
  into the table of contents in the background (memory_status says who processes).
- memory_forget: DESTRUCTIVE, only when the user asks to delete something, and only by explicit
  event ids or a since+until range (never by query); run it with dry_run first.
- memory_status: health, the processing queue, and who processes new events."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

Project = Annotated[
    str | None,
    Field(description="Project name (e.g. 'webapp'); default: the only or most recent project."),
]
Tier = Literal["L0", "L1"]
Level = Literal["year", "month", "week", "day", "segment"]
NoteKind = Literal["note", "decision", "todo", "fact"]


def tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn memtoc's errors into MCP tool errors carrying their message (``isError``)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except MemtocError as exc:
            raise ToolError(str(exc)) from exc

    return wrapper


def node_brief(node: TocNode) -> dict[str, JsonValue]:
    """A node as listed in a timeline: id, level, title, L0 and span."""
    return {
        "node_id": node.node_id,
        "level": node.level,
        "title": node.title,
        "abstract": node.abstract,
        "start_time": iso_ms(node.start_ms),
        "end_time": iso_ms(node.end_ms),
        "event_count": node.event_count,
    }


def build_server(memory: Memory, processing: Processing | None = None) -> MCPServer[Any]:
    """An MCP server whose tools, resource and prompt all call ``memory``.

    ``processing``: who processes new events (``memtoc mcp`` passes its started worker); without
    one, ``memory_status`` reports the daemon holding the store's lock, or nobody.
    """
    app: MCPServer[Any] = MCPServer(name="memtoc", instructions=INSTRUCTIONS)
    processing = processing or Processing(memory.settings, worker=False)

    def project_or_default(project: str | None) -> str:
        if project:
            return project
        latest = memory.latest_project()
        if latest is None:
            raise QueryError("the memory is empty: nothing has been recorded yet")
        return latest

    @app.tool(name="memory_context", annotations=READ)
    @tool_errors
    def memory_context(
        project: Project = None,
        budget: Annotated[
            int, Field(ge=0, le=20_000, description="Token budget.")
        ] = DEFAULT_BUDGET,
    ) -> dict[str, Any]:
        """Session-start briefing: where the latest session left off (last request, unresolved
        error), recent days' summaries (newest first) and top bookmarks, within `budget` tokens.
        Call it first in a new session; costs at most `budget` tokens (default 800)."""
        return memory.context(project, budget=budget).to_dict()

    @app.tool(name="memory_toc", annotations=READ)
    @tool_errors
    def memory_toc(
        node_id: Annotated[
            str | None,
            Field(
                description="A node id: toc:year:2024, toc:month:2024-01, toc:week:2024-W03, "
                "toc:day:2024-01-18 or toc:segment:2024-01-18T10:00:<suffix>. "
                "Omit to list the project's years."
            ),
        ] = None,
        project: Project = None,
        depth: Annotated[
            Tier, Field(description="L0: title, abstract, bullets; L1 adds the overview.")
        ] = "L0",
    ) -> dict[str, Any]:
        """Browse the table of contents. Without node_id: the project's years with their children
        (months). With node_id: that node's title, abstract, bullets (each citing grip ids) and
        its children's titles and abstracts — drill down by calling again with a child's id.
        Typically 100-600 tokens per node at L0; L1 can add up to ~2,000."""
        if node_id is None:
            name = project_or_default(project)
            views = [memory.node(r.node_id, project=name, tier=depth) for r in memory.toc(name)]
            out: dict[str, Any] = {
                "project": name,
                "roots": [v.to_dict() for v in views],
                "tokens": sum(v.tokens for v in views),
            }
            if not views:
                out["hint"] = memory.toc_hint(name)
            return out
        return memory.node(node_id, project=project, tier=depth).to_dict()

    @app.tool(name="memory_expand", annotations=READ)
    @tool_errors
    def memory_expand(
        grip_id: Annotated[
            str, Field(description="A grip id from a bullet, like grip:1705572000000:ab12cd.")
        ],
        before: Annotated[int, Field(ge=0, le=50, description="Events before the range.")] = 3,
        after: Annotated[int, Field(ge=0, le=50, description="Events after the range.")] = 3,
    ) -> dict[str, Any]:
        """The exact events behind a summary bullet: the grip's range (in_grip: true) plus
        neighbours of the same session. Use it to check a detail or quote the source. Costs the
        events' text (often 200-2,000 tokens; lower before/after to save)."""
        return memory.expand(grip_id, before=before, after=after).to_dict()

    @app.tool(name="memory_timeline", annotations=READ)
    @tool_errors
    def memory_timeline(
        since: Annotated[
            str,
            Field(description="Start: 2024-01-18, 2024-01-18T10:00Z, epoch ms, 7d, yesterday…"),
        ],
        until: Annotated[str | None, Field(description="End (same forms); default: now.")] = None,
        level: Annotated[Level, Field(description="Which nodes to list.")] = "day",
        project: Project = None,
    ) -> dict[str, Any]:
        """Nodes of one level (days by default) over a time range, in time order, each with its
        id, title and abstract — a cheap overview of a period (~40-120 tokens per node). Open one
        with memory_toc(node_id)."""
        now = memory.clock.now_ms()
        since_ms = parse_when(since, now_ms=now, tz=memory.tz, edge="start", name="since")
        until_ms = (
            parse_when(until, now_ms=now, tz=memory.tz, edge="end", name="until") if until else now
        )
        nodes = memory.timeline(since_ms, until_ms, level=level, project=project)
        tokens = sum(memory.counter.count(f"{n.title}\n{n.abstract}") for n in nodes)
        return {"nodes": [node_brief(n) for n in nodes], "tokens": tokens}

    @app.tool(name="memory_search", annotations=READ)
    @tool_errors
    def memory_search(
        query: Annotated[
            str, Field(min_length=1, max_length=2_000, description="Any text; no syntax needed.")
        ],
        project: Project = None,
        level: Annotated[
            Level | None, Field(description="Only nodes of this level (default: any).")
        ] = None,
        since: Annotated[str | None, Field(description="Start (as in memory_timeline).")] = None,
        until: Annotated[str | None, Field(description="End (as in memory_timeline).")] = None,
        depth: Annotated[
            Literal["L0", "L1", "L2"],
            Field(description="L0 abstracts (cheap), L1 overviews, L2 the full events."),
        ] = "L0",
        limit: Annotated[int, Field(ge=1, le=50, description="How many items.")] = 10,
        at: Annotated[
            str | None,
            Field(description="Reference time for 'last week' etc. in the query (default now)."),
        ] = None,
    ) -> dict[str, Any]:
        """Teleport: search summaries, grips, bookmarks and events (BM25 + vectors) and jump to
        the best matches, each with its id, time span, text at `depth` and the events it cites.
        Use it when you know what you are looking for; browse with memory_toc when you do not.
        A time expression in the query ("last week", "in March", "before the migration") filters
        the results; `time_range` says how it was read. At L0 ~40-100 tokens per item; `tokens`
        gives the total."""
        now = memory.clock.now_ms()
        at_ms = parse_when(at, now_ms=now, tz=memory.tz, edge="start", name="at") if at else None
        since_ms = (
            parse_when(since, now_ms=now, tz=memory.tz, edge="start", name="since")
            if since
            else None
        )
        until_ms = (
            parse_when(until, now_ms=now, tz=memory.tz, edge="end", name="until") if until else None
        )
        result = memory.search(
            query,
            project=project,
            level=level,
            since_ms=since_ms,
            until_ms=until_ms,
            limit=limit,
            depth=depth,
            at_ms=at_ms,
        )
        return result.to_dict()

    # -- recall (memtoc.retrieval.recall) -------------------------------------------------------
    @app.tool(name="memory_recall", annotations=READ)
    @tool_errors
    def memory_recall(
        query: Annotated[
            str, Field(min_length=1, max_length=2_000, description="The question, in any words.")
        ],
        budget: Annotated[
            int, Field(ge=0, le=50_000, description="Most tokens the context may hold.")
        ] = 1_000,
        project: Project = None,
    ) -> dict[str, Any]:
        """Recall — "what do we know about X, within N tokens": the best context for a question
        packed into `budget` tokens — matching bookmarks, then the best events, grips and
        segments (an item that does not fit steps down to its summary), in time order, each with
        the events it includes and cites. "last week" / "in March" in the question favour that
        time. `tokens` (never above `budget`) is what the context costs; use it before
        memory_search when you need context rather than pointers."""
        return memory.recall(query, budget=budget, project=project).to_dict()

    @app.tool(name="memory_bookmarks", annotations=READ)
    @tool_errors
    def memory_bookmarks(
        project: Project = None,
        limit: Annotated[int, Field(ge=1, le=100, description="How many.")] = 10,
    ) -> dict[str, Any]:
        """Salient moments kept as bookmarks — conclusions, resolutions after a correction,
        validated understanding, foundational context — most important first (importance decays
        mildly with age). Each cites its event ids. ~30-60 tokens per bookmark."""
        marks = memory.bookmarks(project, limit)
        tokens = sum(memory.counter.count(b.content) for b in marks)
        return {"bookmarks": [b.to_dict() for b in marks], "tokens": tokens}

    @app.tool(name="memory_remember", annotations=WRITE)
    @tool_errors
    def memory_remember(
        text: Annotated[
            str, Field(min_length=1, max_length=20_000, description="What to keep, verbatim.")
        ],
        kind: Annotated[NoteKind, Field(description="What it is.")] = "note",
        project: Project = None,
        session_id: Annotated[
            str | None, Field(description="Session to file it under; default 'memtoc-notes'.")
        ] = None,
    ) -> dict[str, Any]:
        """Record a decision, fact, todo or note now, as an event in the memory. It is searchable
        and recallable once processed — within seconds when this server's worker or a `memtoc
        serve` daemon runs (memory_status → processing says which). Use it for things a future
        session must know. Returns the stored event (its event_id) and the text's token count."""
        settings_project = memory.settings.project if memory.settings else None
        name = project or settings_project or memory.latest_project() or "default"
        event = memory.remember(
            text,
            project=name,
            session_id=session_id or "memtoc-notes",
            role="assistant",
            agent="mcp",
            metadata={"kind": kind, "via": "mcp"},
        )
        return {"event": event.to_dict(), "tokens": memory.counter.count(event.text)}

    # -- forget (memtoc.forgetting): explicit ids or a closed time range only, never a query ------
    @app.tool(name="memory_forget", annotations=DESTROY)
    @tool_errors
    def memory_forget(
        event_ids: Annotated[
            list[str] | None,
            Field(max_length=1000, description="Exact event ids to forget (from search/expand)."),
        ] = None,
        since: Annotated[
            str | None, Field(description="With until: forget every event in [since, until).")
        ] = None,
        until: Annotated[str | None, Field(description="End of the range (exclusive).")] = None,
        project: Annotated[
            str | None, Field(description="Only in this project (recommended with a range).")
        ] = None,
        dry_run: Annotated[
            bool, Field(description="Only report what would be forgotten; change nothing.")
        ] = False,
    ) -> dict[str, Any]:
        """DESTRUCTIVE, cannot be undone: forget events for good — only when the user asks to
        delete something. Give explicit event_ids, or since+until (both). The events' text is
        purged from the store, summaries, grips, vectors and bookmarks built from them are
        re-derived, and an audit entry (ids and counts) is kept. Use dry_run first to show the
        user what would go. ~100 tokens plus the ids."""
        if (event_ids is None) == (since is None and until is None):
            raise ToolError("memory_forget: give event_ids, or since and until (not both)")
        if event_ids is None and (since is None or until is None):
            raise ToolError("memory_forget: a range needs both since and until")
        now = memory.clock.now_ms()
        since_ms = (
            parse_when(since, now_ms=now, tz=memory.tz, edge="start", name="since")
            if since
            else None
        )
        until_ms = (
            parse_when(until, now_ms=now, tz=memory.tz, edge="end", name="until") if until else None
        )
        report = memory.forget(
            event_ids=event_ids,
            since_ms=since_ms,
            until_ms=until_ms,
            project=project,
            dry_run=dry_run,
        ).to_dict()
        report["tokens"] = memory.counter.count(str(report))
        return report

    @app.tool(name="memory_status", annotations=READ)
    @tool_errors
    def memory_status() -> dict[str, Any]:
        """Health of the memory: events, projects, sessions, the processing queue (outbox
        pending/failed), recent failures, which backends run (token counter, summariser; degraded
        modes are named) and `processing`: who files new events into the table of contents —
        `by` this-server (its worker), other-process (a `memtoc serve` or another MCP server,
        with its pid) or nobody (`degraded` says why; events wait in the queue). ~250 tokens."""
        status = memory.status()
        status["processing"] = processing.info()
        status["tokens"] = memory.counter.count(str(status))
        return status

    @app.resource(
        "memtoc://context/{project}",
        name="session-context",
        description="Session-start context of a project (recent days, open thread, bookmarks).",
        mime_type="text/markdown",
    )
    def context_resource(project: str) -> str:
        try:
            view = memory.context(project)
        except MemtocError as exc:
            raise ResourceError(str(exc)) from exc
        return view.text or f"(memtoc has nothing for project {project} yet)"

    @app.prompt(
        name="memtoc_session_start",
        description="Brief the agent with memtoc's memory of this project at session start.",
    )
    def session_start_prompt(project: str | None = None, budget: str = str(DEFAULT_BUDGET)) -> str:
        try:
            view = memory.context(project, budget=int(budget))
        except (MemtocError, ValueError) as exc:
            return f"(memtoc could not build the context: {exc})"
        if not view.text:
            return "memtoc has no memory of earlier sessions yet."
        return (
            "Here is what memtoc remembers of earlier sessions of this project. Use it to pick up "
            "where work left off; use the memory_* tools for details.\n\n" + view.text
        )

    return app
