"""What a summary spends its words on: a plan read by its sections (why, steps, checklist), an
agent's diagnoses and reports over its lead-ins, keywords that add to the text beside them, and
periods that carry their children's distinctive content rather than their first lines."""

from __future__ import annotations

from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer, complementary_keywords
from memtoc.pipeline.summarize.extractive_facts import extract_facts, score_facts
from memtoc.pipeline.summarize.extractive_markdown import section_label, sentences
from memtoc.text.keyphrases import key_terms
from memtoc.text.tokens import TiktokenCounter

COUNTER = TiktokenCounter()

PLAN = """Implement the following plan:

# Upload JSON Reports in Web UI

## Context

Users can generate JSON reports via the CLI, but there is no way to view them in the Web UI.
This feature lets users upload CLI-generated reports for viewing, only in non-cloud instances.

## Design Decisions (confirmed with user)

- Store imported reports in the evaluations table with an is_imported flag

## Implementation

### Backend: Add `POST /api/evaluations/import` endpoint

File: `src/api/routes/evaluation.ts`

## Files to modify

| File | Change |
|------|--------|
| `src/api/index.ts` | Register the import route |

## Verification

Run `bun run test` and check the badge.

If you need specific details from before exiting plan mode (like exact code snippets), read the full transcript at: /Users/x/.claude/projects/p/abc.jsonl
"""


def ev(i: int, etype: str, role: str, text: str, **meta: object) -> Event:
    return Event(f"01HX{i:022d}", "s1", "p", "claude-code", 1_770_000_000_000 + i * 1000, etype,
                 role, text, meta)  # fmt: skip


def test_markdown_sections_labels_and_tables() -> None:
    assert section_label("Context") == "why"
    assert section_label("Design Decisions (confirmed with user)") == "decision"
    assert section_label("Files to modify") == "detail"
    assert section_label("Implementation Steps") == ""
    assert section_label("Backend: Add `POST /api/evaluations/import` endpoint") is None
    got = sentences(PLAN)
    texts = [s.text for s in got]
    assert "Context" not in texts and "Verification" not in texts  # labels set sections
    assert "`src/api/index.ts`: Register the import route" in texts  # a table row in words
    assert not any("File | Change" in t or "---" in t for t in texts)  # header, rule dropped
    assert not any("full transcript" in t for t in texts)  # the agent's notice is nobody's
    why = [s.text for s in got if s.section == "why"]
    assert why and why[0].startswith("Users can generate JSON reports")
    assert [s.section for s in got if s.text.startswith("Run `bun")] == ["detail"]


def test_a_plan_says_why_and_its_steps_not_its_labels() -> None:
    events = [ev(0, "user_message", "user", PLAN)]
    facts = extract_facts(events)
    score_facts(facts, events)
    kinds = {f.text: f.kind for f in facts}
    assert kinds["Upload JSON Reports in Web UI"] == "request"
    assert any(k == "motive" and t.startswith("This feature lets users upload") for t, k in
               kinds.items())  # fmt: skip
    assert kinds["Run `bun run test` and check the badge."] == "detail"
    assert next(f for f in facts if "is_imported flag" in f.text).decision
    label_only = next(f for f in facts if f.text == "File: `src/api/routes/evaluation.ts`")
    motive = next(f for f in facts if f.kind == "motive")
    assert label_only.score < motive.score - 1.0  # a label and a path say nothing
    s = ExtractiveSummarizer(COUNTER).summarize_events(events)
    shown = " ".join((s.abstract, *s.bullets))
    assert "This feature lets users upload" in shown or "Users can generate JSON" in shown
    assert "File: `src/api/routes/evaluation.ts`" not in s.bullets
    assert "Context" not in s.bullets and "full transcript" not in shown


def test_agent_diagnoses_and_reports_over_lead_ins() -> None:
    said = (
        "Now add the test cases to `docs-finder.test.ts`:\n\n"
        "The glob in the JSDoc comment prematurely closes the block comment. Let me fix it.\n\n"
        "Added `isSkillsSubFile()` helper that keeps only SKILL.md at a skill folder's root.\n\n"
        "The 1 failing test is pre-existing (evaluation routes test unrelated to my changes)."
    )
    events = [ev(0, "user_message", "user", "Filter skill sub-files from linked docs"),
              ev(1, "assistant_message", "assistant", said)]  # fmt: skip
    facts = extract_facts(events)
    kinds = {f.text: f.kind for f in facts}
    assert kinds["Now add the test cases to `docs-finder.test.ts`:"] == "intent"
    assert kinds["The glob in the JSDoc comment prematurely closes the block comment."] == (
        "conclusion"
    )  # what it is about to fix: the diagnosis
    assert (
        kinds["Added `isSkillsSubFile()` helper that keeps only SKILL.md at a skill folder's root."]
        == "done"
    )
    pre = next(f for f in facts if f.text.startswith("The 1 failing test is pre-existing"))
    assert pre.finding and pre.kind == "conclusion"


