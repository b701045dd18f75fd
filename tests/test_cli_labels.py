"""What the CLI prints about the real history a user imported says whose, when and who spoke, once.

Seen importing the shared Claude Code transcripts (user trial 3): ``memtoc search`` printed a
node's title, then its L0 opening with the same title (a period's twice more); ``memtoc recall``
headed items ``event <uuid> L2 · 13 tok`` — a user's "Please fix these lint errors" read like
the agent's; ``memtoc toc`` of a segment named neither its project, its session nor its time;
without an embedder every search and recall printed the embedder's whole error (a Hugging Face
exception of several lines); and ``memtoc toc`` in a folder with no memory said "ask for all
projects", an option toc does not have. A store filled from the real transcripts (fixture cut
from them, MIT) through the real pipeline; the CLI through typer's runner.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtoc.config import load_settings
from memtoc.memory import Memory
from memtoc.surfaces.cli import app

FIXTURE = Path(__file__).parent / "fixtures" / "claude-code-real"
STATIC_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "minilm-static-256"
PROJECT = "claude-code-log"
QUERY = "GitHub Action workflow tests linting"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("labels")
    with Memory.open(_settings(home)) as memory:
        assert memory.ingest([FIXTURE]).ingested > 20
        memory.process()
        memory.rollup(force=True)
    return home


def _settings(home: Path, **extra: str) -> object:
    embedder = {"embed_model": str(STATIC_MODEL)} if STATIC_MODEL.is_dir() else {}
    return load_settings({"home": str(home), **embedder, **extra}, environ={})


def run(home: Path, *args: str, embedder: str | None = None, columns: int = 400) -> tuple[str, str]:
    env = {"COLUMNS": str(columns), "HF_HUB_OFFLINE": "1"}
    env["MEMTOC_EMBEDDER" if embedder else "MEMTOC_EMBED_MODEL"] = embedder or str(STATIC_MODEL)
    result = CliRunner().invoke(app, ["--home", str(home), *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def _rows(table: str) -> dict[str, list[str]]:
    """The text column of each row of the search table, by the row's id."""
    rows: dict[str, list[str]] = {}
    current: list[str] = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) != 7:
            continue
        if cells[1]:  # a score: a new row, its id first in the id column
            current = rows.setdefault(cells[3], [])
        current.append(cells[4])
    return rows


def test_search_says_a_title_once(home: Path) -> None:
    args = ("search", QUERY, "--project", PROJECT, "--limit", "12")
    out, _ = run(home, *args)
    data = json.loads(run(home, *args, "--json")[0])
    rows = _rows(out)
    opening = [i for i in data["items"] if i["title"] and i["text"].startswith(i["title"])]
    assert sum(i["kind"] == "node" for i in opening) >= 2, data["items"]
    for item in opening:
        cell = rows[item["id"]]
        assert cell[0] == item["title"], cell
        rest = " ".join(cell[1:])
        assert not rest.startswith(item["title"]), cell  # a period's abstract said it again
        said = item["text"].replace(item["title"], " ").split()
        assert rest.split()[:5] == [w for w in said if w.strip(".:;,")][:5], cell


def test_search_in_an_80_column_terminal_keeps_ids_whole(home: Path) -> None:
    """At 80 columns the results table left ~12 characters of text a line and folded each id
    across two lines ("toc:segment:2025-06-14T2" / "3:45:90389f"): results are then a list, each
    headed by its whole id, then its title."""
    args = ("search", QUERY, "--project", PROJECT, "--limit", "8")
    out, _ = run(home, *args, columns=80)
    data = json.loads(run(home, *args, "--json")[0])
    assert "│" not in out  # no table
    lines = out.splitlines()
    for n, item in enumerate(data["items"], start=1):
        (head,) = [i for i, ln in enumerate(lines) if ln.startswith(f"{n}. {item['kind']} ")]
        assert f" {item['id']} " in lines[head], lines[head]
        if item["title"]:  # the title opens the text below the head
            assert lines[head + 1].strip().startswith(item["title"][:40]), lines[head + 1]


