"""The LLM bookmark detector: the summariser's chat backends, a JSON prompt, validated output.

``LLMBookmarkDetector`` shows a chat model (``memtoc.pipeline.summarize.llm_clients``: OpenAI-
compatible or Anthropic) a window of events, each with a short reference (``e1``, ``e2``…), and
asks for JSON::

    {"bookmarks": [{"type": "resolution", "content": "…", "events": ["e4", "e6"], "cue": 0.9}]}

The reply is validated: a known type, content of 1-2 sentences (at most 400 characters; cut to 50
words like extractive content), at least one event reference that exists in the window, ``cue`` in
0..1. Importance uses the extractive formula (type weight x cue x length sanity), ids are the same
deterministic hash of the source events, so an LLM bookmark and an extractive one for the same
moment merge. On any failure — HTTP, timeout, unreadable or invalid JSON — the window is
detected extractively and the ``Detection`` carries ``degraded`` with the reason and the
extractive backend's name: never a silent substitute.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import groupby
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from memtoc.config import Settings
from memtoc.errors import ConfigError, SummarizerError
from memtoc.model import Bookmark, Event
from memtoc.pipeline.summarize.llm_clients import (
    AnthropicClient,
    ChatClient,
    OpenAIChatClient,
    RetryPolicy,
)
from memtoc.pipeline.summarize.llm_prompt import extract_json_text
from memtoc.retrieval.bookmarks import (
    BookmarkDetector,
    Detection,
    ExtractiveDetector,
    make_bookmark,
)

PROMPT_VERSION = 1
MAX_BOOKMARKS = 8
_MESSAGE_CHARS = 700
_TOOL_CHARS = 240
_WINDOW_CHARS = 24_000
_REASON_CHARS = 400

SYSTEM_PROMPT = f"""\
You find the salient moments in a conversation between a user and an AI coding agent, for the
agent's long-term memory. Return JSON only, with this shape:
{{"bookmarks": [{{"type": "...", "content": "...", "events": ["e1"], "cue": 0.0}}]}}

Types:
- "conclusion": a decision or plan ("let's use X", "we'll go with Y", "we decided").
- "resolution": what turned out to be right after a correction or an error, and the fix. State
  the corrected understanding and the fix, NEVER the wrong guess that was corrected.
- "validated": an assistant statement the user explicitly confirmed ("yes, exactly").
- "foundational": what the user says about themselves, their project or their constraints
  ("I'm a data engineer", "we must support Python 3.9").

Rules: at most {MAX_BOOKMARKS} bookmarks, only clear ones (an empty list is fine). "content" is
1-2 self-contained sentences, at most 50 words, in plain text. "events" lists the references of
the events the bookmark comes from (e.g. ["e4", "e6"]). "cue" is how explicit the moment is, 0..1.
"""


class _ItemOut(BaseModel):
    type: Literal["conclusion", "resolution", "validated", "foundational"]
    content: str = Field(min_length=3, max_length=400)
    events: list[str] = Field(min_length=1, max_length=40)
    cue: float = Field(default=0.8, ge=0.0, le=1.0)


class _ReplyOut(BaseModel):
    bookmarks: list[_ItemOut] = Field(max_length=MAX_BOOKMARKS)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def window_prompt(events: Sequence[Event]) -> tuple[str, dict[str, Event]]:
    """The user message for ``events`` and the reference → event map. Message text is clipped
    (tool output more), and the oldest events are dropped when the window is too long."""
    lines: list[dict[str, str]] = []
    refs: dict[str, Event] = {}
    for n, e in enumerate(events, start=1):
        ref = f"e{n}"
        refs[ref] = e
        limit = _MESSAGE_CHARS if e.role in {"user", "assistant"} else _TOOL_CHARS
        lines.append(
            {"ref": ref, "role": e.role, "type": e.event_type, "text": _clip(e.text, limit)}
        )
    while len(lines) > 1 and len(json.dumps(lines, ensure_ascii=False)) > _WINDOW_CHARS:
        dropped = lines.pop(0)
        refs.pop(dropped["ref"], None)
    return json.dumps({"events": lines}, ensure_ascii=False), refs


def parse_reply(reply: str, refs: dict[str, Event], project: str) -> list[Bookmark]:
    """Bookmarks from the model's reply; raises ``SummarizerError`` naming what is wrong."""
    try:
        data = _ReplyOut.model_validate_json(extract_json_text(reply))
    except (ValidationError, ValueError) as exc:
        raise SummarizerError(f"invalid bookmark JSON: {_describe(exc)}") from exc
    out: list[Bookmark] = []
    for k, item in enumerate(data.bookmarks):
        unknown = [r for r in item.events if r not in refs]
        if unknown:
            raise SummarizerError(f"bookmarks[{k}]: unknown event reference(s) {unknown[:3]}")
        b = make_bookmark(
            project, item.type, item.content, [refs[r] for r in item.events], item.cue
        )
        if b is None:
            raise SummarizerError(f"bookmarks[{k}]: empty content")
        out.append(b)
    return out


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": str(exc)}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return f"{loc}: {first.get('msg', '')}" if loc else str(first.get("msg", ""))
    return str(exc)