def test_keywords_add_to_the_text_beside_them() -> None:
    phrases = ["art", "pottery", "painting", "camping", "kids", "forest", "quietly", "Oscar",
               "a/src/app.ts", "www.cnn.com", "redacted_count", "grep -n x main.go",
               "src/app.ts"]  # fmt: skip
    recurring = {"camp": 2, "kid": 3, "forest": 1, "quiet": 1, "oscar": 2}
    from collections import Counter

    title = "Caroline & Melanie: art"
    said = key_terms(f"{title}\nMelanie: We went camping with the kids.")
    got = complementary_keywords(phrases, said, 9, Counter(recurring), key_terms(title))
    # the central ones the title does not name; then what the text does not say: a recurring
    # name, a path (never its diff side, an address, a placeholder or a command line), a noun
    # said once (an adverb is no search term); then what the text says, up to 2/3 of the list
    assert got == ["pottery", "painting", "Oscar", "src/app.ts", "forest", "art"]
    # without a title naming them, the central ones come first whatever the text says
    got = complementary_keywords(phrases, said, 4, Counter(recurring))
    assert got == ["art", "pottery", "painting", "Oscar"]
    events = [ev(i, "user_message", "user", f"{who}: {text}") for i, (who, text) in enumerate([
        ("Caroline", "I went to a pottery class and made a bowl for my mom."),
        ("Melanie", "A pottery class sounds lovely, my kids love painting too."),
        ("Caroline", "Bye! Talk soon, I'm going to the pottery studio tomorrow."),
    ])]  # fmt: skip
    s = ExtractiveSummarizer(COUNTER).summarize_events(events)
    assert not {"Caroline", "Melanie", "Bye", "bye"} & set(s.keywords)  # the title names them


def _seg(title: str, bullets: list[str], abstract: str, thread: str = "s1") -> Summary:
    return Summary(title, tuple(bullets), ("k",), abstract, title, thread=thread)


def test_a_day_of_one_session_carries_more_than_its_first_lines() -> None:
    child = _seg(
        "Caroline & Melanie: art, camping and pottery",
        ["Caroline: I love that you chose pottery for your art.",
         "Melanie: We went camping with the kids a few weeks ago."],
        "Caroline & Melanie: art, camping and pottery. Caroline: I love that you chose pottery "
        "for your art. Melanie: Seven years now, and I've finally found my muses: painting and "
        "pottery. Caroline: Creating art helped me understand and accept myself.",
    )  # fmt: skip
    day = ExtractiveSummarizer(COUNTER).summarize_children([child], "day")
    text = " ".join((day.abstract, *day.bullets))
    assert "Seven years now" in text and "Creating art helped me" in text  # the L0's facts too
    assert "We went camping with the kids" in text
    assert not set(day.bullets) & set(child.bullets)  # never a child's line verbatim
    assert not any(b.startswith("Art, camping and pottery:") for b in day.bullets)  # no topic
    assert day.abstract != child.abstract


def test_a_period_abstract_adds_what_its_bullets_do_not_say() -> None:
    topics = ["loader", "parser", "renderer", "scheduler", "exporter", "importer", "indexer",
              "tokenizer", "uploader"]  # fmt: skip
    children = [
        _seg(f"Fixed the {t}", [f"Committed 1a2b3c{i}: Fix the {t} timeout",
                                f"The root cause was a stale {t} cache entry",
                                f"Decided to keep {t} retries because the disk is slow"],
             f"Fixed the {t}.", thread=f"s{i}")
        for i, t in enumerate(topics)
    ]  # fmt: skip
    day = ExtractiveSummarizer(COUNTER).summarize_children(children, "day")
    assert len(day.bullets) == 8  # one per thread, the heaviest first
    bullets = " ".join(day.bullets)
    beyond = [line for line in day.abstract.split(". ")[1:] if line.strip(" .") not in bullets]
    assert beyond  # the L0 carries lines that no bullet does
    assert not set(day.bullets) & {b for c in children for b in c.bullets}


