"""The HTTP front door (``surfaces/http/guard.py``): Host and Origin checks with and without a
token (DNS rebinding: ``Host: evil.com`` used to read search results and write an event under
``serve --no-auth``), the token checked before a byte of the body is read (an unauthenticated
200 MB POST used to be read whole: 181 -> 766 MB), and the body limit — through the app in
process, on the raw ASGI level (what was read), and over a real socket with uvicorn."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memtoc.config import Settings, load_settings
from memtoc.memory import Memory
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.http.guard import MAX_BODY_BYTES, allowed_hosts
from memtoc.surfaces.http.mcp_http import mcp_http_app

TOKEN = "guard-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOCAL = "http://127.0.0.1:8765"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = load_settings({"home": str(tmp_path / "home"), "embedder": "none"}, environ={})
    with Memory.open(s) as memory:
        memory.ingest_records(
            [
                {
                    "session_id": "s",
                    "timestamp": 1_705_572_000_000,
                    "role": "user",
                    "text": "postgres vacuum plan",
                }
            ],
            project="webapp",
        )
        memory.process()
    return s


def events(settings: Settings) -> int:
    with Memory.open(settings) as memory:
        return memory.store.count_events()


def test_allowed_hosts() -> None:
    loop = allowed_hosts("127.0.0.1")
    assert loop is not None and {"127.0.0.1", "localhost", "::1"} <= loop
    assert allowed_hosts("::1") is not None
    assert allowed_hosts("0.0.0.0") is None  # a public bind needs a token; any Host name
    named = allowed_hosts("0.0.0.0", ["memtoc.internal:443"])
    assert named == frozenset({"memtoc.internal", "0.0.0.0"})
    assert "memtoc.lan" in (allowed_hosts("127.0.0.1", ["Memtoc.LAN"]) or ())


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-auth", "token"])
def test_dns_rebinding_host_and_foreign_origins_are_refused(
    settings: Settings, token: str | None
) -> None:
    app = create_app(lambda: Memory.open(settings), token=token, web=True)
    auth = AUTH if token else {}
    with TestClient(app, base_url=LOCAL) as c:
        for host in ("evil.com", "evil.com:8765", "127.0.0.1.evil.com", "[::2]:8765", ""):
            read = c.get("/v1/search", params={"q": "postgres"}, headers={**auth, "Host": host})
            assert read.status_code == 421, (host, read.text)
            assert "is not served here" in read.json()["error"]
            assert "postgres" not in read.text
            wrote = c.post("/v1/remember", json={"text": "planted"}, headers={**auth, "Host": host})
            assert wrote.status_code == 421
            assert c.get("/", headers={"Host": host}).status_code == 421  # the web page too
        assert events(settings) == 1
        for host in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST", "[::1]:8765", "127.0.0.2"):
            ok = c.get("/v1/search", params={"q": "postgres"}, headers={**auth, "Host": host})
            assert ok.status_code == 200, (host, ok.text)
        for origin in ("http://evil.com", "null", "http://127.0.0.1.evil.com:8765", "file://"):
            r = c.post("/v1/remember", json={"text": "csrf"}, headers={**auth, "Origin": origin})
            assert r.status_code == 403 and "cross-origin" in r.json()["error"], origin
        assert events(settings) == 1
        same = c.post("/v1/remember", json={"text": "kept"}, headers={**auth, "Origin": LOCAL})
        assert same.status_code == 200, same.text
        assert events(settings) == 2


def test_allow_host_adds_a_name(settings: Settings) -> None:
    app = create_app(
        lambda: Memory.open(settings), token=None, web=False, allow_hosts=["memtoc.lan"]
    )
    with TestClient(app, base_url="http://memtoc.lan") as c:
        assert c.get("/v1/projects").status_code == 200
        assert c.get("/v1/projects", headers={"Host": "evil.com"}).status_code == 421


def test_public_bind_accepts_any_host_but_only_same_origin(settings: Settings) -> None:
    app = create_app(lambda: Memory.open(settings), token=TOKEN, web=False, host="0.0.0.0")
    with TestClient(app, base_url="http://10.1.2.3:8765") as c:
        assert c.get("/v1/projects", headers=AUTH).status_code == 200
        assert c.get("/v1/projects").status_code == 401
        cross = {**AUTH, "Origin": "http://evil.com"}
        assert c.get("/v1/projects", headers=cross).status_code == 403
        same = {**AUTH, "Origin": "http://10.1.2.3:8765"}
        assert c.get("/v1/projects", headers=same).status_code == 200


def _asgi_call(
    app: Any, method: str, path: str, headers: dict[str, str], chunks: list[bytes]
) -> tuple[int, int, bytes]:
    """Run one request on the ASGI level: (status, bytes of body the app pulled, reply body)."""
    pulled = 0
    queue = list(chunks)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if not queue:
            await asyncio.sleep(3600)  # a client that never sends more
        chunk = queue.pop(0)
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8765),
        "state": {},
    }

    async def run() -> None:
        await asyncio.wait_for(app(scope, receive, send), timeout=30)

    asyncio.run(run())
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(start["status"]), pulled, body


def test_token_is_checked_before_the_body_is_read(settings: Settings) -> None:
    app = create_app(lambda: Memory.open(settings), token=TOKEN, web=False)
    mb = b"x" * (1 << 20)
    host = {"Host": "127.0.0.1:8765", "Content-Type": "application/json"}
    # 200 MB announced, streamed in 1 MB chunks: refused at once, nothing read
    status, pulled, body = _asgi_call(
        app, "POST", "/v1/remember", {**host, "Content-Length": str(200 << 20)}, [mb] * 200
    )
    assert status == 401 and pulled == 0 and b"bearer token" in body
    # chunked (no Content-Length), unauthenticated: still nothing read
    status, pulled, _ = _asgi_call(app, "POST", "/v1/remember", host, [mb] * 200)
    assert status == 401 and pulled == 0
    # authenticated but over the limit: announced -> nothing read; chunked -> read to the limit
    status, pulled, body = _asgi_call(
        app, "POST", "/v1/remember", {**host, **AUTH, "Content-Length": str(200 << 20)}, [mb]
    )
    assert status == 413 and pulled == 0 and b"limit" in body
    status, pulled, _ = _asgi_call(app, "POST", "/v1/remember", {**host, **AUTH}, [mb] * 200)
    assert status == 413 and MAX_BODY_BYTES < pulled <= MAX_BODY_BYTES + len(mb)
    assert events(settings) == 1
    # a normal body, chunked, reaches the route whole
    note = json.dumps({"text": "the vacuum runs nightly"}).encode()
    status, _, body = _asgi_call(
        app, "POST", "/v1/remember", {**host, **AUTH}, [note[:10], note[10:]]
    )
    assert status == 200, body
    assert events(settings) == 2


@contextmanager
def served(app: Any) -> Iterator[int]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _raw(port: int, request: bytes, body_bytes: int = 0) -> bytes:
    """Send ``request`` (then up to ``body_bytes`` of body, stopping when the server answers)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        conn.settimeout(0.05)
        sent = 0
        chunk = b"y" * 65536
        reply = b""
        while sent < body_bytes and not reply:
            try:
                conn.sendall(chunk)
                sent += len(chunk)
                reply = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break  # the server closed the connection after answering
        conn.settimeout(10)
        while b"\r\n\r\n" not in reply:
            more = conn.recv(65536)
            if not more:
                break
            reply += more
        assert sent < 50 << 20, "the server kept reading the body"
        return reply


