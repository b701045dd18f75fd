"""``memtoc mcp``: serve the memory to agents over the Model Context Protocol.

Beside the server runs the background worker of ``memtoc serve`` (``processing``), unless
another process holds the store's processing lock or ``--no-worker`` is given. Shutdown: on stdio
the client closing stdin ends the server; on SIGTERM/SIGINT the worker finishes the unit of work in
hand, the lock is released and the process exits 0 right away — the stdio reader is a thread
blocked on stdin that cannot be interrupted, so waiting for it would mean waiting for the client.
Over HTTP uvicorn finishes the requests in flight first.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from memtoc.memory import Memory
from memtoc.surfaces.cli.app import app, open_memory, state
from memtoc.surfaces.processing import Processing

SIGNALS = (signal.SIGTERM, signal.SIGINT)
log = logging.getLogger("memtoc")


@app.command()
def mcp(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (spawned by an agent) or http.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port (0: any free port).")] = 8766,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="HTTP: no bearer token (loopback hosts only).")
    ] = False,
    no_worker: Annotated[
        bool,
        typer.Option(
            "--no-worker",
            help="Do not process new events here (leave it to `memtoc serve` or `memtoc process`).",
        ),
    ] = False,
    structured: Annotated[
        bool,
        typer.Option(
            "--structured",
            help="Add structured content (the data as JSON) to every result, for clients that "
            "read it; agents such as Claude Code and Codex then show the model that JSON instead "
            "of the compact text.",
        ),
    ] = False,
) -> None:
    """Run the MCP server (tools memory_*, resource memtoc://context/{project}, a prompt).

    Claude Code: `claude mcp add memtoc -- memtoc mcp`. Over HTTP the endpoint is
    http://HOST:PORT/mcp and every request needs `Authorization: Bearer <token>` (the token
    `memtoc token` prints), like the HTTP API.

    It also processes the store in the background — the outbox worker and rollup scheduler of
    `memtoc serve` — so what the agent remembers and the hooks ingest is filed into the table of
    contents without a daemon. Only one process processes a store: when `memtoc serve` or another
    `memtoc mcp` holds the store's lock, this one leaves processing to it (and takes over when it
    ends); `--no-worker` turns processing off. memory_status reports who processes. Closing stdin,
    SIGTERM or Ctrl-C stops it cleanly: the worker finishes the batch in hand.

    Each tool works on the project of the client's working directory — its first root, else the
    directory this server was started in — unless given a project. Results are compact text for
    the model, ending with their true token count; --structured adds the data beside it.
    """
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected stdio or http", param_hint="--transport")
    # stdout belongs to the protocol on stdio: diagnostics go to stderr only.
    logging.basicConfig(level=logging.WARNING, format="memtoc mcp: %(levelname)s %(message)s")
    settings = state(ctx).settings
    with open_memory(ctx) as memory:
        processing = Processing(settings, worker=not no_worker)
        warm_in_background(memory)
        try:
            if transport == "stdio":
                run_stdio(memory, processing, structured=structured)
            else:
                run_http(
                    memory,
                    processing,
                    settings.home,
                    host=host,
                    port=port,
                    auth=not no_auth,
                    structured=structured,
                )
        finally:
            processing.stop()
            typer.echo("memtoc mcp: stopped (work in hand finished, lock released)", err=True)


def warm_in_background(memory: Memory) -> threading.Thread:
    """Load the embedder, its vectors and vocabulary now, on a thread (the server answers the
    client meanwhile), so the first query's time limit is not spent loading; said on stderr."""

    def work() -> None:
        try:
            seconds = memory.warm()
        except Exception as exc:  # a broken model is reported by the queries that need it
            log.warning("could not load the models ahead of the first query: %s", exc)
            return
        typer.echo(f"memtoc mcp: models loaded in {seconds:.2f} s", err=True)

    thread = threading.Thread(target=work, name="memtoc-warm", daemon=True)
    thread.start()
    return thread


def _start(processing: Processing) -> None:
    """Start processing (or find who does) and say so on stderr."""
    info = processing.start().info()
    who = {
        "this-server": "this server's worker (lock {lock})",
        "other-process": "left to memtoc {role} (pid {pid})",
        "nobody": "nobody — {degraded}",
    }[str(info["by"])].format(**{**info, "role": info.get("role") or "process"})
    typer.echo(f"memtoc mcp: processing: {who}", err=True)


def run_stdio(memory: Memory, processing: Processing, *, structured: bool = False) -> None:
    """Serve on stdin/stdout until the client closes stdin (or a signal stops the process)."""
    from memtoc.surfaces.mcp_server import build_server

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        typer.echo(f"memtoc mcp: {signal.Signals(sig).name}: finishing the work in hand", err=True)
        processing.stop()
        os._exit(0)

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    try:
        _start(processing)
        build_server(memory, processing, structured=structured).run("stdio")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_http(
    memory: Memory,
    processing: Processing,
    home: Path,
    *,
    host: str,
    port: int,
    auth: bool,
    structured: bool = False,
) -> None:
    """Serve MCP over streamable HTTP, token-guarded (``memtoc.surfaces.http.mcp_http``)."""
    import uvicorn

    from memtoc.surfaces.http.auth import ensure_token
    from memtoc.surfaces.http.mcp_http import MCP_PATH, mcp_http_app
    from memtoc.surfaces.serve import base_url, bind_socket

    token = ensure_token(home) if auth else None
    asgi = mcp_http_app(
        memory, host=host, token=token, processing=processing, structured=structured
    )
    sock = bind_socket(host, port)
    try:
        where = base_url(host, int(sock.getsockname()[1])) + MCP_PATH
        guard = "header 'Authorization: Bearer <token>' (`memtoc token`)" if token else "no auth"
        typer.echo(f"memtoc mcp: {where}  {guard}", err=True)
        server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning"))

        def on_signal(_sig: int, _frame: FrameType | None) -> None:
            server.should_exit = True  # also absorbs the signal uvicorn re-raises after shutdown

        previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
        try:
            _start(processing)
            server.run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        sock.close()
