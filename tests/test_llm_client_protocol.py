"""Client-protocol tests for the LLM summariser backends.

Each test starts a real HTTP server on 127.0.0.1 (``ThreadingHTTPServer`` in a thread) that speaks
the OpenAI chat-completions or the Anthropic Messages API: it checks the request path, headers and
JSON body the way those APIs do (answering 400/401 in their error shapes when something is wrong)
and answers with their real response shapes. The clients and ``LLMSummarizer`` are exercised
through that server: success, retries, failures that degrade to the fallback, cache, concurrency
limit and key hygiene. Sleeps between retries are injected, so nothing here waits on backoff.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.llm import LLMSummarizer, build_llm_summarizer
from memtoc.pipeline.summarize.llm_cache import MemorySummaryCache, SqliteSummaryCache
from memtoc.pipeline.summarize.llm_clients import (
    AnthropicClient,
    ChatClient,
    OpenAIChatClient,
    RetryPolicy,
    parse_retry_after,
)
from memtoc.pipeline.summarize.llm_prompt import HeuristicTokens, extract_json_text, fit_items

API_KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "test-model"

GOOD = {
    "title": "Fixed the flaky SQLite WAL checkpoint test",
    "bullets": [
        "Reproduced the flaky test_checkpoint failure under load",
        "Traced it to a missing busy_timeout on the reader connection",
        "Set busy_timeout=5000 and the test passed 200 runs in a row",
    ],
    "keywords": ["sqlite", "WAL", "busy_timeout", "test_checkpoint", "flaky test"],
    "abstract": "A flaky WAL checkpoint test was traced to a missing busy timeout and fixed.",
    "overview": "The user reported test_checkpoint failing intermittently. The assistant ...",
}


# --------------------------------------------------------------------------- the fake-free server


@dataclass
class Reply:
    """What the server does for one request."""

    status: int = 200
    content: str | None = None
    """The model's text (200 only); None means the JSON of ``GOOD``."""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error_message: str = "error"
    finish: str | None = None


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ApiServer:
    """A local server speaking one provider's API (``openai`` or ``anthropic``)."""

    def __init__(self, provider: str, *, reject_response_format: bool = False) -> None:
        self.provider = provider
        self.reject_response_format = reject_response_format
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.seen: list[Seen] = []
        self.violations: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        port = self._httpd.server_address[1]
        root = f"http://127.0.0.1:{port}"
        return f"{root}/v1" if self.provider == "openai" else root

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    # -- protocol checks, as the real APIs would answer them ----------------------------------

    def check(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, str] | None:
        """None if the request is well-formed, else (status, message) as the API would reply."""
        if not isinstance(body, dict):
            return 400, "body must be a JSON object"
        if headers.get("content-type", "").split(";")[0] != "application/json":
            return 400, "content-type must be application/json"
        if not isinstance(body.get("model"), str):
            return 400, "model: field required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, "messages: field required"
        if self.provider == "openai":
            if path != "/v1/chat/completions":
                return 404, f"unknown url {path}"
            if headers.get("authorization") != f"Bearer {API_KEY}":
                return 401, f"Incorrect API key provided: {headers.get('authorization', '')[7:]}"
            for m in messages:
                if m.get("role") not in {"system", "user", "assistant"}:
                    return 400, "messages: bad role"
                if not isinstance(m.get("content"), str):
                    return 400, "messages: content must be a string"
            if "response_format" in body:
                if self.reject_response_format:
                    return 400, "Unrecognized request argument supplied: response_format"
                if body["response_format"] != {"type": "json_object"}:
                    return 400, "response_format: invalid"
            if not isinstance(body.get("temperature", 1), int | float):
                return 400, "temperature must be a number"
            return None
        if path != "/v1/messages":
            return 404, f"unknown url {path}"
        if headers.get("x-api-key") != API_KEY:
            return 401, f"invalid x-api-key {headers.get('x-api-key')}"
        if headers.get("anthropic-version") != "2023-06-01":
            return 400, "anthropic-version header is required"
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return 400, "max_tokens: field required"
        if "system" in body and not isinstance(body["system"], str | list):
            return 400, "system: must be a string or a list of blocks"
        if messages[0].get("role") != "user" or any(
            m.get("role") not in {"user", "assistant"} for m in messages
        ):
            return 400, "messages: first message must use the user role"
        return None

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        if self.provider == "openai":
            kind = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
                status, "invalid_request"
            )
            return {"error": {"message": message, "type": kind, "param": None, "code": None}}
        kind = {
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
            500: "api_error",
            529: "overloaded_error",
        }.get(status, "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def ok_body(self, model: str, text: str, finish: str | None) -> dict[str, Any]:
        if self.provider == "openai":
            return {
                "id": "chatcmpl-9xTest",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": finish or "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500},
                "system_fingerprint": "fp_test",
            }
        return {
            "id": "msg_01TestXyz",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": finish or "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1200, "output_tokens": 300},
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (timeout tests)
                    self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = None
                with server._lock:
                    server.seen.append(
                        Seen(self.path, headers, body if isinstance(body, dict) else {})
                    )
                    reply = server.script.popleft() if server.script else server.default
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if reply.delay_s:
                        server.release.wait(reply.delay_s)
                    problem = server.check(self.path, headers, body)
                    if problem is not None:
                        status, message = problem
                        if not (status == 400 and "response_format" in message):
                            server.violations.append(message)
                        self._send(status, server.error_body(status, message), {})
                    elif reply.status != 200:
                        self._send(
                            reply.status,
                            server.error_body(reply.status, reply.error_message),
                            reply.headers,
                        )
                    else:
                        text = reply.content if reply.content is not None else json.dumps(GOOD)
                        self._send(
                            200, server.ok_body(body["model"], text, reply.finish), reply.headers
                        )
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(provider: str) -> Iterator[ApiServer]:
    srv = ApiServer(provider)
    yield srv
    srv.close()


