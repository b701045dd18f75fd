"""HTTP clients for the LLM summariser: OpenAI-compatible chat completions and Anthropic Messages.

Both clients speak one narrow protocol, ``ChatClient.complete(system, user, max_output_tokens)``,
and share one retrying transport:

- retries on 429, 5xx, timeouts and connection errors, with exponential backoff and jitter,
  honouring ``retry-after`` / ``retry-after-ms``; any other 4xx fails at once;
- the sleep function and the random source are injected, so tests never sleep;
- failures raise ``LLMRequestError`` (a ``SummarizerError``) carrying the provider, the HTTP
  status, the number of attempts and a snippet of the response body;
- the API key is never logged, never in ``repr`` and is scrubbed from every error text (some
  servers echo the key they rejected).

``OpenAIChatClient`` covers OpenAI, Ollama, vLLM, llama.cpp and LM Studio through ``base_url``. It
asks for ``response_format: {"type": "json_object"}``; a server that rejects that field with a
400 mentioning it gets the request again without it, and the client stops sending it.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from memtoc.errors import SummarizerError

_SNIPPET_CHARS = 300
_BODY_KEEP_CHARS = 2_000


class LLMRequestError(SummarizerError):
    """An LLM API call failed (HTTP status, timeout, connection, or an unreadable response)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        attempts: int = 1,
        body: str = "",
    ) -> None:
        self.provider = provider
        self.status = status
        self.attempts = attempts
        self.body = body
        """The start of the response body, with the API key scrubbed."""
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One completed chat call: the model's text and what it cost in tokens."""

    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: str | None = None
    """``finish_reason`` (OpenAI) or ``stop_reason`` (Anthropic), as the server sent it."""
    truncated: bool = False
    """True when the model stopped at the output limit (``length`` / ``max_tokens``)."""
    response_id: str | None = None


class ChatClient(Protocol):
    """A chat model that answers one system + user message pair."""

    provider: str
    model: str

    def complete(self, system: str, user: str, *, max_output_tokens: int) -> ChatResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a failed call.

    The n-th retry waits ``base_delay_s * 2**(n-1)`` capped at ``max_delay_s``, scaled by a random
    factor in ``[1 - jitter, 1 + jitter]``; a ``retry-after`` header replaces that delay (capped at
    ``max_retry_after_s``).
    """

    max_attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.25
    max_retry_after_s: float = 60.0

    def backoff(self, retry: int, unit_random: float) -> float:
        """Delay before retry number ``retry`` (1-based), given a random number in [0, 1)."""
        raw = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        return max(0.0, raw * (1.0 - self.jitter + 2.0 * self.jitter * unit_random))


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    if secret:
        return text.replace(secret, "***")
    return text


def _snippet(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= _SNIPPET_CHARS else flat[:_SNIPPET_CHARS] + "…"


def parse_retry_after(headers: httpx.Headers, now_s: float | None = None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``retry-after`` seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_s is None else now_s
    return max(0.0, when.timestamp() - now)


class _Transport:
    """POSTs JSON with retries; shared by both clients (composition, not inheritance)."""

    def __init__(
        self,
        *,
        provider: str,
        timeout_s: float,
        secret: str | None,
        retry: RetryPolicy | None,
        sleep: Callable[[float], None],
        rng: Callable[[], float] | None,
    ) -> None:
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self._secret = secret
        self._sleep = sleep
        self._rng = rng or random.Random().random
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def _fail(
        self, what: str, *, status: int | None, attempts: int, body: str = ""
    ) -> LLMRequestError:
        body = scrub(body[:_BODY_KEEP_CHARS], self._secret)
        tail = f": {_snippet(body)}" if body else ""
        plural = "attempt" if attempts == 1 else "attempts"
        msg = scrub(f"{self.provider}: {what} after {attempts} {plural}{tail}", self._secret)
        return LLMRequestError(
            msg, provider=self.provider, status=status, attempts=attempts, body=body
        )

    def post_json(self, url: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON response, retrying what is worth retrying."""
        policy = self.retry
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                resp = self._http.post(url, json=dict(body), headers=dict(headers))
            except httpx.TimeoutException as exc:
                error = self._fail(
                    f"timed out ({type(exc).__name__})", status=None, attempts=attempt
                )
            except httpx.UnsupportedProtocol as exc:
                raise self._fail(
                    f"bad URL {url!r} ({exc})", status=None, attempts=attempt
                ) from None
            except httpx.TransportError as exc:
                error = self._fail(
                    f"connection failed ({type(exc).__name__}: {exc})",
                    status=None,
                    attempts=attempt,
                )
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise self._fail(
                    f"request failed ({type(exc).__name__}: {exc})", status=None, attempts=attempt
                ) from None
            else:
                if resp.status_code < 300:
                    try:
                        return resp.json()
                    except ValueError:
                        raise self._fail(
                            "HTTP 200 with a body that is not JSON",
                            status=resp.status_code,
                            attempts=attempt,
                            body=resp.text,
                        ) from None
                error = self._fail(
                    f"HTTP {resp.status_code}",
                    status=resp.status_code,
                    attempts=attempt,
                    body=resp.text,
                )
                if not (resp.status_code == 429 or resp.status_code >= 500):
                    raise error
                wait = parse_retry_after(resp.headers)
            if attempt >= policy.max_attempts:
                raise error
            if wait is None:
                wait = policy.backoff(attempt, self._rng())
            self._sleep(min(wait, policy.max_retry_after_s))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class OpenAIChatClient:
    """``POST {base_url}/chat/completions`` on any OpenAI-compatible server.

    ``base_url`` includes the API version path, e.g. ``https://api.openai.com/v1`` or
    ``http://localhost:11434/v1`` (Ollama). ``api_key`` may be None for local servers.
    ``max_tokens_field`` names the output-limit field to send (``max_tokens`` for most local
    servers, ``max_completion_tokens`` for newer OpenAI models) or None to send none.
    """

    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        extra_headers: Mapping[str, str] | None = None,
        *,
        json_mode: bool = True,
        max_tokens_field: str | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key or None
        self._extra_headers = dict(extra_headers or {})
        self._json_mode = json_mode
        self._json_mode_lock = threading.Lock()
        self._max_tokens_field = max_tokens_field
        self._transport = _Transport(
            provider=self.provider,
            timeout_s=timeout_s,
            secret=self._api_key,
            retry=retry,
            sleep=sleep,
            rng=rng,
        )

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    @property
    def json_mode(self) -> bool:
        """Whether requests carry ``response_format`` (turned off after a server rejects it)."""
        return self._json_mode

    def close(self) -> None:
        self._transport.close()

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", **self._extra_headers}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(
        self, system: str, user: str, max_output_tokens: int, json_mode: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
        }
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        if self._max_tokens_field:
            body[self._max_tokens_field] = max_output_tokens
        return body

    def complete(self, system: str, user: str, *, max_output_tokens: int) -> ChatResult:
        url = f"{self.base_url}/chat/completions"
        json_mode = self._json_mode
        try:
            data = self._transport.post_json(
                url, self._headers(), self._body(system, user, max_output_tokens, json_mode)
            )
        except LLMRequestError as exc:
            if not (json_mode and exc.status == 400 and "response_format" in exc.body):
                raise
            with self._json_mode_lock:
                self._json_mode = False
            data = self._transport.post_json(
                url, self._headers(), self._body(system, user, max_output_tokens, False)
            )
        return self._parse(data)

    def _parse(self, data: Any) -> ChatResult:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise self._shape_error("no choices[0].message", data) from None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            why = (
                f"model refused: {refusal}" if refusal else "choices[0].message.content is not text"
            )
            raise self._shape_error(why, data)
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        finish = choice.get("finish_reason")
        return ChatResult(
            text=content,
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            stop_reason=finish if isinstance(finish, str) else None,
            truncated=finish == "length",
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
        )

    def _shape_error(self, why: str, data: Any) -> LLMRequestError:
        return shape_error(self.provider, self._api_key, why, data)


