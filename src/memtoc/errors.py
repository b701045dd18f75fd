"""memtoc's exceptions: one rooted hierarchy.

::

    MemtocError
     ├── ConfigError          a setting is missing, malformed or contradictory
     ├── StoreError           the store cannot be opened, read or written
     │    ├── MigrationError  a schema migration failed or the schema is newer than this code
     │    └── NotFoundError   an id (event, node, grip, bookmark) does not exist
     │         └── UnknownProjectError  a project named that does not exist (names the known ones)
     ├── IngestError          one input record (file, line, event) cannot be imported
     ├── QueryError           a search, recall or navigation request is malformed
     ├── SummarizerError      a summariser backend failed (the pipeline degrades, never mocks)
     └── EmbedderError        an embedding backend failed to load or run

Errors carry the context a user needs to act: a file and line, an event id, a setting's name.
"""

from __future__ import annotations


class MemtocError(Exception):
    """Root of every error memtoc raises on purpose."""


class ConfigError(MemtocError):
    """A setting is missing, malformed or contradictory."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        self.setting = setting
        super().__init__(f"{setting}: {message}" if setting else message)


class StoreError(MemtocError):
    """The store cannot be opened, read or written."""


class MigrationError(StoreError):
    """A schema migration failed, or the store was written by a newer memtoc."""


class NotFoundError(StoreError):
    """An id does not exist in the store."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(f"{kind} not found: {ident}")


class UnknownProjectError(NotFoundError):
    """A project reference matches no project; the message names the known ones."""

    def __init__(self, ident: str, known: list[str]) -> None:
        self.known = known
        NotFoundError.__init__(self, "project", ident)
        listed = ", ".join(known) if known else "none yet"
        self.args = (f"unknown project {ident!r} (known projects: {listed})",)

    def __str__(self) -> str:
        return str(self.args[0])


class IngestError(MemtocError):
    """One input record cannot be imported; the rest of the batch still goes in."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        event_id: str | None = None,
    ) -> None:
        self.reason = message
        self.source = source
        self.line = line
        self.event_id = event_id
        super().__init__(self.location() + message)

    def location(self) -> str:
        """``file:line: `` (or ``event <id>: ``) prefix for messages; empty when unknown."""
        if self.source is not None and self.line is not None:
            return f"{self.source}:{self.line}: "
        if self.source is not None:
            return f"{self.source}: "
        if self.event_id is not None:
            return f"event {self.event_id}: "
        return ""


class QueryError(MemtocError):
    """A search, recall or navigation request is malformed."""


class SummarizerError(MemtocError):
    """A summariser backend failed; the caller builds the node extractively and marks it degraded."""


class EmbedderError(MemtocError):
    """An embedding backend failed to load or run."""
