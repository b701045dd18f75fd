"""What a tool result showed, in words — never the raw output.

A result is read according to the tool that produced it: the call it answers (paired by the
``tool_use_id`` every importer records, else the nearest call before it), or the tool named in the
result's own metadata (SpecStory), else its shape (``cat -n`` numbered lines are a file read).

- a **shell** command's output gives its outcomes: a test tally in any common runner's words
  ("Tests: 1216 passed, 0 failed"; pytest, bun/jest/vitest, go test, cargo), a commit ("Committed
  f2635a5: Fix the diff viewer"), files changed ("13 files changed, 1345 insertions(+), 28
  deletions(-)"), or an error line (an exception, ``error:``, ``FAILED``, ``fatal``, ``panic``);
- a **read** shows a file: its line count and the names it defines, never an "error" because
  the code mentions one;
- an **edit** or **write** adds nothing (the call already says what was edited) unless it failed;
- a failed call (``is_error``) names what went wrong — a tool's own refusal ("String to replace
  not found") is a ``tool_error``, weaker than a failure of the project's code.

``describe_result`` returns these as ``ResultFact``s; ``output_fact`` describes a result when a
segment holds nothing else (a long tool output cut into a segment of its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memtoc.model import Event
from memtoc.pipeline.summarize.tool_calls import ToolAction, call_content, render_tool_call
from memtoc.text.keyphrases import is_code_token

TAIL_CHARS = 6_000
"""Outcomes are read from the end of an output (runners print their tally last)."""
HEAD_CHARS = 4_000
OUTPUT_NAMES = 12
"""Names a file read lists (the output of a segment holding nothing else)."""
GIST_WORDS = 40
"""Words of an output's first meaningful lines that describe it."""

_NUMBERED = re.compile(r"^\s*\d+(?:→|\t| \| )", re.MULTILINE)
_ERROR_LINE = re.compile(
    r"(?:^|\s)((?:[A-Za-z_][\w.]*(?:Error|Exception)|error(?:\[\w+\])?|ERROR|FAILED|FAIL:|fatal|"
    r"panic)\b[:\s].{0,200})"
)
_PYTEST_FAILED = re.compile(r"FAILED \S*?::(\w+)\S* - (.+)")
_PYTEST = re.compile(r"\b(\d+) (passed|failed|errors?|skipped)\b")
_BUN_PASS = re.compile(r"^\s*(\d+) pass\s*$", re.MULTILINE)
_BUN_FAIL = re.compile(r"^\s*(\d+) fail\s*$", re.MULTILINE)
_JEST = re.compile(r"^\s*Tests?:?\s+(.*\d+ (?:passed|failed).*)$", re.MULTILINE)
_GO_OK = re.compile(r"^ok\s+\S+\s+(?:\d+(?:\.\d+)?m?s|\(cached\)|\[no test files\])", re.MULTILINE)
"""``go test``'s line for a package that passed ("ok  	example.com/pkg	0.012s"); not a tool's
own "ok ✓"."""
_GO_FAIL_PKG = re.compile(
    r"^FAIL\s+(\S+)\s+(?:\d+(?:\.\d+)?m?s|\[(?:build|setup) failed\])", re.MULTILINE
)
_GO_FAIL_TEST = re.compile(r"^\s*--- FAIL: (\w+)", re.MULTILINE)
_CARGO = re.compile(r"test result: (\w+)\. (\d+) passed; (\d+) failed")
_BIOME = re.compile(
    r"Checked (\d+) files? in [\d.]+\s*[mµ]?s\.(?: (?:No fixes applied|Fixed (\d+) files?)\.)?"
)
_FOUND = re.compile(r"^\s*Found (\d+) (errors?|warnings?)\b", re.MULTILINE)
_RUFF_OK = re.compile(r"^All checks passed!", re.MULTILINE)
_MYPY_OK = re.compile(r"^Success: no issues found in (\d+) source files?", re.MULTILINE)
_MYPY_FOUND = re.compile(r"^Found (\d+) errors? in \d+ files? \(checked \d+ source files?\)",
                         re.MULTILINE)  # fmt: skip
