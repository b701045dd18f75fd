"""The real Claude Code fixture (``fixtures/claude-code-real``, MIT: see its README) filed in a
fresh memory, as the surface tests that read it through MCP, HTTP or the CLI need it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memtoc.config import load_settings
from memtoc.memory import Memory

FIXTURE = Path(__file__).parent / "fixtures" / "claude-code-real"


@contextmanager
def real_memory(home: Path, *, rollup: bool = True) -> Iterator[Memory]:
    """A Memory at ``home`` (no embedder) holding the fixture, processed and, with ``rollup``,
    every period rolled up."""
    settings = load_settings({"home": str(home), "embedder": "none"}, environ={})
    with Memory.open(settings) as memory:
        assert memory.ingest([FIXTURE]).ingested > 20
        memory.process()
        if rollup:
            memory.rollup(force=True)
        yield memory