class AnthropicClient:
    """``POST {base_url}/v1/messages`` (Anthropic Messages API, ``anthropic-version: 2023-06-01``)."""

    provider = "anthropic"
    api_version = "2023-06-01"

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str = "https://api.anthropic.com",
        timeout_s: float = 60.0,
        *,
        extra_headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._extra_headers = dict(extra_headers or {})
        self._transport = _Transport(
            provider=self.provider,
            timeout_s=timeout_s,
            secret=api_key,
            retry=retry,
            sleep=sleep,
            rng=rng,
        )

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"AnthropicClient(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    def close(self) -> None:
        self._transport.close()

    def complete(self, system: str, user: str, *, max_output_tokens: int) -> ChatResult:
        headers = {
            "content-type": "application/json",
            **self._extra_headers,
            "x-api-key": self._api_key,
            "anthropic-version": self.api_version,
        }
        body = {
            "model": self.model,
            "max_tokens": max_output_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "temperature": 0,
        }
        data = self._transport.post_json(f"{self.base_url}/v1/messages", headers, body)
        return self._parse(data)

    def _parse(self, data: Any) -> ChatResult:
        blocks = data.get("content") if isinstance(data, dict) else None
        if not isinstance(blocks, list):
            raise self._shape_error("no content list", data)
        text = next(
            (
                b["text"]
                for b in blocks
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            ),
            None,
        )
        if text is None:
            raise self._shape_error("no content block of type text", data)
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        stop = data.get("stop_reason")
        return ChatResult(
            text=text,
            input_tokens=_int(usage.get("input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
            stop_reason=stop if isinstance(stop, str) else None,
            truncated=stop == "max_tokens",
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
        )

    def _shape_error(self, why: str, data: Any) -> LLMRequestError:
        return shape_error(self.provider, self._api_key, why, data)


def shape_error(provider: str, api_key: str | None, why: str, data: Any) -> LLMRequestError:
    """A 200 response whose body is not the API's shape (the body quoted with the key scrubbed)."""
    return LLMRequestError(
        f"{provider}: unexpected response: {why}: {_snippet(scrub(str(data), api_key))}",
        provider=provider,
        status=200,
    )