_ESLINT = re.compile(r"✖ (\d+ problems? \(\d+ errors?, \d+ warnings?\))")
_CHECKS_LINE = re.compile(
    r"✖ \d+ problems?|\bFound \d+ (?:errors?|warnings?)|\bChecked \d+ files? in "
)
"""In a linter's or type checker's summary line: its "2 errors" are no test tally."""
_CHECKER = re.compile(r"\b(biome|eslint|ruff|oxlint|prettier|mypy|pyright|tsc)\b")
_COMMIT = re.compile(r"^\[([\w./-]+)(?: \(root-commit\))? ([0-9a-f]{7,12})\] (.+)$", re.MULTILINE)
_CHANGED = re.compile(r"\b\d+ files? changed(?:, \d+ insertions?\(\+\))?(?:, \d+ deletions?\(-\))?")
_DEFINES = re.compile(
    r"^\s*(?:\d+(?:→|\t))?\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?"
    r"(?:def|class|func|function|interface|type|struct|fn|const|enum)\s+(?:\([^)]*\)\s*)?"
    r"([A-Za-z_]\w{2,})",
    re.MULTILINE,
)
_UPDATED = re.compile(r"has been (?:updated|created|written)|updated successfully|File created")
_TAG = re.compile(r"</?[\w-]+>")
_ERROR_LABEL = re.compile(r"^error:\s*", re.IGNORECASE)
_FAILED_COUNT = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")

_READ_TYPES = frozenset({"read", "search", "list", "fetch", "glob", "grep"})
_EDIT_TYPES = frozenset({"write", "edit"})
_SHELL_TYPES = frozenset({"shell", "bash", "command", "exec", "terminal"})


@dataclass(frozen=True, slots=True)
class ResultFact:
    """One thing a result showed: ``kind`` is ``tests``, ``commit``, ``changed``, ``error``,
    ``tool_error``, ``read`` or ``output``."""

    kind: str
    text: str


def call_index(events: Iterable[Event]) -> dict[str, Event]:
    """``tool_use_id`` → the call that carries it."""
    out: dict[str, Event] = {}
    for e in events:
        if e.event_type == "tool_call":
            tid = e.metadata.get("tool_use_id")
            if isinstance(tid, str) and tid:
                out[tid] = e
    return out


def paired_call(result: Event, calls: Mapping[str, Event], previous: Event | None) -> Event | None:
    """The call ``result`` answers: by ``tool_use_id``, else ``previous`` (the nearest call)."""
    tid = result.metadata.get("tool_use_id")
    if isinstance(tid, str) and tid:
        return calls.get(tid)
    return previous


def result_role(result: Event, action: ToolAction | None) -> str:
    """``shell``, ``read``, ``edit`` or ``other``: what kind of tool produced ``result``."""
    if action is not None:
        return {"command": "shell", "read": "read", "edit": "edit"}.get(action.kind, "other")
    for key in ("tool_type", "tool_name", "tool"):
        value = result.metadata.get(key)
        if isinstance(value, str) and value:
            low = value.lower()
            if low in _SHELL_TYPES or "shell" in low or "bash" in low:
                return "shell"
            if low in _EDIT_TYPES or any(t in low for t in ("edit", "write", "replace", "patch")):
                return "edit"
            if low in _READ_TYPES or any(t in low for t in ("read", "search", "grep", "glob")):
                return "read"
    head = result.text[:2_000]
    if len(_NUMBERED.findall(head)) >= 3:
        return "read"
    return "other"


def describe_result(result: Event, action: ToolAction | None) -> list[ResultFact]:
    """What ``result`` showed (see the module docstring); empty when it showed nothing worth
    a bullet (a read, a successful edit, plain output)."""
    text = result.text
    failed = result.metadata.get("is_error") is True
    role = result_role(result, action)
    if failed and role in ("read", "edit", "other") and len(text) < 2_000:
        message = _clean(_strip_tags(text)) or "failed"
        target = f" `{action.subject}`" if action is not None and action.subject else ""
        verb = {"read": "Read", "edit": "Edit of"}.get(role, "Call")
        return [ResultFact("tool_error", f"{verb}{target} failed: {_words(message, 16)}")]
    if role in ("read", "edit"):
        return []
    tail = text[-TAIL_CHARS:]
    out: list[ResultFact] = []
    tests = _tests(_without_checks(tail))
    if tests:
        out.append(ResultFact("tests", tests))
    checks = _checks(tail, action.subject if action is not None else "")
    if checks:
        out.append(ResultFact("checks", checks))
    commit = _COMMIT.search(text[:HEAD_CHARS]) or _COMMIT.search(tail)
    if commit:
        out.append(ResultFact("commit", f"Committed {commit.group(2)}: {_words(commit.group(3))}"))
    changed = _CHANGED.search(tail)
    if changed and not commit:
        out.append(ResultFact("changed", changed.group(0)[:1].upper() + changed.group(0)[1:]))
    elif changed and commit:
        out[-1] = ResultFact("commit", f"{out[-1].text} ({changed.group(0)})")
    # A command the agent's tool reported as succeeded (exit status 0) printed its error lines
    # as expected output (a test's logged failure, a warning): they are not this result's error.
    succeeded = result.metadata.get("is_error") is False
    error = "" if succeeded else _error(tail, failed)
    if error and not (tests and _FAILED_COUNT.search(tests) is None):
        out.append(ResultFact("error", error))
    return out


