"""memtoc's MCP server: the ``Memory`` facade as tools, a context resource and a prompt.

``build_server(memory, processing)`` returns an ``MCPServer`` (the official ``mcp`` SDK, 2.x) over
one ``Memory``: one store connection opened once per server process, read by every tool, written
by ``memory_remember`` and ``memory_forget``. ``memtoc mcp`` runs it over stdio (what agents
spawn) or streamable HTTP, beside a background worker on a connection of its own that files new
events into the table of contents (``processing``; ``memory_status`` says who processes).

**Which project** (``memtoc.projects``, the rule every surface uses): an explicit ``project``
argument (id or name) always wins, and an unknown one is an error naming the known projects;
otherwise the project of the client's working directory — its first ``file://`` root
(``roots/list``, when the client declares roots; remembered per session object, which stateless
protocol versions renew per request), else the directory the server was started in. A working directory with no memory yet gives an empty result that says
so — never another project's memory. ``memory_search`` and ``memory_recall`` take
``all_projects`` for every project.

**What the agent receives** (``mcp_text``): compact text written for a model — ids first, one
line per item — ending with ``[N tokens]``, N the one token counter's count of the whole text.
``memory_context`` and ``memory_recall`` fit that whole text into the budget asked for. Structured
content (the CLI's ``--json`` data) is added only with ``structured=True`` (``memtoc mcp
--structured``): Claude Code and Codex hand a result's structured content to the model *instead*
of its text, which would replace the compact text with JSON. Failures (an unknown id or project,
a malformed time, a bad level) come back as tool errors (``isError``) with the reason.
"""

from __future__ import annotations

import functools
import inspect
import os
import weakref
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar
from urllib.parse import unquote, urlsplit

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, ListRootsResult, ToolAnnotations
from pydantic import Field

import memtoc
from memtoc.errors import MemtocError
from memtoc.memory import Memory
from memtoc.model import iso_ms
from memtoc.projects import Scope
from memtoc.retrieval.context import DEFAULT_BUDGET
from memtoc.retrieval.node_view import MAX_CHILD_LIMIT
from memtoc.retrieval.timeparse import Edge, parse_bound
from memtoc.surfaces import mcp_text as mt
from memtoc.surfaces.mcp_handles import Handles
from memtoc.surfaces.mcp_status import status_text
from memtoc.surfaces.processing import Processing
from memtoc.text.tokens import truncate_to_tokens

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = """\
memtoc is this user's long-term memory of past agent sessions, filed as a table of contents over
time (year > month > week > day > segment). Each summary bullet cites grip ids (grip:...) that
expand to the exact conversation events behind it. Results are compact text: ids in parentheses
or brackets are what the other tools take; the last line, [N tokens], is what the result cost.
Every tool works on the project of your working directory (a repository and all its worktrees
are one project) unless you pass project=<name>; search and recall take all_projects=true.
- memory_context: call first in a session (where work left off, recent days, top bookmarks).
- memory_recall(query, budget): "what do we know about X, within N tokens" - the best context for
  a question, packed into the budget (the whole result fits it), in time order, each item led by
  a handle of what it cites (#12, which memory_expand takes). Prefer it when you need an
  answer's context rather than pointers.
- memory_search(query): find things by any text (teleport); returns ids to open.
- memory_toc / memory_timeline: browse (node ids look like toc:year:2024, toc:week:2024-W03,
  toc:day:2024-01-18; give memory_toc focus=<your question> to list the children most about it
  first); memory_expand(grip_id, event_id or #handle): the exact events behind a bullet, a search
  hit or a recall item.
- memory_bookmarks: the salient moments kept (conclusions, resolutions, validated facts).
- memory_remember(text, kind): record a decision or note a future session must know; it is filed
  into the table of contents in the background (memory_status says who processes).
- memory_forget: DESTRUCTIVE, only when the user asks to delete something, and only by explicit
  event ids or a since+until range (never by query); run it with dry_run first.
- memory_status: health, the processing queue, who processes new events, and this session's
  project."""

