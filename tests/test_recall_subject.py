"""Recall's speaker and substance priors (``recall_subject``), unit by unit and through a real
store ranked with the real static model."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.model import Event, JsonValue
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall import rank_only, recall
from memtoc.retrieval.recall_rank import RankConfig, Ranking
from memtoc.retrieval.recall_subject import (
    asks_question,
    content_words,
    named_speakers,
    narrates,
    speaker,
    substance,
)
from memtoc.store.sqlite import SqliteStore
from memtoc.text.tokens import default_counter
from search_support import file_records, rank_scope, require_model

UTC_TZ = ZoneInfo("UTC")


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _event(
    text: str, metadata: dict[str, JsonValue] | None = None, n: int = 1, role: str = "user"
) -> Event:
    return Event(
        event_id=f"01HX00000000000000000000{n:02d}",
        session_id="s",
        project="p",
        agent="a",
        ts_ms=_ms("2024-01-01T10:00"),
        event_type="user_message" if role == "user" else "tool_result",
        role=role,
        text=text,
        metadata=metadata or {},
    )


def test_speaker_from_metadata_then_label() -> None:
    assert speaker(_event("hi there", {"speaker": "Melanie"})) == "Melanie"
    assert speaker(_event("Caroline: I went to a support group")) == "Caroline"
    assert speaker(_event("Dr. Chen: take two a day")) == "Dr. Chen"
    assert speaker(_event("the build failed: exit code 2")) is None
    assert speaker(_event("Note:no space after the colon")) is None
    # a tool's output is nobody's turn, whatever it starts with
    assert speaker(_event("Error: connection refused", role="tool")) is None
    assert speaker(_event("done", {"speaker": "CI"}, role="tool")) == "CI"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What activities does Melanie partake in?", {"Melanie"}),
        ("What do Melanie's kids like?", {"Melanie"}),
        ("What do Caroline and Melanie both paint?", set()),  # all of them: no preference
        ("What did we decide about the cache?", set()),
        ("What does Mel like?", set()),  # a word of its own, not a prefix of a name
    ],
)
def test_named_speakers(question: str, expected: set[str]) -> None:
    assert named_speakers(question, ["Caroline", "Melanie"]) == expected


def test_content_words_leave_out_the_label_and_stopwords() -> None:
    assert content_words(_event("Melanie: Wow, that's great! Thanks!", n=2)) == 0
    assert content_words(_event("Melanie: I painted a sunset over the lake", n=3)) == 3
    chat = _event("Caroline: Thanks, Melanie!", n=4)
    assert substance(chat, 7, 0.5) == pytest.approx((2 / 8) ** 0.5)  # "melanie"
    rich = _event(
        "Melanie: we went camping by the lake, hiked the ridge trail, swam at sunrise", n=5
    )
    assert substance(rich, 7, 0.5) == 1.0
    assert substance(chat, 0, 0.5) == substance(chat, 7, 0.0) == 1.0  # off


def _filed(path: Path, records: list[dict[str, Any]]) -> Memory:
    """A SQLite memory with the real static model, asked on 2024-03-01, holding ``records``."""
    clock = ManualClock(_ms("2024-03-01T12:00"))
    store = SqliteStore(path, clock=clock)
    semantic = SemanticIndex(store, kind="static", model=str(require_model()))
    memory = Memory(store, clock=clock, tz=UTC_TZ, semantic=semantic)
    return file_records(memory, records)


def _memory(path: Path, turns: list[tuple[str, str]]) -> Memory:
    records: list[dict[str, Any]] = [
        {
            "session_id": f"s{n // 4}",
            "timestamp": _ms("2024-01-01T10:00") + n * 86_400_000,
            "role": "user" if who == "Caroline" else "assistant",
            "text": f"{who}: {text}",
        }
        for n, (who, text) in enumerate(turns)
    ]
    return _filed(path, records)


TURNS = [
    ("Caroline", "I went to a support group meeting downtown, it was powerful"),
    ("Melanie", "Wow, that's great! Thanks!"),
    ("Caroline", "Thanks, Melanie! How do you like to relax these days?"),
    ("Melanie", "Pottery class on weekends calms me, I made a bowl with a flower design"),
    ("Caroline", "I am researching adoption agencies for my future family"),
    ("Melanie", "Awesome, Caroline!"),
    ("Caroline", "Relaxing sounds nice, Melanie, I should relax more too"),
    ("Melanie", "We went camping by the lake with the kids and roasted marshmallows"),
]


def test_the_named_speakers_own_turns_come_first(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m.db", TURNS)
    try:
        store = memory.store
        question = "How does Melanie relax?"
        kwargs = rank_scope(memory, "p")
        off = RankConfig(w_speaker=0, substance_words=0)
        plain = rank_only(store, question, config=off, **kwargs)
        ranked = rank_only(store, question, **kwargs)
        assert {"substance", "speaker"} <= set(ranked.stages)
        assert "speaker" not in plain.stages
        before = [e.text for e in plain.ranked_events()]
        after = [e.text for e in ranked.ranked_events()]
        # without the priors, Caroline's turns holding the question's words lead; with them,
        # Melanie's own turns with something in them come first, her chit-chat after them
        assert before[0].startswith("Caroline: "), before
        told = {TURNS[3][1], TURNS[7][1]}
        assert {t.split(": ", 1)[1] for t in after[:2]} == told, after
        chat = [after.index(f"Melanie: {TURNS[n][1]}") for n in (1, 5)]
        assert min(chat) > 1, after
        assert min(before.index(f"Melanie: {t}") for t in told) > 0, before
        cfg = RankConfig()
        for e in ranked.ranked_events():
            prior = substance(e, cfg.substance_words, cfg.substance_power)
            bonus = cfg.w_speaker if e.text.startswith("Melanie: ") else 0.0
            expected = plain.scores[e.event_id] * prior + bonus
            assert ranked.scores[e.event_id] == pytest.approx(expected)
        # naming both speakers prefers neither
        both = rank_only(store, "How do Caroline and Melanie relax?", **kwargs)
        assert "speaker" not in both.stages
    finally:
        memory.close()


def test_asks_question() -> None:
    assert asks_question(_event("Caroline: What do you do to relax these days? "))
    assert asks_question(_event("which port does the dev server use?"))
    assert not asks_question(_event("Melanie: Pottery, mostly. Is it odd? I love it."))
    assert not asks_question(_event("Melanie: Thanks!"))


# the question's words are in Caroline's question; Melanie's answer shares none of them
REPLY_TURNS = [
    ("Caroline", "The adoption agency called back about the paperwork"),
    ("Melanie", "That is great news, fingers crossed for you"),
    ("Caroline", "So what do your kids enjoy doing on weekends these days?"),
    ("Melanie", "Mostly pottery in the garage and long bike rides along the river"),
    ("Caroline", "My kids enjoy weekends at the library reading comics"),
    ("Melanie", "Comics are fun, I read them as a child too"),
    ("Caroline", "The weather was rainy, we stayed home and baked bread"),
    ("Melanie", "Baking bread is relaxing, I should try it again"),
]


def test_the_reply_to_a_question_hit_joins_at_part_of_its_score(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m.db", REPLY_TURNS)
    try:
        store = memory.store
        question = "What do the kids enjoy on weekends?"
        kwargs = rank_scope(memory, "p")
        # no plain neighbours and no priors: the reply's score is the stage's alone
        cfg = RankConfig(neighbours=0, w_speaker=0, substance_words=0)
        off = rank_only(store, question, config=replace(cfg, w_reply=0), **kwargs)
        on = rank_only(store, question, config=cfg, **kwargs)
        ids = {e.text.split(": ", 1)[1]: e.event_id for e in store.scan_events()}
        asked, answer = ids[REPLY_TURNS[2][1]], ids[REPLY_TURNS[3][1]]
        top = [e.event_id for e in off.ranked_events()]
        assert asked in top[:2]  # the question's words; the answer matches by vectors alone
        assert on.scores[answer] == pytest.approx(
            max(off.scores.get(answer, 0.0), cfg.w_reply * off.scores[asked])
        )
        after = [e.event_id for e in on.ranked_events()].index(answer)
        assert after <= 2 < top.index(answer), [e.text for e in on.ranked_events()]
        # a hit that asks nothing passes nothing on: the turn after it keeps its own score
        told, follow = ids[REPLY_TURNS[4][1]], ids[REPLY_TURNS[5][1]]
        assert told in top[:2]
        assert on.scores[follow] == pytest.approx(off.scores[follow])
        # through recall (every default): a budget of about two turns holds the answer
        _held_only_with(store, question, REPLY_TURNS[3][1], 45, kwargs, w_reply=0)
    finally:
        memory.close()


def _held_only_with(
    store: Any, question: str, text: str, budget: int, kwargs: dict[str, Any], **off: float
) -> None:
    """Recall within ``budget`` (every default) holds ``text``; with the weights ``off`` zeroed it
    does not."""
    counter = default_counter()
    result = recall(store, counter, question, budget=budget, time_limit_ms=None, **kwargs)
    assert text in result.context(), result.context()
    result = recall(store, counter, question, budget=budget, time_limit_ms=None,
                    config=replace(RankConfig(), **off), **kwargs)  # fmt: skip
    assert text not in result.context(), result.context()


def _coding_memory(path: Path, steps: list[tuple[str, str]]) -> Memory:
    """One coding session: ``(event_type, text)`` steps a minute apart."""
    records: list[dict[str, Any]] = [
        {
            "session_id": "work",
            "timestamp": _ms("2024-02-01T10:00") + n * 60_000,
            "event_type": kind,
            "text": text,
        }
        for n, (kind, text) in enumerate(steps)
    ]
    return _filed(path, records)


# the question's words are in the agent's proposal and the tool output; the user's decision
# about it and the agent's conclusion after the tool steps share none of them
CODING_STEPS = [
    ("user_message", "The nightly export job keeps timing out, can you look into it?"),
    ("tool_call", '{"command": "grep -rn export_batch_size src/export/"}'),
    (
        "tool_result",
        "src/export/job.py:12: export_batch_size = 50000  # nightly export batch size\n"
        "src/export/job.py:40: for batch in chunks(rows, export_batch_size):",
    ),
    ("tool_call", '{"command": "pytest tests/export -q"}'),
    ("tool_result", "4 passed in 2.1s"),
    (
        "assistant_message",
        "I propose lowering the nightly export batch size from 50000 to 5000 so each "
        "transaction finishes before the statement timeout.",
    ),
    ("user_message", "No, stream the rows with a server-side cursor instead."),
    ("assistant_message", "Done: rows now stream through a named cursor; all tests pass."),
]


EXPORT_QUESTION = "What did we decide about the nightly export batch size?"


def _by_text(memory: Memory) -> tuple[dict[str, Any], dict[str, str]]:
    """``rank_only``'s scope for the coding session, and its event ids by text."""
    return rank_scope(memory, "p"), {e.text: e.event_id for e in memory.store.scan_events()}


