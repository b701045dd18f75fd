"""Codex rollouts: the injected system prompt and instructions are kept once per session, by hash,
never as event text (tests/fixtures/codex-real: a real 0.141 rollout, MIT)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from memtoc.config import load_settings
from memtoc.ingest.sources import SOURCES, sniff_format
from memtoc.ingest.sources.base import SourceOptions
from memtoc.memory import Memory

ROLLOUT = (
    Path(__file__).resolve().parent
    / "fixtures"
    / "codex-real"
    / "rollout-2026-06-22T12-10-56-019eef3d-abd1-72e1-ab99-dcdb259027c5.jsonl"
)
SESSION = "019eef3d-abd1-72e1-ab99-dcdb259027c5"


def _drafts(start: int = 0) -> list:  # type: ignore[type-arg]
    records = list(SOURCES["codex"].read(ROLLOUT, start, SourceOptions()))
    assert not [r.error for r in records if r.error]
    return [d for r in records for d in r.drafts]


def test_instructions_are_kept_once_by_hash_not_as_text() -> None:
    source = sniff_format(ROLLOUT)
    assert source is not None and source.name == "codex"
    drafts = _drafts()
    session = [d for d in drafts if d.metadata.get("kind") == "session_meta"]
    assert len(session) == 1
    meta = session[0].metadata
    assert session[0].event_type == "system" and meta["bookkeeping"] == "instructions"
    assert session[0].text == (
        f"Codex session {SESSION} in /home/entity/projects/EntityProcess/agentv (codex-tui 0.141.0)"
    )
    assert (
        meta["cli_version"] == "0.141.0" and meta["git"]["branch"] == "fix/openai-codex-target-env"
    )
    kinds = [b["kind"] for b in meta["instructions"]]
    assert kinds == [
        "base_instructions", "permissions instructions", "collaboration_mode",
        "apps_instructions", "skills_instructions", "plugins_instructions", "AGENTS.md",
    ]  # fmt: skip
    agents = meta["instructions"][-1]
    assert agents["path"] == "/home/entity/projects/EntityProcess/agentv"
    assert agents["chars"] > 5_000 and len(agents["sha256"]) == 64
    # none of those texts is stored; the whole session's system text is a few hundred bytes
    texts = "\n".join(d.text for d in drafts)
    assert "You are Codex" not in texts and "AgentV Agent Guide" not in texts
    assert "<skills_instructions>" not in texts and "<permissions instructions>" not in texts
    injected = [d for d in drafts if d.metadata.get("bookkeeping") == "instructions"]
    assert sum(len(d.text) for d in injected) < 600
    # what arrived mid-session and was new: a short stub naming it, with its hash
    stubs = [d.metadata["instructions"]["kind"] for d in injected if "instructions" in d.metadata
             and isinstance(d.metadata["instructions"], dict)]  # fmt: skip
    assert stubs == ["model_switch", "skill"]
    # the collaboration mode sent again after the model switch is the opening's: not repeated
    assert Counter(d.metadata.get("bookkeeping") for d in drafts)["instructions"] == 3


def test_prompts_context_and_interrupts() -> None:
    drafts = _drafts()
    prompts = [d.text for d in drafts if d.event_type == "user_message"]
    assert prompts[:2] == [
        "please switch to main and delete stale branches like fix/openai-codex-target-env",
        "is there research done in ai-research-wiki on agent-eval, if so please research how "
        "that does workspace setup (e.g. using sandbox) and whether agentv can adopt such "
        "pattern. $coordinator",
    ]
    assert not [p for p in prompts if p.lstrip().startswith("<")]
    context = [d for d in drafts if d.metadata.get("bookkeeping") == "context"]
    assert len(context) == 2 and context[0].metadata["shell"] == "zsh"
    assert context[1].metadata["timezone"] == "Europe/Berlin"
    assert [d.metadata["bookkeeping"] for d in drafts if "<turn_aborted>" in d.text] == [
        "interrupt"
    ]


def test_a_resumed_read_still_knows_the_opening() -> None:
    """An incremental read that starts mid-file (a hook after the second turn) still skips the
    opening's blocks when they are sent again and knows the session's instructions."""
    whole = _drafts()
    offset = len(b"".join(ROLLOUT.read_bytes().splitlines(keepends=True)[:28]))
    rest = _drafts(offset)
    tail = [(d.text, d.metadata.get("bookkeeping")) for d in whole][-len(rest) :]
    assert [(d.text, d.metadata.get("bookkeeping")) for d in rest] == tail


def test_memory_stores_no_instruction_text(tmp_path: Path) -> None:
    with Memory.open(load_settings({"home": str(tmp_path / "home")})) as mem:
        report = mem.ingest([ROLLOUT])
        assert report.rejected == 0 and report.unusable == []
        events = mem.events()
        mem.process()
        view = mem.context()
    system = sum(len(e.text) for e in events if e.event_type == "system")
    assert system < 2_000, system  # was about 28 KB of instructions in this session alone
    assert "You are Codex" not in view.text and "AGENTS.md instructions" not in view.text
    assert json.dumps([e.metadata for e in events]).count("skills_instructions") == 1


def test_a_compressed_rollout_is_read_and_never_stored_twice(tmp_path: Path) -> None:
    """Codex zstd-compresses a rollout idle for a week (``rollout-….jsonl.zst``): it is read
    through a plain copy, with the ids the plain file gave, so a rollout imported before and after
    its compression is stored once."""
    import zstandard

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    plain = sessions / ROLLOUT.name
    plain.write_bytes(ROLLOUT.read_bytes())
    with Memory.open(load_settings({"home": str(tmp_path / "home")})) as mem:
        first = mem.ingest([sessions])
        assert first.rejected == 0 and first.ingested > 0
        packed = plain.with_name(plain.name + ".zst")
        packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
        plain.unlink()  # what Codex's compression worker does
        again = mem.ingest([sessions])
        assert (again.files, again.rejected, again.ingested) == (1, 0, 0)
        assert mem.ingest([packed], rescan=True).duplicates == first.ingested
        sources = {e.source for e in mem.events()}
    assert sources == {str(plain)}  # the events keep the file they came from first
    with Memory.open(load_settings({"home": str(tmp_path / "fresh")})) as mem:
        report = mem.ingest([packed])
        assert (report.rejected, report.ingested) == (0, first.ingested)
        assert {e.source for e in mem.events()} == {str(packed)}
        broken = (
            sessions / "rollout-2026-06-23T00-00-00-019eef3d-0000-7000-8000-000000000000.jsonl.zst"
        )
        broken.write_bytes(b"\x28\xb5\x2f\xfd not really zstd")
        bad = mem.ingest([broken])
        assert bad.unusable == [str(broken)] and "zstd" in bad.rejections[0].reason
