"""Pydantic models of the HTTP API's request bodies and error responses (they shape OpenAPI).

Responses are the ``to_dict()`` of the Memory's return types — the same JSON the CLI prints with
``--json`` (DESIGN §6) — so they are declared as JSON objects rather than re-modelled here: one
contract, one place (the model and retrieval types).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Level = Literal["year", "month", "week", "day", "segment"]
Tier = Literal["L0", "L1", "L2"]
NodeTier = Literal["L0", "L1"]
Kind = Literal["node", "grip", "bookmark", "event"]
Role = Literal["user", "assistant", "system", "tool"]
NoteKind = Literal["note", "decision", "todo", "fact"]

Project = Field(
    default=None,
    min_length=1,
    max_length=200,
    description="Project name or id; default: the store's only project (several: 400).",
)


class ErrorBody(BaseModel):
    """Every 4xx (and the 501 of an unavailable operation) carries this body."""

    error: str = Field(description="What was wrong, with the offending value.")


class RecallBody(BaseModel):
    """``POST /v1/recall``: the best context for a question within a token budget."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2_000, description="Any text; no syntax needed.")
    budget: int = Field(default=1_000, ge=1, le=50_000, description="Token budget.")
    project: str | None = Project
    all_projects: bool = Field(default=False, description="Every project (instead of one).")
    at: str | None = Field(
        default=None,
        max_length=100,
        description="Reference time for 'last week' etc.: ISO 8601, epoch ms, or a phrase.",
    )


class RememberBody(BaseModel):
    """``POST /v1/remember``: record a note or decision now, as an event."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=20_000, description="What to keep, verbatim.")
    project: str | None = Project
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Session to file it under; default 'memtoc-notes'.",
    )
    role: Role = "assistant"
    kind: NoteKind = "note"


JsonObject = dict[str, Any]
"""A response body: the ``to_dict()`` of a Memory return type."""

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Malformed request (bad time, bad id, …)."},
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token."},
    404: {"model": ErrorBody, "description": "Unknown node, grip or project."},
    422: {"model": ErrorBody, "description": "A parameter failed validation."},
    503: {"model": ErrorBody, "description": "The store is unavailable (locked, shutting down)."},
}
"""Error responses every ``/v1`` route may give (declared so the OpenAPI document is complete)."""