def test_recall_heads_each_item_by_who_spoke_and_when(home: Path) -> None:
    out, _ = run(home, "recall", QUERY, "--project", PROJECT, "--budget", "600")
    data = json.loads(
        run(home, "recall", QUERY, "--project", PROJECT, "--budget", "600", "--json")[0]
    )
    events = [i for i in data["items"] if i["kind"] == "event"]
    assert events
    with Memory.open(_settings(home)) as memory:
        roles = {e.event_id: e.role for e in memory.store.get_events([i["id"] for i in events])}
    for item in events:
        when = item["start_time"][:10] + " " + item["start_time"][11:16] + " UTC"
        head = f"event · {roles[item['id']]} · {when} · {item['tier']} · {item['tokens']} tok"
        assert f"{head} · {item['id']}" in out, (head, out)
    assert {roles[i["id"]] for i in events} >= {"user", "assistant"}


def test_a_segment_says_its_project_session_and_time(home: Path) -> None:
    with Memory.open(_settings(home)) as memory:
        segment = memory.store.list_nodes(PROJECT, level="segment")[0]
        tz = memory.tz
    out, _ = run(home, "toc", segment.node_id, "--project", PROJECT)
    start = datetime.fromtimestamp(segment.start_ms / 1000, tz)
    end = datetime.fromtimestamp((segment.end_ms - 1) / 1000, tz)
    line = out.splitlines()[1]
    assert line.startswith(f"{PROJECT} · {start:%Y-%m-%d %H:%M} to {end:%H:%M}"), line
    assert f"session {segment.session_id} · {segment.event_count} events" in line


def test_without_an_embedder_the_degraded_mode_is_short(home: Path) -> None:
    for command in ("search", "recall"):
        out, _ = run(home, command, QUERY, "--project", PROJECT, embedder="none")
        assert "degraded: no embedder, BM25 only (memtoc status says why)" in out
    with Memory.open(_settings(home, embedder="none")) as memory:
        reason = memory.search(QUERY, project=PROJECT).degraded
    assert reason and reason not in out
    status, _ = run(home, "status", embedder="none")
    assert re.search(r"embedder\s+│ none \(degraded: no embedder", status), status


def test_a_folder_without_memory_names_the_options_the_command_has(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, toc_note = run(home, "toc")
    assert "known projects: claude-code-log" in toc_note
    assert "name one with --project NAME" in toc_note and "all-projects" not in toc_note
    _, search_note = run(home, "search", QUERY)
    assert "name one with --project NAME or use --all-projects" in search_note


def test_ingest_names_what_waits_and_where_the_events_went(tmp_path: Path) -> None:
    """Importing the shared transcripts said "waiting 1" without naming the file, and the Gemini
    CLI sessions (no working directory in their files) went to project 'default' unsaid."""
    waiting = tmp_path / "summary-only"  # a fresh copy: a file just written may still grow
    shutil.copytree(FIXTURE.parent / "claude-code-summary-only", waiting, copy_function=shutil.copy)
    gemini = FIXTURE.parent / "gemini" / "session-2026-03-18T15-20-76d8ed24.json"
    out, _ = run(tmp_path, "ingest", str(waiting), str(gemini), str(FIXTURE))
    data = json.loads(run(tmp_path / "again", "ingest", str(waiting), str(gemini), "--json")[0])
    (line,) = data["waiting_at"]
    assert line.endswith("4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl:1") and data["waiting"] == 1
    assert f"waiting {line}: a summary line with no time" in out and "skipped once" in out
    default = data["projects"]["default"]
    assert default > 0 and set(data["projects"]) == {"default"}
    assert f"into projects: {PROJECT} +" in out and f"default +{default}" in out
    assert f"note: {default} events named no working directory and went to project 'default'" in out


def test_expand_and_projects_cut_no_path_at_the_terminal_width(home: Path) -> None:
    """On an 80-column terminal a tool call's JSON (no spaces) was cut to its column's width:
    'Read {"file_path":"/Users/dain/workspace/c…' did not say which file; a project's folder
    and a long name ('coderabbit-review-…') were cut too. Such text now folds."""
    with Memory.open(_settings(home)) as memory:
        found = None
        for node in memory.store.list_nodes(PROJECT, level="segment"):
            for grip in (g for b in node.bullets for g in b.grip_ids):
                view = memory.expand(grip)
                long = [e for e in view.events if max(map(len, e.text.split())) > 60]
                if long:
                    found = grip, long[0]
                    break
            if found:
                break
        roots = [r for p in memory.projects() for r in p.get("roots") or []]
    assert found is not None, "no event with a long unbroken word in the fixture"
    grip, event = found
    out, _ = run(home, "expand", grip, columns=80)
    start = event.ts_ms
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if iso_stamp(start) in line)
    cell = []
    for line in lines[row:]:
        cells = line.split("│")
        if len(cells) != 6 or (cell and cells[2].strip()):
            break
        cell.append(cells[4].strip())
    shown = "".join(cell)
    text = event.text.replace("\n", " ")  # as the table shows it, cut at 160 characters
    assert shown.replace(" ", "") == text[:160].replace(" ", "") + ("…" if len(text) > 160 else "")
    listed, _ = run(home, "projects", "list", columns=80)
    flat = "".join(line.split("│")[-2].strip() for line in listed.splitlines() if "│" in line)
    assert all(str(root) in flat for root in roots), (roots, listed)


