"""Tool calls and their results for the synthetic history: Read, Grep, Edit, Write and Bash.

Each builder returns a ``(call, result)`` pair of items (see ``synth_text.Item``). The texts are the
kind an agent transcript holds: ``Bash: pytest tests/test_auth.py -x`` with a JSON input in the
metadata, then pytest output, a stack trace, a diff or command output. Per-topic pieces (code views,
grep hits, test names) are built once per topic and cached, so each event costs a few string joins.
"""

from __future__ import annotations

import random

from memtoc.eval.synth_vocab import PYTEST_SUFFIXES, Issue, Topic
from memtoc.model import JsonValue

Item = tuple[str, str, str, dict[str, JsonValue]]
"""``(event_type, role, text, metadata)`` of one event before it gets a time and an id."""

_PYTHON = "Python 3.12.1, pytest-8.0.2, pluggy-1.4.0"


def _bare(func: str) -> str:
    """``RateLimiter.__call__()`` -> ``__call__``; ``refresh_token()`` -> ``refresh_token``."""
    return func.rstrip("()").rsplit(".", 1)[-1]


_VIEWS: dict[str, tuple[str, ...]] = {}
_TESTS: dict[str, tuple[str, ...]] = {}


def code_views(topic: Topic) -> tuple[str, ...]:
    """Numbered source excerpts (as the Read tool shows them), one per function of the topic."""
    cached = _VIEWS.get(topic.key)
    if cached is not None:
        return cached
    views = []
    for k, func in enumerate(topic.funcs):
        name = _bare(func)
        start = 12 + 37 * k
        body = (
            f"def {name}(self, request, *, timeout: float = 5.0):",
            f'    """{name.replace("_", " ").capitalize()} for the {topic.name} flow."""',
            "    started = time.monotonic()",
            f"    state = self._store.get(request.key)  # see {topic.files[0]}",
            "    if state is None:",
            f'        log.debug("{name}: miss for %s", request.key)',
            "        return self._fallback(request)",
            "    result = self._apply(state, request)",
            f'    metrics.observe("{topic.key}.{name}", time.monotonic() - started)',
            "    return result",
        )
        views.append("\n".join(f"{start + i:6d}\u2192{line}" for i, line in enumerate(body)))
    _VIEWS[topic.key] = out = tuple(views)
    return out


def test_names(topic: Topic) -> tuple[str, ...]:
    """Test function names for the topic's tests (``test_refresh_token_is_idempotent``...)."""
    cached = _TESTS.get(topic.key)
    if cached is None:
        cached = tuple(
            f"test_{_bare(f).strip('_')}_{s}" for f in topic.funcs for s in PYTEST_SUFFIXES
        )
        _TESTS[topic.key] = cached
    return cached


def _tool_id(rng: random.Random) -> str:
    return f"toolu_01{rng.getrandbits(104):026x}"


def _pair(
    rng: random.Random,
    tool: str,
    call_text: str,
    tool_input: dict[str, JsonValue],
    result: str,
    is_error: bool = False,
) -> tuple[Item, Item]:
    tid = _tool_id(rng)
    call: Item = (
        "tool_call",
        "assistant",
        call_text,
        {"tool_name": tool, "tool_use_id": tid, "input": tool_input},
    )
    res: Item = (
        "tool_result",
        "tool",
        result,
        {"tool_name": tool, "tool_use_id": tid, "is_error": is_error},
    )
    return call, res


def read_file(rng: random.Random, topic: Topic, cwd: str) -> tuple[Item, Item]:
    """Read a source file of the topic: the result is a numbered code excerpt (sometimes long)."""
    k = rng.randrange(len(topic.funcs))
    path = topic.files[k % len(topic.files)]
    views = code_views(topic)
    if rng.random() < 0.08:  # the whole file: a few KB
        text = "\n".join(views[(k + i) % len(views)] for i in range(len(views) * 2))
    else:
        text = views[k]
    return _pair(rng, "Read", f"Read: {path}", {"file_path": f"{cwd}/{path}"}, text)


def grep(rng: random.Random, topic: Topic, cwd: str) -> tuple[Item, Item]:
    """Search the code for a function of the topic."""
    name = _bare(rng.choice(topic.funcs))
    hits = [
        f"{topic.files[i % len(topic.files)]}:{rng.randrange(10, 400)}:    {name}(request)"
        for i in range(rng.randrange(1, 5))
    ]
    hits.append(
        f"{topic.tests[0]}:{rng.randrange(10, 300)}:def test_{name.strip('_')}_happy_path():"
    )
    return _pair(
        rng,
        "Grep",
        f"Grep: {name} in src/",
        {"pattern": name, "path": "src/", "output_mode": "content", "-n": True},
        "\n".join(hits),
    )


