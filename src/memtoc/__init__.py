"""memtoc: long-term memory for AI agents, filed as a table of contents over time.

The public surface is small: the ``Memory`` facade, the model types, the result types its verbs
return (``SearchResult``, ``RecallResult``, ``TimelineView``, ``ForgetReport`` …), the error root
and its branches, the settings loader, and the injectable clock and id factory. Everything else is
an implementation module users need not import.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from memtoc.clock import Clock, ManualClock, SystemClock
from memtoc.errors import (
    ConfigError,
    EmbedderError,
    IngestError,
    MemtocError,
    MigrationError,
    NotFoundError,
    QueryError,
    StoreError,
    SummarizerError,
)
from memtoc.ids import UlidFactory
from memtoc.model import (
    Bookmark,
    Bullet,
    Event,
    Grip,
    IngestReport,
    Rejection,
    Summary,
    TocNode,
)

if _TYPE_CHECKING:
    from memtoc.config import Settings, load_settings
    from memtoc.derived.rebuild import RebuildReport
    from memtoc.forgetting import ForgetReport
    from memtoc.memory import Memory
    from memtoc.merging import MergeReport
    from memtoc.pipeline.embed_step import EmbedReport
    from memtoc.pipeline.rollup import RollupReport
    from memtoc.pipeline.worker import ProcessReport
    from memtoc.projects import Scope
    from memtoc.retrieval.bookmark_step import BookmarkReport
    from memtoc.retrieval.context import ContextView
    from memtoc.retrieval.drill_result import DrillResult
    from memtoc.retrieval.hybrid import SearchResult
    from memtoc.retrieval.navigate import ExpandView, NodeView, TimelineView
    from memtoc.retrieval.recall import RecallResult
    from memtoc.retrieval.tiers import SearchItem
    from memtoc.retrieval.time_search import ResolvedTime
    from memtoc.store.capabilities import AuditEntry
    from memtoc.store.derived import VerifyReport

    __version__: str

# ``Memory`` (and what it imports: the store, the pipeline, retrieval), the settings loader and
# the version are imported on first use (PEP 562), so ``import memtoc.<module>`` — which every
# hook and CLI command does — does not pay for the whole library.
_LAZY = {
    "Memory": ("memtoc.memory", "Memory"),
    "Settings": ("memtoc.config", "Settings"),
    "load_settings": ("memtoc.config", "load_settings"),
    # the result types of Memory's verbs (a test checks every verb's return type is here)
    "AuditEntry": ("memtoc.store.capabilities", "AuditEntry"),
    "BookmarkReport": ("memtoc.retrieval.bookmark_step", "BookmarkReport"),
    "ContextView": ("memtoc.retrieval.context", "ContextView"),
    "DrillResult": ("memtoc.retrieval.drill_result", "DrillResult"),
    "EmbedReport": ("memtoc.pipeline.embed_step", "EmbedReport"),
    "ExpandView": ("memtoc.retrieval.navigate", "ExpandView"),
    "ForgetReport": ("memtoc.forgetting", "ForgetReport"),
    "MergeReport": ("memtoc.merging", "MergeReport"),
    "NodeView": ("memtoc.retrieval.navigate", "NodeView"),
    "ProcessReport": ("memtoc.pipeline.worker", "ProcessReport"),
    "RebuildReport": ("memtoc.derived.rebuild", "RebuildReport"),
    "RecallResult": ("memtoc.retrieval.recall", "RecallResult"),
    "ResolvedTime": ("memtoc.retrieval.time_search", "ResolvedTime"),
    "RollupReport": ("memtoc.pipeline.rollup", "RollupReport"),
    "Scope": ("memtoc.projects", "Scope"),
    "SearchItem": ("memtoc.retrieval.tiers", "SearchItem"),
    "SearchResult": ("memtoc.retrieval.hybrid", "SearchResult"),
    "TimelineView": ("memtoc.retrieval.navigate", "TimelineView"),
    "VerifyReport": ("memtoc.store.sqlite.maintenance", "VerifyReport"),
}


def __getattr__(name: str) -> _Any:
    if name == "__version__":
        from importlib import metadata

        try:
            version = metadata.version("memtoc")
        except metadata.PackageNotFoundError:  # running from a source tree without an install
            version = "0.0.0+src"
        globals()["__version__"] = version
        return version
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memtoc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


__all__ = [
    "AuditEntry",
    "Bookmark",
    "BookmarkReport",
    "Bullet",
    "Clock",
    "ConfigError",
    "ContextView",
    "DrillResult",
    "EmbedReport",
    "EmbedderError",
    "Event",
    "ExpandView",
    "ForgetReport",
    "Grip",
    "IngestError",
    "IngestReport",
    "ManualClock",
    "Memory",
    "MemtocError",
    "MergeReport",
    "MigrationError",
    "NodeView",
    "NotFoundError",
    "ProcessReport",
    "QueryError",
    "RebuildReport",
    "RecallResult",
    "Rejection",
    "ResolvedTime",
    "RollupReport",
    "Scope",
    "SearchItem",
    "SearchResult",
    "Settings",
    "StoreError",
    "SummarizerError",
    "Summary",
    "SystemClock",
    "TimelineView",
    "TocNode",
    "UlidFactory",
    "VerifyReport",
    "__version__",
    "load_settings",
]
