"""The web TOC browser in a real headless Chromium, against the real HTTP server.

A store is filled by the real pipeline (synthetic Claude Code sessions → ingest → process →
rollup), served by ``create_app`` under uvicorn on a loopback port, and driven with Playwright:
load, drill year → month → week, expand a grip into its events, search and open a result, recall,
the status panel, and the 401 page. Screenshots go to ``test-artifacts/web/`` (git-ignored).

Chromium is Debian's ``/usr/bin/chromium`` (``make browser`` installs it; Playwright's own
browser download is never used: no CDN). Without it the tests skip locally and fail under
``CI=true``, like the PostgreSQL tests.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memtoc.config import Settings, load_settings
from memtoc.eval.synth import SynthConfig, generate_with_facts, write_claude_code
from memtoc.memory import Memory
from memtoc.pipeline.periods import Calendar

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "web"
CHROMIUM = Path(os.environ.get("MEMTOC_TEST_CHROMIUM", "/usr/bin/chromium"))
STATIC_MODEL = ROOT.parent / "shared" / "models" / "minilm-static-256"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "web-test-token"
PROJECT = "webapp"
VIEWPORT = {"width": 1440, "height": 900}  # a laptop screen
WAIT_MS = 15_000


UNNAMED_CONTROLS = """() => [...document.querySelectorAll('button, input, select, textarea')]
  .filter((el) => !(el.textContent.trim() || el.getAttribute('aria-label')
    || (el.id && document.querySelector(`label[for="${el.id}"]`)) || el.closest('label')))
  .map((el) => el.outerHTML.slice(0, 120))"""
"""JavaScript listing buttons and fields that a screen reader could not name."""


def browser_unavailable(reason: str) -> None:
    """Skip locally; fail under CI (``CI=true``), where ``make browser`` must have installed it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"headless Chromium required in CI: {reason}")
    pytest.skip(f"browser tests skipped: {reason}")


@dataclass
class Served:
    """The running server and what the test knows about its store."""

    url: str
    settings: Settings
    query: str
    """A planted fact's question (search finds its answer)."""


def _settings(home: Path) -> Settings:
    embedder = (
        {"embedder": "static", "embed_model": str(STATIC_MODEL)}
        if STATIC_MODEL.is_dir()
        else {"embedder": "none"}
    )
    return load_settings({"home": str(home), **embedder}, environ={})


def _fill_store(settings: Settings) -> str:
    """Three months of one project's sessions through the real pipeline; a planted question."""
    stream, facts = generate_with_facts(
        SynthConfig(seed=11, events=450, projects=(PROJECT,), months=3, planted_facts=5)
    )
    transcripts = settings.home / "transcripts"
    write_claude_code(stream, transcripts)
    with Memory.open(settings) as memory:
        report = memory.ingest([transcripts])
        assert report.ingested > 300, report.to_dict()
        memory.process()
        memory.rollup(force=True)
        assert len(memory.store.list_nodes(PROJECT, level="week")) >= 4
    return facts[0].query


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """uvicorn serving ``create_app`` (API + web UI) on a free loopback port, in a thread."""
    import uvicorn

    from memtoc.surfaces.http.app import create_app

    app = create_app(lambda: Memory.open(settings), token=TOKEN)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The store filled once for the module, served for all its tests."""
    settings = _settings(tmp_path_factory.mktemp("web-home"))
    query = _fill_store(settings)
    with serving(settings) as url:
        yield Served(url, settings, query)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        browser_unavailable(f"{CHROMIUM} not found (run `make browser` as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (own sessionStorage); JavaScript exceptions fail the test."""
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def tree_row(page: Any, node_id: str) -> Any:
    return page.locator(f'[data-testid=tree-node][data-node-id="{node_id}"]')


def expand(page: Any, node_id: str) -> None:
    """Click a tree node's twisty (unless already expanded) and wait for its children."""
    toggle = tree_row(page, node_id).locator("xpath=..").locator("[data-testid=tree-toggle]")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    item = tree_row(page, node_id).locator("xpath=ancestor::li[1]")
    item.locator("ul[role=group] [data-testid=tree-node]").first.wait_for()


