"""``memtoc serve``: one process running the worker, the rollup scheduler, the HTTP API and web UI.

Start-up, in order:

1. refuse a non-loopback ``host`` without a token (``check_bind``);
2. take the store's daemon lock (``serve_lock``, through ``processing``): a second ``memtoc serve``
   on the same store stops here with an error naming the pid of the first; an agent's
   ``memtoc mcp`` worker holding it is left to process, and this daemon takes processing over
   when that server ends (``/v1/status`` says who processes);
3. create the bearer token if missing (``<home>/http-token``, mode 0600);
4. bind the socket (so "address in use" is a clear error, and ``port=0`` picks a free port);
5. start the ``BackgroundWorker`` thread (outbox drain + rollups, back-filling at start) when the
   lock is ours;
6. print the web URL with ``#token=…`` and the MCP config snippet, and run uvicorn in the main
   thread.

Shutdown (SIGTERM or SIGINT): uvicorn stops accepting connections and finishes the requests in
flight; then the worker is asked to stop and finishes its unit in hand (one outbox batch or one
rollup run, committed), the Memories close and the lock is released; the exit code is 0.
uvicorn re-raises the signal it caught once it has shut down: the handlers installed here (which
it restores) absorb it, so the process ends normally instead of dying of the signal.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn

from memtoc.config import Settings
from memtoc.errors import ConfigError, StoreError
from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.http.auth import check_bind, ensure_token
from memtoc.surfaces.invocation import memtoc_argv, shell_command
from memtoc.surfaces.processing import Processing
from memtoc.surfaces.serve_lock import lock_owner, lock_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What ``memtoc serve`` was asked for."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: bool = True
    """False: no token (``--no-auth``; refused on a non-loopback host)."""
    poll_s: float = 2.0
    """Idle worker: seconds between looks at the outbox."""
    rollup_interval_s: float = 300.0
    """Seconds between scheduled rollup runs (also run when the queue drains)."""
    takeover_s: float = 30.0
    """While an MCP server's worker processes the store: seconds between tries to take over."""
    pool_size: int = 4
    """Store connections for concurrent HTTP requests."""
    allow_hosts: tuple[str, ...] = ()
    """``Host`` names served besides loopback's (``--allow-host``; ``surfaces/http/guard.py``)."""
    log_level: str = "warning"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (ConfigError when it cannot be bound)."""
    name = host.strip("[]")
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(name).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET  # a host name such as localhost
    try:
        sock = socket.create_server((name, port), family=family, reuse_port=False)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def base_url(host: str, port: int) -> str:
    name = host.strip("[]")
    shown = "127.0.0.1" if name in ("0.0.0.0", "") else name
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def banner(settings: Settings, url: str, token: str | None) -> list[str]:
    """The lines printed at start: web URL (with the token), API, MCP config snippet."""
    fragment = f"#token={token}" if token else ""
    command, *args = memtoc_argv()
    mcp = {
        "mcpServers": {"memtoc": {"command": command, "args": [*args, "--db", settings.db, "mcp"]}}
    }
    return [
        f"memtoc serve: web UI  {url}/{fragment}",
        f"memtoc serve: API     {url}/v1  (OpenAPI: {url}/docs; "
        + (
            "header 'Authorization: Bearer <token>', `memtoc token` prints it)"
            if token
            else "no auth)"
        ),
        f"memtoc serve: store   {settings.db}",
        f"memtoc serve: MCP     claude mcp add memtoc -- {shell_command('--db', settings.db, 'mcp')}"
        f"   or in an MCP config: {json.dumps(mcp)}",
    ]


def serve(
    settings: Settings,
    options: ServeOptions,
    *,
    say: Callable[[str], None] = print,
) -> None:
    """Run the daemon until SIGTERM/SIGINT (see the module docstring)."""
    token = ensure_token(settings.home) if options.auth else None
    check_bind(options.host, token)
    refuse_second_daemon(settings)
    processing = Processing(
        settings,
        role="serve",
        poll_s=options.poll_s,
        rollup_interval_s=options.rollup_interval_s,
        takeover_s=options.takeover_s,
    )
    sock: socket.socket | None = None
    try:
        sock = bind_socket(options.host, options.port)
        port = int(sock.getsockname()[1])

        def open_memory() -> Memory:
            return Memory.open(settings)

        def daemon_info() -> dict[str, JsonValue]:
            info = processing.info()
            worker = info.get("worker") if info["by"] == "this-server" else None
            lock = processing.lock.path if processing.lock is not None else lock_path(settings)
            return {"pid": os.getpid(), "lock": str(lock), "worker": worker, "processing": info}

        app = create_app(
            open_memory,
            token=token,
            daemon=daemon_info,
            pool_size=options.pool_size,
            host=options.host,
            allow_hosts=options.allow_hosts,
            warm=True,
        )
        config = uvicorn.Config(
            app, log_level=options.log_level, access_log=False, timeout_graceful_shutdown=30
        )
        server = uvicorn.Server(config)
        previous = _absorb_signals(server)  # from here on, SIGTERM means a clean stop
        try:
            processing.start()
            who = processing.info()
            if who["by"] != "this-server":
                say(f"memtoc serve: processing: {who.get('note') or who.get('degraded')}")
            for line in banner(settings, base_url(options.host, port), token):
                say(line)
            server.run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        say("memtoc serve: stopping (finishing the unit of work in hand)…")
    finally:
        processing.stop()
        if sock is not None:
            sock.close()


def refuse_second_daemon(settings: Settings) -> None:
    """A ``memtoc serve`` already processing this store stops a second one (naming its pid); an
    MCP server's worker does not (this daemon takes over when it ends)."""
    path = lock_path(settings)
    owner = lock_owner(path)
    if owner is not None and owner.role != "mcp":
        who = f"pid {owner.pid}" if owner.pid > 0 else "another process"
        raise StoreError(
            f"another memtoc {owner.role or 'process'} ({who}) is already processing this store "
            f"(lock {path}); stop it first"
        )


def _absorb_signals(
    server: uvicorn.Server,
) -> dict[int, Callable[[int, FrameType | None], object] | int | None]:
    """Handlers for SIGTERM/SIGINT that ask ``server`` to exit (and absorb uvicorn's re-raise)."""

    def handler(_sig: int, _frame: FrameType | None) -> None:
        server.should_exit = True

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[int(sig)] = signal.signal(sig, handler)
    return previous
