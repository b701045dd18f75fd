"""MCP over HTTP with the HTTP API's bearer token (``memtoc mcp --transport http``).

The MCP SDK's streamable-HTTP app (endpoint ``/mcp``; its own DNS-rebinding protection on for
loopback hosts) behind ``RequestGuard`` (``guard.py``: Host and Origin checks, the token before the
body is read, a body limit): every request needs the same token as ``/v1``
(``<home>/http-token``), unless auth is off (``--no-auth``), which ``check_bind`` only allows on a
loopback address. Run with uvicorn on a socket bound by ``memtoc.surfaces.serve.bind_socket``.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from memtoc.memory import Memory
from memtoc.surfaces.http.auth import check_bind
from memtoc.surfaces.http.guard import RequestGuard, allowed_hosts
from memtoc.surfaces.mcp_server import build_server
from memtoc.surfaces.processing import Processing

MCP_PATH = "/mcp"


def mcp_http_app(
    memory: Memory,
    *,
    host: str,
    token: str | None,
    processing: Processing | None = None,
    structured: bool = False,
) -> ASGIApp:
    """The MCP server over ``memory`` as an ASGI app guarded by ``token`` (None: no auth);
    ``processing``: who processes new events, for ``memory_status``; ``structured``: add
    structured content to results (``build_server``)."""
    check_bind(host, token)
    app: ASGIApp = build_server(memory, processing, structured=structured).streamable_http_app(
        streamable_http_path=MCP_PATH, host=host
    )
    return RequestGuard(app, hosts=allowed_hosts(host), token=token, token_prefixes=("/",))