# --------------------------------------------------------------------------- helpers


class LeadSummarizer:
    """A small deterministic fallback: the first lines as bullets, frequent words as keywords."""

    name = "lead/1"

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        return self._from_texts([e.text for e in events])

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        return self._from_texts([c.title for c in children])

    def _from_texts(self, texts: list[str]) -> Summary:
        words = Counter(w.lower() for t in texts for w in t.split() if len(w) > 3)
        return Summary(
            title=(texts[0] if texts else "empty")[:80],
            bullets=tuple(t[:200] for t in texts[:3]),
            keywords=tuple(w for w, _ in words.most_common(5)),
            abstract=" ".join(texts)[:300],
            overview=" ".join(texts)[:2000],
            backend=self.name,
        )


def make_events(tag: str = "", n: int = 4) -> list[Event]:
    base = int(datetime(2024, 1, 18, 10, 0, tzinfo=UTC).timestamp() * 1000)
    roles = [
        ("user_message", "user"),
        ("assistant_message", "assistant"),
        ("tool_call", "assistant"),
    ]
    out = []
    for i in range(n):
        etype, role = roles[i % 3]
        out.append(
            Event(
                event_id=f"01HEV{tag}{i:04d}",
                session_id="s1",
                project="p",
                agent="claude-code",
                ts_ms=base + i * 60_000,
                event_type=etype,
                role=role,
                text=f"{tag} step {i}: the   test_checkpoint\nfails with SQLITE_BUSY",
            )
        )
    return out


@dataclass
class Harness:
    client: ChatClient
    summarizer: LLMSummarizer
    sleeps: list[float]


def make_client(
    server: ApiServer,
    sleeps: list[float],
    *,
    timeout_s: float = 5.0,
    attempts: int = 3,
    api_key: str = API_KEY,
) -> ChatClient:
    retry = RetryPolicy(max_attempts=attempts, base_delay_s=0.5, jitter=0.25)
    if server.provider == "openai":
        return OpenAIChatClient(
            server.base_url,
            MODEL,
            api_key,
            timeout_s,
            retry=retry,
            sleep=sleeps.append,
            rng=lambda: 0.5,
        )
    return AnthropicClient(
        MODEL,
        api_key,
        server.base_url,
        timeout_s,
        retry=retry,
        sleep=sleeps.append,
        rng=lambda: 0.5,
    )


@pytest.fixture
def harness(server: ApiServer) -> Iterator[Harness]:
    sleeps: list[float] = []
    client = make_client(server, sleeps)
    summ = LLMSummarizer(client, LeadSummarizer(), cache=MemorySummaryCache(), prices=(3.0, 15.0))
    yield Harness(client, summ, sleeps)
    summ.close()