def iso_stamp(ms: int) -> str:
    from memtoc.model import iso_ms

    return iso_ms(ms)[:19]


def test_http_recall_names_who_spoke_for_every_event_item(home: Path) -> None:
    """/v1/recall's event items carried who spoke only in ``events``, which an item at L1 (a
    passage) leaves empty: the web's recall could not say whose it was. Each now has ``role``."""
    from fastapi.testclient import TestClient

    from memtoc.surfaces.http.app import create_app

    app = create_app(lambda: Memory.open(_settings(home)), token="t" * 24, pool_size=1)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        response = client.post(
            "/v1/recall",
            json={"query": QUERY, "budget": 600, "project": PROJECT},
            headers={"Authorization": "Bearer " + "t" * 24},
        )
    assert response.status_code == 200, response.text
    items = [i for i in response.json()["items"] if i["kind"] == "event"]
    assert any(not i["events"] for i in items), "no event item at L1 to check"
    with Memory.open(_settings(home)) as memory:
        for item in items:
            assert item["role"] == memory.store.get_event(item["id"]).role


def test_a_cut_quote_in_the_session_start_context_says_so(home: Path) -> None:
    """The context quoted the latest outcome cut at 80 tokens with nothing to say so ("… public
    `policy` examples now only show”): a cut quote ends with "…"."""
    out, _ = run(home, "context", "--project", PROJECT, "--budget", "800")
    quotes = re.findall(r"(?:Asked|Last request|Outcome|asked|outcome): “(.*?)”", out, re.S)
    assert quotes, out
    with Memory.open(_settings(home)) as memory:
        texts = [" ".join(e.text.split()) for e in memory.events(project=PROJECT)]
    cut = [q for q in quotes if not any(" ".join(q.split()) in t for t in texts)]
    assert cut, "no quote was cut"
    for quote in cut:
        flat = " ".join(quote.split())
        assert flat.endswith("…"), quote
        assert any(flat[:-1] in t.replace("**", "") for t in texts), quote


def test_timeline_shows_each_node_id_whole_at_80_columns(home: Path) -> None:
    """`memtoc timeline --level segment` cut the ids a user copies into `memtoc toc`
    ('toc:segment:2026-06-22T1…') and dated every segment of a day alike."""
    with Memory.open(_settings(home)) as memory:
        ids = {n.node_id for n in memory.store.list_nodes(PROJECT, level="segment")}
    for level in ("segment", "day"):
        out, _ = run(home, "timeline", "--project", PROJECT, "--level", level, columns=80)
        shown = set(re.findall(r"toc:\S+", out))
        if level == "segment":
            assert shown == ids, out
        assert shown and not any("…" in s for s in shown), out


def test_events_in_an_80_column_terminal_one_line_each_with_the_whole_time(home: Path) -> None:
    """At 80 columns `memtoc events` cut the time to "2025-07-19T23…" and folded the text a word
    a line: each event is one line, its time whole, its text cut to fit."""
    out, _ = run(home, "events", "--project", PROJECT, "-n", "6", columns=80)
    data = json.loads(run(home, "events", "--project", PROJECT, "-n", "6", "--json")[0])
    lines = out.splitlines()
    assert len(lines) == 1 + len(data["events"]) == 7, out
    for line, event in zip(lines[1:], data["events"], strict=True):
        when = event["timestamp"][:10] + " " + event["timestamp"][11:19]
        assert line.startswith(f"{when}  {event['session_id'][:8]}"), line
        assert len(line) <= 80 and event["role"] in line, line
