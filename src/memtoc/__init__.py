"""memtoc: long-term memory for AI agents, filed as a table of contents over time.

The public surface is small: the ``Memory`` facade, the model types, the error root and its
branches, the settings loader, and the injectable clock and id factory. Everything else is an
implementation module users need not import.
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
    from memtoc.memory import Memory

    __version__: str

# ``Memory`` (and what it imports: the store, the pipeline, retrieval), the settings loader and
# the version are imported on first use (PEP 562), so ``import memtoc.<module>`` — which every
# hook and CLI command does — does not pay for the whole library.
_LAZY = {
    "Memory": ("memtoc.memory", "Memory"),
    "Settings": ("memtoc.config", "Settings"),
    "load_settings": ("memtoc.config", "load_settings"),
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
    "Bookmark",
    "Bullet",
    "Clock",
    "ConfigError",
    "EmbedderError",
    "Event",
    "Grip",
    "IngestError",
    "IngestReport",
    "ManualClock",
    "Memory",
    "MemtocError",
    "MigrationError",
    "NotFoundError",
    "QueryError",
    "Rejection",
    "Settings",
    "StoreError",
    "SummarizerError",
    "Summary",
    "SystemClock",
    "TocNode",
    "UlidFactory",
    "__version__",
    "load_settings",
]