def written_fact(call: Event, action: ToolAction) -> ResultFact | None:
    """What a write call put in a file, when its arguments carry the content ("Wrote `x` (312
    lines): defines A, B"), else None."""
    content = call_content(call.text, call.metadata)
    if not content:
        return None
    lines = [ln for ln in content.splitlines() if ln.strip()]
    names = _defined(content)
    shown = f": defines {_listed(names)}" if names else (f": {_gist(lines)}" if lines else "")
    verb = action.text.split(" `", 1)[0]  # the call's fact without the names edited
    return ResultFact("read", f"{verb} `{action.subject}` ({len(lines)} lines){shown}")


def _defined(text: str) -> list[str]:
    return list(
        dict.fromkeys(
            n
            for m in _DEFINES.finditer(text[:50_000])
            if is_code_token(n := m.group(1)) or (n[:1].isupper() and len(n) >= 4)
        )
    )


def _listed(names: Sequence[str]) -> str:
    more = f" and {len(names) - OUTPUT_NAMES} more" if len(names) > OUTPUT_NAMES else ""
    return ", ".join(names[:OUTPUT_NAMES]) + more


def output_fact(result: Event, action: ToolAction | None) -> ResultFact:
    """A description of ``result`` when a segment holds nothing else: the file read (line count,
    names defined), else the command and its first meaningful line, else the output's size."""
    text = result.text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    role = result_role(result, action)
    target = action.subject if action is not None and action.subject else ""
    if role == "read":
        names = _defined(text)
        what = f"`{target}`" if target else "a file"
        if names:
            return ResultFact("read", f"Read {what} ({len(lines)} lines): defines {_listed(names)}")
        gist = _gist(lines)
        return ResultFact(
            "read", f"Read {what} ({len(lines)} lines)" + (f": {gist}" if gist else "")
        )
    if role == "edit" and _UPDATED.search(text[:500]):
        return ResultFact("read", f"Edited `{target}`" if target else _words(_clean(lines[0])))
    gist = _gist(lines)
    if target:
        shown = f": {gist}" if gist else ""
        return ResultFact("output", f"Output of `{target}` ({len(lines)} lines){shown}")
    if gist:
        return ResultFact("output", f"Tool output ({len(lines)} lines): {gist}")
    return ResultFact("output", f"Tool output ({len(lines)} lines)")


def _gist(lines: Sequence[str]) -> str:
    """The first few meaningful lines of an output (numbering, markup and symbols dropped)."""
    out: list[str] = []
    words = 0
    for line in lines[:200]:
        text = _clean(_strip_tags(_NUMBERED.sub("", line, count=1)))
        if len(text.split()) < 3 or sum(c.isalpha() for c in text) < len(text) / 2:
            continue
        out.append(_words(text, 16).rstrip(".") + ".")
        words += min(len(text.split()), 16)
        if words >= GIST_WORDS:
            break
    return " ".join(out)


def _tests(tail: str) -> str:
    """A test tally in words, or ''."""
    cargo = _CARGO.search(tail)
    if cargo:
        return f"Tests: {cargo.group(2)} passed, {cargo.group(3)} failed"
    passed, failed = _BUN_PASS.findall(tail), _BUN_FAIL.findall(tail)
    if passed or failed:
        p, f = (int(passed[-1]) if passed else 0), (int(failed[-1]) if failed else 0)
        return f"Tests: {p} passed, {f} failed" + _failed_names(tail, f)
    jest = _JEST.findall(tail)
    if jest:
        return "Tests: " + " ".join(jest[-1].split())
    counts = _PYTEST.findall(tail)
    if counts:
        seen: dict[str, str] = {}
        for n, word in counts:
            seen[word] = n  # the last tally wins (a rerun's summary line)
        parts = [f"{n} {w}" for w, n in seen.items()]
        failed_n = int(seen.get("failed", "0"))
        return "Tests: " + ", ".join(parts) + _failed_names(tail, failed_n)
    oks, fails = _GO_OK.findall(tail), _GO_FAIL_PKG.findall(tail)
    if oks or fails:
        text = f"Go tests: {len(oks)} packages ok, {len(fails)} failed"
        names = list(dict.fromkeys(_GO_FAIL_TEST.findall(tail)))[:3]
        return text + (f" ({', '.join(names)})" if names else "")
    return ""


