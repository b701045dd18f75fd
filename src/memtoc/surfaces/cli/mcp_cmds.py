"""``memtoc mcp``: serve the memory to agents over the Model Context Protocol."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from memtoc.memory import Memory
from memtoc.surfaces.cli.app import app, open_memory, state


@app.command()
def mcp(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (spawned by an agent) or http.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port.")] = 8766,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="HTTP: no bearer token (loopback hosts only).")
    ] = False,
) -> None:
    """Run the MCP server (tools memory_*, resource memtoc://context/{project}, a prompt).

    Claude Code: `claude mcp add memtoc -- memtoc mcp`. Over HTTP the endpoint is
    http://HOST:PORT/mcp and every request needs `Authorization: Bearer <token>` (the token
    `memtoc token` prints), like the HTTP API.
    """
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected stdio or http", param_hint="--transport")
    from memtoc.surfaces.mcp_server import build_server

    # stdout belongs to the protocol on stdio: diagnostics go to stderr only.
    logging.basicConfig(level=logging.WARNING, format="memtoc mcp: %(levelname)s %(message)s")
    with open_memory(ctx) as memory:
        if transport == "stdio":
            build_server(memory).run("stdio")
        else:
            run_http(memory, state(ctx).settings.home, host=host, port=port, auth=not no_auth)


def run_http(memory: Memory, home: Path, *, host: str, port: int, auth: bool) -> None:
    """Serve MCP over streamable HTTP, token-guarded (``memtoc.surfaces.http.mcp_http``)."""
    import uvicorn

    from memtoc.surfaces.http.auth import ensure_token
    from memtoc.surfaces.http.mcp_http import MCP_PATH, mcp_http_app
    from memtoc.surfaces.serve import base_url, bind_socket

    token = ensure_token(home) if auth else None
    asgi = mcp_http_app(memory, host=host, token=token)
    sock = bind_socket(host, port)
    try:
        where = base_url(host, int(sock.getsockname()[1])) + MCP_PATH
        guard = "header 'Authorization: Bearer <token>' (`memtoc token`)" if token else "no auth"
        typer.echo(f"memtoc mcp: {where}  {guard}", err=True)
        uvicorn.Server(uvicorn.Config(asgi, log_level="warning")).run(sockets=[sock])
    finally:
        sock.close()
