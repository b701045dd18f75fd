"""The front door of memtoc's HTTP servers: Host and Origin checks, the token, a body limit.

``RequestGuard`` is ASGI middleware in front of the whole app (the ``/v1`` API, the web UI and MCP
over HTTP). Per HTTP request, before any route runs and before a byte of the body is read:

1. **Host.** A server bound to loopback answers only requests whose ``Host`` names loopback
   (``127.0.0.1``, ``localhost``, ``::1``, any port) or a name given with ``--allow-host``; else
   421. This is what defeats DNS rebinding: a page on ``evil.com`` whose name the attacker
   re-points at 127.0.0.1 reaches the port, but its requests say ``Host: evil.com``. It matters
   most without a token (``--no-auth``, loopback only), where nothing else stops such a page from
   reading search results or writing events. A server bound to another address needs a token
   (``check_bind``), so there any ``Host`` is accepted (it is reached by whatever name the network
   gives it) unless ``--allow-host`` restricts it.
2. **Origin.** A browser's cross-site request carries ``Origin``; it must name an allowed host (or,
   when every host is allowed, the request's own ``Host``); ``Origin: null`` (sandboxed frames,
   ``file://``) is refused. 403. Requests without ``Origin`` (curl, agents, same-origin GETs) pass.
3. **Token.** Paths under a guarded prefix (``/v1``; ``/`` for MCP) need ``Authorization: Bearer
   <token>`` when the server has one; else 401 — checked here, so an unauthenticated request never
   gets its body read (a route's FastAPI dependency checks it again, which is what declares the
   scheme in the OpenAPI document).
4. **Body size.** ``Content-Length`` above the limit is refused at once (413); a body without one
   (chunked) is read up to the limit and refused past it. The body is then handed to the app from
   memory, so no route ever sees more than the limit.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memtoc.surfaces.http.auth import bearer_ok, is_loopback

MAX_BODY_BYTES = 1 << 20
"""The largest request body accepted: 1 MiB (the largest legitimate one, a ``remember`` of
20,000 characters, is at most 80 kB)."""

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def allowed_hosts(bind_host: str, extra: Collection[str] = ()) -> frozenset[str] | None:
    """The ``Host`` names a server bound to ``bind_host`` answers (lower case, no port); None:
    any (a non-loopback bind, which needs a token, without ``extra`` names)."""
    names = {_host_name(h) for h in extra if h.strip()}
    if is_loopback(bind_host):
        return frozenset(LOOPBACK_NAMES | {_host_name(bind_host)} | names)
    return frozenset(names | {_host_name(bind_host)}) if names else None


def _host_name(value: str) -> str:
    """``Host`` header value → host name: port dropped, IPv6 brackets removed, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare IPv6 address or a name


def _is_loopback_ip(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class RequestGuard:
    """ASGI middleware: Host, Origin, token and body-size checks (see the module docstring).

    ``hosts``: the allowed ``Host`` names (:func:`allowed_hosts`), None for any; ``token``: the
    bearer token (None: auth off); ``token_prefixes``: paths that need it; ``max_body_bytes``:
    the body limit.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: frozenset[str] | None,
        token: str | None,
        token_prefixes: tuple[str, ...] = ("/v1",),
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token
        self.token_prefixes = token_prefixes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers", []):
            headers.setdefault(key, value)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        body = await self._read_body(receive, headers)
        if body is None:
            await _reply(send, 413, f"request body over the limit of {self.max_body_bytes:,} bytes")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # afterwards: the client's disconnect, for streaming replies

        await self.app(scope, replay, send)

    def _refusal(
        self, scope: Scope, headers: dict[bytes, bytes]
    ) -> tuple[int, str, dict[str, str]] | None:
        raw_host = headers.get(b"host", b"").decode("latin-1")
        host = _host_name(raw_host)
        if self.hosts is not None and host not in self.hosts and not self._loopback_ok(host):
            return (
                421,
                f"Host {raw_host!r} is not served here (allowed: {', '.join(sorted(self.hosts))}"
                "; `memtoc serve --allow-host NAME` adds one)",
                {},
            )
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin.decode("latin-1"), raw_host):
            return 403, f"cross-origin request from {origin.decode('latin-1')!r} refused", {}
        path = str(scope.get("path", ""))
        if self.token is not None and any(path.startswith(p) for p in self.token_prefixes):
            header = headers.get(b"authorization")
            if not bearer_ok(header.decode("latin-1") if header else None, self.token):
                return (
                    401,
                    "missing or wrong bearer token (send 'Authorization: Bearer <token>'; "
                    "`memtoc token` prints it)",
                    {"www-authenticate": "Bearer"},
                )
        length = headers.get(b"content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                return 400, f"invalid Content-Length {length.decode('latin-1')!r}", {}
            if size > self.max_body_bytes:
                return 413, f"request body over the limit of {self.max_body_bytes:,} bytes", {}
        return None

    def _loopback_ok(self, host: str) -> bool:
        """Any loopback address is loopback (127.0.0.2 included) when loopback names are served."""
        return self.hosts is not None and "127.0.0.1" in self.hosts and _is_loopback_ip(host)

    def _origin_ok(self, origin: str, raw_host: str) -> bool:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null" and anything that is not a web origin
        name = parts.hostname.lower()
        if self.hosts is not None:
            return name in self.hosts or self._loopback_ok(name)
        return parts.netloc.lower() == raw_host.strip().lower()

    async def _read_body(self, receive: Receive, headers: dict[bytes, bytes]) -> bytes | None:
        """The whole body, or None past the limit (read no further)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client left; the app sees an empty body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _reply(
    send: Send, status: int, error: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps({"error": error}).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    if status == 413:
        raw.append((b"connection", b"close"))  # the rest of the body is not read
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