class LLMBookmarkDetector:
    """A ``BookmarkDetector`` over a chat model, degrading to ``fallback`` on any failure."""

    def __init__(
        self,
        client: ChatClient,
        fallback: BookmarkDetector | None = None,
        *,
        max_output_tokens: int = 1_200,
    ) -> None:
        self.client = client
        self.fallback: BookmarkDetector = fallback or ExtractiveDetector()
        self.name = f"llm:{client.provider}:{client.model}/bookmarks-{PROMPT_VERSION}"
        self.max_output_tokens = max_output_tokens

    def close(self) -> None:
        self.client.close()

    def detect(self, events: Sequence[Event]) -> Detection:
        found: list[Bookmark] = []
        reasons: list[str] = []
        ordered = sorted(events, key=lambda e: (e.project, e.ts_ms, e.event_id))
        for project, group in groupby(ordered, key=lambda e: e.project):
            window = sorted(group, key=lambda e: (e.ts_ms, e.event_id))
            try:
                found.extend(self._ask(project, window))
            except Exception as exc:  # never raise to the pipeline: degrade, and say why
                kind = (
                    "" if isinstance(exc, SummarizerError) else f"unexpected {type(exc).__name__}: "
                )
                reasons.append(f"{self.name}: {kind}{exc}"[:_REASON_CHARS])
                found.extend(self.fallback.detect(window).bookmarks)
        if reasons:
            return Detection(found, backend=self.fallback.name, degraded="; ".join(reasons))
        return Detection(found, backend=self.name)

    def _ask(self, project: str, window: Sequence[Event]) -> list[Bookmark]:
        if not window:
            return []
        user, refs = window_prompt(window)
        result = self.client.complete(SYSTEM_PROMPT, user, max_output_tokens=self.max_output_tokens)
        try:
            return parse_reply(result.text, refs, project)
        except SummarizerError as exc:
            if result.truncated:
                raise SummarizerError(f"reply cut off at the output limit; {exc}") from exc
            raise


def build_chat_client(
    provider: str,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    *,
    timeout_s: float = 60.0,
    retry: RetryPolicy | None = None,
) -> ChatClient:
    """A chat client from the summariser's settings values (``ConfigError`` names the setting)."""
    if not model:
        raise ConfigError("an LLM bookmark detector needs a model name", setting="llm_model")
    if provider == "openai":
        return OpenAIChatClient(
            base_url or "https://api.openai.com/v1", model, api_key, timeout_s, None, retry=retry
        )
    if provider == "anthropic":
        if not api_key:
            raise ConfigError("the Anthropic API needs an API key", setting="llm_api_key")
        return AnthropicClient(
            model, api_key, base_url or "https://api.anthropic.com", timeout_s, retry=retry
        )
    raise ConfigError(f"unknown LLM provider {provider!r}", setting="summarizer")


def build_bookmark_detector(settings: Settings) -> BookmarkDetector:
    """The detector the settings call for: the LLM one when the summariser is an LLM backend
    (same provider, model, URL and key), else the extractive one."""
    provider = settings.summarizer
    if provider not in {"openai", "anthropic"}:
        return ExtractiveDetector()
    client = build_chat_client(
        provider, settings.llm_model, settings.llm_base_url, settings.llm_api_key
    )
    return LLMBookmarkDetector(client)
