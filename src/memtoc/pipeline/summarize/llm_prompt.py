"""Prompts for the LLM summariser and validation of what comes back.

The request is structured JSON: the system message states the output schema; the user message is
a JSON document with the task and the material, either a segment's events rendered compactly as
``[HH:MM role] text`` (plus overlap context, marked as such) or a period's children rendered as
title + bullets + keywords. Long material is fitted to a token budget by clipping each item, then
by dropping items from the middle (the start and the end of a segment carry the most signal),
with a marker saying how many were left out.

The reply must be one JSON object ``{"title", "bullets", "keywords", "abstract", "overview"}``;
``parse_summary_json`` strips code fences and surrounding prose, and validates types, counts and
lengths with pydantic (extra keys are tolerated). Every failure is an ``OutputError`` whose message
is short enough to store as a node's ``degraded`` reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from memtoc.errors import SummarizerError
from memtoc.model import Event, Summary
from memtoc.text.tokens import TokenCounter

TITLE_MAX_CHARS = 80
BULLETS = (3, 5)
KEYWORDS = (5, 10)
ABSTRACT_MAX_TOKENS = 200
"""The prompt asks for about 100 tokens (60 words); the hard limit leaves room for over-counting."""
OVERVIEW_MAX_TOKENS = 2_000

SYSTEM_PROMPT = f"""\
You summarise part of the work log of an AI coding agent (user messages, assistant replies, tool
calls and tool results) for a table of contents that the agent will later browse and search.
The user message is a JSON document: "task" says what to summarise; "events" are the lines to
summarise, each "[HH:MM role] text"; "context_before" lines are earlier context only - do not
summarise them; "children" are summaries of the parts of a period, to be merged into one.

Reply with ONE JSON object and nothing else, with exactly these keys:
  "title": string, at most {TITLE_MAX_CHARS} characters, specific (what was done, decided or found);
  "bullets": {BULLETS[0]} to {BULLETS[1]} strings, each one concrete fact, decision, result or
             open question, in the order they happened, at most 200 characters each;
  "keywords": {KEYWORDS[0]} to {KEYWORDS[1]} distinct short key terms (file names, functions,
              tools, errors, concepts), most important first;
  "abstract": string, one to three sentences, at most 60 words;
  "overview": string, one or two paragraphs, at most 300 words, with the details a reader needs
              to decide whether to open the full log.
Use only facts present in the input. Keep names, paths, identifiers and numbers exact. Write in the
language the input is written in."""


class OutputError(SummarizerError):
    """The model's reply is not a valid summary (not JSON, wrong shape, counts or lengths)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered request: the two messages and what was left out to fit the budget."""

    system: str
    user: str
    omitted: int = 0
    """Items (events or children) dropped to fit the input budget."""


class HeuristicTokens:
    """Over-counting token estimate (one token per three characters) when no counter is given."""

    name = "heuristic/chars3"

    def count(self, text: str) -> int:
        return (len(text) + 2) // 3


def _flat(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)].rstrip() + "…"


def event_line(event: Event, tz: tzinfo) -> str:
    """``[HH:MM role] text`` with whitespace collapsed; tool calls are labelled ``tool_call``."""
    hhmm = datetime.fromtimestamp(event.ts_ms / 1000, tz=tz).strftime("%H:%M")
    label = "tool_call" if event.event_type == "tool_call" else event.role
    return f"[{hhmm} {label}] {_flat(event.text)}"


def child_block(child: Summary) -> str:
    """A child summary as ``title`` / ``- bullet`` lines / ``keywords: ...``."""
    lines = [_flat(child.title)]
    lines += [f"- {_flat(b)}" for b in child.bullets]
    if child.keywords:
        lines.append("keywords: " + ", ".join(_flat(k) for k in child.keywords))
    return "\n".join(lines)


def fit_items(
    items: Sequence[str],
    budget_tokens: int,
    counter: TokenCounter,
    *,
    max_item_chars: int,
    min_item_chars: int = 160,
    noun: str = "items",
) -> tuple[list[str], int]:
    """Clip and, if needed, thin ``items`` so their total fits ``budget_tokens``.

    Each item is clipped to ``max_item_chars``, halving the limit (down to ``min_item_chars``)
    while the total is over budget; then items are kept alternately from the start and the end
    while they fit, and one marker line replaces the dropped middle. Returns the items and the
    number dropped.
    """
    limit = max_item_chars
    while True:
        clipped = [_clip(t, limit) for t in items]
        costs = [counter.count(t) + 1 for t in clipped]
        if sum(costs) <= budget_tokens or limit <= min_item_chars:
            break
        limit = max(min_item_chars, limit // 2)
    if sum(costs) <= budget_tokens:
        return clipped, 0
    marker_cost = counter.count(f"[... 1000000 {noun} omitted ...]") + 1
    head: list[int] = []
    tail: list[int] = []
    used = marker_cost
    lo, hi = 0, len(clipped) - 1
    take_head = True
    while lo <= hi:
        idx = lo if take_head else hi
        if used + costs[idx] > budget_tokens:
            break
        used += costs[idx]
        if take_head:
            head.append(idx)
            lo += 1
        else:
            tail.append(idx)
            hi -= 1
        take_head = not take_head
    dropped = len(clipped) - len(head) - len(tail)
    kept = [clipped[i] for i in head]
    kept.append(f"[... {dropped} {noun} omitted ...]")
    kept += [clipped[i] for i in reversed(tail)]
    return kept, dropped


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1)


