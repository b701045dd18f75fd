"""FastAPI dependencies shared by the routes: the token check and a leased ``Memory``.

``create_app`` stores the token, the ``MemoryPool`` and the daemon-info callback on
``app.state``; these dependencies read them from the request, so routes stay plain functions of
their parameters and a ``Memory``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memtoc.memory import Memory
from memtoc.model import JsonValue
from memtoc.surfaces.http.auth import bearer_ok
from memtoc.surfaces.http.pool import MemoryPool

DaemonInfo = Callable[[], dict[str, JsonValue]]
"""What ``memtoc serve`` adds to ``/v1/status``: worker state, last rollup, lock holder."""

_bearer = HTTPBearer(auto_error=False, description="The token `memtoc token` prints.")


@dataclass
class ApiState:
    """What the routes need from the app (``app.state.memtoc``)."""

    pool: MemoryPool
    token: str | None
    daemon: DaemonInfo | None = None


def api_state(request: Request) -> ApiState:
    state = request.app.state.memtoc
    assert isinstance(state, ApiState)
    return state


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the request carries the app's bearer token (no-op when auth is off)."""
    token = api_state(request).token
    if token is None:
        return
    header = f"Bearer {credentials.credentials}" if credentials is not None else None
    if not bearer_ok(header, token):
        raise HTTPException(
            status_code=401,
            detail="missing or wrong bearer token (send 'Authorization: Bearer <token>'; "
            "`memtoc token` prints it)",
            headers={"WWW-Authenticate": "Bearer"},
        )


def reject_unknown_query(request: Request) -> None:
    """422 for a query parameter the route does not declare (``?projct=`` is a typo, not a
    request for everything)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = _query_aliases(dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        expected = ", ".join(sorted(known)) or "none"
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"unknown query parameter (expected: {expected})",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )


def _query_aliases(dependant: Dependant) -> set[str]:
    """The query parameter names a route (and its dependencies) declares."""
    found = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        found |= _query_aliases(sub)
    return found


def leased_memory(request: Request) -> Iterator[Memory]:
    """A Memory for this request alone (returned to the pool when the response is sent)."""
    with api_state(request).pool.lease() as memory:
        yield memory


MemoryDep = Annotated[Memory, Depends(leased_memory)]