def _replied(memory: Memory, proposal: str, decision: str) -> tuple[Ranking, Ranking]:
    """The ranking without and with replies (no other stage moving scores): the user's answer
    to the agent's proposal joins at ``w_reply`` of the proposal's score."""
    kwargs, _ = _by_text(memory)
    alone = RankConfig(neighbours=0, substance_words=0, w_speaker=0)
    no_reply = rank_only(memory.store, EXPORT_QUESTION, config=replace(alone, w_reply=0), **kwargs)
    reply = rank_only(memory.store, EXPORT_QUESTION, config=alone, **kwargs)
    assert reply.scores[decision] == pytest.approx(
        max(no_reply.scores.get(decision, 0.0), alone.w_reply * no_reply.scores[proposal])
    )
    assert reply.scores[decision] > no_reply.scores.get(decision, 0.0)
    return no_reply, reply


def test_tools_are_working_material_and_turns_step_over_them(tmp_path: Path) -> None:
    memory = _coding_memory(tmp_path / "m.db", CODING_STEPS)
    try:
        store, question = memory.store, EXPORT_QUESTION
        kwargs, ids = _by_text(memory)
        output, proposal = ids[CODING_STEPS[2][1]], ids[CODING_STEPS[5][1]]
        decision = ids[CODING_STEPS[6][1]]
        flat = rank_only(store, question, config=RankConfig(w_tool=1.0), **kwargs)
        ranked = rank_only(store, question, **kwargs)
        # the tool prior: a tool output keeps w_tool of its score, a turn all of its own
        assert ranked.scores[output] == pytest.approx(RankConfig().w_tool * flat.scores[output])
        assert ranked.scores[proposal] == pytest.approx(flat.scores[proposal])
        order = [e.event_id for e in ranked.ranked_events()]
        assert order.index(proposal) < order.index(output), [e.text for e in ranked.ranked_events()]
        # the user's answer to the agent's proposal joins at w_reply of the proposal's score
        _replied(memory, proposal, decision)
        assert order.index(decision) <= 2, [e.text for e in ranked.ranked_events()]
        # the turn before the proposal is the user's request, not the tool output between them
        first, _ = store.session_neighbors(
            store.get_event(proposal),
            before=1,
            after=0,
            event_types=("user_message", "assistant_message"),
        )
        assert [e.event_id for e in first] == [ids[CODING_STEPS[0][1]]]
        # through recall: a budget of about two turns holds the proposal and the decision
        result = recall(store, default_counter(), question, budget=70, time_limit_ms=None, **kwargs)
        assert CODING_STEPS[6][1] in result.context(), result.context()
    finally:
        memory.close()