# --------------------------------------------------------------------------- client-protocol tests


def test_client_protocol_success_builds_summary_and_counts_tokens_and_cost(
    server: ApiServer, harness: Harness
) -> None:
    summary = harness.summarizer.summarize_events(make_events("a"), make_events("ctx", 2))

    assert summary.degraded is None
    assert summary.backend == f"llm:{server.provider}:{MODEL}/1"
    assert summary.title == GOOD["title"]
    assert summary.bullets == tuple(GOOD["bullets"])
    assert summary.keywords == tuple(GOOD["keywords"])
    usage = harness.summarizer.usage
    assert (usage.requests, usage.failures, usage.cache_hits) == (1, 0, 0)
    assert (usage.input_tokens, usage.output_tokens) == (1200, 300)
    assert usage.cost_usd == pytest.approx((1200 * 3.0 + 300 * 15.0) / 1e6)
    assert server.violations == []

    (req,) = server.seen
    body = req.body
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    if server.provider == "openai":
        assert req.path == "/v1/chat/completions"
        assert body["response_format"] == {"type": "json_object"}
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        user = body["messages"][1]["content"]
    else:
        assert req.path == "/v1/messages"
        assert req.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in req.headers
        assert body["max_tokens"] == 1500
        assert "JSON object" in body["system"]
        assert [m["role"] for m in body["messages"]] == ["user"]
        user = body["messages"][0]["content"]
    doc = json.loads(user)
    assert doc["task"] == "summarize_segment"
    assert doc["events"][0] == "[10:00 user] a step 0: the test_checkpoint fails with SQLITE_BUSY"
    assert doc["events"][2].startswith("[10:02 tool_call] ")
    assert doc["context_before"][0].startswith("[10:00 user] ctx step 0")


def test_client_protocol_children_prompt_carries_titles_bullets_keywords(
    server: ApiServer, harness: Harness
) -> None:
    child = Summary("Day one work", ("did X", "fixed Y"), ("x", "y"), "abs", "ov")
    summary = harness.summarizer.summarize_children([child, child])
    assert summary.degraded is None
    body = server.seen[0].body
    user = body["messages"][-1]["content"]
    doc = json.loads(user)
    assert doc["task"] == "summarize_period"
    assert doc["children"][0] == "Day one work\n- did X\n- fixed Y\nkeywords: x, y"


def test_client_protocol_429_with_retry_after_is_retried(
    server: ApiServer, harness: Harness
) -> None:
    server.script.append(Reply(status=429, headers={"retry-after": "2"}, error_message="slow down"))
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.degraded is None
    assert len(server.seen) == 2
    assert harness.sleeps == [2.0]
    assert harness.summarizer.usage.failures == 0


def test_client_protocol_500_three_times_degrades_with_status(
    server: ApiServer, harness: Harness
) -> None:
    server.default = Reply(status=500, error_message="upstream exploded")
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.backend == "lead/1"
    assert summary.degraded is not None
    assert "HTTP 500 after 3 attempts" in summary.degraded
    assert "upstream exploded" in summary.degraded
    assert summary.degraded.startswith(f"llm:{server.provider}:{MODEL}/1: ")
    assert len(server.seen) == 3
    assert harness.sleeps == [0.5, 1.0]  # exponential, jitter factor 1.0 at rng=0.5
    usage = harness.summarizer.usage
    assert (usage.requests, usage.failures, usage.input_tokens) == (1, 1, 0)


def test_client_protocol_other_4xx_is_not_retried(server: ApiServer, harness: Harness) -> None:
    server.default = Reply(status=404, error_message="model test-model not found")
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.degraded is not None and "HTTP 404 after 1 attempt:" in summary.degraded
    assert len(server.seen) == 1
    assert harness.sleeps == []


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("Sure! Here is a summary of the session.", "not JSON"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "bullets"}), "bullets"),
        (json.dumps({**GOOD, "bullets": GOOD["bullets"][:2]}), "bullets"),
        (json.dumps({**GOOD, "keywords": ["a", "A", "b", "c", "d"]}), "distinct keywords"),
        (json.dumps({**GOOD, "title": "x" * 81}), "title"),
        (json.dumps({**GOOD, "abstract": 42}), "abstract"),
        (json.dumps(["title", "bullets"]), "not an object"),
    ],
)
def test_client_protocol_invalid_reply_degrades(
    server: ApiServer, harness: Harness, content: str, why: str
) -> None:
    server.default = Reply(content=content)
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.backend == "lead/1"
    assert summary.degraded is not None and why in summary.degraded
    usage = harness.summarizer.usage
    assert (usage.failures, usage.input_tokens) == (1, 1200)  # a bad reply is still billed
    assert len(server.seen) == 1  # no retry of a bad reply


