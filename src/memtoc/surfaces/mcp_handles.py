"""Short handles for the ids an agent reads in a recall: ``#12`` for ``01KY0PW388P9R59KM9NBSM9Y8W``.

Recall leads every item with the id it cites, so the agent can expand or quote it. A ULID in its
parentheses costs 21 tokens, a grip's or a bookmark's about as much: over MCP, 23-30 % of a
1,500-token recall went on ids (user trial 3). A handle costs 4. The server hands out one handle
per id for its lifetime (the same id keeps its handle across calls; the oldest are forgotten past
``MAX_HANDLES``); the tools that take an id (``memory_expand``, ``memory_toc``) take its handle
too. A handle the server does not know — it restarted since, or forgot it — is refused, naming
it, never guessed. The data (``--structured``) keeps the full ids.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from memtoc.errors import NotFoundError

MAX_HANDLES = 200_000
"""Handles kept per server (each a few dozen bytes): far more than a session cites."""
HANDLE = re.compile(r"#([1-9][0-9]*)")


class Handles:
    """The ids an MCP server has cited, by handle (thread-safe: tools run in worker threads)."""

    def __init__(self, limit: int = MAX_HANDLES) -> None:
        self._limit = limit
        self._ids: OrderedDict[int, str] = OrderedDict()
        self._handles: dict[str, int] = {}
        self._next = 1
        self._lock = threading.Lock()

    def label(self, item_id: str) -> str:
        """The handle of ``item_id`` (``#n``), given on first use."""
        with self._lock:
            n = self._handles.get(item_id)
            if n is None:
                n = self._next
                self._next += 1
                self._handles[item_id] = n
                self._ids[n] = item_id
                if len(self._ids) > self._limit:
                    _, old = self._ids.popitem(last=False)
                    del self._handles[old]
            return f"#{n}"

    def resolve(self, ref: str) -> str:
        """The id behind ``ref`` when it is a handle, else ``ref`` itself."""
        m = HANDLE.fullmatch(ref.strip())
        if m is None:
            return ref
        with self._lock:
            item_id = self._ids.get(int(m.group(1)))
        if item_id is None:
            raise NotFoundError(
                "handle",
                f"{ref.strip()} (this server did not give it, or restarted since: "
                "recall or search again for a current handle, or pass the full id)",
            )
        return item_id
