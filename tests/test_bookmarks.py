"""Bookmarks: extractive detection of each type on hand-written conversations, generation through
the real pipeline (thresholds, checkpoints, idempotency), merge by overlap, decay and use, the LLM
detector against a local OpenAI-shaped server (and its degraded fallback), and the CLI."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from memtoc.clock import ManualClock
from memtoc.ids import derived_ulid
from memtoc.memory import Memory
from memtoc.model import Bookmark, Event
from memtoc.pipeline.summarize.llm_clients import OpenAIChatClient, RetryPolicy
from memtoc.retrieval.bookmark_step import BookmarkConfig, BookmarkStep, checkpoint_job
from memtoc.retrieval.bookmarks import (
    ExtractiveDetector,
    bookmark_id,
    effective_importance,
    importance,
    make_bookmark,
)
from memtoc.retrieval.bookmarks_llm import LLMBookmarkDetector
from memtoc.store.sqlite import SqliteStore
from memtoc.surfaces.cli import app
from memtoc.text.tokens import HeuristicCounter

T0 = 1_710_000_000_000  # 2024-03-09T16:00Z
MIN = 60_000
DAY = 86_400_000

Turn = tuple[str, str]  # (role or event type, text)
_TYPES = {"user": "user_message", "assistant": "assistant_message", "tool": "tool_result"}


def conversation(turns: list[Turn], *, session: str = "s1", project: str = "p", start: int = T0):
    """Events of one session, a minute apart (``tool_call`` / ``session_end`` as the role name
    give those event types)."""
    out = []
    for n, (role, text) in enumerate(turns):
        etype = _TYPES.get(role, role)
        real_role = {"tool_call": "assistant", "session_end": "system"}.get(role, role)
        ts = start + n * MIN
        out.append(
            Event(
                derived_ulid(ts, f"{session}:{n}"),
                session,
                project,
                "t",
                ts,
                etype,
                real_role,
                text,
            )
        )
    return out


def detect(turns: list[Turn]) -> list[Bookmark]:
    return ExtractiveDetector().detect(conversation(turns)).bookmarks


def of_type(marks: list[Bookmark], type_: str) -> list[Bookmark]:
    return [b for b in marks if b.type == type_]


# -- detection --------------------------------------------------------------------------------------
DECISION: list[Turn] = [
    ("user", "We keep hitting the rate limit in staging."),
    ("assistant", "Two options: Redis, or keep the in-process dict and shard it. I'd go with Redis."),
    ("user", "OK. Let's use Redis for the rate limiter instead of the in-process dict. Write that down."),
    ("assistant", "Agreed, I'll go with that and note the decision in the PR description."),
    ("user", "Let's look at the logs first though. Should we use Redis streams too?"),
]  # fmt: skip


def test_conclusion_keeps_the_decision_and_its_acknowledgement() -> None:
    events = conversation(DECISION)
    found = of_type(ExtractiveDetector().detect(events).bookmarks, "conclusion")
    assert len(found) == 1  # "let's look", a question and the assistant's "I'd go with" are not
    b = found[0]
    assert b.content == "Let's use Redis for the rate limiter instead of the in-process dict."
    assert b.event_ids == tuple(sorted([events[2].event_id, events[3].event_id]))
    assert b.importance == pytest.approx(0.9)  # weight 0.9 x cue 1.0 (+ack, capped) x length 1.0
    assert b.created_ms == events[3].ts_ms == b.last_relevant_ms
    assert b.bookmark_id == bookmark_id("p", b.event_ids, "conclusion", b.created_ms)


CORRECTION: list[Turn] = [
    ("user", "Users get logged out when two tabs refresh at once."),
    ("tool_call", "Bash: pytest tests/test_auth.py -x"),
    ("tool", "FAILED tests/test_auth.py::test_two_tabs - InvalidTokenError: refresh token already used\n1 failed"),
    ("assistant", "I think the problem is in validate_claims(): it doesn't handle the retried request."),
    ("user", "No, the bug is in refresh_token(), not validate_claims(). Look at it again."),
    ("assistant", "You're right, sorry. In refresh_token(): the old token is revoked before the new pair is committed. That's the actual bug."),
    ("tool_call", "Edit: src/auth/session.py"),
    ("tool_call", "Bash: pytest tests/test_auth.py"),
    ("tool", "===== 12 passed in 0.41s ====="),
    ("assistant", "All tests in tests/test_auth.py pass now. The change is limited to src/auth/session.py."),
]  # fmt: skip


def test_resolution_keeps_the_corrected_understanding_not_the_error() -> None:
    events = conversation(CORRECTION)
    marks = ExtractiveDetector().detect(events).bookmarks
    found = of_type(marks, "resolution")
    assert len(found) == 1
    b = found[0]
    assert "refresh_token()" in b.content
    assert "revoked before the new pair is committed" in b.content
    # the passing run is cited, but "All tests … pass now" says nothing of the fix: not in the text
    assert "pass now" not in b.content
    assert "validate_claims(): it doesn't handle" not in b.content
    assert "sorry" not in b.content.lower()
    wrong_guess = events[3].event_id
    assert all(wrong_guess not in m.event_ids for m in marks)  # the error is never bookmarked
    assert {events[4].event_id, events[5].event_id, events[9].event_id} <= set(b.event_ids)
    assert b.importance == pytest.approx(1.0)


def test_resolution_from_an_error_and_a_stated_cause() -> None:
    marks = detect(
        [
            ("tool_call", "Bash: pytest tests/test_cache.py"),
            ("tool", "FAILED tests/test_cache.py::test_tenant - AssertionError: 2 != 1\n1 failed"),
            ("assistant", "Found it. Root cause: the cache key ignores the tenant id, so tenants share entries."),
            ("tool_call", "Edit: src/cache/keys.py"),
            ("tool", "==== 9 passed in 0.20s ===="),
            ("assistant", "Fixed: the tests pass now and each tenant gets its own key."),
        ]
    )  # fmt: skip
    found = of_type(marks, "resolution")
    assert len(found) == 1
    # the cause itself, not its label; then what the fix said beyond "tests pass"
    assert found[0].content.startswith("The cache key ignores the tenant id")
    assert "each tenant gets its own key" in found[0].content
    assert found[0].importance == pytest.approx(0.8)


def test_no_resolution_without_a_fix() -> None:
    marks = detect(
        [
            ("tool", "FAILED tests/test_cache.py::test_tenant - AssertionError\n1 failed"),
            ("assistant", "Root cause: the cache key ignores the tenant id."),
            ("user", "Why did this only show up now?"),
        ]
    )
    assert of_type(marks, "resolution") == []


def test_validated_bookmarks_the_confirmed_statement() -> None:
    events = conversation(
        [
            ("user", "Why is the suite flaky?"),
            ("assistant", "The flakiness comes from the shared temp directory: two xdist workers write the same file. Using tmp_path per test fixes it."),
            ("user", "Yes, exactly."),
        ]
    )  # fmt: skip
    found = of_type(ExtractiveDetector().detect(events).bookmarks, "validated")
    assert len(found) == 1
    assert found[0].content.startswith("The flakiness comes from the shared temp directory")
    assert found[0].event_ids == tuple(sorted([events[1].event_id, events[2].event_id]))
    assert found[0].importance == pytest.approx(0.8)


def test_a_weak_confirmation_weighs_less_and_a_long_reply_is_not_one() -> None:
    weak = detect(
        [
            ("assistant", "The index is rebuilt nightly by the cron job on db-2."),
            ("user", "Right, go ahead."),
        ]
    )
    long_reply = detect(
        [
            ("assistant", "The index is rebuilt nightly by the cron job on db-2."),
            ("user", "Yes, but " + "we also need to think about the replicas and the backups " * 3),
        ]
    )  # fmt: skip
    assert [b.importance for b in of_type(weak, "validated")] == [pytest.approx(0.4)]
    assert of_type(long_reply, "validated") == []


def test_foundational_statements_about_the_user_and_constraints() -> None:
    marks = detect(
        [
            ("user", "Some context: I'm a backend developer at a small fintech. We must support Python 3.9 because a customer pins it."),
            ("assistant", "Understood."),
            ("user", "My name is Ana, by the way."),
            ("user", "Can you check whether we use Redis anywhere?"),
        ]
    )  # fmt: skip
    found = of_type(marks, "foundational")
    contents = [b.content for b in found]
    assert "We must support Python 3.9 because a customer pins it." in contents
    assert "My name is Ana, by the way." in contents
    assert len(found) == 2  # the question is not a statement about the project


def test_detection_is_deterministic_and_content_is_bounded() -> None:
    events = conversation(CORRECTION + DECISION)
    first = ExtractiveDetector().detect(events).bookmarks
    second = ExtractiveDetector().detect(list(reversed(events))).bookmarks
    assert first == second and first
    long = make_bookmark(
        "p", "conclusion", "Let's use " + "very " * 80 + "big caches.", events[:1], 1.0
    )
    assert long is not None and len(long.content.split()) == 50 and long.content.endswith("…")
    assert long.importance == importance("conclusion", 1.0, long.content, cut=True) == 0.765


# -- decay ------------------------------------------------------------------------------------------
def _mark(n: int, imp: float, created: int, events: tuple[str, ...] = ()) -> Bookmark:
    ids = events or (f"E{n}",)
    return Bookmark(
        bookmark_id(f"p{n}", ids, "conclusion", created),
        "p",
        f"Decision number {n} here.",
        ids,
        imp,
        "conclusion",
        created,
        created,
    )


def test_decay_half_life_and_floor() -> None:
    b = _mark(1, 0.8, T0)
    assert effective_importance(b, T0) == pytest.approx(0.8)
    assert effective_importance(b, T0 + 90 * DAY) == pytest.approx(0.4)
    assert effective_importance(b, T0 + 180 * DAY) == pytest.approx(0.2)
    assert effective_importance(b, T0 + 5_000 * DAY) == pytest.approx(0.16)  # floor: 0.2 x 0.8
    assert effective_importance(b, T0 - DAY) == pytest.approx(0.8)  # no growth before creation


# -- the pipeline step ------------------------------------------------------------------------------
def memory_at(tmp_path: Path, clock: ManualClock, config: BookmarkConfig | None = None) -> Memory:
    store = SqliteStore(tmp_path / "m.db", clock=clock)
    return Memory(
        store, clock=clock, tz=ZoneInfo("UTC"), counter=HeuristicCounter(), bookmark_config=config
    )


def records(turns: list[Turn], *, session: str = "s1", start: int = T0) -> list[dict[str, Any]]:
    return [
        {"session_id": session, "timestamp": e.ts_ms, "role": e.role, "text": e.text, "event_type": e.event_type, "event_id": e.event_id}
        for e in conversation(turns, session=session, start=start)
    ]  # fmt: skip


FILLER: list[Turn] = [("user", f"Please also check module_{n}.py.") for n in range(12)]


def test_threshold_generation_through_the_pipeline(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 60 * MIN)
    mem = memory_at(tmp_path, clock, BookmarkConfig(every_messages=20, every_tokens=100_000))
    turns = DECISION + FILLER + CORRECTION  # 5 + 12 + 6 messages
    recs = records(turns)
    first, rest = recs[:10], recs[10:]  # 10 messages: below the threshold
    assert mem.ingest_records(first, project="p").ingested == 10
    mem.process()
    assert mem.bookmarks("p") == []
    assert mem.store.get_checkpoint(checkpoint_job("p", "s1")) is None
    assert mem.ingest_records(rest, project="p").ingested == len(rest)
    report = mem.process()
    assert report.failed_entries == []
    types = sorted(b.type for b in mem.bookmarks("p"))
    assert types == ["conclusion", "resolution"]
    last = mem.events(project="p")[-1]
    assert mem.store.get_checkpoint(checkpoint_job("p", "s1")) == {
        "ts_ms": last.ts_ms,
        "event_id": last.event_id,
    }
    # the pass is idempotent: delivering the same events again writes nothing
    again = mem.bookmark_step.after_events(mem.events(project="p"))
    assert again.passes == 0 and again.written == 0
    # and a full refresh finds exactly what the pipeline found
    before = {b.bookmark_id for b in mem.bookmarks("p")}
    assert mem.refresh_bookmarks("p") == 0
    assert {b.bookmark_id for b in mem.bookmarks("p")} == before
    # bookmarks are searchable documents for teleport
    docs = mem.store.connection.execute(
        "SELECT COUNT(*) FROM docs WHERE kind = 'bookmark'"
    ).fetchone()
    assert docs[0] == len(before)


def test_session_end_and_token_thresholds_trigger_a_pass(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 60 * MIN)
    mem = memory_at(tmp_path, clock, BookmarkConfig(every_messages=1_000, every_tokens=100_000))
    mem.ingest_records(records(DECISION[:4]), project="p")
    mem.process()
    assert mem.bookmarks("p") == []  # 4 messages, few tokens, session still open
    mem.ingest_records(
        records([("session_end", "Session ended")], start=T0 + 10 * MIN), project="p"
    )
    mem.process()
    assert [b.type for b in mem.bookmarks("p")] == ["conclusion"]

    mem2 = memory_at(tmp_path / "b", clock, BookmarkConfig(every_messages=1_000, every_tokens=60))
    long_text = "Some context: we must support Python 3.9 in every service. " + "filler words " * 40
    mem2.ingest_records(records([("user", long_text)], session="s2"), project="p")
    mem2.process()
    assert [b.type for b in mem2.bookmarks("p")] == ["foundational"]


def test_refresh_is_idempotent_and_rebuild_recreates(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 60 * MIN)
    mem = memory_at(tmp_path, clock, BookmarkConfig(enabled=False))
    mem.ingest_records(records(DECISION + CORRECTION), project="p")
    mem.process()
    assert mem.bookmarks("p") == []  # the step is off
    written = mem.refresh_bookmarks("p")
    assert written == len(mem.bookmarks("p")) >= 2
    assert mem.refresh_bookmarks("p") == 0
    assert mem.refresh_bookmarks() == 0  # every project
    report = mem.refresh_bookmarks_report("p", rebuild=True)
    assert report.deleted == written and report.written == written


# -- merge ------------------------------------------------------------------------------------------
def test_merge_by_overlap_newer_wins(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = SqliteStore(tmp_path / "m.db", clock=clock)
    step = BookmarkStep(store, HeuristicCounter(), clock)
    old = _mark(1, 0.9, T0, ("E1", "E2", "E3"))
    old = Bookmark(
        old.bookmark_id, "p", old.content, old.event_ids, 0.9, "conclusion", T0, T0 + 5 * DAY
    )
    new = _mark(2, 0.5, T0 + MIN, ("E2", "E3", "E4"))  # 2 of 3 shared: the same moment
    apart = _mark(3, 0.7, T0 + 2 * MIN, ("E3", "E8", "E9"))  # 1 of 3 shared: a different one
    assert step.merge("p", [old]) == (1, 0)
    assert step.merge("p", [new, apart]) == (2, 1)
    kept = {b.bookmark_id: b for b in store.list_bookmarks("p")}
    assert set(kept) == {new.bookmark_id, apart.bookmark_id}
    assert kept[new.bookmark_id].created_ms == new.created_ms  # the kept one's own creation
    assert kept[new.bookmark_id].last_relevant_ms == T0 + 5 * DAY  # the latest use survives
    # an older candidate never replaces a newer stored one, and nothing is rewritten
    assert step.merge("p", [old, new, apart]) == (0, 0)
    # the same decision restated later (no shared events) replaces the earlier one
    restated = make_bookmark(
        "p", "conclusion", new.content, conversation([("user", "x")], start=T0 + DAY), 0.9
    )
    assert restated is not None
    assert step.merge("p", [restated]) == (1, 1)
    assert {b.bookmark_id for b in store.list_bookmarks("p")} == {
        restated.bookmark_id,
        apart.bookmark_id,
    }
    store.close()


def test_bookmarks_sorted_with_decay_and_touch_updates_last_relevant(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = SqliteStore(tmp_path / "m.db", clock=clock)
    mem = Memory(store, clock=clock, tz=ZoneInfo("UTC"))
    old = _mark(1, 0.9, T0 - 360 * DAY)  # 0.9 x 2^-4 = 0.056 → floor 0.18
    fresh = _mark(2, 0.5, T0 - DAY)
    for b in (old, fresh):
        store.put_bookmark(b)
    assert [b.bookmark_id for b in mem.bookmarks("p")] == [fresh.bookmark_id, old.bookmark_id]
    assert [b.bookmark_id for b in mem.bookmarks("p", limit=1, touch=True)] == [fresh.bookmark_id]
    assert store.list_bookmarks("p")[0].last_relevant_ms in {T0, old.last_relevant_ms}
    assert mem.touch_bookmarks([old.bookmark_id]) == 1
    assert mem.touch_bookmarks([old.bookmark_id]) == 0  # already at now
    by_id = {b.bookmark_id: b for b in store.list_bookmarks("p")}
    assert (
        by_id[old.bookmark_id].last_relevant_ms == T0 == by_id[fresh.bookmark_id].last_relevant_ms
    )
    assert [b.bookmark_id for b in mem.bookmarks("p")] == [old.bookmark_id, fresh.bookmark_id]
    clock.advance(1)
    assert store.touch_bookmarks([old.bookmark_id], T0 - DAY) == 0  # never moves back
    store.close()


# -- the LLM detector -------------------------------------------------------------------------------
class OpenAIServer:
    """A local server speaking the OpenAI chat-completions shape; replies are scripted."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, str]] = []
        self.seen: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.seen.append(body)
                status, text = server.replies.pop(0) if server.replies else (200, "{}")
                if self.path != "/v1/chat/completions" or not isinstance(
                    body.get("messages"), list
                ):
                    status, text = 400, "bad request"
                if status == 200:
                    payload: dict[str, Any] = {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                    }  # fmt: skip
                else:
                    payload = {"error": {"message": text, "type": "server_error"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)  # fmt: skip
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def llm() -> Iterator[tuple[OpenAIServer, LLMBookmarkDetector]]:
    server = OpenAIServer()
    client = OpenAIChatClient(
        server.base_url, "test-model", "sk-test", 5.0, None,
        retry=RetryPolicy(max_attempts=1), sleep=lambda s: None,
    )  # fmt: skip
    detector = LLMBookmarkDetector(client)
    yield server, detector
    detector.close()
    server.close()


def test_llm_detector_reads_validated_json(llm: tuple[OpenAIServer, LLMBookmarkDetector]) -> None:
    server, detector = llm
    events = conversation(CORRECTION)
    reply = {
        "bookmarks": [
            {"type": "resolution", "content": "The bug was in refresh_token(): it revoked the old token before committing the new pair; fixed and tests pass.", "events": ["e5", "e6", "e10"], "cue": 1.0}
        ]
    }  # fmt: skip
    server.replies.append((200, "```json\n" + json.dumps(reply) + "\n```"))
    found = detector.detect(events)
    assert found.degraded is None and found.backend.startswith("llm:openai:test-model")
    [b] = found.bookmarks
    assert b.type == "resolution" and "refresh_token()" in b.content
    assert b.event_ids == tuple(sorted(events[k].event_id for k in (4, 5, 9)))
    assert b.importance == pytest.approx(1.0)
    sent = server.seen[0]["messages"]
    assert sent[0]["role"] == "system" and '"ref": "e1"' in sent[1]["content"]


@pytest.mark.parametrize(
    ("status", "text", "why"),
    [
        (200, '{"bookmarks": [{"type": "resolution", "content": "Fixed it.", "events": ["e99"]}]}', "unknown event reference"),
        (200, '{"bookmarks": [{"type": "insight", "content": "Something.", "events": ["e1"]}]}', "invalid bookmark JSON"),
        (200, "not json at all", "invalid bookmark JSON"),
        (500, "boom", "500"),
    ],
)  # fmt: skip
def test_llm_detector_falls_back_marked_degraded(
    llm: tuple[OpenAIServer, LLMBookmarkDetector], status: int, text: str, why: str
) -> None:
    server, detector = llm
    server.replies.append((status, text))
    events = conversation(CORRECTION)
    found = detector.detect(events)
    assert found.degraded is not None and why in found.degraded
    assert found.backend == "extractive"
    assert found.bookmarks == ExtractiveDetector().detect(events).bookmarks


def test_degraded_detection_is_reported_by_refresh(
    tmp_path: Path, llm: tuple[OpenAIServer, LLMBookmarkDetector]
) -> None:
    server, detector = llm
    server.replies.append((500, "down"))
    clock = ManualClock(T0 + 60 * MIN)
    store = SqliteStore(tmp_path / "m.db", clock=clock)
    mem = Memory(store, clock=clock, tz=ZoneInfo("UTC"), bookmark_detector=detector, bookmark_config=BookmarkConfig(enabled=False))  # fmt: skip
    mem.ingest_records(records(CORRECTION), project="p")
    report = mem.refresh_bookmarks_report("p")
    assert report.written == 1 and report.backends == {"extractive": 1}
    assert report.degraded and "500" in report.degraded[0]
    mem.close()


# -- CLI --------------------------------------------------------------------------------------------
def test_cli_refresh_and_list(tmp_path: Path) -> None:
    path = tmp_path / "conv.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records(DECISION + CORRECTION)))
    runner = CliRunner()
    db = str(tmp_path / "cli.db")
    env = {"MEMTOC_EMBEDDER": "none", "MEMTOC_TIMEZONE": "UTC"}
    assert (
        runner.invoke(app, ["--db", db, "ingest", str(path), "--project", "p"], env=env).exit_code
        == 0
    )
    first = runner.invoke(app, ["--db", db, "bookmarks", "refresh", "--json"], env=env)
    assert first.exit_code == 0, first.output
    second = runner.invoke(
        app, ["--db", db, "bookmarks", "refresh", "--project", "p", "--json"], env=env
    )
    assert json.loads(second.output)["written"] == 0
    listed = runner.invoke(
        app, ["--db", db, "bookmarks", "list", "--project", "p", "--json"], env=env
    )
    marks = json.loads(listed.output)["bookmarks"]
    assert len(marks) == json.loads(first.output)["written"] >= 2
    assert {m["type"] for m in marks} >= {"conclusion", "resolution"}
    table = runner.invoke(app, ["--db", db, "bookmarks", "list", "--all-projects"], env=env)
    assert table.exit_code == 0 and "conclusion" in table.output