def _checks(tail: str, command: str) -> str:
    """A linter's or type checker's verdict in words, or '': biome ("Lint (biome): 272 files
    checked, 2 files fixed"), ruff, eslint, mypy ("Type check (mypy): no issues in 224 files").
    The checker is named when the output (a script runner echoes ``$ biome check``) or the
    command names it."""
    mypy_ok, mypy_found = _MYPY_OK.search(tail), _MYPY_FOUND.search(tail)
    if mypy_ok or mypy_found:
        verdict = (f"{mypy_found.group(1)} errors" if mypy_found
                   else f"no issues in {mypy_ok.group(1) if mypy_ok else '?'} files")  # fmt: skip
        return f"Type check (mypy): {verdict}"
    biome, eslint = _BIOME.search(tail), _ESLINT.search(tail)
    found = _FOUND.search(tail)
    if biome:
        parts = [_files(biome.group(1), "checked")]
        if biome.group(2):
            parts.append(_files(biome.group(2), "fixed"))
        if found:
            parts.append(f"{found.group(1)} {found.group(2)}")
        elif not biome.group(2):
            parts.append("no issues")
        verdict = ", ".join(parts)
    elif eslint:
        verdict = eslint.group(1)
    elif _RUFF_OK.search(tail):
        verdict = "all checks passed"
    elif found and "ruff" in command:
        verdict = f"{found.group(1)} {found.group(2)}"
    else:
        return ""
    echoed = (
        ("\n" + tail[: biome.start()]).rsplit("\n$ ", 1) if biome else []
    )  # "$ biome check --write"
    said = echoed[1].split("\n", 1)[0] if len(echoed) > 1 else ""
    named = _CHECKER.search(said) or _CHECKER.search(command)
    name = "ruff" if named is None and _RUFF_OK.search(tail) else named.group(1) if named else ""
    return f"Lint ({name}): {verdict}" if name else f"Lint: {verdict}"


def _without_checks(tail: str) -> str:
    """``tail`` without the summary lines of linters and type checkers."""
    if _CHECKS_LINE.search(tail) is None:
        return tail
    return "\n".join(ln for ln in tail.split("\n") if _CHECKS_LINE.search(ln) is None)


def _files(count: str, done: str) -> str:
    return f"{count} file{'' if count == '1' else 's'} {done}"


def _failed_names(tail: str, failed: int) -> str:
    if not failed:
        return ""
    names = [m.group(1) for m in _PYTEST_FAILED.finditer(tail)]
    names += _GO_FAIL_TEST.findall(tail)
    names += re.findall(r"^\s*\(fail\) (.{3,80}?)(?: \[[\d.]+ms\])?$", tail, re.MULTILINE)
    names = list(dict.fromkeys(n.strip() for n in names))[:3]
    return f" ({'; '.join(names)})" if names else ""


def _error(tail: str, failed: bool) -> str:
    errors = [m.group(1) for m in _ERROR_LINE.finditer(tail)]
    if not errors and not failed:
        return ""
    stripped = tail.strip()
    line = errors[-1] if errors else stripped.splitlines()[-1] if stripped else "failed"
    pytest = _PYTEST_FAILED.match(line.strip())
    if pytest:
        return f"Error: {_words(_clean(pytest.group(2)), 20)} in `{pytest.group(1)}`"
    line = _ERROR_LABEL.sub("", _clean(line), count=1)  # "Error: error: x" says it once
    return "Error: " + _words(line, 24)


def _strip_tags(text: str) -> str:
    return _TAG.sub(" ", text)


def _clean(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def _words(text: str, n: int = 20) -> str:
    words = text.split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


def results_of(
    events: Sequence[Event], context: Sequence[Event] = ()
) -> list[tuple[int, Event | None, ToolAction | None]]:
    """For every tool result in ``events``: its index, the call it answers (in ``events`` or the
    overlap ``context``) and that call rendered as an action."""
    calls = call_index([*context, *events])
    previous: Event | None = next((e for e in reversed(context) if e.event_type == "tool_call"),
                                  None)  # fmt: skip
    out: list[tuple[int, Event | None, ToolAction | None]] = []
    for i, e in enumerate(events):
        if e.event_type == "tool_call":
            previous = e
            continue
        if e.event_type != "tool_result":
            continue
        call = paired_call(e, calls, previous)
        action = render_tool_call(call.text, call.metadata) if call is not None else None
        out.append((i, call, action))
    return out
