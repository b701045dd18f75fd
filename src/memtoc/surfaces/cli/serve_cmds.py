"""``memtoc serve`` (the daemon: worker, rollups, HTTP API, web UI) and ``memtoc token``."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from memtoc.surfaces.cli.app import JsonOpt, app, console, emit_json, fail, state
from memtoc.surfaces.http.auth import ensure_token, token_path, write_token
from memtoc.surfaces.serve import DEFAULT_HOST, DEFAULT_PORT, ServeOptions, serve

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@app.command("serve")
def serve_cmd(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Interface to bind (loopback by default).")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port.")] = (
        DEFAULT_PORT
    ),
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="No bearer token (loopback only; refused elsewhere)."),
    ] = False,
    poll: Annotated[
        float, typer.Option("--poll", min=0.05, help="Idle worker: seconds between outbox looks.")
    ] = 2.0,
    rollup_interval: Annotated[
        float,
        typer.Option("--rollup-interval", min=0.05, help="Seconds between scheduled rollups."),
    ] = 300.0,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn/memtoc log level: warning, info, debug.")
    ] = "warning",
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Also answer requests for this Host name (repeatable; e.g. behind a proxy). "
            "A loopback server answers only loopback names otherwise (DNS rebinding).",
        ),
    ] = None,
) -> None:
    """Run the daemon: outbox worker, rollup scheduler, HTTP API (/v1) and web UI.

    One daemon per store (a lock beside the store). Every /v1 request needs the bearer token
    `memtoc token` prints; the web URL printed at start carries it (#token=…). SIGTERM or Ctrl-C
    stops it cleanly: the worker finishes the batch in hand.
    """
    if log_level.lower() not in LOG_LEVELS:
        raise fail(f"--log-level must be one of {', '.join(LOG_LEVELS)} (got {log_level!r})")
    logging.basicConfig(level=log_level.upper(), format="memtoc serve: %(levelname)s %(message)s")
    options = ServeOptions(
        host=host,
        port=port,
        auth=not no_auth,
        poll_s=poll,
        rollup_interval_s=rollup_interval,
        log_level=log_level.lower(),
        allow_hosts=tuple(allow_host or ()),
    )

    def say(line: str) -> None:
        console.print(line, highlight=False, soft_wrap=True)
        console.file.flush()

    serve(state(ctx).settings, options, say=say)


@app.command("token")
def token_cmd(
    ctx: typer.Context,
    rotate: Annotated[
        bool, typer.Option("--rotate", help="Replace the token (running daemons keep the old).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Print the HTTP API's bearer token (created, mode 0600, when missing)."""
    home = state(ctx).settings.home
    token = write_token(home) if rotate else ensure_token(home)
    if json_out:
        emit_json({"token": token, "path": str(token_path(home))})
    else:
        typer.echo(token)