def test_the_users_next_message_answers_the_agent_past_its_own_turns(tmp_path: Path) -> None:
    """The user's reaction to an agent's proposal often comes after the agent's own follow-up
    ("Builds clean.", a tool step): it is the user's next message that decides, not the next
    turn (getspecstory: "yeah, let's do no space and 12 dash chars" four steps after the
    proposal it answers)."""
    steps = [*CODING_STEPS[:6]]
    steps += [
        ("tool_call", '{"command": "go build ./..."}'),
        ("assistant_message", "Builds clean."),
        CODING_STEPS[6],
        CODING_STEPS[7],
    ]
    memory = _coding_memory(tmp_path / "m.db", steps)
    try:
        _, ids = _by_text(memory)
        proposal, decision = ids[CODING_STEPS[5][1]], ids[CODING_STEPS[6][1]]
        no_reply, reply = _replied(memory, proposal, decision)
        # the agent's own follow-up is not the user's answer: it gains nothing from the reply
        follow = ids["Builds clean."]
        assert reply.scores.get(follow) == no_reply.scores.get(follow)
    finally:
        memory.close()


# getspecstory (ss-128, shortened): the agent's account of carrying out an instruction repeats
# the question's words; the instruction itself, two agent turns and tool steps earlier, shares none
PROMPTED_STEPS = [
    ("user_message", "Resume works for Claude and Codex now. What about the others?"),
    ("assistant_message", "Gemini stores JSON chats; Cursor keeps a SQLite blob store."),
    ("user_message", "Let's skip Cursor for now and focus on Gemini."),
    ("tool_call", '{"command": "ls ~/.gemini/tmp/chats"}'),
    ("tool_result", "chat-0617.json  logs.json"),
    ("assistant_message", "Reading one chat file to check its message shapes."),
    ("tool_call", '{"command": "head -c 400 ~/.gemini/tmp/chats/chat-0617.json"}'),
    ("tool_result", '{"messages": [{"type": "user", "content": "hi"}]}'),
    (
        "assistant_message",
        "Session reconstruction for the remaining providers: Gemini goes first, its chats "
        "are plain JSON that invert cleanly into user and model turns.",
    ),
    ("user_message", "Also bump the changelog."),
]
PROMPTED_QUESTION = (
    "When we moved on to session reconstruction for the remaining providers, which agent "
    "did I say to put off?"
)