def test_client_protocol_truncated_reply_says_so(server: ApiServer, harness: Harness) -> None:
    finish = "length" if server.provider == "openai" else "max_tokens"
    server.default = Reply(content=json.dumps(GOOD)[:60], finish=finish)
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.degraded is not None and "cut off at the output limit" in summary.degraded


def test_client_protocol_fenced_json_with_extra_keys_is_accepted(
    server: ApiServer, harness: Harness
) -> None:
    server.default = Reply(content="```json\n" + json.dumps({**GOOD, "mood": "happy"}) + "\n```")
    summary = harness.summarizer.summarize_events(make_events())
    assert summary.degraded is None
    assert summary.overview == GOOD["overview"]


def test_client_protocol_timeout_degrades(server: ApiServer) -> None:
    sleeps: list[float] = []
    client = make_client(server, sleeps, timeout_s=0.2, attempts=2)
    summ = LLMSummarizer(client, LeadSummarizer())
    server.default = Reply(delay_s=2.0)
    started = time.monotonic()
    try:
        summary = summ.summarize_events(make_events())
    finally:
        summ.close()
    assert time.monotonic() - started < 1.5
    assert summary.degraded is not None and "timed out" in summary.degraded
    assert "2 attempts" in summary.degraded
    assert len(sleeps) == 1


