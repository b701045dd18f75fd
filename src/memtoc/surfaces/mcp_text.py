"""What an MCP tool result says to the model: compact text with ids, and its true token count.

Agents read a tool result's ``content`` text (Claude Code 2.1 and Codex send
``JSON.stringify(structuredContent)`` *instead* when a result carries structured content, so the
server adds it only when asked: ``memtoc mcp --structured``). Each tool's text is written for a
model: one line per item, ids first (the handles other tools take: ``toc:day:…``, ``grip:…``,
event ids), times in ISO form, no JSON punctuation. The last line is ``[N tokens]`` where N is the
one token counter's count of the *whole* text, that line included — what the agent pays.

``deliver`` builds the result; ``fit`` keeps a budgeted text (context, recall) within the budget
the agent asked for, the header and the token line included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from mcp.types import CallToolResult, ContentBlock, TextContent

from memtoc.model import Bookmark, JsonValue, TocNode, iso_ms
from memtoc.retrieval.hybrid import SearchResult
from memtoc.retrieval.navigate import ExpandView, NodeView, TimelineView
from memtoc.retrieval.recall import RecallResult
from memtoc.surfaces.labels import OUTSIDE_WINDOW, after_title, outside_window
from memtoc.text.tokens import TokenCounter, truncate_to_tokens

_FIXPOINT_ROUNDS = 4
SMALL_RECALL = 150
"""A recall budget under which an empty result may be one whose items did not fit (an item
steps down to its summary, a few dozen tokens, before it is left out)."""


def token_line(n: int, budget: int | None = None) -> str:
    return f"[{n} of {budget} tokens]" if budget is not None else f"[{n} tokens]"


def with_tokens(counter: TokenCounter, body: str, budget: int | None = None) -> tuple[str, int]:
    """``body`` plus its token line, and the count of the whole (the line's own tokens included:
    the number is found by iterating to a fixed point, which takes one or two rounds)."""
    n = counter.count(body) + 4
    text = body
    for _ in range(_FIXPOINT_ROUNDS):
        text = f"{body}\n{token_line(n, budget)}" if body else token_line(n, budget)
        counted = counter.count(text)
        if counted == n:
            return text, n
        n = counted
    return text, counter.count(text)


def deliver(
    counter: TokenCounter,
    body: str,
    data: Mapping[str, Any] | None,
    *,
    structured: bool,
    budget: int | None = None,
) -> CallToolResult:
    """The tool result: ``body`` and its token line as text; with ``structured``, ``data`` (plus
    ``tokens``: the text's count) as structured content beside it."""
    text, tokens = with_tokens(counter, body, budget)
    content: list[ContentBlock] = [TextContent(type="text", text=text)]
    if not structured or data is None:
        return CallToolResult(content=content)
    return CallToolResult(content=content, structured_content={**data, "tokens": tokens})


def fit(
    counter: TokenCounter, budget: int, render: Callable[[int], str], *, floor: int = 0
) -> tuple[str, int]:
    """The richest text ``render(inner_budget)`` whose delivered form (token line included) fits
    ``budget``: the inner budget starts at ``budget`` minus the wrapper's cost and shrinks until
    the whole fits (a few rounds: the wrapper is a few dozen tokens). Returns the body and the
    inner budget used; an empty body when not even the token line fits."""
    reserve = counter.count(token_line(budget, budget)) + 1
    inner = budget - reserve
    while inner >= floor:
        body = render(inner)
        _, tokens = with_tokens(counter, body, budget)
        if tokens <= budget:
            return body, inner
        inner -= max(1, tokens - budget)
    return "", 0


# -- one renderer per tool ------------------------------------------------------------------------
def _when(start_ms: int, end_ms: int | None = None) -> str:
    start = iso_ms(start_ms)
    if end_ms is None or end_ms == start_ms:
        return start
    end = iso_ms(end_ms)
    if end[:10] == start[:10]:
        return f"{start}..{end[11:]}"
    return f"{start}..{end}"


def _oneline(text: str) -> str:
    return " ".join(text.split())


def project_line(what: str, name: str | None, note: str | None = None) -> str:
    head = f"{what} · project {name}" if name else what
    return f"{head}\n{note}" if note else head


def node_text(view: NodeView) -> str:
    """A node view (``memory_toc`` with an id): the navigator's own rendering."""
    node = view.node
    head = f"{node.level}{_span(node)} · {node.event_count} events"
    if node.degraded:  # the LLM summariser failed: say so, in a few words (memory_status: all)
        head += f"\ndegraded: summary by the extractive fallback ({short_reason(node.degraded)})"
    return f"{head}\n{view.render()}"


def _span(node: TocNode) -> str:
    """A node's time span where its id does not say it: a week's dates (its id says
    ``2025-W29``), a segment's instants to the second. A year's, month's or day's id names it:
    the span in milliseconds cost ~25 tokens of every ``memory_toc`` ("year
    2025-01-01T00:00:00.000Z..2026-01-01T00:00:00.000Z")."""
    if node.level == "week":
        year, _, week = node.node_id.rsplit(":", 1)[-1].partition("-W")
        with contextlib.suppress(ValueError):
            monday = date.fromisocalendar(int(year), int(week), 1)
            return f" {monday}..{monday + timedelta(days=6)}"
    if node.level != "segment":
        return ""
    start, end = iso_ms(node.start_ms)[:19], iso_ms(node.end_ms)[:19]
    tail = end[11:] if end[:10] == start[:10] else end
    return f" {start}Z..{tail}Z"


def roots_text(name: str, views: Iterable[NodeView]) -> str:
    parts = [node_text(v) for v in views]
    if not parts:
        return f"project {name}: no table of contents yet (events not processed)"
    return f"project {name}: years, oldest first\n\n" + "\n\n".join(parts)


def expand_text(view: ExpandView, shown: Sequence[str] | None = None) -> str:
    """An expand as an agent reads it: the grip (or event) and its segment with the day, then
    one line per event — its id (memory_expand takes it), its time of day, who, the text. The
    session's uuid (no tool takes it: ~25 tokens), each event's full ISO instant (15 tokens, 5 as
    a time of day) and an excerpt the grip's own events say word for word are left to the JSON.
    ``shown``: each event's text as cut to a budget (``expand_within``; "" leaves it out)."""
    texts = list(shown) if shown is not None else [view.shown(i) for i in range(len(view.events))]
    g = view.grip
    date = iso_ms(view.events[0].ts_ms)[:10] if view.events else ""
    if g is not None:
        lines = [f"{g.grip_id} ({g.toc_node_id}) · {date}"]
        inside = " ".join(
            " ".join(view.shown(i).split()) for i in range(view.range_start, view.range_end + 1)
        )
        excerpt = " ".join(g.excerpt.split()).rstrip("…")
        if excerpt and excerpt not in inside:
            lines.append(f"excerpt: {g.excerpt}")
    else:
        where = f" ({view.toc_node_id})" if view.toc_node_id else ""
        lines = [f"event {view.event_id}{where} · {date}"]
    dropped = 0
    for i, e in enumerate(view.events):
        if not texts[i]:
            dropped += 1
            continue
        mark = "*" if view.range_start <= i <= view.range_end else " "
        when = iso_ms(e.ts_ms)
        shown_when = when[11:19] if when[:10] == date else f"{when[:10]} {when[11:19]}"
        lines.append(f"{mark} ({e.event_id}) {shown_when} {e.role}: {texts[i]}")
    what = "in the grip" if g is not None else "the event"
    quiet = f"; {view.left_out} agent notices (hook progress…) left out" if view.left_out else ""
    lines.append(f"(* = {what}; the others are its neighbours in the session{quiet})")
    if any(view.cut(i) for i in range(len(view.events))):
        lines.append("(… = parts of a long event left out: not about the focus)")
    if shown is not None and (dropped or any(t.endswith(_CUT_TAIL) for t in texts)):
        left = f"{dropped} events and " if dropped else ""
        lines.append(
            f"({left}[+N tok] = what the budget left out: memory_expand(event id, before=0, "
            "after=0, budget=…) shows an event whole)"
        )
    return "\n".join(lines)


_CUT_TAIL = " tok]"


_HEAD = 40
"""Tokens a grip's event keeps at least before neighbours are given up for it."""


def expand_within(view: ExpandView, counter: TokenCounter, budget: int) -> str:
    """``expand_text`` within ``budget`` tokens: a grip's range of whole events, a file read or
    a long diff among them, cost thousands of tokens (6,059 for one bullet of the real
    claude-code-log history). Every event is cut to a head of at most C tokens (neighbours to
    C/2), C the largest that fits, each cut saying what it left out (``… [+N tok]``); neighbours
    are given up, from the outside in, while the grip's events would keep under ``_HEAD``
    tokens; then the grip's last events. Too small a budget for any event says so."""
    whole = expand_text(view)
    if counter.count(whole) <= budget:
        return whole
    full = [view.shown(i) for i in range(len(view.events))]
    sizes = [counter.count(t) for t in full]
    inside = [view.range_start <= i <= view.range_end for i in range(len(full))]

    def cut(cap: int, keep: Sequence[bool]) -> list[str]:
        texts = []
        for text, size, core, kept in zip(full, sizes, inside, keep, strict=True):
            limit = cap if core else max(8, cap // 2)
            if not kept:
                texts.append("")
            elif size <= limit:
                texts.append(text)
            else:
                head = truncate_to_tokens(counter, text, limit)
                texts.append(f"{head} … [+{size - counter.count(head)}{_CUT_TAIL}")
        return texts

    def best(keep: Sequence[bool]) -> tuple[int, list[str]] | None:
        """The largest cap whose text fits, and the texts; None when not even 8 tokens do."""
        low, high = 8, max(sizes)
        if counter.count(expand_text(view, cut(low, keep))) > budget:
            return None
        while low < high:
            mid = (low + high + 1) // 2
            if counter.count(expand_text(view, cut(mid, keep))) <= budget:
                low = mid
            else:
                high = mid - 1
        return low, cut(low, keep)

    middle = (view.range_start + view.range_end) / 2
    neighbours = sorted(
        (i for i in range(len(full)) if not inside[i]), key=lambda i: -abs(i - middle)
    )
    keep = [True] * len(full)
    found = best(keep)
    for i in neighbours:
        if found is not None and found[0] >= _HEAD:
            break
        keep[i] = False
        found = best(keep)
    for i in reversed([i for i in range(len(full)) if inside[i]][1:]):
        if found is not None:
            break
        keep[i] = False
        found = best(keep)
    if found is not None:
        return expand_text(view, found[1])
    return f"{len(full)} events ({sum(sizes):,} tokens): none fits the budget; raise it"


def timeline_text(view: TimelineView, latest: TocNode | None = None) -> str:
    """One line per node, ``- [id] title: abstract (N events)``, the abstract without the title it
    opens with (an extractive L0 repeats it: each day was said twice); an empty range names the
    project's latest node of that level (``latest``), where an agent asking about "yesterday" of
    a project idle since June goes next."""
    lines = []
    for node in view.nodes:
        title = _oneline(node.title)
        rest = after_title(title, _oneline(node.abstract))
        lines.append(f"- [{node.node_id}] {title}{': ' + rest if rest else ''} "
                     f"({node.event_count} events)")  # fmt: skip
    if lines:
        return "\n".join(lines)
    empty = f"no {view.level} nodes in that range"
    if latest is not None:
        empty += f"; the latest: [{latest.node_id}]{_span(latest)} {_oneline(latest.title)}"
    return empty


def time_line(tr: Mapping[str, object], spans: Iterable[tuple[int, int]] = ()) -> str:
    """A query's time expression as read (the one time-range shape, ``ResolvedTime.to_dict``),
    and whether none of the result's items (``spans``) falls in it."""
    if tr.get("start_time") is None:
        return f"time: {tr.get('expression')} (unresolved: searched as written)"
    line = f"time: {tr.get('expression')} → {tr.get('start_time')}…{tr.get('end_time')}"
    return f"{line} — {OUTSIDE_WINDOW}" if outside_window(tr, spans) else line


def _spans(items: Iterable[Any]) -> list[tuple[int, int]]:
    return [(item.start_ms, item.end_ms) for item in items]


def search_text(result: SearchResult) -> str:
    n = len(result.items)
    lines = [f"{n} result{'s' if n != 1 else ''} ({result.mode}, {result.depth}), best first"]
    if result.time_range:
        lines.append(time_line(result.time_range, _spans(result.items)))
    if result.degraded:
        lines.append(f"degraded: {short_reason(result.degraded)}")
    for i, item in enumerate(result.items, start=1):
        # an event says who spoke or which tool ran ('tool output · exec_command · failed'):
        # "event" alone left a user's request and the agent's guess alike
        who = f" · {item.title}" if item.kind == "event" and item.title else ""
        lines.append(
            f"{i}. ({item.id}) {item.kind}{who} {_when(item.start_ms, item.end_ms)} "
            f"[{item.project}]\n{item.text}"
        )
    return "\n".join(lines)


def recall_text(result: RecallResult, project: str | None) -> str:
    """A recall as delivered: a header, the cited context (``(id) text`` per item, date lines),
    and any degraded mode or cut — the time limit says so in the text itself."""
    n = len(result.items)
    head = f"recall · {n} item{'s' if n != 1 else ''}"
    if project:
        head += f" · project {project}"
    if result.method != "hybrid":
        head += f" · {result.method}"
    lines = [head]
    if result.time_range:
        lines.append(time_line(result.time_range, _spans(result.items)))
    context = result.context()
    if context:
        lines.append(context)
    elif not n:  # under a small budget, what was found may not fit
        small = result.budget < SMALL_RECALL
        lines.append("nothing fits the budget" if small else "nothing found")
    if result.truncated:
        lines.append(f"CUT SHORT: {short_reason(result.degraded)}")
    elif result.degraded:
        lines.append(f"degraded: {short_reason(result.degraded)}")
    return "\n".join(lines)


def short_reason(degraded: str | None) -> str:
    """A degraded mode in a few words (the full reason is in ``memory_status`` and the data):
    the budget pays for it."""
    parts = []
    for part in (degraded or "").split("; "):
        if part.startswith("no embedder"):
            parts.append("no embedder, BM25 only")
        elif part.startswith("time limit"):
            parts.append(part)
        elif part.startswith(("vectors stale", "vectors missing")):
            parts.append(f"{part.split(':', 1)[0]}, BM25 only")
        elif part.startswith("vectors behind"):
            count = part.split(":", 1)[-1].split(" filed", 1)[0].strip()
            parts.append(f"vectors behind: {count} events found by BM25 only")
        else:
            parts.append(
                part if len(part) <= 80 else part[:79].rsplit(" ", 1)[0].rstrip(",;:") + "…"
            )
    return "; ".join(parts)


def first_of(ids: Sequence[str]) -> str:
    """The first id of a list and how many more (``abc +2``): each id costs ~20 tokens, and
    ``memory_expand`` of the first one shows its neighbours anyway."""
    if not ids:
        return "-"
    return ids[0] + (f" +{len(ids) - 1}" if len(ids) > 1 else "")


def bookmarks_text(marks: Iterable[Bookmark]) -> str:
    lines = [
        f"- ({b.bookmark_id}) {b.type} {b.importance:.2f} {iso_ms(b.created_ms)[:10]}: "
        f"{_oneline(b.content)} [events: {first_of(b.event_ids)}]"
        for b in marks
    ]
    return "\n".join(lines) if lines else "no bookmarks yet"


_EPOCH_MS_FLOOR = 100_000_000_000
"""An ``*_ms`` value at least this large is an instant (after March 1973), not a duration."""


def without_empty(data: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``data`` without the keys that say nothing (None, "", empty lists and mappings, at any
    depth): memory_status listed ``failures: outbox: - segments: -``, ``embedder_degraded: -``,
    ``detail: -``, ``worker: -`` … ``False`` and ``0`` stay (``usable: False`` says vectors
    are not used)."""
    out: dict[str, JsonValue] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            value = without_empty(value)
        if value is None or value == "" or value == [] or value == {}:
            continue
        out[key] = value
    return out


def mapping_text(data: Mapping[str, JsonValue], indent: str = "") -> str:
    """A nested mapping as ``key: value`` lines (status, forget reports); an instant in epoch
    milliseconds (``last_run_ms: 1795577922722``) is shown as ISO time under its name without
    ``_ms`` — a model reads a date, not thirteen digits."""
    lines = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            inner = mapping_text(value, indent + "  ")
            lines.append(f"{indent}{key}:" + (f"\n{inner}" if inner else " -"))
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value) if value else "-"
            lines.append(f"{indent}{key}: {shown}")
        elif (
            key.endswith("_ms")
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value >= _EPOCH_MS_FLOOR
        ):
            lines.append(f"{indent}{key.removesuffix('_ms')}: {iso_ms(value)}")
        else:
            lines.append(f"{indent}{key}: {'-' if value is None else value}")
    return "\n".join(lines)
