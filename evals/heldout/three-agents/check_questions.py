#!/usr/bin/env python3
"""Check this held-out set's gold quotes: the coding corpora's checker, taught Codex and Gemini.

The standard-library ``check_questions.py`` of ``shared/datasets/coding/context-evaluator`` reads
Claude Code JSONL only. This wrapper loads it unchanged and extends its ``load_records`` with the
two other formats of this set, extracting the texts a memory product could return, as that checker
does for Claude Code:

* Codex CLI rollouts (``rollout-*.jsonl``): ``response_item`` user and assistant messages, tool
  calls (``function_call`` arguments and ``custom_tool_call`` input, raw and each string value
  inside) and tool outputs; the session is ``session_meta.payload.id``. Developer messages,
  reasoning, ``event_msg`` copies of the same messages and ``compacted`` replays are not read.
* Gemini CLI sessions (``*.json``): each message's ``content`` (user, gemini, warning…), its tool
  calls' arguments (raw JSON and each string value) and their ``functionResponse`` outputs; the
  session is ``sessionId``. Thoughts are not read.

Every other check (schema, the record named by ``session_id``/``timestamp``, ``multi`` spanning two
sessions, ``at`` not before its evidence) is the shared checker's own.

Usage: python3 check_questions.py --questions Q --transcripts DIR [--checker PATH] [--verbose]
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
_REL = os.path.join("datasets", "coding", "context-evaluator", "check_questions.py")
CANDIDATES = (
    os.path.join(HERE, "..", "..", "..", "..", "shared", _REL),
    os.path.join("/work", "shared", _REL),
)


def load_checker(path: str | None) -> ModuleType:
    """The shared checker module (given path, else ../shared beside the checkout, else /work)."""
    paths = [path] if path else [p for p in CANDIDATES if os.path.isfile(p)]
    if not paths or not os.path.isfile(paths[0]):
        raise SystemExit(f"shared check_questions.py not found (tried {path or CANDIDATES})")
    spec = importlib.util.spec_from_file_location("shared_check_questions", paths[0])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _call_texts(raw: object) -> Iterator[str]:
    """A tool call's input: the raw text, and each string value when it is JSON."""
    if isinstance(raw, str):
        yield raw
        try:
            yield from _strings(json.loads(raw))
        except ValueError:
            return
    elif raw is not None:
        yield json.dumps(raw, ensure_ascii=False)
        yield from _strings(raw)


def codex_records(path: str, name: str, norm) -> list[dict]:
    out: list[dict] = []
    session = name[:-6]
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            payload = rec.get("payload") or {}
            if rec.get("type") == "session_meta":
                session = payload.get("id") or session
                continue
            if rec.get("type") != "response_item":
                continue
            kind = payload.get("type")
            texts: list[tuple[str, str]] = []
            if kind == "message" and payload.get("role") in ("user", "assistant"):
                role = payload["role"]
                for part in payload.get("content") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        texts.append((f"{role}_text", part["text"]))
            elif kind in ("function_call", "custom_tool_call"):
                raw = payload.get("arguments", payload.get("input"))
                texts += [("tool_use", t) for t in _call_texts(raw)]
            elif kind in ("function_call_output", "custom_tool_call_output"):
                texts += [("tool_result", t) for t in _strings(payload.get("output"))]
            texts = [(k, norm(t)) for k, t in texts if t]
            if texts:
                out.append({"session_id": session, "file": name, "line": line_no,
                            "timestamp": rec.get("timestamp"), "uuid": None,
                            "type": kind, "texts": texts})  # fmt: skip
    return out


def gemini_records(path: str, name: str, norm) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return []
    session = data.get("sessionId") or name[:-5]
    out: list[dict] = []
    for n, msg in enumerate(data["messages"], 1):
        texts: list[tuple[str, str]] = []
        content = msg.get("content")
        role = msg.get("type")
        if isinstance(content, str):
            texts.append((f"{role}_message", content))
        elif isinstance(content, list):
            texts += [(f"{role}_text", p["text"]) for p in content
                      if isinstance(p, dict) and isinstance(p.get("text"), str)]  # fmt: skip
        for call in msg.get("toolCalls") or []:
            texts += [("tool_use", t) for t in _call_texts(call.get("args"))]
            for res in call.get("result") or []:
                response = (res.get("functionResponse") or {}).get("response")
                texts += [("tool_result", t) for t in _strings(response)]
        texts = [(k, norm(t)) for k, t in texts if t]
        if texts:
            out.append({"session_id": session, "file": name, "line": n,
                        "timestamp": msg.get("timestamp"), "uuid": msg.get("id"),
                        "type": role, "texts": texts})  # fmt: skip
    return out


def extend(checker: ModuleType) -> None:
    """Make ``checker.load_records`` read Codex rollouts and Gemini sessions too."""
    claude_code = checker.load_records

    def load_records(transcript_dir: str) -> list[dict]:
        records = list(claude_code(transcript_dir))  # other JSONL formats yield no record there
        for name in sorted(os.listdir(transcript_dir)):
            path = os.path.join(transcript_dir, name)
            if name.startswith("rollout-") and name.endswith(".jsonl"):
                records += codex_records(path, name, checker.norm)
            elif name.endswith(".json"):
                records += gemini_records(path, name, checker.norm)
        return records

    checker.load_records = load_records


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    checker_path = None
    if "--checker" in args:
        i = args.index("--checker")
        checker_path = args[i + 1]
        del args[i : i + 2]
    checker = load_checker(checker_path)
    extend(checker)
    return int(checker.main(args))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