def test_drill_into_a_week_and_expand_a_grip(served: Served, page: Any) -> None:
    with Memory.open(served.settings) as memory:
        year = memory.toc(PROJECT)[-1]  # the latest year, which the page opens first
        month = memory.store.find_node(year.child_node_ids[0], PROJECT)
        week = memory.store.find_node(month.child_node_ids[0], PROJECT)

    page.goto(f"{served.url}/#token={TOKEN}")
    tree_row(page, year.node_id).wait_for()
    assert "token=" not in page.url, "the token must leave the address bar"
    assert page.locator("[data-testid=project-picker]").input_value() == PROJECT
    assert year.title in tree_row(page, year.node_id).inner_text()
    page.locator("[data-testid=status] dd").first.wait_for()
    status = page.locator("[data-testid=status]").inner_text()
    assert "Events" in status and "Queue" in status
    with Memory.open(served.settings) as memory:
        events = memory.store.stats()["events"]
    assert isinstance(events, int)
    assert f"{events:,}" in status
    shot(page, "01-loaded")
    assert page.evaluate(UNNAMED_CONTROLS) == [], "controls without an accessible name"

    # The page opens the latest year in the detail pane and expands it in the tree.
    page.locator(f'[data-testid=node-detail][data-node-id="{year.node_id}"]').wait_for()
    tree_row(page, month.node_id).wait_for()
    expand(page, year.node_id)  # already expanded: a no-op
    # Keyboard: ↓ from the year row reaches its first month, → expands it.
    tree_row(page, year.node_id).focus()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.nodeId") == month.node_id
    page.keyboard.press("ArrowRight")
    tree_row(page, week.node_id).wait_for()
    tree_row(page, week.node_id).click()
    detail = page.locator(f'[data-testid=node-detail][data-node-id="{week.node_id}"]')
    detail.wait_for()
    assert week.title in detail.locator("h2").inner_text()
    page.wait_for_function(
        "id => location.hash.endsWith('node=' + encodeURIComponent(id))", arg=week.node_id
    )
    bullets = detail.locator("[data-testid=bullet-toggle]")
    assert bullets.count() == sum(1 for b in week.bullets if b.grip_ids)
    shot(page, "02-week")

    bullets.first.click()
    grip = detail.locator("[data-testid=grip]").first
    grip.wait_for()
    grip_id = grip.get_attribute("data-grip-id")
    assert grip_id in week.bullets[0].grip_ids
    with Memory.open(served.settings) as memory:
        view = memory.expand(grip_id)
    core = [e for i, e in enumerate(view.events) if view.range_start <= i <= view.range_end]
    shown = grip.locator("[data-testid=event].in-grip")
    assert shown.count() == len(core)
    first_text = shown.first.locator(".event-text").inner_text()
    assert core[0].text[:80].strip() in first_text
    shot(page, "03-grip-expanded")

    # Keyboard: the bullet toggles closed with Enter.
    bullets.first.focus()
    page.keyboard.press("Enter")
    assert detail.locator("[data-testid=grip-events]").first.is_hidden()


def test_a_day_of_a_straddling_week_opens_under_its_own_month(served: Served, page: Any) -> None:
    """A week running into the next month is listed under both months; a day of it opened from a
    link shows the breadcrumbs, and is revealed in the tree, under the month that contains it."""
    with Memory.open(served.settings) as memory:
        # Two short sessions around a month boundary that falls inside a week.
        cal = Calendar(memory.tz)
        months = memory.store.list_nodes(PROJECT, level="month")
        first = next(d for m in months[1:] if (d := cal.local_date(m.start_ms)).weekday() != 0)
        for n, on in enumerate((first - timedelta(days=1), first)):
            start = cal.day_start(on) + 10 * 3_600_000
            memory.ingest_records(
                [
                    {"session_id": f"edge{n}", "timestamp": start, "role": "user",
                     "text": f"edge-of-month check {n}"},
                    {"session_id": f"edge{n}", "timestamp": start + 60_000, "role": "assistant",
                     "text": f"checked the edge-of-month report {n}"},
                ],
                project=PROJECT,
            )  # fmt: skip
        memory.process()
        memory.rollup(force=True)
        straddling = [
            w for w in memory.store.list_nodes(PROJECT, level="week") if len(w.parents) == 2
        ]
        assert straddling
        week = straddling[0]
        second = memory.store.find_node(week.parents[1], PROJECT)
        day = next(
            d
            for d in memory.store.list_nodes(PROJECT, parent_id=week.node_id)
            if second.start_ms <= d.start_ms < second.end_ms
        )
        assert week.node_id in second.child_node_ids
    page.goto(f"{served.url}/#token={TOKEN}&project={PROJECT}&node={day.node_id}")
    detail = page.locator(f'[data-testid=node-detail][data-node-id="{day.node_id}"]')
    detail.wait_for()
    crumbs = [b.get_attribute("title") for b in detail.locator("[data-testid=crumbs] button").all()]
    assert second.title in crumbs and week.title in crumbs
    item = tree_row(page, second.node_id).locator("xpath=ancestor::li[1]")
    item.locator(f'[data-testid=tree-node][data-node-id="{week.node_id}"]').wait_for()
    shot(page, "02b-straddling-week")


