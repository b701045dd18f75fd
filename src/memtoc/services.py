"""Building the service's collaborators from settings: summariser, time zone.

Kept apart from ``memory.py`` so the facade stays about verbs; entry points call ``Memory.open``,
which uses these.
"""

from __future__ import annotations

import logging
from datetime import tzinfo
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memtoc.config import Settings
from memtoc.errors import ConfigError

if TYPE_CHECKING:
    from memtoc.pipeline.summarize.base import Summarizer
    from memtoc.text.tokens import TokenCounter

log = logging.getLogger("memtoc")

ROLLUP_LEVELS = ("day", "week", "month", "year")
_TZ_META = "timezone"


def machine_timezone_name() -> str:
    """The machine's IANA time zone name (``UTC`` when it cannot be told)."""
    try:
        import tzlocal

        name = tzlocal.get_localzone_name()
    except Exception:  # tzlocal raises several kinds on odd systems; UTC is a safe answer
        name = None
    return name or "UTC"


class MetaStore(Protocol):
    """A store's ``meta`` values (both stores)."""

    read_only: bool

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


def store_timezone(store: MetaStore, configured: str | None) -> tzinfo:
    """The time zone TOC periods are computed in.

    A store keeps the zone it was first processed in (in its ``meta`` table), so moving the
    machine to another zone does not re-cut existing periods; an explicit setting wins and is
    recorded.
    """
    stored = store.get_meta(_TZ_META) if not store.read_only else None
    name = configured or stored or machine_timezone_name()
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown time zone {name!r}", setting="MEMTOC_TIMEZONE") from exc
    if not store.read_only and stored != name:
        store.set_meta(_TZ_META, name)
    return zone


def build_summarizer(settings: Settings, counter: TokenCounter) -> Summarizer:
    """The extractive default, or an LLM backend that falls back to it (marked degraded)."""
    from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer

    extractive = ExtractiveSummarizer(counter)
    if settings.summarizer == "extractive":
        return extractive
    from memtoc.pipeline.summarize.llm import build_llm_summarizer
    from memtoc.pipeline.summarize.llm_cache import SqliteSummaryCache

    return build_llm_summarizer(
        settings.summarizer,
        settings.llm_model,
        settings.llm_base_url,
        settings.llm_api_key,
        extractive,
        cache=SqliteSummaryCache(settings.home / "llm-cache.db"),
        token_counter=counter,
    )