MIN_BUDGET = 20
"""The smallest budget memory_context and memory_recall take: their token line alone costs up to
nine tokens, and the whole result must fit the budget."""
DEFAULT_EXPAND_BUDGET = 2_000
"""memory_expand's default budget: one bullet of a real history expanded to 6,059 tokens (a
224-line file read among its events), more than an agent's whole 1,500-token allowance."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

Project = Annotated[
    str | None,
    Field(
        description="A project's name or id. Default: the project of your working directory (a "
        "repository, whatever subfolder or worktree); an unknown name is an error that lists "
        "the known projects."
    ),
]
AllProjects = Annotated[
    bool, Field(description="Search every project instead of one (do not give project).")
]
Tier = Literal["L0", "L1"]
Level = Literal["year", "month", "week", "day", "segment"]
NoteKind = Literal["note", "decision", "todo", "fact"]

_SESSION_DIRS: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
"""The working directory each client session's roots gave (asked once per session)."""


def client_roots(ctx: Context) -> Any:
    """Resolver of the client's working directory: what an earlier call of this session found,
    else the client's roots (``roots/list``) when it declares that capability, else None."""
    known = _SESSION_DIRS.get(_session_key(ctx))
    if known is not None:
        return known
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    return ListRoots()


Roots = Annotated[Any, Resolve(client_roots)]


def _session_key(ctx: Context) -> object:
    try:
        return ctx.session
    except Exception:  # outside a request (direct calls in tests): no session to key by
        return ctx


def root_directory(roots: object) -> str | None:
    """The first ``file://`` root of a ``roots/list`` answer, as a local path."""
    if isinstance(roots, str):
        return roots
    if not isinstance(roots, ListRootsResult):
        return None
    for root in roots.roots:
        parts = urlsplit(str(root.uri))
        if parts.scheme == "file" and parts.path:
            return unquote(parts.path)
    return None


def tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn memtoc's errors into MCP tool errors carrying their message (``isError``), and give
    the tool its docstring without indentation."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except MemtocError as exc:
            raise ToolError(str(exc)) from exc

    # the docstring is the tool's description, sent to the model with every request: without
    # its source indentation ("\n        " on every line)
    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def build_server(
    memory: Memory,
    processing: Processing | None = None,
    *,
    working_dir: str | None = None,
    structured: bool = False,
) -> MCPServer[Any]:
    """An MCP server whose tools, resource and prompt all call ``memory``.

    ``processing``: who processes new events (``memtoc mcp`` passes its started worker); without
    one, ``memory_status`` reports the daemon holding the store's lock, or nobody.
    ``working_dir``: where the server was started (default: the process's working directory),
    the project of sessions whose client gives no roots. ``structured``: add structured content
    (the data behind the text) to every result.
    """
    app: MCPServer[Any] = MCPServer(
        name="memtoc", instructions=INSTRUCTIONS, version=memtoc.__version__
    )
    processing = processing or Processing(memory.settings, worker=False)
    started_in = working_dir or os.getcwd()
    counter = memory.counter
    handles = Handles()

    def where(ctx: Context, roots: object) -> str:
        found = root_directory(roots)
        if found is not None:
            _SESSION_DIRS[_session_key(ctx)] = found
            return found
        return started_in

    def scope_of(
        project: str | None, ctx: Context, roots: object, all_projects: bool = False
    ) -> Scope:
        return memory.scope(project, all_projects=all_projects, working_dir=where(ctx, roots))

    def when(value: str | None, edge: Edge, name: str) -> int | None:
        """A time argument at the memory's clock and zone (``timeparse.parse_bound``); absent
        or empty: None."""
        if not value:
            return None
        now = memory.clock.now_ms()
        return parse_bound(value, reference_ms=now, tz=memory.tz, edge=edge, name=name)

    def out(body: str, data: dict[str, Any] | None, budget: int | None = None) -> CallToolResult:
        return mt.deliver(counter, body, data, structured=structured, budget=budget)

    def nothing(
        what: str, scope: Scope, extra: dict[str, Any] | None = None, budget: int | None = None
    ) -> CallToolResult:
        """The result of a read whose scope holds no project: the note says why (cut to fit
        ``budget`` when given: its list of known projects grows with the store)."""
        note = body = mt.project_line(what, scope.name, scope.note)
        if budget is not None:
            body, _ = mt.fit(
                counter, budget, lambda inner: truncate_to_tokens(counter, note, inner)
            )
        return out(body, {**(extra or {}), "scope": scope.to_dict()}, budget)

    @app.tool(name="memory_context", annotations=READ)
    @tool_errors
    def memory_context(
        ctx: Context,
        roots: Roots,
        project: Project = None,
        budget: Annotated[
            int,
            Field(ge=MIN_BUDGET, le=20_000, description="Token budget of the whole result."),
        ] = DEFAULT_BUDGET,
    ) -> CallToolResult:
        """Session-start briefing: where the latest session left off (last request, unresolved
        error), recent days' summaries (newest first) and top bookmarks, within `budget` tokens.
        Call it first in a new session; the whole result costs at most `budget` (default 800)."""
        scope = scope_of(project, ctx, roots)
        if scope.empty:
            return nothing("session context", scope, {"items": [], "text": ""}, budget)
        views = {}

        def render(inner: int) -> str:
            view = views[inner] = memory.context(scope.project, budget=max(0, inner))
            # the context's own heading names the project: no second header to pay for
            return view.text or f"session context · project {scope.name}\nnothing recorded yet"

        body, inner = mt.fit(counter, budget, render)
        data = views[inner].to_dict() if body else {"items": [], "text": ""}
        return out(body, {**data, "budget": budget, "scope": scope.to_dict()}, budget)

    @app.tool(name="memory_toc", annotations=READ)
    @tool_errors
    def memory_toc(
        ctx: Context,
        roots: Roots,
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
            Tier,
            Field(
                description="L0: title, bullets (first grip each), children one line each; "
                "L1 adds the abstract, keywords, overview, every grip and children's abstracts."
            ),
        ] = "L0",
        focus: Annotated[
            str | None,
            Field(
                max_length=2_000,
                description="Your question: children most about it are listed first, a "
                "period shows only its bullets about it, and a year or month names the days "
                "holding the best matches (open one directly).",
            ),
        ] = None,
        offset: Annotated[int, Field(ge=0, description="Children to skip (paging).")] = 0,
        limit: Annotated[
            int | None,
            Field(ge=1, le=MAX_CHILD_LIMIT, description="Children to list (8; 5 with a focus)."),
        ] = None,
    ) -> CallToolResult:
        """Browse the table of contents. Without node_id: the project's years with their
        months. With node_id: that node's title, bullets (each citing a grip id for
        memory_expand) and a page of its children, one line each ([id] title; a day's id has
        its date, a segment's its start time) — drill down by calling again with a child's id.
        A day can have 100+ segments: pass focus=<your question> to list those most about it
        first; "… N more: offset=K" says how to list the rest. ~100-400 tokens per node at L0."""
        scope = scope_of(project, ctx, roots)
        if scope.empty or scope.project is None:
            return nothing("table of contents", scope, {"roots": []})
        if node_id is None:
            views = [
                memory.node(r.node_id, project=scope.project, tier=depth, focus=focus, limit=limit)
                for r in memory.toc(scope.project)
            ]
            body = mt.roots_text(scope.name or scope.project, views)
            data: dict[str, Any] = {
                "project": scope.project,
                "roots": [v.to_dict() for v in views],
            }
            if not views:
                data["hint"] = memory.toc_hint(scope.project)
                body += f" ({data['hint']})"
            return out(body, data)
        view = memory.node(
            handles.resolve(node_id),
            project=scope.project,
            tier=depth,
            focus=focus,
            offset=offset,
            limit=limit,
        )
        return out(mt.node_text(view), view.to_dict())

    @app.tool(name="memory_expand", annotations=READ)
    @tool_errors
    def memory_expand(
        grip_id: Annotated[
            str,
            Field(
                description="A grip id from a bullet, like grip:1705572000000:ab12cd, an "
                "event id from memory_search (the event and its neighbours), or a recall "
                "item's handle, like #12."
            ),
        ],
        before: Annotated[int, Field(ge=0, le=50, description="Events before the range.")] = 3,
        after: Annotated[int, Field(ge=0, le=50, description="Events after the range.")] = 3,
        focus: Annotated[
            str | None,
            Field(
                max_length=2_000,
                description="Your question: a long event is then shown by its passages about it.",
            ),
        ] = None,
        budget: Annotated[
            int,
            Field(ge=MIN_BUDGET, le=50_000, description="Most tokens the whole result may cost."),
        ] = DEFAULT_EXPAND_BUDGET,
    ) -> CallToolResult:
        """The exact events behind a summary bullet: the grip's range (marked *) plus
        neighbours of the same session; or, given an event id (a search hit), that event with its
        neighbours and the segment it is filed under. Use it to check a detail or quote the
        source. Costs at most `budget` tokens (default 2,000): a long event (a file read, a
        diff) is cut to its head, saying how much was left out; lower before/after, or give a
        focus, to save."""
        view = memory.expand(handles.resolve(grip_id), before=before, after=after, focus=focus)
        body, _ = mt.fit(counter, budget, lambda inner: mt.expand_within(view, counter, inner))
        return out(body, view.to_dict(), budget)

    @app.tool(name="memory_timeline", annotations=READ)
    @tool_errors
    def memory_timeline(
        ctx: Context,
        roots: Roots,
        since: Annotated[
            str | None,
            Field(
                description="Start: 2024-01-18, 2024-01-18T10:00Z, epoch ms, 7d, yesterday, last "
                "week… (default: the beginning)."
            ),
        ] = None,
        until: Annotated[str | None, Field(description="End (same forms); default: now.")] = None,
        level: Annotated[Level, Field(description="Which nodes to list.")] = "day",
        project: Project = None,
    ) -> CallToolResult:
        """Nodes of one level (days by default) over a time range, in time order, each with its
        id, title and abstract — a cheap overview of a period (~40-120 tokens per node). Open one
        with memory_toc(node_id)."""
        since_ms = when(since, "start", "since")
        until_ms = when(until, "end", "until")
        scope = scope_of(project, ctx, roots)
        if scope.empty or scope.project is None:
            return nothing("timeline", scope, {"nodes": []})
        view = memory.timeline(since_ms, until_ms, level=level, project=scope.project)
        latest = None
        if not view.nodes:
            found = memory.store.latest_nodes(scope.project, level, 5)
            latest = next((n for n in found if not n.bookkeeping_only), None)
        return out(mt.timeline_text(view, latest), view.to_dict())

    @app.tool(name="memory_search", annotations=READ)
    @tool_errors
    def memory_search(
        ctx: Context,
        roots: Roots,
        query: Annotated[
            str, Field(min_length=1, max_length=2_000, description="Any text; no syntax needed.")
        ],
        project: Project = None,
        all_projects: AllProjects = False,
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
    ) -> CallToolResult:
        """Teleport: search summaries, grips, bookmarks and events (BM25 + vectors) and jump to
        the best matches, each with its id, time span and text at `depth`. Use it when you know
        what you are looking for; browse with memory_toc when you do not. A time expression in
        the query ("last week", "in March", "before the migration") favours that period; the
        result says how it was read. At L0 ~40-100 tokens per item."""
        at_ms = when(at, "start", "at")
        since_ms = when(since, "start", "since")
        until_ms = when(until, "end", "until")
        scope = scope_of(project, ctx, roots, all_projects)
        if scope.empty:
            return nothing("search", scope, {"query": query, "items": []})
        result = memory.search(
            query,
            projects=scope.projects,
            level=level,
            since_ms=since_ms,
            until_ms=until_ms,
            limit=limit,
            depth=depth,
            at_ms=at_ms,
        )
        return out(mt.search_text(result), {**result.to_dict(), "scope": scope.to_dict()})

    # -- recall (memtoc.retrieval.recall) -------------------------------------------------------
    @app.tool(name="memory_recall", annotations=READ)
    @tool_errors
    def memory_recall(
        ctx: Context,
        roots: Roots,
        query: Annotated[
            str, Field(min_length=1, max_length=2_000, description="The question, in any words.")
        ],
        budget: Annotated[
            int,
            Field(ge=MIN_BUDGET, le=50_000, description="Most tokens the whole result may cost."),
        ] = 1_000,
        project: Project = None,
        all_projects: AllProjects = False,
    ) -> CallToolResult:
        """Recall — "what do we know about X, within N tokens": the best context for a question
        packed into `budget` tokens — matching bookmarks, then the best events, grips and
        segments (an item that does not fit steps down to its summary), in time order, each led
        by a handle of what it cites (#12: memory_expand takes it, memory_toc a segment's).
        "last week" / "in March" in the question favour that time. The whole result, header
        and token line included, costs at most `budget`; use it before memory_search when you
        need context rather than pointers. A result cut short by the time limit says so."""
        scope = scope_of(project, ctx, roots, all_projects)
        if scope.empty:
            return nothing("recall", scope, {"query": query, "items": []}, budget)
        results = {}

        def render(inner: int) -> str:
            result = memory.recall(
                query, budget=max(0, inner), projects=scope.projects, cite=handles.label
            )
            results[inner] = result
            return mt.recall_text(result, scope.name if scope.project else None)

        body, inner = mt.fit(counter, budget, render)
        data = results[inner].to_dict() if body else {"query": query, "items": []}
        return out(body, {**data, "budget": budget, "scope": scope.to_dict()}, budget)

    @app.tool(name="memory_bookmarks", annotations=READ)
    @tool_errors
    def memory_bookmarks(
        ctx: Context,
        roots: Roots,
        project: Project = None,
        limit: Annotated[int, Field(ge=1, le=100, description="How many.")] = 10,
    ) -> CallToolResult:
        """Salient moments kept as bookmarks — conclusions, resolutions after a correction,
        validated understanding, foundational context — most important first (importance decays
        mildly with age). Each cites its event ids. ~30-60 tokens per bookmark."""
        scope = scope_of(project, ctx, roots)
        if scope.empty or scope.project is None:
            return nothing("bookmarks", scope, {"bookmarks": []})
        marks = memory.bookmarks(scope.project, limit)
        data = {"project": scope.project, "bookmarks": [b.to_dict() for b in marks]}
        return out(mt.bookmarks_text(marks), data)

    @app.tool(name="memory_remember", annotations=WRITE)
    @tool_errors
    def memory_remember(
        ctx: Context,
        roots: Roots,
        text: Annotated[
            str, Field(min_length=1, max_length=20_000, description="What to keep, verbatim.")
        ],
        kind: Annotated[NoteKind, Field(description="What it is.")] = "note",
        project: Project = None,
        session_id: Annotated[
            str | None, Field(description="Session to file it under; default 'memtoc-notes'.")
        ] = None,
    ) -> CallToolResult:
        """Record a decision, fact, todo or note now, as an event in the memory (in the project
        of your working directory unless you name one). It is searchable and recallable once
        processed — within seconds when this server's worker or a `memtoc serve` daemon runs
        (memory_status → processing says which). Use it for things a future session must know.
        Returns the stored event's id."""
        name = memory.project_for_write(project, working_dir=where(ctx, roots))
        event = memory.remember(
            text,
            project=name,
            session_id=session_id or "memtoc-notes",
            role="assistant",
            agent="mcp",
            metadata={"kind": kind, "via": "mcp"},
        )
        shown = memory.registry.name_of(event.project)
        body = (
            f"remembered ({event.event_id}) as a {kind} in project {shown}, session "
            f"{event.session_id}, {iso_ms(event.ts_ms)}"
        )
        return out(body, {"event": event.to_dict()})

    # -- forget (memtoc.forgetting): explicit ids or a closed time range only, never a query ------
    @app.tool(name="memory_forget", annotations=DESTROY)
    @tool_errors
    def memory_forget(
        ctx: Context,
        roots: Roots,
        event_ids: Annotated[
            list[str] | None,
            Field(max_length=1000, description="Exact event ids to forget (from search/expand)."),
        ] = None,
        since: Annotated[
            str | None, Field(description="With until: forget every event in [since, until).")
        ] = None,
        until: Annotated[str | None, Field(description="End of the range (exclusive).")] = None,
        project: Annotated[
            str | None,
            Field(
                description="The project a range applies to (default: your working directory's)."
            ),
        ] = None,
        dry_run: Annotated[
            bool, Field(description="Only report what would be forgotten; change nothing.")
        ] = False,
    ) -> CallToolResult:
        """DESTRUCTIVE, cannot be undone: forget events for good — only when the user asks to
        delete something. Give explicit event_ids, or since+until (both; within your working
        directory's project unless you name one). The events' text is purged from the store,
        summaries, grips, vectors and bookmarks built from them are re-derived, and an audit
        entry (ids and counts) is kept. Use dry_run first to show the user what would go."""
        if (event_ids is None) == (since is None and until is None):
            raise ToolError("memory_forget: give event_ids, or since and until (not both)")
        if event_ids is None and (since is None or until is None):
            raise ToolError("memory_forget: a range needs both since and until")
        since_ms = when(since, "start", "since")
        until_ms = when(until, "end", "until")
        scoped: str | None = None
        if event_ids is None:  # a range: one project, by the rule
            scope = scope_of(project, ctx, roots)
            if scope.empty or scope.project is None:
                return nothing("forget", scope, {"event_ids": []})
            scoped = scope.project
        elif project is not None:
            scoped = memory.scope(project).project
        report = memory.forget(
            event_ids=event_ids,
            since_ms=since_ms,
            until_ms=until_ms,
            project=scoped,
            dry_run=dry_run,
        ).to_dict()
        verb = "would forget" if dry_run else "forgot"
        ids = report.get("event_ids") or []
        head = f"{verb} {len(ids) if isinstance(ids, list) else 0} events"
        return out(f"{head}\n{mt.mapping_text(report)}", report)

    @app.tool(name="memory_status", annotations=READ)
    @tool_errors
    def memory_status(
        ctx: Context,
        roots: Roots,
        detail: Annotated[
            bool, Field(description="Every field (counts, backends, rollups: ~600 tokens).")
        ] = False,
    ) -> CallToolResult:
        """Health of the memory in a few lines (~150 tokens): events and their time span, the
        processing queue, who files new events into the table of contents (this server's
        worker, another memtoc process, or nobody: events then wait), whether search and
        summaries run degraded, and the project your calls are about. Problems (failures,
        stale vectors, a summariser fallback) get a line each."""
        status = memory.status()
        status["processing"] = processing.info()
        directory = where(ctx, roots)
        found, ws = memory.registry.for_directory(directory, register=False)
        status["working_project"] = {
            "directory": directory,
            "root": ws.root,
            "project": found.project if found else None,
            "name": found.name if found else ws.name,
            "known": found is not None,
        }
        text = mt.mapping_text(mt.without_empty(status)) if detail else status_text(status)
        return out(text, status)

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
            scope = memory.scope(project, working_dir=started_in)
            if scope.empty or scope.project is None:
                return scope.note or "memtoc has no memory of earlier sessions yet."
            view = memory.context(scope.project, budget=int(budget))
        except (MemtocError, ValueError) as exc:
            return f"(memtoc could not build the context: {exc})"
        if not view.text:
            return "memtoc has no memory of earlier sessions yet."
        return (
            "Here is what memtoc remembers of earlier sessions of this project. Use it to pick up "
            "where work left off; use the memory_* tools for details.\n\n" + view.text
        )

    return app