def edit_file(rng: random.Random, topic: Topic, issue: Issue, cwd: str) -> tuple[Item, Item]:
    """Edit a file of the topic towards the issue's fix."""
    path = rng.choice(topic.files)
    name = _bare(issue.func)
    pick = rng.randrange(4)
    if pick == 0:
        old = "state = self._store.get(request.key)"
        new = f"state = self._store.get(request.key, for_update=True)  # {issue.title}"
    elif pick == 1:
        old = "timeout: float = 5.0"
        new = f"timeout: float = {rng.choice((2, 10, 15, 30, 60))}.0"
    elif pick == 2:
        old = "return self._fallback(request)"
        new = f"# {issue.fix}\n        return self._fallback(request, retry=False)"
    else:
        old = "result = self._apply(state, request)"
        new = f"result = self._apply(state, request)\n        log.info('{name} applied', extra={{'key': request.key}})"
    call_text = f'Edit: {path} {{"old_string": "{old}", "new_string": "{new}"}}'
    view = code_views(topic)[topic.funcs.index(issue.func) if issue.func in topic.funcs else 0]
    result = (
        f"The file {cwd}/{path} has been updated. Here's the result of running `cat -n` on a "
        f"snippet of the edited file:\n{view.replace(old, new, 1)}"
    )
    return _pair(
        rng,
        "Edit",
        call_text,
        {"file_path": f"{cwd}/{path}", "old_string": old, "new_string": new},
        result,
    )


def write_test(rng: random.Random, topic: Topic, issue: Issue, cwd: str) -> tuple[Item, Item]:
    """Write a regression test for the issue."""
    path = f"tests/test_{topic.key}_regression.py"
    name = _bare(issue.func).strip("_")
    content = (
        f'def test_{name}_regression():\n    """Regression: {issue.title}."""\n'
        f"    result = {name}(make_request())\n    assert result.ok\n"
    )
    return _pair(
        rng,
        "Write",
        f"Write: {path}",
        {"file_path": f"{cwd}/{path}", "content": content},
        f"File created successfully at: {cwd}/{path}",
    )


def run_tests(
    rng: random.Random, topic: Topic, issue: Issue, cwd: str, *, fail: bool
) -> tuple[Item, Item]:
    """Run the topic's tests: a failure with the issue's error and a traceback, or a pass."""
    own = [c for c in topic.commands if c.startswith("pytest")]
    cmd = (
        rng.choice(own) if own and rng.random() < 0.5 else f"pytest {rng.choice(topic.tests)} -x -q"
    )
    test = topic.tests[0]
    names = test_names(topic)
    count = rng.randrange(6, 60)
    secs = f"{rng.uniform(0.4, 40.0):.2f}"
    head = f"============ test session starts ============\nplatform linux -- {_PYTHON}\nrootdir: {cwd}\ncollected {count} items\n\n"
    if rng.random() < 0.06:  # verbose listing: a few KB
        body = "\n".join(
            f"{test}::{names[(i * 7) % len(names)]} {'FAILED' if fail and i == 3 else 'PASSED'} [{100 * (i + 1) // count:3d}%]"
            for i in range(count)
        )
    else:
        body = f"{test} {'.' * min(count, 40)}{'F' if fail else ''} [100%]"
    if fail:
        failed = names[rng.randrange(len(names))]
        line = rng.randrange(20, 400)
        text = (
            f"{head}{body}\n\n================= FAILURES =================\n"
            f"____________ {failed} ____________\n\n"
            f"    def {failed}():\n>       result = {_bare(issue.func)}(make_request())\n\n"
            f"{topic.files[0]}:{line}: in {_bare(issue.func)}\n    state = self._store.get(request.key)\n"
            f"E   {issue.error}\n\n{test}:{rng.randrange(10, 200)}: {issue.error.split(':', 1)[0]}\n"
            f"========= short test summary info =========\nFAILED {test}::{failed} - {issue.error}\n"
            f"======== 1 failed, {count - 1} passed in {secs}s ========"
        )
    else:
        text = f"{head}{body}\n\n============ {count} passed in {secs}s ============"
    return _pair(
        rng,
        "Bash",
        f"Bash: {cmd}",
        {"command": cmd, "description": "Run the tests"},
        text,
        is_error=fail,
    )


def run_command(rng: random.Random, topic: Topic, issue: Issue, cwd: str) -> tuple[Item, Item]:
    """A non-test shell command: git status/diff/log, a lint run or a topic command."""
    pick = rng.random()
    path = rng.choice(topic.files)
    if pick < 0.25:
        ins, dels = rng.randrange(1, 60), rng.randrange(0, 30)
        cmd = "git diff --stat"
        out = f" {path} | {ins + dels} {'+' * min(ins, 20)}{'-' * min(dels, 10)}\n 1 file changed, {ins} insertions(+), {dels} deletions(-)"
    elif pick < 0.45:
        cmd = "git log --oneline -5"
        out = "\n".join(
            f"{rng.getrandbits(28):07x} {verb} {topic.key}: {issue.title}"
            for verb in ("fix", "test", "refactor", "docs", "chore")
        )
    elif pick < 0.6:
        cmd = "ruff check . && mypy src"
        out = "All checks passed!\nSuccess: no issues found in 84 source files"
    elif pick < 0.7:
        cmd = "git status --short"
        out = f" M {path}\n M {topic.tests[0]}\n?? tests/test_{topic.key}_regression.py"
    else:
        cmd = rng.choice(
            [c for c in topic.commands if not c.startswith("pytest")] or ["make check"]
        )
        out = (
            f"$ {cmd}\nINFO  starting ({topic.name})\nINFO  processed {rng.randrange(100, 90000)} items "
            f"in {rng.uniform(0.5, 120.0):.1f}s\nWARN  {issue.title}: {rng.randrange(0, 40)} retries\nDone."
        )
    return _pair(rng, "Bash", f"Bash: {cmd}", {"command": cmd}, out)