def test_over_a_real_socket_no_auth_host_and_unauthenticated_flood(settings: Settings) -> None:
    no_auth = create_app(lambda: Memory.open(settings), token=None, web=False)
    with served(no_auth) as port:
        reply = _raw(port, b"GET /v1/search?q=postgres HTTP/1.1\r\nHost: evil.com\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 421") and b"postgres" not in reply.split(b"\r\n\r\n")[1]
        ok = _raw(port, f"GET /v1/projects HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert ok.startswith(b"HTTP/1.1 200")
    with_token = create_app(lambda: Memory.open(settings), token=TOKEN, web=False)
    with served(with_token) as port:
        head = (
            f"POST /v1/remember HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {200 << 20}\r\n\r\n"
        ).encode()
        reply = _raw(port, head, body_bytes=200 << 20)
        assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert events(settings) == 1


def test_mcp_over_http_refuses_a_rebound_host_without_a_token(tmp_path: Path) -> None:
    s = load_settings({"home": str(tmp_path / "home"), "embedder": "none"}, environ={})
    with Memory.open(s) as memory:
        asgi = mcp_http_app(memory, host="127.0.0.1", token=None)
        with TestClient(asgi, base_url="http://127.0.0.1:8766") as client:
            r = client.post("/mcp", content="{}", headers={"Host": "evil.com"})
            assert r.status_code == 421
            big = client.post(
                "/mcp", content=b"x" * (MAX_BODY_BYTES + 1), headers={"Host": "localhost"}
            )
            assert big.status_code == 413
