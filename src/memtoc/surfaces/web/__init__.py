"""The web TOC browser: static files (HTML, CSS, ES modules) served beside the HTTP API.

``mount_web(app)`` adds two things to a FastAPI app:

- ``GET /`` — ``static/index.html``, the single page of the browser;
- ``/static/*`` — its stylesheet and JavaScript modules.

The page needs no build step and loads nothing from the network: it talks only to the ``/v1/*``
routes of the same server (``memtoc.surfaces.http``), sending the bearer token it read from the
URL fragment ``#token=…`` that ``memtoc serve`` prints. Static files carry no data and need no
token; every data request does.
"""

from __future__ import annotations

import os
from importlib import resources
from os import PathLike
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

from memtoc.errors import ConfigError

__all__ = ["CSP", "STATIC_DIR", "mount_web"]

STATIC_DIR = Path(str(resources.files(__name__).joinpath("static")))
"""Where the page's files live (package data, shipped in the wheel)."""

# The page is small and changes with each release; a browser must not keep a stale copy of the
# JavaScript after an upgrade, so every static response says so.
_NO_CACHE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

# The page shows recorded conversations, i.e. text anyone could have written. It only ever inserts
# text (never HTML), and this policy is the second line: scripts, styles and requests come from
# this server alone, nothing inline runs, and no other site can frame the page.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def mount_web(app: FastAPI) -> None:
    """Serve the browser at ``/`` and its assets under ``/static`` on ``app``.

    Raises ``ConfigError`` when the package was installed without its static files (a broken
    wheel), rather than serving 404s that look like a server bug.
    """
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        raise ConfigError(f"web UI files missing: {index} (reinstall memtoc)", setting="web")

    async def page() -> FileResponse:
        """The single page of the TOC browser."""
        headers = {**_NO_CACHE, "Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"}
        return FileResponse(index, media_type="text/html", headers=headers)

    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    app.mount("/static", _NoCacheStatic(directory=STATIC_DIR), name="static")


class _NoCacheStatic(StaticFiles):
    """``StaticFiles`` that asks browsers to revalidate (ETag still saves the transfer)."""

    def file_response(
        self,
        full_path: PathLike[str] | str,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(_NO_CACHE)
        return response
