"""Labels the surfaces share (CLI and MCP; the web has its JavaScript twins in ``dom.js`` and
``search.js``): what a result's text says after the title shown above it, and whether a result
read for a time window holds anything from it.

A node's L0 opens with its title and a grip's text with its first line (the grip's title, cut
at a word with '…'), so a list showing the title and then the text said it twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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


OUTSIDE_WINDOW = "nothing recorded then: these are the best matches from other times"
"""Said under a time window none of a result's items falls in: an agent asking "what was I doing
yesterday" of a project last touched in June was given June's work under "time: yesterday",
with nothing saying that yesterday held none of it."""


def outside_window(
    time_range: Mapping[str, object] | None, spans: Iterable[tuple[int, int]]
) -> bool:
    """Whether a time-resolved result (``ResolvedTime.to_dict``) has items, none of whose
    ``(start_ms, end_ms)`` spans overlaps its window."""
    if not time_range:
        return False
    start, end = time_range.get("start_ms"), time_range.get("end_ms")
    if not isinstance(start, int) or not isinstance(end, int):
        return False
    spans = list(spans)
    return bool(spans) and not any(s < end and max(e, s + 1) > start for s, e in spans)
