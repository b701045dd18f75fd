"""Remote embedding backends: an OpenAI-compatible ``/embeddings`` API and Ollama's ``/api/embed``.

Both POST JSON through one small retrying transport: 429, 5xx, timeouts and connection errors are
retried with exponential backoff (honouring ``retry-after``), any other 4xx fails at once; the
sleep function is injected so tests never wait. Failures raise ``EmbedderError`` naming the
backend, URL, HTTP status and attempts, with the API key scrubbed from every message. Returned
vectors are checked for shape and L2-normalised here (servers differ on whether they normalise).

``version`` is the remote model id: a server cannot tell us more about the weights it runs.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from memtoc.errors import EmbedderError
from memtoc.text.embed import FloatMatrix, normalize_rows

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class RemoteEmbedderError(EmbedderError):
    """An embeddings API call failed; ``status`` is the last HTTP status (None: no response)."""

    def __init__(self, message: str, *, url: str, status: int | None, attempts: int) -> None:
        self.url = url
        self.status = status
        self.attempts = attempts
        super().__init__(message)


class _JsonPoster:
    """POSTs JSON and returns the decoded reply, retrying what is worth retrying."""

    def __init__(
        self,
        *,
        label: str,
        timeout_s: float,
        api_key: str | None,
        max_attempts: int,
        base_delay_s: float,
        sleep: Callable[[float], None],
    ) -> None:
        self.label = label
        self._api_key = api_key
        self._max_attempts = max(1, max_attempts)
        self._base_delay_s = base_delay_s
        self._sleep = sleep
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def _error(self, what: str, url: str, status: int | None, attempts: int) -> RemoteEmbedderError:
        text = f"{self.label}: POST {url} {what} after {attempts} attempt{'s' * (attempts != 1)}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return RemoteEmbedderError(text, url=url, status=status, attempts=attempts)

    def post(self, url: str, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                resp = self._http.post(url, json=body, headers=headers)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if isinstance(exc, httpx.UnsupportedProtocol) or attempt >= self._max_attempts:
                    raise self._error(
                        f"failed ({type(exc).__name__}: {exc})", url, None, attempt
                    ) from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise self._error(
                    f"failed ({type(exc).__name__}: {exc})", url, None, attempt
                ) from None
            else:
                if resp.status_code < 300:
                    try:
                        return resp.json()
                    except ValueError:
                        raise self._error(
                            f"returned invalid JSON: {resp.text[:200]!r}",
                            url,
                            resp.status_code,
                            attempt,
                        ) from None
                what = f"returned HTTP {resp.status_code}: {resp.text[:300]!r}"
                if resp.status_code not in _RETRY_STATUSES or attempt >= self._max_attempts:
                    raise self._error(what, url, resp.status_code, attempt)
                wait = _retry_after(resp.headers)
            delay = self._base_delay_s * 2.0 ** (attempt - 1)
            self._sleep(min(60.0, wait if wait is not None else delay))


def _retry_after(headers: httpx.Headers) -> float | None:
    raw = headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


class _RemoteEmbedder(ABC):
    """Shared batching, shape checks and lazy dimension probe of the two HTTP backends."""

    kind = "remote"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None,
        batch_size: int,
        timeout_s: float,
        dim: int | None,
        max_attempts: int,
        sleep: Callable[[float], None] | None,
    ) -> None:
        if not model:
            raise EmbedderError(f"the {self.kind} embedder needs a model name")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{self.kind}:{model}"
        self.version = model
        self._dim = dim
        self._batch_size = max(1, batch_size)
        self._poster = _JsonPoster(
            label=self.name,
            timeout_s=timeout_s,
            api_key=api_key,
            max_attempts=max_attempts,
            base_delay_s=0.5,
            sleep=sleep or time.sleep,
        )

    @property
    def dim(self) -> int:
        """The vector width, asked of the server once (by embedding a short probe) if not given."""
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def close(self) -> None:
        self._poster.close()

    @abstractmethod
    def _request(self, batch: list[str]) -> FloatMatrix:
        """Embed one batch with one API call (retries included)."""

    def _matrix(self, rows: Any, expected: int, url: str) -> FloatMatrix:
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            matrix = np.zeros((0,), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != expected or matrix.shape[1] == 0:
            raise EmbedderError(
                f"{self.name}: {url} returned {matrix.shape[0] if matrix.ndim else 0} vectors of "
                f"shape {matrix.shape[1:]} for {expected} texts"
            )
        if self._dim is not None and matrix.shape[1] != self._dim:
            raise EmbedderError(
                f"{self.name}: {url} returned {matrix.shape[1]}-d vectors, expected {self._dim}"
            )
        return matrix

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self._batch_size]))
            for i in range(0, len(texts), self._batch_size)
        ]
        out = normalize_rows(np.concatenate(parts, axis=0))
        if self._dim is None:
            self._dim = out.shape[1]
        return out


class OpenAIEmbedder(_RemoteEmbedder):
    """``POST {base_url}/embeddings`` with ``{"model", "input": [...]}``, bearer-token auth.

    Works with OpenAI and compatible servers (vLLM, llama.cpp, LM Studio, Ollama's ``/v1``).
    Results are put back in input order by each item's ``index``.
    """

    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch_size: int = 128,
        timeout_s: float = 30.0,
        dim: int | None = None,
        max_attempts: int = 4,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            model,
            api_key=api_key,
            batch_size=batch_size,
            timeout_s=timeout_s,
            dim=dim,
            max_attempts=max_attempts,
            sleep=sleep,
        )

    def _request(self, batch: list[str]) -> FloatMatrix:
        url = f"{self.base_url}/embeddings"
        reply = self._poster.post(url, {"model": self.model, "input": batch})
        try:
            items = sorted(reply["data"], key=lambda item: int(item.get("index", 0)))
            rows = [item["embedding"] for item in items]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise EmbedderError(
                f"{self.name}: {url} replied without data[i].embedding: {str(reply)[:200]}"
            ) from None
        return self._matrix(rows, len(batch), url)


class OllamaEmbedder(_RemoteEmbedder):
    """Ollama's ``POST {base_url}/api/embed`` with ``{"model", "input": [...]}`` → ``embeddings``."""

    kind = "ollama"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:11434",
        model: str = "nomic-embed-text",
        *,
        batch_size: int = 64,
        timeout_s: float = 60.0,
        dim: int | None = None,
        max_attempts: int = 4,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            model,
            api_key=None,
            batch_size=batch_size,
            timeout_s=timeout_s,
            dim=dim,
            max_attempts=max_attempts,
            sleep=sleep,
        )

    def _request(self, batch: list[str]) -> FloatMatrix:
        url = f"{self.base_url}/api/embed"
        reply = self._poster.post(url, {"model": self.model, "input": batch})
        if not isinstance(reply, dict) or "embeddings" not in reply:
            raise EmbedderError(
                f"{self.name}: {url} replied without embeddings: {str(reply)[:200]}"
            )
        return self._matrix(reply["embeddings"], len(batch), url)
