"""Gemini CLI sessions: both layouts of the chat recorder, cut from real sessions
(tests/fixtures/gemini, MIT), through the source, the importer, the CLI and the hook."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memtoc.config import load_settings
from memtoc.ingest.sources import SOURCES, sniff_format
from memtoc.ingest.sources.base import RawRecord, SourceOptions
from memtoc.memory import Memory
from memtoc.model import Event

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gemini"
DOCUMENT = FIXTURES / "session-2026-03-17T22-24-a41f5459.json"
SUBAGENT_DOC = FIXTURES / "session-2026-03-18T01-49-50316244.json"
WARNING_ONLY = FIXTURES / "session-2026-03-18T15-20-76d8ed24.json"
CHATS = FIXTURES / "tmp" / "aim" / "chats"
LOG = CHATS / "session-2026-03-17T22-24-a41f5459.jsonl"
SUBAGENT_LOG = CHATS / "a41f5459-d458-492a-860d-722d91c66efc" / "50316244.jsonl"
MAIN = "a41f5459-d458-492a-860d-722d91c66efc"
SOURCE = SOURCES["gemini"]


def read(path: Path, start: int = 0, *, thinking: bool = False) -> list[RawRecord]:
    return list(SOURCE.read(path, start, SourceOptions(include_thinking=thinking)))


def kinds(records: list[RawRecord]) -> Counter[str]:
    return Counter(d.event_type for r in records for d in r.drafts)


def test_every_fixture_is_sniffed_as_gemini() -> None:
    for path in (DOCUMENT, SUBAGENT_DOC, WARNING_ONLY, LOG, SUBAGENT_LOG):
        source = sniff_format(path)
        assert source is not None and source.name == "gemini", path


def test_document_messages_tool_calls_and_results() -> None:
    records = read(DOCUMENT)
    assert not [r.error for r in records if r.error]
    assert len(records) == 6  # one record per message
    assert kinds(records) == {
        "user_message": 2, "assistant_message": 4, "tool_call": 3, "tool_result": 3,
    }  # fmt: skip
    drafts = [d for r in records for d in r.drafts]
    assert {d.session_id for d in drafts} == {MAIN}
    assert all(d.project is None and d.cwd is None for d in drafts)  # it names no directory
    assert all(d.metadata["project_hash"].startswith("d53620cc") for d in drafts)
    first = drafts[0]
    assert first.event_id == "12ec20b8-11c7-40d6-b19d-87fd54e78531"
    assert first.text.startswith("I would like to see/verify that the last 2 sessions")
    calls = [d for d in drafts if d.event_type == "tool_call"]
    assert calls[0].text.startswith('run_shell_command {"command":"ls -R aim/archive/')
    assert calls[0].event_id == (
        "d198cbca-4f1d-44cd-a3ac-7ec15d63a49f#call:run_shell_command_1773786689684_0"
    )
    results = [d for d in drafts if d.event_type == "tool_result"]
    assert results[0].text.startswith("Output: ls: cannot access 'aim/archive/'")
    assert results[0].ts_ms > calls[0].ts_ms  # at the call's own (later) timestamp
    failed = [d for d in results if d.metadata["is_error"]]
    assert [d.metadata["tool_name"] for d in failed] == ["replace"]
    assert failed[0].metadata["status"] == "error"
    # thoughts are skipped (counted) unless asked for, like the other importers' thinking
    assert sum(r.skipped for r in records) == 1
    thinking = [d for r in read(DOCUMENT, thinking=True) for d in r.drafts]
    thoughts = [d for d in thinking if d.metadata.get("kind") == "thinking"]
    assert len(thoughts) == 1 and thoughts[0].text.startswith("Verifying the Archive: ")
    assert thoughts[0].event_id == "d198cbca-4f1d-44cd-a3ac-7ec15d63a49f#thoughts"
    assert records[-1].end_offset == DOCUMENT.stat().st_size


def test_subagent_document_summary_and_notices() -> None:
    records = read(SUBAGENT_DOC)
    drafts = [d for r in records for d in r.drafts]
    summary = [d for d in drafts if d.metadata.get("kind") == "summary"]
    assert [d.text for d in summary] == ["Get Gemini CLI token usage details."]
    assert all(d.metadata["session_kind"] == "subagent" for d in drafts)
    # its replies hold thoughts only: skipped, counted, never an error
    assert kinds(records)["user_message"] == 2 and not [r for r in records if r.error]
    warning = [d for r in read(WARNING_ONLY) for d in r.drafts]
    assert [(d.event_type, d.metadata["bookkeeping"], d.metadata["kind"]) for d in warning] == [
        ("system", "notice", "warning")
    ]


def test_jsonl_log_upserts_by_id_and_finds_the_working_directory() -> None:
    records = read(LOG)
    assert not [r.error for r in records if r.error]
    drafts = [d for r in records for d in r.drafts]
    assert {d.metadata["cwd"] for d in drafts} == {"/home/kingb/aim"}  # from the session context
    assert {(d.project, d.cwd) for d in drafts} == {(None, "/home/kingb/aim")}
    context = [d for d in drafts if d.metadata.get("bookkeeping") == "context"]
    assert len(context) == 1 and context[0].event_type == "system"
    ids = [d.event_id for d in drafts if d.event_id]
    # the reply appended again once its tool call finished only adds the call and its result
    assert Counter(ids)["d198cbca-4f1d-44cd-a3ac-7ec15d63a49f"] == 2
    unique = {d.event_id: d for d in drafts}
    doc = {d.event_id: d for r in read(DOCUMENT) for d in r.drafts}
    assert set(doc) <= set(unique)  # the same conversation as the document layout
    assert unique[f"{MAIN}#summary:" + _summary_hash(drafts)].metadata["kind"] == "summary"
    skipped_lines = [r.line for r in records if r.skipped and not r.drafts]
    assert len(skipped_lines) >= 2  # the $rewindTo and header-only $set lines


def _summary_hash(drafts: list) -> str:  # type: ignore[type-arg]
    (summary,) = [d for d in drafts if d.metadata.get("kind") == "summary"]
    return str(summary.event_id).rsplit(":", 1)[1]


def test_jsonl_log_reads_the_same_from_any_record_end() -> None:
    whole = read(LOG)
    everything = [(d.event_id, d.text) for r in whole for d in r.drafts]
    for record in whole:
        rest = read(LOG, record.end_offset)
        later = [(d.event_id, d.text) for r in rest for d in r.drafts]
        done = [(d.event_id, d.text) for r in whole if r.end_offset <= record.end_offset
                for d in r.drafts]  # fmt: skip
        assert done + later == everything


def test_subagent_log_is_its_own_session_linked_to_its_parent() -> None:
    drafts = [d for r in read(SUBAGENT_LOG) for d in r.drafts]
    assert {d.session_id for d in drafts} == {f"{MAIN}/50316244-145e-46cb-b42b-db11410ad87a"}
    assert {d.metadata["parent_session_id"] for d in drafts} == {MAIN}
    assert {d.metadata["cwd"] for d in drafts} == {"/home/kingb/aim"}  # from .project_root


def test_sidecar_files_are_skipped_not_rejected(tmp_path: Path) -> None:
    folder = tmp_path / "tmp" / "aim"
    folder.mkdir(parents=True)
    (folder / "logs.json").write_text(
        json.dumps(
            [
                {
                    "sessionId": MAIN,
                    "messageId": 0,
                    "type": "user",
                    "message": "hi",
                    "timestamp": "2026-03-17T22:25:41.698Z",
                }
            ]
        )
    )
    (folder / "checkpoint-before-fix.json").write_text(
        json.dumps({"history": [{"role": "user", "parts": [{"text": "hi"}]}]})
    )
    for name in ("logs.json", "checkpoint-before-fix.json"):
        source = sniff_format(folder / name)
        assert source is not None and source.name == "gemini"
        assert [(r.skipped, r.error) for r in read(folder / name)] == [(1, None)]


def _memory(home: Path) -> Memory:
    return Memory.open(load_settings({"home": str(home)}))


def test_import_real_sessions_with_zero_errors_once(tmp_path: Path) -> None:
    with _memory(tmp_path / "a") as mem:
        report = mem.ingest([DOCUMENT, SUBAGENT_DOC, WARNING_ONLY])
        assert report.rejected == 0 and report.unusable == [] and report.ingested == 16
        again = mem.ingest([DOCUMENT, SUBAGENT_DOC, WARNING_ONLY], rescan=True)
        assert again.ingested == 0 and again.duplicates == 16
        assert {e.agent for e in mem.events()} == {"gemini"}
    with _memory(tmp_path / "b") as mem:
        report = mem.ingest([CHATS])
        assert report.rejected == 0 and report.ingested > 0
        assert set(mem.store.projects()) == {"aim"}
        mem.process()
        assert mem.toc("aim")


def test_growing_log_and_rewritten_document_store_each_event_once(tmp_path: Path) -> None:
    lines = LOG.read_bytes().splitlines(keepends=True)
    live = tmp_path / "chats" / LOG.name
    live.parent.mkdir()
    doc = tmp_path / "chats" / "session-doc.json"
    data = json.loads(DOCUMENT.read_text())
    with _memory(tmp_path / "home") as mem:
        seen: list[str] = []
        for cut in (3, 6, len(lines)):
            live.write_bytes(b"".join(lines[:cut]))
            mem.ingest([live])
        for n in (2, 4, 6):  # the JSON layout is rewritten whole after every message
            doc.write_text(json.dumps({**data, "messages": data["messages"][:n]}, indent=2))
            report = mem.ingest([doc])
            assert report.rejected == 0
        seen = [e.event_id for e in mem.events(session_id=MAIN)]
    assert len(seen) == len(set(seen))
    reference = {d.event_id for r in read(LOG) for d in r.drafts}
    assert set(seen) == reference


def _events(home: Path) -> list[Event]:
    with _memory(home) as mem:
        return mem.events()


def test_gemini_hooks_ingest_a_real_session(tmp_path: Path) -> None:
    """``hooks install gemini`` wires AfterAgent/PreCompress/SessionEnd to ``hook ingest``; run
    as Gemini CLI runs it (hook JSON on stdin), the session is stored under the hook's project."""
    from typer.testing import CliRunner

    from memtoc.surfaces.cli import app

    project = tmp_path / "aim"
    project.mkdir()
    home = tmp_path / "home"
    result = CliRunner().invoke(
        app,
        [
            "--home",
            str(home),
            "hooks",
            "install",
            "gemini",
            "--scope",
            "project",
            "--project-dir",
            str(project),
        ],
    )
    assert result.exit_code == 0, result.output
    settings = json.loads((project / ".gemini" / "settings.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "AfterAgent", "PreCompress", "SessionEnd"}
    command = settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"]
    assert command.endswith("hook ingest --process")
    transcript = tmp_path / "session.json"
    shutil.copy(DOCUMENT, transcript)
    payload = json.dumps(
        {
            "session_id": MAIN,
            "transcript_path": str(transcript),
            "cwd": str(project),
            "hook_event_name": "SessionEnd",
            "timestamp": "2026-03-17T22:49:13.038Z",
            "reason": "exit",
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "memtoc", "--home", str(home), "hook", "ingest", "--process", "--wait"],
        input=payload, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert not (home / "hooks.log").exists()
    events = _events(home)
    assert len(events) == 12 and {e.project for e in events} == {"aim"}


@pytest.mark.parametrize("bad", ['{"sessionId": "x", "projectHash": "y", "messages": [1]}'])
def test_a_bad_message_is_an_error_naming_it(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "session.json"
    path.write_text(bad)
    records = read(path)
    assert [r.error for r in records] == ["message is not a JSON object"]


def test_an_archived_sub_agent_session_is_not_where_we_left_off(tmp_path: Path) -> None:
    """A Gemini CLI sub-agent's file copied out of its parent's folder (``kind: subagent``, no
    ``chats/<parent>/`` to say so) ran after the main session: the session-start context quotes
    the main session's request, never the sub-agent's prompt ("Your task is to answer …")."""
    with Memory.open(load_settings({"home": str(tmp_path / "home"), "embedder": "none"})) as mem:
        mem.ingest([DOCUMENT, SUBAGENT_DOC], default_cwd=str(tmp_path / "aim"))
        mem.process()
        sub = [e for e in mem.events() if e.metadata.get("session_kind") == "subagent"]
        assert sub and max(e.ts_ms for e in sub) > max(e.ts_ms for e in mem.events()
                                                        if e not in sub)  # fmt: skip
        view = mem.context(mem.store.projects()[0])
        events = mem.events()
    told = [i.text for i in view.items if i.section in ("thread", "earlier")]
    assert told and not [t for t in told if "Your task is to answer" in t], told
    main = next(e for e in events if e.session_id == MAIN and e.event_type == "user_message")
    assert any(i.ref == main.event_id for i in view.items if i.section == "thread"), told
