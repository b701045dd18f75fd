"""Grips: ranges, source events of extractive bullets, quoted excerpts."""

from __future__ import annotations

import json

from memtoc.model import Event
from memtoc.pipeline.grips import EXCERPT_CHARS, best_range, bullet_core, excerpt_of, segment_grips
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.text.tokens import TiktokenCounter


def _ev(i: int, event_type: str, role: str, text: str, **metadata: object) -> Event:
    return Event(
        event_id=f"01HX{i:022d}",
        session_id="s1",
        project="p",
        agent="claude-code",
        ts_ms=1_700_000_000_000 + i * 1000,
        event_type=event_type,
        role=role,
        text=text,
        metadata=metadata,
    )


CODE = "\n".join(
    f"    {n}→    started = time.monotonic()  # push_image reproduce focused test wrong Docker"
    for n in range(40, 90)
)


def claude_code_segment() -> list[Event]:
    """A plan message, then tool calls in Claude Code's shape and a long code-heavy result."""
    bash = json.dumps({"command": "pytest tests/test_image.py -x -q", "description": "Run"})
    return [
        _ev(0, "user_message", "user", "The arm64 image crashes on start. Can you fix it?"),
        _ev(
            1,
            "assistant_message",
            "assistant",
            "Plan: 1) reproduce with a focused test, 2) find where push_image() goes wrong, "
            "3) fix it, 4) run the Docker builds test suite.",
        ),
        _ev(2, "tool_call", "assistant", f"Bash {bash}", tool_name="Bash"),
        _ev(3, "tool_result", "tool", f"def push_image(self):\n{CODE}\n1 failed, 3 passed"),
        _ev(
            4,
            "tool_call",
            "assistant",
            'Edit {"file_path":"/home/dev/infra/Dockerfile","old_string":"a","new_string":"b"}',
            tool_name="Edit",
            cwd="/home/dev/infra",
        ),
        _ev(5, "tool_result", "tool", f"The file has been updated. Snippet:\n{CODE}"),
        _ev(6, "assistant_message", "assistant", "Fixed. The full suite passes now."),
        *(_ev(7 + k, "user_message", "user", f"Unrelated note number {k}.") for k in range(8)),
        # A dense run of code-heavy output sharing much of the plan's wording: by overlap
        # alone it would win the plan bullet's grip.
        *(
            _ev(15 + k, "tool_result", "tool", f"Snippet of the edited file:\n{CODE}")
            for k in range(4)
        ),
    ]


def test_extractive_bullet_grips_its_own_event_and_quotes_it() -> None:
    events = claude_code_segment()
    plan = (
        "Plan: 1) reproduce with a focused test, 2) find where push_image() goes wrong, "
        "3) fix it, 4) run the Docker builds test suite."
    )
    ran = "Ran `pytest tests/test_image.py -x -q`"
    edited = "Edited `Dockerfile`"
    grips = segment_grips("p", "toc:segment:x", "s1", events, [plan, ran, edited])
    by_id = {e.event_id: i for i, e in enumerate(events)}
    # The plan bullet: its own message, quoted — not the code-heavy tool output that shares
    # more of its words.
    g = grips[0]
    assert by_id[g.event_id_start] <= 1 <= by_id[g.event_id_end]
    assert g.excerpt.startswith("Plan: 1) reproduce with a focused test")
    assert "→" not in g.excerpt and len(g.excerpt) <= EXCERPT_CHARS
    # Tool facts grip their tool call; the excerpt is the command, not the JSON head.
    g = grips[1]
    assert by_id[g.event_id_start] <= 2 <= by_id[g.event_id_end]
    assert "pytest tests/test_image.py -x -q" in g.excerpt
    g = grips[2]
    assert by_id[g.event_id_start] <= 4 <= by_id[g.event_id_end]
    assert "Dockerfile" in g.excerpt


def test_summariser_bullets_and_grips_agree_on_claude_code_events() -> None:
    events = claude_code_segment()
    summary = ExtractiveSummarizer(TiktokenCounter()).summarize_events(events)
    assert not any("{" in b or "Bash" in b for b in summary.bullets), summary.bullets
    grips = segment_grips("p", "n", "s1", events, summary.bullets)
    for bullet, grip in zip(summary.bullets, grips, strict=True):
        core, _ = bullet_core(bullet)
        if core and not bullet.startswith(("Ran", "Edited", "Error", "Tests")):
            assert core[:30] in grip.excerpt.lower(), (bullet, grip.excerpt)


def test_bullet_core_forms() -> None:
    assert bullet_core("Ran `pytest -x tests/a.py`")[0] == "pytest -x tests/a.py"
    assert bullet_core("Error: TypeError: boom went the thing in `test_x`")[0] == (
        "typeerror: boom went the thing"
    )
    assert bullet_core("Caroline: I went to a **support group** yesterday.")[0] == (
        "i went to a support group yesterday."
    )
    assert bullet_core("Ok.")[0] == ""  # too short to identify an event


def test_paraphrase_still_grips_the_best_overlap() -> None:
    events = claude_code_segment()
    (g,) = segment_grips("p", "n", "s1", events, ["Docker image crash on arm64 was fixed"])
    assert g.event_id_start == events[0].event_id  # the ask names arm64 and image


def test_best_range_prefers_dense_runs() -> None:
    assert best_range([0.0, 0.9, 0.8, 0.0, 0.1]) == (1, 2)
    assert best_range([0.0, 0.0]) == (0, 0)
    # Anchored: the best range that holds the anchor, even when a better one lies elsewhere.
    assert best_range([0.9, 0.8, *[0.0] * 7, 0.1], anchor=9) == (9, 9)
    assert best_range([0.5, 0.9, 0.8, 0.0, 0.1], anchor=3) == (0, 3)


def test_excerpt_is_the_sentence_sharing_most_terms_whatever_its_inflection() -> None:
    """Sentences that cannot beat the best so far are skipped unread; the pick must stay the one
    sharing most key terms (the first on ties), also through ``ies`` -> ``y`` and non-ASCII."""
    text = (
        "Unrelated line one.\nThe studies covered two libraries.\nNothing here either.\n"
        "Bibliothèques: the library studies ran on café data.\nThe libraries were studied."
    )
    bullet = {"library", "study", "café"}
    assert excerpt_of(text, bullet).startswith("Bibliothèques: the library studies")
    assert excerpt_of(text, {"library", "study"}).startswith("The studies covered two libraries.")
    assert excerpt_of(text, {"absent"}).startswith("Unrelated line one.")  # none: the first
