"""The extractive summariser: salience, titles, keywords, sizes, merging, determinism, speed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.extractive import EMPTY_TITLE, ExtractiveSummarizer
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TiktokenCounter

LOCOMO = Path("/work/shared/datasets/locomo/locomo10.json")
COUNTER = TiktokenCounter()


def _event(i: int, event_type: str, role: str, text: str, **metadata: object) -> Event:
    return Event(
        event_id=f"01HX{i:022d}",
        session_id="s1",
        project="p",
        agent="a",
        ts_ms=1_700_000_000_000 + i * 1000,
        event_type=event_type,
        role=role,
        text=text,
        metadata=metadata,
    )


def coding_segment() -> list[Event]:
    rows = [
        (
            "user_message",
            "user",
            "hey, can you look at why the JWT refresh fails? Users get logged out after 5 minutes.",
        ),
        ("assistant_message", "assistant", "Sure. Let me check the session code first."),
        ("tool_call", "assistant", json.dumps({"command": "grep -rn refresh_token src/app/"})),
        ("tool_result", "tool", "src/app/auth/session.py:42: def refresh_token(self, token):"),
        ("tool_call", "assistant", json.dumps({"file_path": "src/app/auth/session.py"})),
        (
            "assistant_message",
            "assistant",
            "The root cause is a race: two concurrent requests both call refresh_token() and the second invalidates the first token. The fix is to hold a per-user lock in refresh_token.",
        ),
        (
            "tool_call",
            "assistant",
            json.dumps(
                {"file_path": "src/app/auth/session.py", "old_string": "a", "new_string": "b"}
            ),
        ),
        ("tool_call", "assistant", json.dumps({"command": "pytest tests/test_session.py -q"})),
        (
            "tool_result",
            "tool",
            "E   TypeError: refresh_token() missing 1 required positional argument: 'user_id'\n1 failed, 11 passed",
        ),
        (
            "assistant_message",
            "assistant",
            "Fixed by passing user_id through from the middleware. Now all tests pass.",
        ),
        ("tool_result", "tool", "12 passed in 0.4s"),
        ("user_message", "user", "ok thanks, great!"),
        ("assistant_message", "assistant", "You're welcome, happy to help!"),
        ("user_message", "user", "Should we also add a test for the concurrent refresh case?"),
        (
            "assistant_message",
            "assistant",
            "Yes — I'll add test_concurrent_refresh in tests/test_session.py using two threads.",
        ),
    ]
    tools = {2: "Bash", 4: "Read", 6: "Edit", 7: "Bash"}
    return [
        _event(i, t, r, x, **({"tool_name": tools[i]} if i in tools else {}))
        for i, (t, r, x) in enumerate(rows)
    ]


@pytest.fixture(scope="module")
def summarizer() -> ExtractiveSummarizer:
    return ExtractiveSummarizer(COUNTER)


def test_coding_segment_summary(summarizer: ExtractiveSummarizer) -> None:
    events = coding_segment()
    s = summarizer.summarize_events(events)
    assert summarizer.name == "extractive/2" and s.backend == "extractive/2"
    # A descriptive title, not the first words of the first message.
    assert 0 < len(s.title) <= 80
    assert not events[0].text.lower().startswith(s.title.lower()[:15])
    # The error was fixed later in the segment (tests pass), so the title says so.
    assert s.title.startswith("Fixed")
    assert "TypeError" in s.title and "JWT" in s.title
    assert "refresh_token" in s.title or "session.py" in s.title
    # Decisions and the error and its fix beat chit-chat.
    assert 3 <= len(s.bullets) <= 5
    joined = " ".join(s.bullets)
    assert "root cause" in joined
    assert "TypeError" in joined
    assert "Fixed by passing user_id" in joined
    assert not any(b.lower().startswith(("ok thanks", "sure", "you're welcome")) for b in s.bullets)
    # Keywords keep identifiers and paths whole.
    assert 5 <= len(s.keywords) <= 10
    assert "refresh_token" in s.keywords
    assert "src/app/auth/session.py" in s.keywords
    assert not {"src", "app", "py"} & set(s.keywords)
    # L0 / L1 and the key facts.
    assert 60 <= COUNTER.count(s.abstract) <= 140
    assert s.abstract.startswith(s.title)
    assert "Files: src/app/auth/session.py" in s.overview
    assert "pytest tests/test_session.py -q" in s.overview
    assert COUNTER.count(s.overview) <= 2000


def test_deterministic(summarizer: ExtractiveSummarizer) -> None:
    events = coding_segment()
    assert summarizer.summarize_events(events) == summarizer.summarize_events(list(events))
    other = ExtractiveSummarizer(COUNTER)
    assert other.summarize_events(events) == summarizer.summarize_events(events)


def test_empty_input(summarizer: ExtractiveSummarizer) -> None:
    s = summarizer.summarize_events([])
    assert s.title == EMPTY_TITLE and s.bullets == () and s.keywords == ()
    assert (
        summarizer.summarize_events([_event(0, "session_start", "system", "")]).title == EMPTY_TITLE
    )
    assert summarizer.summarize_children([]).title == EMPTY_TITLE
    assert summarizer.summarize_children([s, s]).title == EMPTY_TITLE


def test_long_input_respects_token_limits(summarizer: ExtractiveSummarizer) -> None:
    para = (
        "We decided to migrate the ingestion worker from threads to asyncio because the "
        "outbox drain blocked on sqlite writes under load and the root cause was lock contention. "
    )
    events = [
        _event(i, "assistant_message", "assistant", f"Step {i}: " + para * 30 + "x" * 3000)
        for i in range(60)
    ]
    s = summarizer.summarize_events(events)
    assert COUNTER.count(s.abstract) <= 140  # one sentence repeated: nothing more to say
    assert COUNTER.count(s.overview) <= 2000
    assert all(len(b.split()) <= 41 for b in s.bullets)
    assert len(s.title) <= 80


def test_markdown_is_cleaned(summarizer: ExtractiveSummarizer) -> None:
    text = (
        "## Plan\n\n- **Decided** to use [FTS5](https://sqlite.org/fts5.html) instead of tantivy.\n"
        "- The fix for `rank()` is in store/sqlite.py.\n\n```python\nx = 1\n```\n"
    )
    s = summarizer.summarize_events([_event(0, "assistant_message", "assistant", text)])
    assert any(b == "Decided to use FTS5 instead of tantivy." for b in s.bullets)
    assert not any("**" in b or "](" in b or "x = 1" in b for b in s.bullets)


def _child(title: str, bullets: list[str], keywords: list[str]) -> Summary:
    return Summary(title, tuple(bullets), tuple(keywords), title, title)


def test_children_merge_covers_each_child(summarizer: ExtractiveSummarizer) -> None:
    children = [
        _child(
            "Fixing TypeError in src/app/auth.py",
            ["Fixed the refresh_token race with a lock.", "Added test_concurrent_refresh."],
            ["refresh_token", "src/app/auth.py", "lock"],
        ),
        _child(
            "Editing docs/architecture.md",
            ["Documented the outbox worker design.", "Noted the fsync policy."],
            ["outbox", "docs/architecture.md", "refresh_token"],
        ),
        _child(
            "Running pytest",
            ["All 212 tests pass on PostgreSQL 15.", "pgvector built from source."],
            ["pytest", "PostgreSQL", "refresh_token"],
        ),
    ]
    s = summarizer.summarize_children(children)
    assert 3 <= len(s.bullets) <= 8
    for child in children:  # every child's work is told, in the period's own words
        assert any(cb in b for b in s.bullets for cb in child.bullets), child.title
    assert not set(s.bullets) & {b for c in children for b in c.bullets}  # never verbatim
    assert s.keywords[0] == "refresh_token"  # carried by every child
    assert {"outbox", "pytest", "lock"} <= set(s.keywords)
    assert "Summary" not in s.title and 0 < len(s.title) <= 80
    assert COUNTER.count(s.abstract) <= 140
    assert all(b.split(": ", 1)[-1] in s.abstract for b in s.bullets[:2])  # L0 runs through them
    assert summarizer.summarize_children(children) == s


def test_children_merge_removes_redundancy(summarizer: ExtractiveSummarizer) -> None:
    same = "Fixed the refresh_token race with a per-user lock."
    children = [
        _child(f"Fixing race {i}", [same, f"Unique point number {i} about topic{i}."], ["race"])
        for i in range(3)
    ]
    s = summarizer.summarize_children(children)
    assert sum(1 for b in s.bullets if same in b) == 1


EVENT_TYPES = st.sampled_from(
    ["user_message", "assistant_message", "tool_call", "tool_result", "system"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(EVENT_TYPES, st.text(max_size=400)), max_size=12))
def test_never_raises_and_bounded(
    summarizer: ExtractiveSummarizer, rows: list[tuple[str, str]]
) -> None:
    events = [_event(i, t, "user", x) for i, (t, x) in enumerate(rows)]
    s = summarizer.summarize_events(events)
    assert len(s.title) <= 80 and s.title
    assert len(s.bullets) <= 5 and len(s.keywords) <= 10
    assert COUNTER.count(s.abstract) <= 140
    assert COUNTER.count(s.overview) <= 2000
    merged = summarizer.summarize_children([s, s])
    assert len(merged.bullets) <= 8 and COUNTER.count(merged.abstract) <= 140


def _locomo_sessions() -> tuple[list[list[str]], list[str]]:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo dataset not found at {LOCOMO}")
    conv = next(c for c in json.loads(LOCOMO.read_text()) if c.get("sample_id") == "conv-26")
    sessions, summaries = [], []
    turns_by_session = conv["conversation"]
    for key, turns in sorted(turns_by_session.items()):
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        reference = conv["session_summary"].get(f"{key}_summary")
        if reference:
            sessions.append([f"{t['speaker']}: {t['text']}" for t in turns])
            summaries.append(reference)
    return sessions, summaries


def test_locomo_bullets_recall_session_summaries(summarizer: ExtractiveSummarizer) -> None:
    sessions, references = _locomo_sessions()
    recalls = []
    for turns, reference in zip(sessions, references, strict=True):
        events = [_event(i, "user_message", "user", t) for i, t in enumerate(turns)]
        s = summarizer.summarize_events(events)
        assert ":" in s.title and len(s.title) <= 80
        assert all(":" in b for b in s.bullets)  # speaker names kept
        ref = key_terms(reference)
        got = set().union(*(key_terms(b) for b in s.bullets))
        recalls.append(len(ref & got) / len(ref))
    mean = sum(recalls) / len(recalls)
    print(f"LoCoMo conv-26: {len(recalls)} sessions, mean key-term recall of bullets {mean:.3f}")
    assert mean > 0.15


def synthetic_segment(n: int = 40) -> list[Event]:
    templates = [
        (
            "user_message",
            "user",
            "Can you check why the sqlite outbox drain is slow when {n} workers run?",
        ),
        (
            "assistant_message",
            "assistant",
            "Looking at store/sqlite.py: the drain holds a write lock for each batch of {n} entries. Let's batch commits instead.",
        ),
        ("tool_call", "assistant", '{{"command": "pytest tests/test_worker.py -q -k drain_{n}"}}'),
        (
            "tool_result",
            "tool",
            "FAILED tests/test_worker.py::test_drain_{n} - AssertionError: expected 0 pending, got {n}",
        ),
        (
            "assistant_message",
            "assistant",
            "Fixed by committing every 500 entries; the test passes now.",
        ),
        (
            "user_message",
            "user",
            "great, thanks! Also Maria said she visited Lisbon last week for the conference.",
        ),
        (
            "tool_call",
            "assistant",
            '{{"file_path": "src/memtoc/pipeline/worker_{n}.py", "old_string": "x", "new_string": "y"}}',
        ),
        ("tool_result", "tool", "{n} passed in 1.2s"),
    ]
    return [
        _event(i, t, r, x.format(n=i))
        for i, (t, r, x) in ((i, templates[i % len(templates)]) for i in range(n))
    ]


def test_speed_per_event() -> None:
    summarizer = ExtractiveSummarizer(TiktokenCounter())
    events = synthetic_segment(40)
    summarizer.summarize_events(events)  # warm caches
    rounds = 30
    start = time.perf_counter()
    for _ in range(rounds):
        summarizer.summarize_events(events)
    per_event = (time.perf_counter() - start) / (rounds * len(events))
    print(f"extractive summariser: {per_event * 1e6:.0f} us/event (40-event segment)")
    assert per_event < 600e-6  # budget ~150 us; loose bound for shared CI machines


def claude_code_events() -> list[Event]:
    """Tool calls as the Claude Code source stores them: ``Name {json}`` + ``tool_name``."""
    bash = json.dumps({"command": "pytest tests/test_image.py -x -q", "description": "Run"})
    rows: list[tuple[str, str, str, dict[str, object]]] = [
        ("user_message", "user", "The arm64 image crashes on start. Fix push_image please.", {}),
        ("tool_call", "assistant", f"Bash {bash}", {"tool_name": "Bash"}),
        (
            "tool_result",
            "tool",
            "FAILED tests/test_image.py::test_push_image_arm64 - exec /usr/bin/python: "
            "exec format error\n1 failed, 3 passed",
            {"is_error": True},
        ),
        (
            "tool_call",
            "assistant",
            'Edit {"file_path":"/home/dev/infra/Dockerfile","old_string":"a","new_string":"b"}',
            {"tool_name": "Edit", "cwd": "/home/dev/infra"},
        ),
        (
            "tool_call",
            "assistant",
            'Grep {"pattern":"push_image","path":"src/"}',
            {"tool_name": "Grep"},
        ),
        ("tool_call", "assistant", "Bash: git diff --stat", {"tool_name": "Bash"}),
        ("assistant_message", "assistant", "Fixed: the arm64 image crashes no longer happen.", {}),
        ("tool_result", "tool", "4 passed in 0.5s", {}),
    ]
    return [_event(i, t, r, x, **m) for i, (t, r, x, m) in enumerate(rows)]


def test_tool_calls_are_rendered_not_raw(summarizer: ExtractiveSummarizer) -> None:
    from memtoc.pipeline.summarize.tool_calls import render_tool_call

    events = claude_code_events()
    actions = [render_tool_call(e.text, e.metadata) for e in events if e.event_type == "tool_call"]
    assert [a.text if a else None for a in actions] == [
        "Ran `pytest tests/test_image.py -x -q`",
        "Edited `Dockerfile`",
        "Searched for `push_image`",
        "Ran `git diff --stat`",
    ]
    assert (
        render_tool_call('{"file_path": "a/b.py"}', {"tool_name": "Write"}).text == "Wrote `a/b.py`"
    )  # type: ignore[union-attr]
    assert render_tool_call("TodoWrite {}", {"tool_name": "TodoWrite"}).text == "Called `TodoWrite`"  # type: ignore[union-attr]
    s = summarizer.summarize_events(events)
    text = " ".join((s.title, *s.bullets, *s.keywords, s.overview))
    assert "{" not in text and '"command"' not in text
    # Tool names and filler are never keywords; identifiers and paths stay whole.
    lowered = {k.lower() for k in s.keywords}
    assert not lowered & {"bash", "edit", "grep", "command", "description", "full suite", "src"}
    assert "push_image" in s.keywords and "tests/test_image.py" in s.keywords
    # A pytest failure reads as its message, with the test named after it.
    # ... in the line of tool work, with the file edited and the tally that followed
    line = ("Error: exec /usr/bin/python: exec format error in `test_push_image_arm64`; edited "
            "`Dockerfile`; tests: 4 passed")  # fmt: skip
    assert line in s.bullets
    # The title says what happened to what: fixed (tests pass after the error), the topic the
    # user asked about, the error, where.
    assert s.title == "Fixed arm64 image crashes (exec format error) in push_image", s.title


def test_period_title_names_dominant_topics(summarizer: ExtractiveSummarizer) -> None:
    children = [
        _child(
            "Fixed arm64 image crashes (exec format error) in push_image",
            ["Error: exec format error in `test_push`."],
            ["tests/test_image.py", "Docker builds", "arm64 image crashes", "push_image"],
        ),
        _child(
            "Fixed API image size in build_image",
            ["Decision: Let's switch to a multi-stage build."],
            ["tests/test_image.py", "Docker builds", "multi-stage build", "build_image"],
        ),
        _child(
            "Debugging state lock in apply_env",
            ["Root cause: the state lock is never released."],
            ["terraform/main.tf", "state lock", "cloud infra", "Docker builds"],
        ),
    ]
    s = summarizer.summarize_children(children)
    # The heaviest thread's work, then how many more: a title that says what was done.
    assert s.title.startswith("Fixed") and s.title.endswith(" and 2 more"), s.title
    # Every thread is told: its topic, then its strongest line (decisions and causes first).
    assert any("Let's switch to a multi-stage build" in b for b in s.bullets)
    assert any(b.startswith("Debugging state lock in apply_env: Root cause") for b in s.bullets)
    one = summarizer.summarize_children(children[:1])
    assert one.title != children[0].title and children[0].title in one.title


def test_locomo_titles_name_speakers_and_topics(summarizer: ExtractiveSummarizer) -> None:
    sessions, _ = _locomo_sessions()
    s = summarizer.summarize_events(
        [_event(i, "user_message", "user", t) for i, t in enumerate(sessions[0])]
    )
    who, _, topics = s.title.partition(": ")
    assert who == "Caroline & Melanie" and topics, s.title
    assert "Caroline" not in topics and "Melanie" not in topics


def test_an_abstract_never_says_a_sentence_twice() -> None:
    """A period's L0 line "topic: text…" followed by the same text without its topic (seen on a
    real context-evaluator year: "The user wants `json` to be the default instead, as…" twice)
    says it once; a sentence of a word or two may come again."""
    s = ExtractiveSummarizer(COUNTER)
    said = "The user wants `json` to be the default instead, as…"
    abstract = s._abstract(
        "Changed default CLI report mode and 10 more",
        [
            f"Changed the report mode: {said}",
            said,
            "All 1351 tests pass and lint is clean.",
            "Passed.",
            "Passed.",
        ],
        [],
    )
    assert abstract.count("The user wants") == 1, abstract
    assert "All 1351 tests pass and lint is clean" in abstract
    assert abstract.count("Passed") == 1  # the same short sentence twice is still one sentence