def test_an_agents_turn_neighbours_the_users_message_it_answers(tmp_path: Path) -> None:
    """The turn before an agent's hit is, in a conversation, the user's message it answers —
    past the agent's own turns and tool steps, which are not what the person said."""
    memory = _coding_memory(tmp_path / "m.db", PROMPTED_STEPS)
    try:
        store = memory.store
        kwargs, ids = _by_text(memory)
        account = ids[PROMPTED_STEPS[8][1]]
        instruction = ids[PROMPTED_STEPS[2][1]]
        step = ids[PROMPTED_STEPS[5][1]]  # the agent's own turn right before the account
        # neighbours alone: no replies, no priors moving scores
        cfg = RankConfig(w_reply=0, substance_words=0, w_speaker=0, w_session=0, w_doc=0)
        off = rank_only(store, PROMPTED_QUESTION, config=replace(cfg, w_neighbour=0), **kwargs)
        on = rank_only(store, PROMPTED_QUESTION, config=cfg, **kwargs)
        order = [e.event_id for e in off.ranked_events()]
        assert order[0] == account, [e.text for e in off.ranked_events()]
        # both the adjacent turn and the user's instruction join at w_neighbour of the hit
        gain = cfg.w_neighbour * off.scores[account]
        assert on.scores[step] == pytest.approx(max(off.scores.get(step, 0.0), gain))
        assert on.scores[instruction] == pytest.approx(gain)
        # more than the turns next to the instruction could give it: the gain is the account's
        first = ids[PROMPTED_STEPS[1][1]]
        assert gain > max(off.scores.get(instruction, 0.0), cfg.w_neighbour * off.scores[first])
        # through recall (every default): a budget of about three turns holds the instruction
        _held_only_with(store, PROMPTED_QUESTION, PROMPTED_STEPS[2][1], 90, kwargs,
                        w_neighbour=0)  # fmt: skip
    finally:
        memory.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # lines from the held-out and development histories: a next step announced
        ("Perfect! Now let me test the error case when there's no PR:", True),
        ("Now let me run tests and lint:", True),
        ("Now let me also guard the cloud sync at the bottom from `onlyStats`:", True),
        ("Now I understand the issue. Let me fix it:", True),
        ("Great!", True),
        # a fact, a finding, a result, a question: not narration
        ("The cache was unbounded, so memory grew until the OOM killer stopped it.", False),
        ("Great! The fix works: the parser now accepts tabs.", False),
        ("All 12 tests pass.", False),
        ("Want me to make that change?", False),
        (
            "Now let me check the config. " + "The timeout is 30 s in prod and 5 s in CI. " * 12,
            False,
        ),
    ],
)
def test_narrates(text: str, expected: bool) -> None:
    event = replace(_event(text), event_type="assistant_message", role="assistant")
    assert narrates(event) is expected
    # only an agent narrates its work: the same words from the user are a request
    assert not narrates(_event(text))


