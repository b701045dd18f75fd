"""The HTTP API: a FastAPI app over the ``Memory`` facade (``/v1``), plus the web UI at ``/``.

``create_app(memory_factory, token=..., host=...)`` builds it. Every ``/v1`` route requires the
bearer token (when ``token`` is None auth is off: ``memtoc serve --no-auth``, loopback only). In
front of everything, ``RequestGuard`` (``guard.py``) checks ``Host`` and ``Origin`` (DNS
rebinding, with or without a token), the token before any body is read, and a body limit. The
OpenAPI document is published at ``/openapi.json`` (interactive docs at ``/docs``) without a
token, as are the web UI's static files; the page reads the token from the URL fragment.

Errors: memtoc's errors become JSON ``{"error": message}`` with a 4xx — 404 for an unknown id,
400 for malformed input (bad time, bad level, unknown project), 422 when a parameter fails
validation — and 503 when the store itself is in trouble (locked, unreadable). Bad input never
yields a 5xx. Routes are synchronous and run on FastAPI's thread pool, each with a ``Memory``
leased from a ``MemoryPool`` (one store connection per concurrent request, never shared).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from importlib import metadata

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memtoc.errors import MemtocError, NotFoundError, StoreError
from memtoc.surfaces.http import routes_navigate, routes_query
from memtoc.surfaces.http.deps import ApiState, DaemonInfo, reject_unknown_query, require_token
from memtoc.surfaces.http.guard import MAX_BODY_BYTES, RequestGuard, allowed_hosts
from memtoc.surfaces.http.pool import MemoryFactory, MemoryPool
from memtoc.surfaces.web import mount_web

log = logging.getLogger("memtoc.http")


def _version() -> str:
    try:
        return metadata.version("memtoc")
    except metadata.PackageNotFoundError:  # a source tree without an install
        return "0.0.0+src"


def create_app(
    memory_factory: MemoryFactory,
    *,
    token: str | None,
    daemon: DaemonInfo | None = None,
    pool_size: int = 4,
    web: bool = True,
    host: str = "127.0.0.1",
    allow_hosts: Collection[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    warm: bool = False,
) -> FastAPI:
    """The API over Memories built by ``memory_factory`` (one per concurrent request).

    ``daemon`` adds ``memtoc serve``'s state to ``/v1/status``; ``web`` mounts the web UI.
    ``host``: the interface it is served on (a loopback one answers loopback ``Host`` names and
    ``allow_hosts`` only); ``max_body_bytes``: the request body limit (``guard.py``); ``warm``:
    load the models into the first pooled Memory at start-up, on a thread (``memtoc serve``: a
    query's time limit is then not spent loading).
    """
    pool = MemoryPool(memory_factory, size=pool_size)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        pool.reopen()
        if warm:
            threading.Thread(target=pool.warm, name="memtoc-warm", daemon=True).start()
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(
        title="memtoc",
        version=_version(),
        summary="Long-term memory for AI agents: a table of contents over time.",
        description="Every `/v1` request needs `Authorization: Bearer <token>` "
        "(`memtoc token` prints it). Bodies are the JSON the CLI prints with `--json`.",
        lifespan=lifespan,
    )
    app.state.memtoc = ApiState(pool=pool, token=token, daemon=daemon)
    auth = [Depends(require_token), Depends(reject_unknown_query)]
    app.include_router(routes_navigate.router, dependencies=auth)
    app.include_router(routes_query.router, dependencies=auth)
    _install_error_handlers(app)
    if web:
        mount_web(app)
    app.add_middleware(
        RequestGuard,
        hosts=allowed_hosts(host, allow_hosts),
        token=token,
        max_body_bytes=max_body_bytes,
    )
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MemtocError)
    async def memtoc_error(_request: Request, exc: MemtocError) -> JSONResponse:
        if isinstance(exc, NotFoundError):
            code = 404
        elif isinstance(exc, StoreError):
            log.warning("store error: %s", exc)
            code = 503
        else:
            code = 400
        return JSONResponse({"error": str(exc)}, status_code=code)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}"
            for err in exc.errors()
        ]
        return JSONResponse({"error": "; ".join(problems) or "invalid request"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )
