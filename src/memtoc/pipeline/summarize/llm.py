"""The LLM summariser: a ``Summarizer`` over a chat model, with a cache, limits and accounting.

``LLMSummarizer`` renders a structured JSON prompt (``llm_prompt``), asks a ``ChatClient``
(``llm_clients``: OpenAI-compatible or Anthropic) for a JSON summary, validates it, and caches the
result by a hash of what was asked (``llm_cache``). It never raises to its caller and never
invents output: on any failure (HTTP error, timeout, invalid JSON, a reply that breaks the schema)
it returns the *fallback* summariser's result with ``degraded`` set to the reason and ``backend``
naming the fallback, so the node says which backend built it and why.

It is thread-safe: the pipeline may call it from a thread pool; a semaphore bounds the requests in
flight (``max_concurrency``). ``usage`` reports requests, failures, cache hits, tokens and cost.

Use ``build_llm_summarizer`` to construct one from settings values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Literal

from memtoc.errors import ConfigError, SummarizerError
from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.base import Summarizer
from memtoc.pipeline.summarize.llm_cache import SummaryCache, cache_key
from memtoc.pipeline.summarize.llm_clients import (
    AnthropicClient,
    ChatClient,
    OpenAIChatClient,
    RetryPolicy,
)
from memtoc.pipeline.summarize.llm_prompt import (
    HeuristicTokens,
    OutputError,
    Prompt,
    children_prompt,
    events_prompt,
    parse_summary_json,
)
from memtoc.text.tokens import TokenCounter

PROMPT_VERSION = 1
"""Bumped whenever the prompt or the validation changes; part of the backend name."""

DEFAULT_BASE_URLS: Mapping[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
_REASON_MAX_CHARS = 400


@dataclass(frozen=True, slots=True)
class LLMUsage:
    """What the summariser has spent so far.

    ``requests`` counts summaries asked of the model (retries inside one request not counted);
    ``failures`` those that fell back; tokens are as the server reported them, including replies
    that failed validation (they were billed). ``cost_usd`` is None when no prices were given.
    """

    requests: int = 0
    failures: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, int | float | None]:
        return dataclasses.asdict(self)


class LLMSummarizer:
    """A ``Summarizer`` backed by a chat model, degrading to ``fallback`` on any failure.

    ``prices`` is ``(input $/Mtok, output $/Mtok)``; ``max_input_tokens`` bounds the prompt
    (material is clipped and thinned to fit); ``max_output_tokens`` bounds the reply.
    """

    def __init__(
        self,
        client: ChatClient,
        fallback: Summarizer,
        *,
        cache: SummaryCache | None = None,
        max_concurrency: int = 4,
        prices: tuple[float, float] | None = None,
        max_input_tokens: int = 8_000,
        max_output_tokens: int = 1_500,
        token_counter: TokenCounter | None = None,
        tz: tzinfo = UTC,
    ) -> None:
        if max_concurrency < 1:
            raise ConfigError("must be at least 1", setting="llm_max_concurrency")
        self.client = client
        self.fallback = fallback
        self.name = f"llm:{client.provider}:{client.model}/{PROMPT_VERSION}"
        self._cache = cache
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.max_concurrency = max_concurrency
        self._prices = prices
        self._max_input_tokens = max_input_tokens
        self._max_output_tokens = max_output_tokens
        self._counter: TokenCounter = token_counter or HeuristicTokens()
        self._tz = tz
        self._lock = threading.Lock()
        self._usage = LLMUsage(cost_usd=0.0 if prices else None)

    def __repr__(self) -> str:
        return f"LLMSummarizer(name={self.name!r}, client={self.client!r})"

    @property
    def usage(self) -> LLMUsage:
        """A snapshot of the accounting (safe to read while other threads summarise)."""
        with self._lock:
            return self._usage

    def close(self) -> None:
        """Close the HTTP client (the cache belongs to whoever created it)."""
        self.client.close()

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        if not events:
            return self._degrade(
                "no events to summarise", lambda: self.fallback.summarize_events(events, context)
            )
        prompt = events_prompt(
            events,
            context,
            budget_tokens=self._max_input_tokens,
            counter=self._counter,
            tz=self._tz,
        )
        return self._run(prompt, lambda: self.fallback.summarize_events(events, context))

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        if not children:
            return self._degrade(
                "no children to summarise",
                lambda: self.fallback.summarize_children(children, level, avoid=avoid),
            )
        prompt = children_prompt(
            children, budget_tokens=self._max_input_tokens, counter=self._counter
        )
        return self._run(
            prompt, lambda: self.fallback.summarize_children(children, level, avoid=avoid)
        )

    def _run(self, prompt: Prompt, fallback: Callable[[], Summary]) -> Summary:
        key = cache_key(self.name, self.client.model, prompt.system + "\n\n" + prompt.user)
        cached = self._cache_get(key)
        if cached is not None:
            self._count(cache_hits=1)
            return cached
        self._count(requests=1)
        try:
            with self._slots:
                result = self.client.complete(
                    prompt.system, prompt.user, max_output_tokens=self._max_output_tokens
                )
        except SummarizerError as exc:
            self._count(failures=1)
            return self._degrade(str(exc), fallback)
        except Exception as exc:  # never raise to the pipeline: degrade, and say why
            self._count(failures=1)
            return self._degrade(f"unexpected {type(exc).__name__}: {exc}", fallback)
        self._count(input_tokens=result.input_tokens, output_tokens=result.output_tokens)
        try:
            summary = parse_summary_json(result.text, backend=self.name, counter=self._counter)
        except OutputError as exc:
            self._count(failures=1)
            why = str(exc)
            if result.truncated:
                why = f"reply cut off at the output limit ({self._max_output_tokens} tokens); {why}"
            return self._degrade(why, fallback)
        self._cache_put(key, summary)
        return summary

    def _degrade(self, why: str, fallback: Callable[[], Summary]) -> Summary:
        reason = f"{self.name}: {why}"
        if len(reason) > _REASON_MAX_CHARS:
            reason = reason[: _REASON_MAX_CHARS - 1] + "…"
        return dataclasses.replace(fallback(), backend=self.fallback.name, degraded=reason)

    def _cache_get(self, key: str) -> Summary | None:
        if self._cache is None:
            return None
        try:
            return self._cache.get(key)
        except SummarizerError:
            return None  # an unreadable cache is a miss, not a failure

    def _cache_put(self, key: str, summary: Summary) -> None:
        if self._cache is None:
            return
        # A good summary stays good when the cache cannot keep it.
        with contextlib.suppress(SummarizerError):
            self._cache.put(key, summary)

    def _count(
        self,
        *,
        requests: int = 0,
        failures: int = 0,
        cache_hits: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        with self._lock:
            u = self._usage
            cost = u.cost_usd
            if self._prices is not None and cost is not None:
                cost += (input_tokens * self._prices[0] + output_tokens * self._prices[1]) / 1e6
            self._usage = LLMUsage(
                requests=u.requests + requests,
                failures=u.failures + failures,
                cache_hits=u.cache_hits + cache_hits,
                input_tokens=u.input_tokens + input_tokens,
                output_tokens=u.output_tokens + output_tokens,
                cost_usd=cost,
            )


def build_llm_summarizer(
    provider: Literal["openai", "anthropic"] | str,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    fallback: Summarizer,
    *,
    timeout_s: float = 60.0,
    max_concurrency: int = 4,
    prices: tuple[float, float] | None = None,
    cache: SummaryCache | None = None,
    max_input_tokens: int = 8_000,
    max_output_tokens: int = 1_500,
    retry: RetryPolicy | None = None,
    extra_headers: Mapping[str, str] | None = None,
    json_mode: bool = True,
    max_tokens_field: str | None = None,
    token_counter: TokenCounter | None = None,
    tz: tzinfo = UTC,
    sleep: Callable[[float], None] = time.sleep,
) -> LLMSummarizer:
    """An ``LLMSummarizer`` from settings values (``summarizer``, ``llm_model``, ``llm_base_url``,
    ``llm_api_key``). ``base_url`` defaults to the provider's public API. Raises ``ConfigError``
    naming the setting when a value is missing or unknown.
    """
    if not model:
        raise ConfigError("an LLM summariser needs a model name", setting="llm_model")
    client: ChatClient
    if provider == "openai":
        client = OpenAIChatClient(
            base_url or DEFAULT_BASE_URLS["openai"],
            model,
            api_key,
            timeout_s,
            extra_headers,
            json_mode=json_mode,
            max_tokens_field=max_tokens_field,
            retry=retry,
            sleep=sleep,
        )
    elif provider == "anthropic":
        if not api_key:
            raise ConfigError("the Anthropic API needs an API key", setting="llm_api_key")
        client = AnthropicClient(
            model,
            api_key,
            base_url or DEFAULT_BASE_URLS["anthropic"],
            timeout_s,
            extra_headers=extra_headers,
            retry=retry,
            sleep=sleep,
        )
    else:
        raise ConfigError(
            f"unknown LLM provider {provider!r} (expected openai or anthropic)",
            setting="summarizer",
        )
    return LLMSummarizer(
        client,
        fallback,
        cache=cache,
        max_concurrency=max_concurrency,
        prices=prices,
        max_input_tokens=max_input_tokens,
        max_output_tokens=max_output_tokens,
        token_counter=token_counter,
        tz=tz,
    )
