"""Recall's passages (``recall_passages``): a long event is packed by its parts that answer the
question, not whole and not by its head — the failure class of long plan and report messages in
real coding histories (a plan of 2,000 tokens whose answer is one bullet deep inside)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from memtoc.clock import ManualClock
from memtoc.memory import Memory
from memtoc.retrieval.embedding_index import SemanticIndex
from memtoc.retrieval.recall_pack import Packer, Unit
from memtoc.retrieval.recall_passages import (
    CONTINUATION,
    PASSAGE_TOKENS,
    Passage,
    passages_text,
    rank_passages,
    section_headings,
    split_passages,
    title_span,
)
from memtoc.retrieval.recall_rank import Deadline
from memtoc.retrieval.tiers import TierRenderer
from memtoc.store.sqlite import SqliteStore
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TiktokenCounter
from search_support import BASE, DAY

COUNTER = TiktokenCounter()


def _plan(sections: int) -> str:
    """A plan message as agents get them: a title, then sections of bullets."""
    out = ["Implement the following plan:", "", "# Plan: Rework the report exporter", ""]
    for n in range(sections):
        out += [f"## Step {n}: adjust module{n}", ""]
        out += [
            f"- update the renderer{n} helper and its unit tests in module{n}" for _ in range(4)
        ]
        out.append("")
    return "\n".join(out)


def _others(topic: str) -> list[dict[str, Any]]:
    """Twelve one-line sessions on the next day that share a word or two with the questions."""
    return [
        {"session_id": f"o{n}", "timestamp": BASE + DAY + n * 3_600_000, "role": "user",
         "text": f"the {topic} option {n} renders the report header"}
        for n in range(12)
    ]  # fmt: skip


@given(st.text(alphabet=st.sampled_from("ab c\n\n  xyz.,-"), max_size=3_000))
def test_passages_tile_the_text(text: str) -> None:
    passages = split_passages(text, COUNTER, limit=20)
    # every non-blank character is in exactly one passage, in order
    assert "".join("".join(p.text.split()) for p in passages) == "".join(text.split())
    for a, b in itertools.pairwise(passages):
        assert a.end <= b.start and a.index + 1 == b.index
    assert all(p.count == len(passages) and p.text == text[p.start : p.end] for p in passages)
    if passages:
        whole, covered = passages_text(text, passages)
        assert covered and whole == text


def test_long_lines_are_cut_and_passages_stay_small() -> None:
    text = _plan(30) + "\n" + "word " * 2_000
    passages = split_passages(text, COUNTER)
    assert len(passages) > 10
    assert max(COUNTER.count(p.text) for p in passages) <= PASSAGE_TOKENS + 10


def test_a_long_line_is_cut_at_sentence_ends() -> None:
    """A paragraph on one line (as agents write them) is cut after a sentence, not mid-sentence:
    an answer is a sentence, and cut in two neither half holds it."""
    sentences = [
        f"Sentence {n} says the cache {n} was {'warm ' * (n % 5)}enough." for n in range(60)
    ]
    line = " ".join(sentences)
    passages = split_passages(line, COUNTER, limit=40)
    assert len(passages) > 5
    for p in passages[:-1]:
        assert p.text.endswith("enough."), p.text
    assert all(any(s in p.text for p in passages) for s in sentences)
    # a line without a sentence end is still cut, at words
    words = split_passages("word " * 400, COUNTER, limit=40)
    assert len(words) > 5 and all(p.text.split() == ["word"] * len(p.text.split()) for p in words)


def test_the_passage_holding_the_rare_terms_ranks_first() -> None:
    text = _plan(20).replace(
        "- update the renderer7 helper", "- the CSV exporter must escape semicolons in the helper"
    )
    ranked = rank_passages(
        key_terms("why does the exporter escape semicolons?"), split_passages(text, COUNTER)
    )
    # it holds every question term the plan holds: it stands for the whole event
    assert "escape semicolons" in ranked[0][0].text and ranked[0][1] == 1.0
    # passages without any of the question's terms are not offered, but for the one right
    # after a match (it continues it), at a share of its relevance
    assert all(r > 0 for _, r in ranked)
    passages = split_passages(text, COUNTER)
    question = key_terms("why does the exporter escape semicolons?")
    offered = {p.index: r for p, r in ranked}
    for index, share in offered.items():
        if not key_terms(passages[index].text) & question:
            assert offered.get(index - 1, 0.0) * CONTINUATION == share
    assert len(offered) < len(passages)
    # no question term anywhere: the opening stands for the event
    opening = rank_passages(key_terms("kubernetes"), split_passages(text, COUNTER))
    assert len(opening) == 1 and opening[0][0].index == 0


def test_passages_match_the_question_by_its_stems() -> None:
    # the question says "promotional" and "Remediate", the plan "Promotion" and "Remediation":
    # full-text search found the plan by the stems; the passage saying it must rank first too
    text = _plan(20).replace(
        "- update the renderer7 helper", "- show the Packmind promotion after remediation"
    )
    question = key_terms("What promotional element did we add to the Remediate tab?")
    ranked = rank_passages(question, split_passages(text, COUNTER))
    assert "Packmind promotion" in ranked[0][0].text and ranked[0][1] == 1.0
    # an identifier is matched whole, never by a stem of its parts
    ids = rank_passages(key_terms("run_impacts"), split_passages(text, COUNTER))
    assert len(ids) == 1 and ids[0][0].index == 0


def test_recall_packs_the_passage_found_by_its_stem(tmp_path: Path) -> None:
    answer = "- show the Packmind promotion banner after remediation succeeds"
    plan = _plan(60).replace(
        "- update the renderer41 helper and its unit tests in module41", answer
    )
    records = [{"session_id": "s1", "timestamp": BASE, "role": "user", "text": plan}]
    records += _others("exporter")
    memory = _memory(tmp_path / "m.db", records)
    try:
        result = memory.recall("What promotional element comes after remediating?", budget=300)
        part = next(i for i in result.items if answer in i.text)
        assert part.tier == "L1" and part.tokens < 300
    finally:
        memory.close()


def test_a_passage_stands_for_its_share_of_the_event() -> None:
    """A long report that scatters the question's terms over its parts: no part of it is the
    answer the whole event's score stands for (getspecstory's long agent reports)."""
    question = key_terms("why does the exporter escape semicolons?")
    scattered = _plan(20)
    for n, word in ((3, "exporter"), (9, "escape"), (15, "semicolons")):
        scattered = scattered.replace(f"- update the renderer{n} helper", f"- the {word} helper")
    shares = [r for _, r in rank_passages(question, split_passages(scattered, COUNTER))]
    assert len(shares) >= 3 and max(shares) < 0.6
    together = scattered.replace("- the escape helper", "- the exporter must escape semicolons")
    best = rank_passages(question, split_passages(together, COUNTER))[0]
    assert "escape semicolons" in best[0].text and best[1] > 0.9


def test_gaps_are_marked() -> None:
    text = _plan(20)
    passages = split_passages(text, COUNTER)
    rendered, whole = passages_text(text, [passages[3], passages[1]])
    assert not whole
    assert rendered.startswith("…\n") and rendered.endswith("\n…")
    assert rendered.index(passages[1].text) < rendered.index(passages[3].text)


def test_a_passage_holds_its_section_headings_terms() -> None:
    """The failure class: a plan's "## Issue Found: Silent Commit Checkout Failure" section goes
    on in its own words ("the impact evaluation would silently run against a different
    commit"), so the passage answering "Why did a failed checkout become a hard error?" held no
    question term and another part of the plan was packed instead (context-evaluator). A
    passage in a section continues its heading: it holds the heading's terms at a
    continuation's share."""
    reason = "If the commit is unreachable the evaluation silently runs against another one."
    question = key_terms("Why does a checkout failure stop the clone?")

    def plan(heading: str) -> str:
        lines = ["Implement the following plan:", "", "## Plan: Harden cloning", ""]
        for n in range(12):
            lines += [f"## Step {n}: adjust module{n}", ""]
            lines += [f"- update the renderer{n} helper and its unit tests in module{n}"] * 4
            lines.append("")
            if n == 6:
                lines += [heading, "", "```sh", "# checkout failure", "```"]
                lines += [f"- note {k} on the cloner's fetch depth and remotes" for k in range(24)]
                lines += ["", reason, ""]
        return "\n".join(lines)

    text = plan("## Issue found: checkout failure")
    passages = split_passages(text, COUNTER)
    at = next(p for p in passages if reason in p.text)
    heading_at = next(p for p in passages if "## Issue found" in p.text)
    assert at.index >= heading_at.index + 2  # beyond the passage right after the heading's
    headings = section_headings(passages)
    assert headings[at.index] == "## Issue found: checkout failure"
    # a "#" line in a code fence is a comment; the event's title (here a level-2 heading) is
    # about the whole event: neither is a section's heading
    assert "# checkout failure" not in headings and "## Plan: Harden cloning" not in headings
    shares = {p.index: r for p, r in rank_passages(question, passages)}
    assert shares[heading_at.index] == 1.0 and shares[at.index] == CONTINUATION
    # under a heading naming none of the question's terms, the passage is not offered at all
    other = split_passages(plan("## Notes on the cloner"), COUNTER)
    offered = {p.index for p, _ in rank_passages(question, other)}
    assert not any(reason in other[i].text for i in offered)


def test_a_passage_is_shown_under_its_events_title() -> None:
    """A bullet from deep inside a plan is shown under the plan's title: the title is what a
    question about the task names (context-evaluator: "What promotional element did we add?" —
    "# Plan: Packmind Promotion After Remediation", never packed with the bullet that matched)."""
    text = _plan(20)
    span = title_span(text)
    assert span is not None and text[span[0] : span[1]] == "# Plan: Rework the report exporter"
    passages = split_passages(text, COUNTER)
    question = key_terms("Which renderer helpers did the exporter rework touch?")
    rendered, whole = passages_text(text, [passages[5]], title=question)
    assert not whole
    assert rendered == f"# Plan: Rework the report exporter\n…\n{passages[5].text}\n…"
    # the opening passage holds the title already: not shown twice
    rendered, _ = passages_text(text, [passages[0], passages[5]], title=question)
    assert rendered.count("# Plan: Rework the report exporter") == 1
    # a title naming none of the question's terms would only spend the budget
    rendered, _ = passages_text(text, [passages[5]], title=key_terms("Which renderer helpers?"))
    assert rendered == f"…\n{passages[5].text}\n…"
    # without a heading among the first lines, or with a paragraph set as one, there is no title
    assert title_span("Done.\nAll tests pass.\nNext step.\n# Notes\n" + text) is None
    assert title_span("# " + "word " * 60 + "\n" + text) is None
    assert title_span("") is None


def _memory(path: Path, records: list[dict[str, Any]]) -> Memory:
    clock = ManualClock(BASE + 30 * DAY)
    store = SqliteStore(path, clock=clock)
    memory = Memory(
        store, clock=clock, tz=ZoneInfo("UTC"), semantic=SemanticIndex(store, kind="none")
    )
    assert memory.ingest_records(records, project="p").ingested == len(records)
    memory.process()
    memory.rollup(force=True)
    return memory


def test_recall_packs_the_answering_part_of_a_long_plan(tmp_path: Path) -> None:
    answer = "- the CSV exporter must escape semicolons because Excel splits cells on them"
    plan = _plan(60).replace(
        "- update the renderer41 helper and its unit tests in module41", answer
    )
    assert COUNTER.count(plan) > 2_000
    records = [
        {"session_id": "s1", "timestamp": BASE, "role": "user", "text": plan},
        {
            "session_id": "s1",
            "timestamp": BASE + 60_000,
            "role": "assistant",
            "text": "Done: the exporter now escapes semicolons.",
        },
    ]
    records += _others("exporter")
    memory = _memory(tmp_path / "m.db", records)
    try:
        for budget in (300, 1_000):
            result = memory.recall("Why must the exporter escape semicolons?", budget=budget)
            assert result.tokens <= budget
            texts = [i.text for i in result.items]
            assert any(answer in t for t in texts), texts
            part = next(i for i in result.items if answer in i.text)
            # a part of the plan, cited, not the plan's 2,000 tokens nor its head, under the
            # plan's title
            assert part.tier == "L1" and part.cites and not part.events
            assert part.tokens < 500 and "…" in part.text
            assert part.text.count("# Plan: Rework the report exporter") == 1, part.text
        # a budget that holds it all gets the plan whole once its parts cover it
        assert any(
            i.tier == "L2" and i.text.endswith(plan[-200:])
            for i in memory.recall(
                "exporter semicolons renderer helper unit tests module plan", budget=20_000
            ).items
        )
    finally:
        memory.close()


def test_a_short_turn_beats_a_report_scattering_the_terms(tmp_path: Path) -> None:
    """The failure class: a long agent report mentions the question's words all over and ranks
    above the user's short instruction that answers; the report's best passage, holding one of
    the words, used to take the report's whole score and the budget (getspecstory)."""
    report = ["Here is the status of the release work:", ""]
    for n in range(40):
        word = ("exporter", "escape", "semicolons")[n * 3 // 40]  # a third of the parts each
        report += [f"## Part {n}", "", f"- the {word} notes for module{n}: renderer{n} updated", ""]
    answer = "the exporter must escape those: Excel splits cells on them"
    records = [
        {"session_id": "s1", "timestamp": BASE, "role": "assistant", "text": "\n".join(report)},
        {"session_id": "s2", "timestamp": BASE + DAY, "role": "user", "text": answer},
    ]
    memory = _memory(tmp_path / "m.db", records)
    try:
        by_text = {e.text: e for e in memory.store.scan_events()}
        long, short = by_text["\n".join(report)], by_text[answer]
        units = [
            Unit("event", "p", long.event_id, 2.0, (long,)),  # the report ranks first...
            Unit("event", "p", short.event_id, 1.5, (short,)),
        ]
        packer = Packer(
            TierRenderer(memory.store, COUNTER), COUNTER, ZoneInfo("UTC"), 130, Deadline(None),
            terms=key_terms("Why must the exporter escape semicolons?"),
        )  # fmt: skip
        packer.pack(units)
        items, tokens = packer.finish()
        # ...but no part of it holds more than two of the three words it matched: the turn first
        assert tokens <= 130 and any(answer in i.text for i in items), [i.text for i in items]
    finally:
        memory.close()


def test_a_weaker_events_deeper_passages_give_way(tmp_path: Path) -> None:
    """The failure class: the second and third passages of a long report ranked below the best
    event took the budget ahead of another event's short answer (getspecstory: four passages of
    one PR review). A deeper passage is discounted by its event's score relative to the best
    event's; the best event itself still goes deep."""
    lines = []
    for n in range(12):
        lines += [f"## Part {n}", "", f"- the exporter must escape semicolons in module{n}", ""]
        lines += [f"- renderer{n}.{k} helper and its unit tests updated" for k in range(3)] + [""]
    report = "\n".join(lines)
    answer = "the exporter escapes semicolons because Excel splits cells"
    top_turn = "the exporter now escapes semicolons, done"
    records = [
        {"session_id": "s1", "timestamp": BASE, "role": "assistant", "text": report},
        {"session_id": "s2", "timestamp": BASE + DAY, "role": "user", "text": answer},
        {"session_id": "s3", "timestamp": BASE + 2 * DAY, "role": "user", "text": top_turn},
    ]
    memory = _memory(tmp_path / "m.db", records)
    try:
        by_text = {e.text: e for e in memory.store.scan_events()}
        long, short, top = by_text[report], by_text[answer], by_text[top_turn]
        terms = key_terms("Why must the exporter escape semicolons?")
        passages = split_passages(report, COUNTER)
        assert len(rank_passages(terms, passages)) >= 3  # every part holds every term
        # room for the best event, the long one's best passage and then one of: its second
        # passage, or the short answer
        first, second = (p for p, _ in rank_passages(terms, passages)[:2])
        budget = sum(COUNTER.count(t) for t in (top_turn, first.text, second.text)) + 8

        def packed(long_score: float) -> list[str]:
            packer = Packer(
                TierRenderer(memory.store, COUNTER), COUNTER, ZoneInfo("UTC"), budget,
                Deadline(None), terms=terms, headers=False,
            )  # fmt: skip
            packer.pack(
                [
                    Unit("event", "p", top.event_id, 2.0, (top,)),
                    Unit("event", "p", long.event_id, long_score, (long,)),
                    Unit("event", "p", short.event_id, 0.9, (short,)),
                ]
            )
            items, tokens = packer.finish()
            assert tokens <= budget
            return [i.text for i in items]

        def depth(texts: list[str]) -> int:
            return sum(p.text in t for p in passages for t in texts)

        # at half the best event's score, its second passage (1.0 x 0.5) gives way to the answer
        texts = packed(1.0)
        assert answer in texts and not any(second.text in t for t in texts), texts
        # as strong as the best event, it goes deep: two passages, the short answer left out
        texts = packed(2.0)
        assert answer not in texts and depth(texts) == 2, texts
    finally:
        memory.close()


def test_the_reason_after_a_matching_statement_is_packed(tmp_path: Path) -> None:
    """The failure class: a plan states what it changes in the question's words, and the reason
    follows in its own ("This is redundant: …", context-evaluator); the reason's passage held no
    question term and was never packed, though the plan ranked first."""
    reason = "This is redundant: the same rows appear in both places."
    question = key_terms("Why did we merge the action summary and file changes lists?")

    def plan(context_lines: int) -> str:
        lines = ["Implement the following plan:", "", "# Plan: Merge the summary lists", ""]
        lines += ["## Context", ""]
        lines += [
            f"- the action summary list and the file changes list of report{n} differ"
            for n in range(context_lines)
        ]
        lines += ["", reason, "", "## Steps", ""]
        lines += [
            f"- update the renderer{n} helper and its unit tests in module{n}" for n in range(80)
        ]
        return "\n".join(lines)

    def reason_passage(text: str) -> Passage | None:
        return next((p for p in split_passages(text, COUNTER) if p.text.startswith(reason)), None)

    # as many context lines as put the reason at the start of a passage
    text = plan(next(n for n in range(1, 40) if reason_passage(plan(n))))
    at = reason_passage(text)
    assert at is not None and not key_terms(at.text) & question  # it holds no question term
    records = [{"session_id": "s1", "timestamp": BASE, "role": "user", "text": text}]
    records += _others("summary")
    memory = _memory(tmp_path / "m.db", records)
    try:
        result = memory.recall(
            "Why did we merge the action summary and file changes lists?", budget=400
        )
        assert result.tokens <= 400
        assert any(reason in i.text and i.tier == "L1" for i in result.items), result.items
    finally:
        memory.close()
