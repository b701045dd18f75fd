"""memtoc: long-term memory for AI agents, filed as a table of contents over time.

The public surface is small: the ``Memory`` facade, the model types, the error root and its
branches, the settings loader, and the injectable clock and id factory. Everything else is an
implementation module users need not import.
"""

from importlib import metadata as _metadata

from memtoc.clock import Clock, ManualClock, SystemClock
from memtoc.config import Settings, load_settings
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
from memtoc.memory import Memory
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

try:
    __version__ = _metadata.version("memtoc")
except _metadata.PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+src"

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
