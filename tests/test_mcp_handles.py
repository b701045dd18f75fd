"""MCP recall handles: one per id for the server's lifetime, bounded, never guessed."""

from __future__ import annotations

import pytest

from memtoc.errors import NotFoundError
from memtoc.surfaces.mcp_handles import Handles


def test_a_handle_stands_for_one_id_and_the_oldest_are_forgotten() -> None:
    handles = Handles(limit=2)
    assert [handles.label(i) for i in ("01A", "grip:1:x", "01A")] == ["#1", "#2", "#1"]
    assert handles.resolve("#2") == "grip:1:x" and handles.resolve(" #1 ") == "01A"
    assert handles.resolve("01KY0PW388P9R59KM9NBSM9Y8W") == "01KY0PW388P9R59KM9NBSM9Y8W"
    assert handles.resolve("#1x") == "#1x"  # not a handle: passed on as an id
    assert handles.label("toc:segment:a") == "#3"  # past the limit: #1 is forgotten
    with pytest.raises(NotFoundError, match=r"handle not found: #1 \(this server did not give"):
        handles.resolve("#1")
    assert handles.label("01A") == "#4"  # cited again: a new handle, never #1's reuse
    with pytest.raises(NotFoundError):
        handles.resolve("#99")