def test_search_opens_a_node(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/#token={TOKEN}")
    # The page opens the latest year by itself.
    page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
    page.fill("[data-testid=search-input]", served.query)
    page.press("[data-testid=search-input]", "Enter")
    results = page.locator("[data-testid=search-result]")
    results.first.wait_for()
    assert results.count() >= 1
    shot(page, "04-search")
    first = results.first
    kind, item_id = first.get_attribute("data-kind"), first.get_attribute("data-id")
    first.click()
    # Wait for the result's node to replace the year (a node result names its node itself).
    opened = (
        f'[data-node-id="{item_id}"]' if kind == "node" else ":not([data-node-id^='toc:year:'])"
    )
    detail = page.locator(f"[data-testid=node-detail]{opened}")
    detail.wait_for()
    node_id = detail.get_attribute("data-node-id")
    assert node_id and node_id.startswith("toc:")
    with Memory.open(served.settings) as memory:
        item = next(
            i
            for i in memory.search(served.query, project=PROJECT, limit=12).items
            if (i.kind, i.id) == (kind, item_id)
        )
        node = memory.store.find_node(node_id, PROJECT)
        if kind == "node":
            assert node_id == item_id
        elif kind == "grip":
            assert node_id == memory.store.get_grip(item_id).toc_node_id
        else:  # an event or bookmark opens the segment holding its first event
            assert node.level == "segment"
            assert node.start_ms <= item.events[0].ts_ms <= node.end_ms
    assert page.locator("[data-testid=search-panel]").is_hidden()
    # Opening ends by recording the node in the address, once the tree is revealed.
    page.wait_for_function("id => location.hash.endsWith(encodeURIComponent(id))", arg=node_id)
    # The tree was opened down to the node and marks it selected.
    selected = tree_row(page, node_id).locator("xpath=../..")
    assert selected.get_attribute("aria-selected") == "true"
    shot(page, "05-search-opened")


def test_search_says_when_its_time_window_holds_nothing(served: Served, page: Any) -> None:
    """A search read for a window holding none of its results showed them under "time: …"
    alone (user trial 4): the head says they are from other times, and only then."""
    page.goto(f"{served.url}/#token={TOKEN}")
    page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
    note = page.locator("[data-testid=outside-window]")
    for query, expected in ((f"{served.query} in 1999", 1), (served.query, 0)):
        page.fill("[data-testid=search-input]", query)
        page.press("[data-testid=search-input]", "Enter")
        page.locator("[data-testid=search-result]").first.wait_for()
        assert note.count() == expected, query
        if expected:
            assert "Nothing recorded then" in note.inner_text()
            shot(page, "05b-search-outside-window")


def test_an_event_result_is_headed_by_who_spoke_or_the_tool(served: Served, page: Any) -> None:
    """An event hit's headline was "assistant in 019ed917…" (its session's uuid, cut): it names
    the speaker, or the tool that ran and whether it failed."""
    page.goto(f"{served.url}/#token={TOKEN}")
    page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
    with Memory.open(served.settings) as memory:
        hits = memory.search(served.query, project=PROJECT, kinds=["event"], limit=12).items
        sessions = {e.session_id for e in memory.events()}
    page.fill("[data-testid=search-input]", served.query)
    page.press("[data-testid=search-input]", "Enter")
    page.locator("[data-testid=search-result]").first.wait_for()
    events = page.locator("[data-testid=search-result][data-kind=event] .row-title")
    titles = events.all_inner_texts()
    assert hits and titles, titles
    for title in titles:
        assert title.split(" · ")[0] in {"user", "assistant", "system", "tool call", "tool output"}
        assert not any(s[:8] in title for s in sessions), title


def test_recall_shows_context_and_tokens(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/#token={TOKEN}")
    page.locator("[data-testid=tree-node]").first.wait_for()
    page.fill("[data-testid=recall-input]", served.query)
    page.fill("[data-testid=recall-budget]", "600")
    with page.expect_response(lambda r: r.url.endswith("/v1/recall")) as answer:
        page.click("[data-testid=recall-form] button[type=submit]")
    response = answer.value
    out = page.locator("[data-testid=recall-out]")
    page.wait_for_function(
        "() => { const o = document.querySelector('[data-testid=recall-out]');"
        " return o.querySelector('[data-testid=recall-tokens], .notice-warn, .notice-error'); }"
    )
    shot(page, "06-recall")
    if response.status == 501:
        # Recall is not in this build: the page says so plainly.
        assert not hasattr(Memory, "recall")
        assert "not available" in out.inner_text()
        assert "501" in out.inner_text()
        return
    # The page shows what the server assembled: its token count against the budget, its items.
    data = response.json()
    assert data["budget"] == 600
    total = out.locator("[data-testid=recall-tokens]").inner_text()
    assert total.startswith(f"{data['tokens']:,} token")
    assert "of 600" in total
    items = out.locator("[data-testid=recall-items] > li")
    assert items.count() == len(data["items"])
    for shown, item in zip(items.all(), data["items"], strict=True):
        assert item["text"][:60].strip() in shown.locator(".recall-text").inner_text()


def test_search_and_recall_say_a_title_once_and_who_spoke(served: Served, page: Any) -> None:
    """A node's L0 and a grip's text open with the title shown above them: the search list said
    "The type checking errors have been fixed" twice per node hit, and recall each item's first
    line twice. A recalled event names who spoke: a user's request read like the agent's."""
    page.goto(f"{served.url}/#token={TOKEN}")
    page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
    page.fill("[data-testid=search-input]", served.query)
    page.press("[data-testid=search-input]", "Enter")
    page.locator("[data-testid=search-result]").first.wait_for()
    with Memory.open(served.settings) as memory:
        hits = memory.search(served.query, project=PROJECT, limit=12).items
    opening = [i for i in hits if i.title and i.text.startswith(i.title.rstrip("…"))]
    assert any(i.kind == "node" for i in opening), [(i.kind, i.title) for i in hits]
    for item in opening:
        row = page.locator(f'[data-testid=search-result][data-id="{item.id}"]')
        head = item.title.rstrip("…")
        assert row.inner_text().count(head) == 1, (item.kind, row.inner_text())
    shot(page, "04b-search-titles-once")
    page.locator("[data-testid=search-panel] button.close").click()

    page.fill("[data-testid=recall-input]", served.query)
    with page.expect_response(lambda r: r.url.endswith("/v1/recall")) as answer:
        page.click("[data-testid=recall-form] button[type=submit]")
    data = answer.value.json()
    page.locator("[data-testid=recall-items]").wait_for()
    items = page.locator("[data-testid=recall-items] > li")
    roles = 0
    for shown, item in zip(items.all(), data["items"], strict=True):
        head = item["title"].rstrip("…")
        if head:
            assert shown.inner_text().count(head) == 1, shown.inner_text()
        if item["kind"] == "event":  # at L1 too, where the item carries no event
            role = shown.locator("[data-testid=recall-role]").inner_text()
            with Memory.open(served.settings) as memory:
                assert role.lower() == item["role"] == memory.store.get_event(item["id"]).role
            roles += 1
    assert roles, "no event recalled"


def test_without_a_token_the_page_asks_for_one(served: Served, page: Any) -> None:
    page.goto(served.url + "/")
    banner = page.locator("[data-testid=auth-error]")
    banner.wait_for()
    assert "Not authorised" in banner.inner_text()
    assert "memtoc serve" in banner.inner_text()
    shot(page, "07-unauthorised")
    page.fill("#token-input", TOKEN)
    page.press("#token-input", "Enter")
    page.locator("[data-testid=tree-node]").first.wait_for()
    assert page.locator("[data-testid=auth-error]").count() == 0


def test_status_panel_shows_degraded_modes_in_warning_colour(served: Served, page: Any) -> None:
    """The same store served without an embedder: search is BM25-only and the panel says so."""
    settings = load_settings({"home": str(served.settings.home), "embedder": "none"}, environ={})
    with serving(settings) as url:
        page.goto(f"{url}/#token={TOKEN}")
        warnings = page.locator("[data-testid=status-warnings]")
        warnings.wait_for()
        assert "BM25-only" in warnings.inner_text()
        assert "no embedder" in warnings.inner_text()
        colour = warnings.evaluate("el => getComputedStyle(el).color")
        background = warnings.evaluate("el => getComputedStyle(el).backgroundColor")
        assert colour == "rgb(138, 59, 0)"  # --warn-ink on --warn-bg (contrast 7.3:1)
        assert background == "rgb(255, 244, 229)"
        assert page.locator("[data-testid=status-ok]").count() == 0
        shot(page, "08-status-degraded")

        # Search and recall name the mode in a few words; the full reason is on hover and in
        # the panel (it filled the results' header: a library's error text, three times a page)
        page.fill("[data-testid=search-input]", served.query)
        page.press("[data-testid=search-input]", "Enter")
        note = page.locator("[data-testid=search-panel] [data-testid=degraded]")
        note.wait_for()
        assert note.inner_text().strip() == "· no embedder, BM25 only (see Status)"
        with Memory.open(settings) as memory:
            reason = memory.search(served.query, project=PROJECT).degraded
        assert reason and note.get_attribute("title") == reason
        page.locator("[data-testid=search-panel] button.close").click()
        page.fill("[data-testid=recall-input]", served.query)
        page.click("[data-testid=recall-form] button[type=submit]")
        recalled = page.locator("[data-testid=recall-out] [data-testid=degraded]")
        recalled.wait_for()
        assert "no embedder, BM25 only" in recalled.inner_text()
        shot(page, "08b-search-recall-degraded")


def test_the_bookmarks_card_lists_the_moments_and_opens_one(served: Served, page: Any) -> None:
    """The page had no bookmarks at all (only as search hits): the card lists the project's most
    important ones; choosing one opens the segment its first event is filed under."""
    with Memory.open(served.settings) as memory:
        marks = memory.bookmarks(PROJECT, 8)
        assert marks, "the served store has no bookmarks"
        segment = memory.expand(marks[0].event_ids[0], before=0, after=0).toc_node_id
    page.goto(f"{served.url}/#token={TOKEN}")
    shown = page.locator("[data-testid=bookmark]")
    shown.first.wait_for()
    assert shown.count() == len(marks)
    for row, mark in zip(shown.all(), marks, strict=True):
        assert row.get_attribute("data-id") == mark.bookmark_id
        assert mark.type in row.inner_text().lower()
        assert mark.content[:40] in row.inner_text()
    shot(page, "09-bookmarks")
    shown.first.click()
    page.locator(f'[data-testid=node-detail][data-node-id="{segment}"]').wait_for()
    page.wait_for_function("id => location.hash.endsWith(encodeURIComponent(id))", arg=segment)


def test_a_long_unbroken_title_or_keyword_stays_in_its_pane(served: Served, page: Any) -> None:
    """Real segment titles and keywords are file paths ("Edited `claude_code_log/templates/
    components/timeline.html`"): the title ran out of the detail pane, a keyword chip out of
    the timeline. A title wraps anywhere; a chip is cut with "…" and shows it whole on hover."""
    path = "`claude_code_log/templates/components/timeline_with_sidechain_group_headers.html`"
    page.goto(f"{served.url}/#token={TOKEN}")
    page.locator("[data-testid=node-detail][data-node-id^='toc:year:']").wait_for()
    page.locator(".sidebar .chip").first.wait_for()
    inside = page.evaluate(
        """path => {
          const h2 = document.querySelector('[data-testid=node-detail] h2');
          h2.textContent = 'Edited ' + path;
          const chip = document.querySelector('.sidebar .chip');
          chip.textContent = path;
          const pane = (el, sel) => el.closest(sel).getBoundingClientRect();
          return {
            title: h2.getBoundingClientRect().right <= pane(h2, '.detail').right
              && h2.scrollWidth <= h2.clientWidth,
            chip: chip.getBoundingClientRect().right <= pane(chip, '.sidebar').right,
            hover: chip.title.length > 0,
          };
        }""",
        path,
    )
    shot(page, "10-long-title")
    assert inside == {"title": True, "chip": True, "hover": True}


def test_status_panel_names_the_summaries_a_failing_llm_left_to_the_fallback(
    tmp_path: Path, page: Any
) -> None:
    """An LLM summariser whose API failed (here a real server answering 401): the panel said
    "Summariser openai is not in use; nodes are built by llm:openai:gpt-4o-mini/1" — false, it
    was in use — and not that the extractive fallback had written the nodes."""
    from test_process_degraded import wrong_key_server

    with wrong_key_server() as llm_url:
        settings = load_settings(
            {
                "home": str(tmp_path),
                "embedder": "none",
                "summarizer": "openai",
                "llm_model": "gpt-4o-mini",
                "llm_base_url": llm_url,
                "llm_api_key": "sk-wrong",
            },
            environ={},
        )
        gemini = ROOT / "tests" / "fixtures" / "gemini" / "session-2026-03-18T15-20-76d8ed24.json"
        with Memory.open(settings) as memory:
            assert memory.ingest([gemini], project="aim").ingested > 0
            memory.process()
            summaries = memory.status()["summaries"]
    assert isinstance(summaries, dict) and summaries["degraded"], summaries
    with serving(settings) as url:
        page.goto(f"{url}/#token={TOKEN}")
        warnings = page.locator("[data-testid=status-warnings]")
        warnings.wait_for()
        text = warnings.inner_text()
        shot(page, "11-status-llm-fallback")
    assert "is not in use" not in text
    assert (
        f"{summaries['degraded']} of {summaries['nodes']} summaries built by the extractive "
        f"fallback: {summaries['degraded_reason']}"
    ) in text
    assert "401" in text and "memtoc rebuild --summaries" in text


def test_periods_are_labelled_by_the_store_calendar_in_any_browser_zone(
    served: Served, browser: Any
) -> None:
    """A period's label came from its start instant in the browser's zone: west of the store's
    zone toc:month:2024-01 read "December 2023" and every day the day before. The labels of a
    browser in the store's zone and of one eight hours west are the same."""
    with Memory.open(served.settings) as memory:
        zone = getattr(memory.tz, "key", None) or "UTC"
        year = memory.toc(PROJECT)[-1]
        month = memory.store.find_node(year.child_node_ids[0], PROJECT)
        week = memory.store.find_node(month.child_node_ids[0], PROJECT)
        day = memory.store.find_node(week.child_node_ids[0], PROJECT)

    def labels(timezone_id: str) -> dict[str, str]:
        context = browser.new_context(viewport=VIEWPORT, timezone_id=timezone_id)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            page.goto(f"{served.url}/#token={TOKEN}&project={PROJECT}&node={day.node_id}")
            page.locator(f'[data-testid=node-detail][data-node-id="{day.node_id}"]').wait_for()
            tree_row(page, day.node_id).wait_for()
            shot(page, f"12-zone-{timezone_id.replace('/', '-')}")
            out = {
                n.node_id: tree_row(page, n.node_id).locator(".period").inner_text()
                for n in (month, week, day)
            }
            out["crumbs"] = page.locator("[data-testid=crumbs]").inner_text()
            out["detail"] = page.locator("[data-testid=node-detail] .meta").inner_text()
            return out
        finally:
            context.close()

    here, west = (
        labels(zone),
        labels("America/Los_Angeles" if zone != "America/Los_Angeles" else "Asia/Tokyo"),
    )
    assert here == west
    assert here[month.node_id].endswith(month.node_id.rsplit(":", 1)[-1][:4])
