"""``memtoc mcp``: serve the memory to agents over the Model Context Protocol."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from memtoc.surfaces.cli.app import app, open_memory


@app.command()
def mcp(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (spawned by an agent) or http.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port.")] = 8766,
) -> None:
    """Run the MCP server (tools memory_*, resource memtoc://context/{project}, a prompt).

    Claude Code: `claude mcp add memtoc -- memtoc mcp`. Over HTTP the endpoint is
    http://HOST:PORT/mcp.
    """
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected stdio or http", param_hint="--transport")
    from memtoc.surfaces.mcp_server import build_server

    # stdout belongs to the protocol on stdio: diagnostics go to stderr only.
    logging.basicConfig(level=logging.WARNING, format="memtoc mcp: %(levelname)s %(message)s")
    with open_memory(ctx) as memory:
        server = build_server(memory)
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)
