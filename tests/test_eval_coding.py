"""``memtoc eval coding``: the scoring rule (a quote split across two returned items does not
count; ``need: all``; whitespace and case), the budget and citation checks, the baselines'
packing, gold-in-store detection, and a whole run through the CLI on a corpus made of the
SpecStory fixtures (real excerpts, Apache-2.0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.eval.coding import GoldIndex, load_questions, select
from memtoc.eval.coding_score import (
    ContextItem,
    budget_violation,
    context_tokens,
    is_answered,
    pack_whole,
    quote_positions,
    unresolved,
)
from memtoc.model import Event
from memtoc.surfaces.cli import app
from memtoc.text.tokens import default_counter
from search_support import require_model

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "specstory" / "getspecstory"
COUNTER = default_counter()


def item(text: str, *ids: str) -> ContextItem:
    return ContextItem(text, ids or ("e",), COUNTER.count(text))


def test_a_quote_split_across_two_items_does_not_count() -> None:
    quote = "we enforce one remediation per evaluation in both modes"
    split = [item("so: we enforce one remediation"), item("per evaluation in both modes.")]
    assert quote_positions([quote], split) == [None]
    assert not is_answered("any", quote_positions([quote], split))
    whole = [
        item("unrelated"),
        item("So: We enforce one remediation per evaluation in both modes."),
    ]
    assert quote_positions([quote], whole) == [2]


def test_whitespace_and_case_are_normalised_nothing_else() -> None:
    quote = "Remove the  completed-remediation\n409 guard"
    items = [item("**remove the completed-remediation 409\tGUARD** (lines 219-228)")]
    assert quote_positions([quote], items) == [1]
    # markup inside the quote's span is not normalised away
    assert quote_positions(["remove the completed remediation"], items) == [None]


def test_need_all_needs_every_quote() -> None:
    quotes = ["first decision was taken", "later it was reversed"]
    one = [item("the first decision was taken on Monday")]
    both = [*one, item("but later it was reversed by the user")]
    assert is_answered("any", quote_positions(quotes, one))
    assert not is_answered("all", quote_positions(quotes, one))
    assert quote_positions(quotes, both) == [1, 2]
    assert is_answered("all", quote_positions(quotes, both))


def test_budget_check_and_whole_event_packing() -> None:
    texts = ["word " * 300, "short answer here", "x " * 50, "another short one", "y " * 2000]
    tokens = [COUNTER.count(t) for t in texts]
    for budget in (5, 50, 120, 400, 5_000):
        packed = pack_whole(range(len(texts)), texts.__getitem__, tokens.__getitem__,
                            lambda i: f"e{i}", budget, COUNTER)  # fmt: skip
        assert context_tokens(packed, COUNTER) <= budget
        assert budget_violation(packed, budget, COUNTER) is None
        assert all(p.text in texts for p in packed)  # whole events, never cut
    # a too-long event is skipped and the next ones still packed, in rank order
    packed = pack_whole(range(len(texts)), texts.__getitem__, tokens.__getitem__,
                        lambda i: f"e{i}", 120, COUNTER)  # fmt: skip
    assert [p.event_ids[0] for p in packed] == ["e1", "e2", "e3"]
    over = [item("a " * 200)]
    assert budget_violation(over, 100, COUNTER) is not None
    assert budget_violation([item("fine")], 100, COUNTER, reported=101) is not None


def test_unresolved_citations() -> None:
    items = [item("a", "e1", "e2"), item("b", "e2", "e3")]
    assert unresolved(items, lambda ids: {"e1", "e3"}) == ["e2"]
    assert unresolved(items, lambda ids: set(ids)) == []


def _event(eid: str, text: str) -> Event:
    return Event(eid, "s", "p", "a", 0, "user_message", "user", text, {}, None, None)


def test_gold_index_finds_whole_quotes_only() -> None:
    index = GoldIndex(
        [
            _event("a", "We decided to use   SQLite\nfor the cache."),
            _event("b", "The cache"),
            _event("c", "TTL is 300 seconds; we decided to use sqlite for the cache"),
        ]
    )
    assert index.events_with("we decided to use SQLite for the cache") == ("a", "c")
    assert index.events_with("the cache TTL is 300") == ()  # spans b and c: not in the store


def test_questions_load_and_select(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    rows = [
        {"id": "q1", "question": "Why?", "category": "decision", "at": None, "gold": ["x" * 30],
         "need": "any"},
        {"id": "q2", "question": "When?", "category": "time", "at": "2026-01-16T23:00:00Z",
         "gold": ["y" * 30], "need": "all"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    questions = load_questions(path)
    assert [q.at_ms for q in questions] == [None, 1_768_604_400_000]
    assert [q.qid for q in select(questions, "time")] == ["q2"]
    assert [q.qid for q in select(questions, "q1,time")] == ["q1", "q2"]
    with pytest.raises(Exception, match="unknown question ids or categories: nope"):
        select(questions, "nope")
    path.write_text('{"id": "q1", "question": "Why?", "gold": []}\n')
    with pytest.raises(Exception, match="line 1: bad question"):
        load_questions(path)


QUESTIONS = [
    {"id": "t-001", "question": "Which illegal operation error did the Read of the directory "
     "return?", "category": "fix", "at": None,
     "gold": ["EISDIR: illegal operation on a directory, read"], "need": "any"},
    {"id": "t-002", "question": "Which emoji and layout did I choose for the cloud link?",
     "category": "decision", "at": None,
     "gold": ["💡 (lightbulb), Two lines (Recommended)"], "need": "any"},
    {"id": "t-003", "question": "What did we build for the cloud sync link and the provenance "
     "summary?", "category": "multi", "at": None,
     "gold": ["Search and chat with your AI conversation history at",
              "that focuses on summary prose and tables comparing the 10 systems"], "need": "all"},
    {"id": "t-004", "question": "What did the agent say yesterday evening about tests?",
     "category": "time", "at": "2026-07-17T12:00:00Z",
     "gold": ["this sentence was never said in any of these sessions"], "need": "any"},
]  # fmt: skip


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "fixture-corpus"
    shutil.copytree(FIXTURES / ".specstory" / "history", root / "history")
    (root / "questions.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    return root


def test_a_whole_run_through_the_cli(corpus: Path, tmp_path: Path, hermetic_env: Path) -> None:
    model = str(require_model())
    runner = CliRunner()
    store, out = tmp_path / "stores", tmp_path / "out"
    args = ["eval", "coding", str(corpus), "--store", str(store), "--out", str(out),
            "--embedder", "static", "--embed-model", model, "--budgets", "500,2000"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "gold quotes not in store 1" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["methods"] == ["recall", "bm25", "dense", "rrf", "recency", "browse",
                                  "teleport-browse"]  # fmt: skip
    assert summary["questions"] == 4 and summary["timezone"] == "UTC"
    assert summary["violations"]["budget"] == 0 and summary["violations"]["citation"] == 0
    assert summary["gold_not_in_store"]["list"] == [
        {"id": "t-004", "quote": 0, "text": QUESTIONS[3]["gold"][0]}
    ]
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["t-001", "t-002", "t-003", "t-004"]
    for row in rows:
        assert set(row["methods"]) == set(summary["methods"])
        for cells in row["methods"].values():
            assert len(cells["rank"]) == len(row["gold"])
            for budget, cell in cells["budgets"].items():
                assert cell["tokens"] <= int(budget)
                need = next(q["need"] for q in QUESTIONS if q["id"] == row["id"])
                assert cell["answered"] == is_answered(need, cell["found"])
    eisdir = rows[0]
    assert eisdir["gold_in_store"] == [True] and eisdir["at_given"] is False
    assert eisdir["methods"]["bm25"]["rank"][0] is not None
    assert eisdir["methods"]["bm25"]["budgets"]["2000"]["answered"]
    assert eisdir["methods"]["recall"]["budgets"]["2000"]["answered"]
    gold_event = eisdir["gold_events"][0][0]
    assert (gold_event["type"], gold_event["at"]) == ("tool_result", "2026-01-16T22:29:06.000Z")
    recall_cell = eisdir["methods"]["recall"]["budgets"]["2000"]
    assert gold_event["id"] in recall_cell["returned"]
    assert rows[3]["at"] == "2026-07-17T12:00:00.000Z"
    assert not any(c["budgets"][b]["answered"] for c in rows[3]["methods"].values()
                   for b in ("500", "2000"))  # fmt: skip
    share = summary["answered"]["bm25"]["2000"]["overall"]
    assert share["n"] == 4 and share["answered"] == share["n_answered"] / 4
    assert (out / "answered_vs_budget.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Answered within 2,000 tokens (%)" in (out / "report.md").read_text()
    by_question = (out / "questions.md").read_text()
    assert "| t-004 | time | any | ✗ |" in by_question and "r—" in by_question
    # a second run reuses the store; a filter and a method list narrow it
    again = runner.invoke(app, [*args[:5], "--embedder", "static", "--embed-model", model,
                                "--questions", "fix", "--methods", "recall,bm25",
                                "--no-time-limit", "--json"])  # fmt: skip
    assert again.exit_code == 0, again.output
    second = json.loads(again.output)
    assert second["questions"] == 1 and second["methods"] == ["recall", "bm25"]
    assert any(n.startswith("store reused from") for n in second["notes"])
    assert (summary["recall_time_limit"], second["recall_time_limit"]) == ("product default", "off")
    bad = runner.invoke(app, [*args[:3], "--methods", "recall,magic"])
    assert bad.exit_code == 1 and "unknown methods ['magic']" in bad.output


def test_browsing_agents_pay_for_what_they_read(corpus: Path, tmp_path: Path) -> None:
    from memtoc.eval.coding import load_corpus, reference_ms
    from memtoc.eval.coding_browse import BrowseMethod
    from memtoc.eval.coding_store import open_store
    from memtoc.eval.modes import ModeContext

    ctx = ModeContext.load("static", str(require_model()))
    built = open_store(load_corpus(corpus), ctx, folder=tmp_path / "stores", keep=False)
    try:
        q = load_corpus(corpus).questions[0]
        ref = reference_ms(q, built.last_event_ms)
        browse = BrowseMethod(built.memory, built.project, ctx, teleport=False)
        teleport = BrowseMethod(built.memory, built.project, ctx, teleport=True)
        for budget in (40, 300, 1_500):
            for method in (browse, teleport):
                items = method.answer(q, ref, budget).items
                assert context_tokens(items, COUNTER) <= budget
        first = browse.answer(q, ref, 1_500).items
        # memory_toc(): the years' views (focused on the question) name the days holding the
        # best matches; the first is opened, past its month and week
        assert first[0].text.startswith("Table of contents (fixture-corpus):\ntoc:year:")
        assert "most about the focus first" in first[0].text
        assert "days holding the" in first[0].text
        assert first[1].text.startswith("toc:day:")
        hits = teleport.answer(q, ref, 1_500).items
        assert hits[0].text.startswith("- [") and not hits[0].event_ids  # the search listing
        # with room for everything, browsing reaches every node and the evidence behind bullets
        everything = browse.answer(q, ref, 200_000).items
        opened = {
            line.split(" — ", 1)[0]
            for i in everything
            if not i.event_ids
            for line in i.text.splitlines()
            if line.startswith("toc:") and " — " in line
        }
        listed = [n for n in built.memory.store.list_nodes(built.project) if not n.bookkeeping_only]
        assert {n.node_id for n in listed} <= opened  # (views list no bookkeeping-only node)
        assert is_answered(q.need, quote_positions(q.gold, everything))
        assert browse.ranking(q, ref)  # the events in reading order
        # the agent reads at the question's time: the memory's clock stands at it while the
        # views are read (a focused view resolves "this afternoon" there, as recall is asked
        # at_ms), and is put back after
        memory = built.memory
        seen: list[int] = []
        read = memory.node
        memory.node = lambda *a, **k: (seen.append(memory.clock.now_ms()), read(*a, **k))[1]  # type: ignore[method-assign]
        before = memory.clock.now_ms()
        browse.answer(q, ref - 3_600_000, 1_500)
        assert seen and set(seen) == {ref - 3_600_000} and memory.clock.now_ms() == before
    finally:
        built.memory.close()


def test_a_corpus_of_links_to_shared_transcripts_is_built(tmp_path: Path) -> None:
    # a corpus laid out beside ../shared links its transcripts rather than copying them; a
    # plain `memtoc ingest` of such a folder follows no link leaving it, and says so
    from memtoc.eval.coding import load_corpus
    from memtoc.eval.coding_store import open_store
    from memtoc.eval.modes import ModeContext

    root = tmp_path / "linked-corpus"
    (root / "history").mkdir(parents=True)
    for f in sorted((FIXTURES / ".specstory" / "history").iterdir()):
        (root / "history" / f.name).symlink_to(f)
    (root / "questions.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    ctx = ModeContext.load("static", str(require_model()))
    built = open_store(load_corpus(root), ctx, folder=tmp_path / "stores", keep=False)
    try:
        assert built.memory.store.count_events() > 0
    finally:
        built.memory.close()


def test_a_run_on_postgresql_answers_as_on_sqlite(
    corpus: Path, tmp_path: Path, hermetic_env: Path, pg_url: str
) -> None:
    """``--db postgresql://…`` builds the corpus in a fresh database on that server, answers every
    question as the SQLite store does (the same build, the same recall and baselines through the
    store protocol), and drops the database after the run."""
    import uuid

    import psycopg

    model = str(require_model())
    named = tmp_path / f"corpus-{uuid.uuid4().hex[:8]}"  # its own database on a shared server
    shutil.copytree(corpus, named)
    runner = CliRunner()
    common = ["eval", "coding", str(named), "--embedder", "static", "--embed-model", model,
              "--budgets", "500,2000", "--methods", "recall,bm25", "--no-time-limit"]  # fmt: skip
    answered: dict[str, dict[str, dict[str, bool]]] = {}
    for backend, extra in (("sqlite", []), ("postgres", ["--db", pg_url])):
        out = tmp_path / f"out-{backend}"
        result = runner.invoke(app, [*common, *extra, "--out", str(out)])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
        answered[backend] = {
            r["id"]: {f"{m}@{b}": c["answered"] for m, cells in r["methods"].items()
                      for b, c in cells["budgets"].items()}
            for r in rows
        }  # fmt: skip
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["violations"]["budget"], summary["violations"]["citation"]) == (0, 0)
    assert answered["postgres"] == answered["sqlite"]
    assert answered["postgres"]["t-001"]["recall@2000"]  # not a parity of empty answers
    db_name = "memtoc_eval_coding_" + named.name.replace("-", "_")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        left = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchall()
    assert not left, f"{db_name} was not dropped"
    clash = runner.invoke(app, [*common, "--db", pg_url, "--store", str(tmp_path / "s")])
    assert clash.exit_code == 1 and "--store and --rebuild are for a SQLite store" in clash.output
    bad = runner.invoke(app, [*common, "--db", "sqlite:///nope.db"])
    assert bad.exit_code == 1 and "--db must be a postgresql:// URL" in bad.output