def test_a_month_does_not_repeat_the_weeks_it_lists() -> None:
    days = [_seg("Fixed the loader", ["Loader fix: retries three times on a slow disk"],
                 "Fixed the loader.", thread="")]  # fmt: skip
    s = ExtractiveSummarizer(COUNTER)
    free = s.summarize_children(days, "month")
    avoided = s.summarize_children(days, "month", avoid=set(free.bullets))
    assert free.bullets and not set(avoided.bullets) & set(free.bullets)


def test_a_period_keyword_adds_to_its_text() -> None:
    children = [
        Summary(f"Fixed the {t}", (f"Committed 1a2b3c{i}: Fix the {t} timeout",),
                (t, "alpha cache", "beta queue", "gamma pool", *(["delta index"] if i == 2 else [])),
                f"Fixed the {t}.", "", thread=f"s{i}")
        for i, t in enumerate(["loader", "parser", "renderer"])
    ]  # fmt: skip
    day = ExtractiveSummarizer(COUNTER).summarize_children(children, "day")
    # the three carried by every child first; then "delta index", which the text does not say,
    # ahead of "loader" (ranked first by its child, but the day's text names it)
    assert day.keywords[:3] == ("alpha cache", "beta queue", "gamma pool")
    assert day.keywords[3] == "delta index" and "loader" in day.keywords[4:]


def test_a_conversation_keeps_what_people_did_over_what_they_asked() -> None:
    turns = [
        ("Gina", "How have you been lately, anything new going on with you?"),
        ("Jon", "I just launched an ad campaign for my clothing store last week."),
        ("Gina", "What made you want to try an ad campaign for the store?"),
        ("Jon", "We got a new mannequin delivery and it looks great in the window."),
        ("Gina", "Do you think the campaign will bring more people into the store?"),
        ("Jon", "I hope so, the store has been quiet since the spring."),
    ]
    events = [ev(i, "user_message", "user", f"{who}: {text}") for i, (who, text) in
              enumerate(turns)]  # fmt: skip
    facts = extract_facts(events)
    score_facts(facts, events)
    by_text = {f.text.split(": ", 1)[1]: f for f in facts}
    launched = by_text["I just launched an ad campaign for my clothing store last week."]
    asked = by_text["What made you want to try an ad campaign for the store?"]
    assert launched.life_event and launched.score > asked.score


def test_list_items_are_read_without_their_markup() -> None:
    said = "Here is what changed:\n\n- **Added** `isImported` to the history item type\n"
    facts = extract_facts([ev(0, "assistant_message", "assistant", said)])
    assert [(f.kind, f.text) for f in facts] == [
        ("intent", "Here is what changed:"),
        ("done", "Added `isImported` to the history item type"),
    ]


def test_no_bullet_repeats_the_title() -> None:
    events = [
        ev(0, "user_message", "user", "Add a dark mode toggle to the settings page"),
        ev(1, "assistant_message", "assistant", "The theme lives in `ThemeContext`, so the "
           "toggle only has to flip its value. Decided to persist the choice in localStorage "
           "because the settings API has no user preferences yet."),
        ev(2, "assistant_message", "assistant", "Added `DarkModeToggle` to `SettingsPage.tsx` "
           "and wired it to `ThemeContext`."),
    ]  # fmt: skip
    s = ExtractiveSummarizer(COUNTER).summarize_events(events)
    assert s.title.lower().startswith(("add a dark mode toggle", "added a dark mode toggle"))
    assert not any("dark mode toggle to the settings page" in b.lower() for b in s.bullets)
    assert any("localStorage" in b for b in s.bullets)


def test_a_week_carries_its_days_abstract_facts() -> None:
    causes = {"loader": "a stale cache entry that survived restarts",
              "parser": "an off-by-one in the tokenizer lookahead"}  # fmt: skip
    days = [
        Summary(f"Fixed the {t}", (f"Fixed the {t}: Committed 1a2b3c{i}: Fix the {t} timeout",),
                (t,), f"Fixed the {t}. Fixed the {t}: The root cause was {cause}.", "")
        for i, (t, cause) in enumerate(causes.items())
    ]  # fmt: skip
    week = ExtractiveSummarizer(COUNTER).summarize_children(days, "week")
    text = " ".join((week.abstract, *week.bullets))
    assert "stale cache entry" in text and "off-by-one in the tokenizer" in text
    assert not set(week.bullets) & {b for d in days for b in d.bullets}


def test_a_period_of_children_with_nothing_but_titles_still_has_one() -> None:
    bare = Summary("Two (1 day)", (), (), "Two (1 day)", "")
    for level in ("week", "month", "year"):
        s = ExtractiveSummarizer(COUNTER).summarize_children([bare], level)
        assert s.title.startswith("Two") and s.bullets
