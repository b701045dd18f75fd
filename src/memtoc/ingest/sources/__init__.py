"""Transcript formats ("sources") and how to pick one.

``SOURCES`` maps each ``--format`` name to its reader; ``get_source`` looks one up and
``sniff_format`` picks one for ``--format auto`` from a file's first bytes. The readers only parse:
storing, redaction, caps and ids belong to the ingest orchestrator.
"""

from __future__ import annotations

from pathlib import Path

from memtoc.errors import ConfigError, IngestError
from memtoc.ingest.sources.base import EventDraft, RawRecord, Source, SourceOptions
from memtoc.ingest.sources.claude_code import ClaudeCodeSource
from memtoc.ingest.sources.codex import CodexSource
from memtoc.ingest.sources.gemini import GeminiSource
from memtoc.ingest.sources.jsonl import JsonlSource
from memtoc.ingest.sources.openai_chat import OpenAIChatSource
from memtoc.ingest.sources.specstory import SpecStorySource

__all__ = [
    "SNIFF_BYTES",
    "SOURCES",
    "EventDraft",
    "RawRecord",
    "Source",
    "SourceOptions",
    "get_source",
    "sniff_format",
]

SOURCES: dict[str, Source] = {
    source.name: source
    for source in (
        GeminiSource(),
        ClaudeCodeSource(),
        CodexSource(),
        JsonlSource(),
        OpenAIChatSource(),
        SpecStorySource(),
    )
}
"""Every format by name, in sniffing order: the most specific shapes first (a Gemini CLI log's
header line has Claude Code's ``sessionId`` too, and its documents OpenAI chat's ``messages``)."""

SNIFF_BYTES = 16 * 1024
"""How much of a file ``sniff_format`` reads."""


def get_source(name: str) -> Source:
    """The source for a ``--format`` name; ``ConfigError`` naming the valid ones otherwise."""
    try:
        return SOURCES[name]
    except KeyError:
        valid = ", ".join(["auto", *SOURCES])
        raise ConfigError(f"unknown format {name!r} (valid: {valid})", setting="format") from None


def sniff_format(path: Path) -> Source | None:
    """The format ``path`` looks like from its first bytes, or None (empty, binary, unknown).

    Gemini CLI, Claude Code and Codex are tried before generic JSONL, then the whole-document
    OpenAI chat format, then SpecStory Markdown. A file that cannot be read raises ``IngestError``.
    """
    try:
        with path.open("rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as exc:
        raise IngestError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    if not head.strip() or b"\x00" in head:
        return None
    for source in SOURCES.values():
        if source.sniff(path, head):
            return source
    return None
