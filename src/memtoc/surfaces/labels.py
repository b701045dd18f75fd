"""Labels the human surfaces share (CLI; the web has its JavaScript twin in ``dom.js``): what a
result's text says after the title shown above it.

A node's L0 opens with its title and a grip's text with its first line (the grip's title, cut
at a word with '…'), so a list showing the title and then the text said it twice.
"""

from __future__ import annotations

import re

_TAGS = re.compile(r"^(\s*\[[^\]\n]{1,40}\])*\s*")
"""Leading ``[2024-01-18]`` / ``[system]`` tags of a recalled item's text."""


def _head(title: str) -> str:
    return title.removesuffix("…").rstrip()


def after_title(title: str, text: str) -> str:
    """``text`` without the ``title`` it opens with (and the punctuation after it), said once or
    twice (a period's L0 is its title, then an abstract that may open with the title again);
    ``text`` unchanged when it does not open with it."""
    head = _head(title)
    for _ in range(2):
        if not head or not text.startswith(head):
            break
        text = text[len(head) :].lstrip(" \t\n.:;,")
    return text


def opens_with(title: str, text: str) -> bool:
    """Whether ``text``, after leading date/role tags, opens with ``title``."""
    head = _head(title)
    return bool(head) and _TAGS.sub("", text, count=1).startswith(head)