def events_prompt(
    events: Sequence[Event],
    context: Sequence[Event],
    *,
    budget_tokens: int,
    counter: TokenCounter,
    tz: tzinfo = UTC,
    max_event_chars: int = 1_200,
) -> Prompt:
    """The request for one segment; context gets at most a fifth of the budget."""
    fmt = "%Y-%m-%d %H:%M"
    start = datetime.fromtimestamp(min(e.ts_ms for e in events) / 1000, tz=tz)
    end = datetime.fromtimestamp(max(e.ts_ms for e in events) / 1000, tz=tz)
    skeleton: dict[str, Any] = {
        "task": "summarize_segment",
        "period": {"start": start.strftime(fmt), "end": end.strftime(fmt)},
        "context_before": [],
        "events": [],
    }
    room = budget_tokens - counter.count(SYSTEM_PROMPT) - counter.count(_dumps(skeleton))
    ctx_lines: list[str] = []
    if context:
        ctx_lines, _ = fit_items(
            [event_line(e, tz) for e in context],
            max(0, room // 5),
            counter,
            max_item_chars=max_event_chars // 2,
            min_item_chars=80,
            noun="context events",
        )
    room -= sum(counter.count(t) + 1 for t in ctx_lines)
    lines, omitted = fit_items(
        [event_line(e, tz) for e in events],
        max(0, room),
        counter,
        max_item_chars=max_event_chars,
        noun="events",
    )
    doc = {**skeleton, "context_before": ctx_lines, "events": lines}
    if not ctx_lines:
        del doc["context_before"]
    return Prompt(SYSTEM_PROMPT, _dumps(doc), omitted)


def children_prompt(
    children: Sequence[Summary], *, budget_tokens: int, counter: TokenCounter
) -> Prompt:
    """The request merging a period's children into one summary."""
    skeleton: dict[str, Any] = {"task": "summarize_period", "children": []}
    room = budget_tokens - counter.count(SYSTEM_PROMPT) - counter.count(_dumps(skeleton))
    blocks, omitted = fit_items(
        [child_block(c) for c in children],
        max(0, room),
        counter,
        max_item_chars=2_000,
        min_item_chars=240,
        noun="children",
    )
    return Prompt(SYSTEM_PROMPT, _dumps({**skeleton, "children": blocks}), omitted)


_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _SummaryOut(BaseModel):
    """The reply's schema. Strict types (no number-to-string coercion); extra keys ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    title: Annotated[_Text, StringConstraints(max_length=TITLE_MAX_CHARS)]
    bullets: list[Annotated[_Text, StringConstraints(max_length=400)]] = Field(
        min_length=BULLETS[0], max_length=BULLETS[1]
    )
    keywords: list[Annotated[_Text, StringConstraints(max_length=80)]]
    abstract: _Text
    overview: _Text

    @field_validator("keywords")
    @classmethod
    def _distinct_keywords(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        out: list[str] = []
        for keyword in value:
            if keyword.casefold() not in seen:
                seen.add(keyword.casefold())
                out.append(keyword)
        if not KEYWORDS[0] <= len(out) <= KEYWORDS[1]:
            raise ValueError(
                f"expected {KEYWORDS[0]}-{KEYWORDS[1]} distinct keywords, got {len(out)}"
            )
        return out


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


def extract_json_text(reply: str) -> str:
    """The JSON object inside ``reply``: code fences and text around the braces removed."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start != -1 and end > start:
            text = text[start : end + 1]
    return text


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "reply"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_summary_json(reply: str, *, backend: str, counter: TokenCounter) -> Summary:
    """Validate the model's reply into a ``Summary`` (or raise ``OutputError`` saying why)."""
    text = extract_json_text(reply)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OutputError(f"reply is not JSON ({exc}): {_clip(_flat(reply), 120)!r}") from None
    if not isinstance(data, dict):
        raise OutputError(f"reply is JSON but not an object: {_clip(_flat(text), 120)!r}")
    try:
        out = _SummaryOut.model_validate(data)
    except ValidationError as exc:
        raise OutputError(f"reply does not match the summary schema: {_describe(exc)}") from None
    if counter.count(out.abstract) > ABSTRACT_MAX_TOKENS:
        raise OutputError(f"abstract longer than {ABSTRACT_MAX_TOKENS} tokens")
    if counter.count(out.overview) > OVERVIEW_MAX_TOKENS:
        raise OutputError(f"overview longer than {OVERVIEW_MAX_TOKENS} tokens")
    return Summary(
        title=out.title,
        bullets=tuple(out.bullets),
        keywords=tuple(out.keywords),
        abstract=out.abstract,
        overview=out.overview,
        backend=backend,
    )