NARRATED_STEPS = [
    ("user_message", "The nightly export job keeps timing out, can you look into it?"),
    ("assistant_message", "Let me check the nightly export batch size and its timeout:"),
    ("tool_call", '{"command": "grep -rn export_batch_size src/export/"}'),
    ("tool_result", "src/export/job.py:12: export_batch_size = 50000"),
    (
        "assistant_message",
        "The nightly export runs one 50000-row batch per transaction, which outlasts the "
        "statement timeout of 30 s.",
    ),
]


def test_an_agents_narration_weighs_as_the_tool_work_it_introduces(tmp_path: Path) -> None:
    memory = _coding_memory(tmp_path / "m.db", NARRATED_STEPS)
    try:
        kwargs, ids = _by_text(memory)
        question = "Why did the nightly export batch hit the timeout?"
        narration, finding = ids[NARRATED_STEPS[1][1]], ids[NARRATED_STEPS[4][1]]
        flat = rank_only(memory.store, question, config=RankConfig(w_tool=1.0), **kwargs)
        ranked = rank_only(memory.store, question, **kwargs)
        assert ranked.scores[narration] == pytest.approx(
            RankConfig().w_tool * flat.scores[narration]
        )
        assert ranked.scores[finding] == pytest.approx(flat.scores[finding])
        order = [e.event_id for e in ranked.ranked_events()]
        assert order.index(finding) < order.index(narration)
    finally:
        memory.close()