def test_client_protocol_connection_refused_degrades(provider: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    summ = build_llm_summarizer(
        provider,
        MODEL,
        f"http://127.0.0.1:{port}",
        API_KEY,
        LeadSummarizer(),
        retry=RetryPolicy(max_attempts=2),
        sleep=sleeps.append,
    )
    try:
        summary = summ.summarize_events(make_events())
    finally:
        summ.close()
    assert summary.degraded is not None and "connection failed" in summary.degraded
    assert len(sleeps) == 1


def test_client_protocol_cache_hit_skips_the_server(server: ApiServer, harness: Harness) -> None:
    first = harness.summarizer.summarize_events(make_events("c"))
    second = harness.summarizer.summarize_events(make_events("c"))
    assert first == second and first.degraded is None
    assert len(server.seen) == 1
    usage = harness.summarizer.usage
    assert (usage.requests, usage.cache_hits) == (1, 1)
    harness.summarizer.summarize_events(make_events("d"))  # different input: a miss
    assert len(server.seen) == 2


def test_client_protocol_sqlite_cache_survives_a_new_summarizer(
    server: ApiServer, tmp_path: Path
) -> None:
    path = tmp_path / "llm-cache.db"
    for round_no in (1, 2):
        cache = SqliteSummaryCache(path)
        sleeps: list[float] = []
        summ = LLMSummarizer(make_client(server, sleeps), LeadSummarizer(), cache=cache)
        try:
            summary = summ.summarize_events(make_events("p"))
        finally:
            summ.close()
            cache.close()
        assert summary.degraded is None
        assert summ.usage.cache_hits == (round_no - 1)
    assert len(server.seen) == 1


def test_client_protocol_degraded_results_are_not_cached(
    server: ApiServer, harness: Harness
) -> None:
    server.script.append(Reply(content="not json"))
    assert harness.summarizer.summarize_events(make_events()).degraded is not None
    assert harness.summarizer.summarize_events(make_events()).degraded is None
    assert len(server.seen) == 2


def test_client_protocol_concurrency_limit_is_respected(server: ApiServer) -> None:
    server.default = Reply(delay_s=0.15)
    sleeps: list[float] = []
    summ = LLMSummarizer(make_client(server, sleeps), LeadSummarizer(), max_concurrency=2)
    results: list[Summary] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        s = summ.summarize_events(make_events(f"t{i}"))
        with lock:
            results.append(s)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    finally:
        summ.close()
    assert len(results) == 6 and all(r.degraded is None for r in results)
    assert len(server.seen) == 6
    assert server.max_in_flight == 2
    assert summ.usage.requests == 6


def test_client_protocol_api_key_never_leaks(server: ApiServer) -> None:
    wrong = "sk-wrong-KEY-that-the-server-echoes-999"
    sleeps: list[float] = []
    client = make_client(server, sleeps, api_key=wrong)
    summ = LLMSummarizer(client, LeadSummarizer())
    try:
        summary = summ.summarize_events(make_events())
    finally:
        summ.close()
    assert server.violations and wrong in server.violations[0]  # the server did echo it
    assert summary.degraded is not None and "HTTP 401" in summary.degraded
    assert wrong not in summary.degraded and "***" in summary.degraded
    assert wrong not in repr(client) and wrong not in repr(summ)
    assert len(server.seen) == 1 and sleeps == []  # 401 is not retried


def test_client_protocol_openai_server_rejecting_response_format() -> None:
    srv = ApiServer("openai", reject_response_format=True)
    sleeps: list[float] = []
    client = make_client(srv, sleeps)
    summ = LLMSummarizer(client, LeadSummarizer())
    try:
        first = summ.summarize_events(make_events("r1"))
        second = summ.summarize_events(make_events("r2"))
    finally:
        summ.close()
        srv.close()
    assert first.degraded is None and second.degraded is None
    assert ["response_format" in s.body for s in srv.seen] == [True, False, False]
    assert isinstance(client, OpenAIChatClient) and client.json_mode is False
    assert srv.violations == []


def test_client_protocol_anthropic_picks_first_text_block() -> None:
    srv = ApiServer("anthropic")
    original = srv.ok_body

    def with_thinking(model: str, text: str, finish: str | None) -> dict[str, Any]:
        body = original(model, text, finish)
        body["content"] = [
            {"type": "thinking", "thinking": "hmm", "signature": "x"},
            *body["content"],
        ]
        return body

    srv.ok_body = with_thinking  # type: ignore[method-assign]
    sleeps: list[float] = []
    summ = LLMSummarizer(make_client(srv, sleeps), LeadSummarizer())
    try:
        summary = summ.summarize_events(make_events())
    finally:
        summ.close()
        srv.close()
    assert summary.degraded is None and summary.title == GOOD["title"]


# --------------------------------------------------------------------------- pure helpers


def test_retry_after_forms() -> None:
    import httpx

    assert parse_retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    date = httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"})
    assert parse_retry_after(date, now_s=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_fit_items_clips_then_drops_the_middle() -> None:
    counter = HeuristicTokens()
    items = [f"item {i} " + "x" * 3000 for i in range(50)]
    kept, dropped = fit_items(items, 2_000, counter, max_item_chars=1_200, noun="events")
    assert sum(counter.count(t) + 1 for t in kept) <= 2_000
    assert dropped > 0 and len(kept) == 50 - dropped + 1
    assert kept[0].startswith("item 0 ") and kept[-1].startswith("item 49 ")
    assert f"[... {dropped} events omitted ...]" in kept
    assert fit_items(["a", "b"], 100, counter, max_item_chars=10) == (["a", "b"], 0)


def test_extract_json_text_strips_fences_and_prose() -> None:
    assert extract_json_text('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert extract_json_text('```\n{"a": 1}```') == '{"a": 1}'
    assert extract_json_text('Here you go: {"a": {"b": 2}} Thanks!') == '{"a": {"b": 2}}'


def test_factory_rejects_bad_settings() -> None:
    from memtoc.errors import ConfigError

    with pytest.raises(ConfigError, match="llm_model"):
        build_llm_summarizer("openai", None, None, None, LeadSummarizer())
    with pytest.raises(ConfigError, match="llm_api_key"):
        build_llm_summarizer("anthropic", "claude", None, None, LeadSummarizer())
    with pytest.raises(ConfigError, match="summarizer"):
        build_llm_summarizer("gemini", "g", None, "k", LeadSummarizer())


def test_client_protocol_url_without_scheme_degrades_without_retry() -> None:
    sleeps: list[float] = []
    summ = build_llm_summarizer(
        "openai", MODEL, "localhost:11434/v1", None, LeadSummarizer(), sleep=sleeps.append
    )
    try:
        summary = summ.summarize_events(make_events())
    finally:
        summ.close()
    assert summary.degraded is not None and "bad URL" in summary.degraded
    assert sleeps == []
