"""``--since`` / ``--until`` / ``--at`` values: read by ``memtoc.retrieval.timeparse.parse_bound``,
as on every surface (ISO 8601, epoch ms, an age like ``7d``, or a phrase like ``last week``), at the
memory's clock and time zone; a bad value is a usage error naming the option."""

from __future__ import annotations

from typing import Annotated

import typer

from memtoc.errors import QueryError
from memtoc.memory import Memory
from memtoc.retrieval.timeparse import Edge, parse_bound


def time_option(memory: Memory, value: str | None, *, option: str, edge: Edge) -> int | None:
    """``value`` as epoch ms (None stays None); a period gives its start, or its end (``edge``)."""
    if value is None:
        return None
    try:
        return parse_bound(value, reference_ms=memory.clock.now_ms(), tz=memory.tz, edge=edge,
                           name=option)  # fmt: skip
    except QueryError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="From: ISO 8601 (2024-01-18, 2024-01-18T10:00Z), epoch ms, an age (7d, 12h) or a "
        "phrase ('last week', yesterday: its start).",
    ),
]
UntilOpt = Annotated[
    str | None,
    typer.Option("--until", help="Until, exclusive (same forms; a date or a phrase: its end)."),
]
AtOpt = Annotated[
    str | None,
    typer.Option("--at", help="Reference time for 'last week', 'yesterday' … (default: now)."),
]
