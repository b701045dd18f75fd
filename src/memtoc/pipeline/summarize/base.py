"""The ``Summarizer`` protocol (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from memtoc.model import Event, Summary


class Summarizer(Protocol):
    name: str
    """Backend name and version, stored with every node it builds (e.g. ``extractive/1``)."""

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event] = ()) -> Summary:
        """Summarise one segment's ``events``; ``context`` (overlap) informs but is not summarised."""
        ...

    def summarize_children(
        self, children: Sequence[Summary], level: str | None = None, *, avoid: Collection[str] = ()
    ) -> Summary:
        """Merge the summaries of a period's children (segments of a day, days of a week, ...);
        ``level`` names the period being written (``day``, ``week``, ``month``, ``year``);
        ``avoid``: lines the period must not repeat verbatim besides its children's (a month is
        written from its days but lists its weeks)."""
        ...
