"""The turns of one synthetic coding session: a coherent task thread on one issue of one topic.

A session opens with the user's ask (what it is depends on the **phase**: first look, implementing
the fix, or a follow-up), then the agent plans, explores (Read, Grep), reproduces the failure,
explains the cause, sometimes guesses wrong and is corrected by the user ("no, the bug is in
refresh_token()"), proposes a fix, the user takes a decision or confirms, the agent edits and
re-runs the tests (which sometimes fail again), and then the thread continues with follow-up
work (more edits, git, lint, questions) for as long as the session lasts. ``body`` is an endless
generator; the caller takes as many events as the session has and closes it with ``summary``.

Templates are ``str.format`` strings over a per-session dict, filled once per event.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from memtoc.eval import synth_tools as tools
from memtoc.eval.synth_tools import Item
from memtoc.eval.synth_vocab import Issue, Topic

OPENING: tuple[tuple[str, ...], ...] = (
    (
        "We have a problem in {proj}: {symptom}. Can you look into it? I suspect something around {file}.",
        "Can you investigate the {issue}? Reports say {symptom}. Start by reproducing it with a test.",
        "New bug on the {topic} side: {symptom}. Please find the cause before changing anything.",
    ),
    (
        "Let's pick up the {issue} again. Last time we found that {cause}. Please implement the fix now.",
        "Back to the {topic} work: can you finish the fix for the {issue}? Tests in {test} should cover it.",
        "Continuing on {issue}. Plan was to {fix}. Go ahead, and keep the diff small.",
    ),
    (
        "The {issue} fix is merged. Can you add a regression test and clean up {file}?",
        "Follow-up on the {issue}: {symptom} came back once in staging. Can you double-check the fix?",
        "Quick follow-up on {topic}: document how we handled the {issue} and make sure nothing else calls {func} the old way.",
    ),
)

PLAN = (
    "I'll start by reading {file} and the tests in {test} to see how {func} is used, then reproduce the failure with a focused test before changing anything. If the test confirms it, I'll look at {file2} as well since it shares the same code path.",
    "Let me look at {file} first. The symptom ({symptom}) suggests the problem is in the {topic} path, so I'll trace it from the entry point.",
    "Plan: 1) reproduce with a focused test, 2) find where {func} goes wrong, 3) fix it, 4) run the {topic} test suite.",
)
EXPLAIN = (
    "Found it. In {file}, {cause}. That explains why {symptom}. The failing test reproduces it reliably, and nothing else in the {topic} code depends on the current behaviour, so the fix can stay local.",
    "The failure reproduces: `{error}`. Root cause: {cause}. I checked the git history of {file}: the behaviour has been there since the last refactor, it just wasn't exercised by the tests.",
    "Looking at the traceback, {func} is where it breaks: {cause}.",
)
WRONG = (
    "I think the problem is in {other}: it doesn't handle the case where the request is retried, so the state gets out of sync.",
    "My guess is {other} is the culprit; it reads the config before it's loaded.",
)
CORRECTION = (
    "No, the bug is in {func}, not {other}. Look at it again.",
    "That's not it. {other} is fine, we tested it last month. Check {func}.",
    "No, you're looking at the wrong place. The bug is in {func}.",
)
ACK_CORRECTION = (
    "You're right, sorry. In {func}: {cause}. That's the actual bug.",
    "Confirmed, it's {func}. {cause_cap}.",
)
PROPOSE = (
    "The fix is to {fix}. I'll change {func} and add a test that fails without it. This also means the existing tests in {test} need a small update, because two of them relied on the old behaviour.",
    "I propose we {fix}. Alternatively we could work around it in the caller ({other}), but that would hide the problem and the next person to touch {file} would hit it again.",
    "Two options: {fix}, or a quick patch in {other}. I'd go with the first.",
)
DECISION = (
    "{decision}.",
    "{decision}. It's simpler to operate and we already run it in prod.",
    "OK. {decision}. Write that down in the PR description.",
)
ACK_DECISION = (
    "Agreed, I'll go with that and note the decision in the PR description so the reasoning is recorded next to the {topic} change.",
    "Makes sense. I'll implement it that way and update {file} accordingly.",
)
CONFIRM = (
    "Yes, exactly.",
    "Yes, that matches what I saw in the logs.",
    "Right, go ahead.",
    "Looks good, ship it.",
    "Perfect, thanks.",
)
QUESTION = (
    "Why did this only show up now?",
    "Does this also affect {file2}?",
    "Is there anything else that calls {func}?",
    "How confident are you that this covers the {issue}?",
)
ANSWER = (
    "It only shows up under load: {cause}. Before the last release the path was rarely hit, because traffic went through {other} first and that masked the problem.",
    "I checked {file2}: it goes through {func} too, so the fix covers it. I added a test for that path.",
    "Only {other} and the tests call {func}. Both are covered by the new test in {test}.",
)
PASSED = (
    "All tests in {test} pass now. The change is limited to {file}: {func} no longer fails this way, and I kept the public signature unchanged so callers in {file2} are unaffected.",
    "Green: the failing test passes and the rest of the {topic} suite is unaffected.",
    "Fixed. `{error_head}` no longer occurs and the full suite passes.",
)
FAILED_AGAIN = (
    "Still failing, but differently now: the first assertion passes and the second one fails with `{error_head}`. {func} needs one more change for the retry path; the first edit only covered the normal path.",
    "The test still fails. I missed a second call site in {file2}; fixing that too.",
)
SUMMARY = (
    "Summary of this session.\n- Problem: {issue} ({symptom}).\n- Cause: {cause}.\n- Fix: {fix}.\n- Decision: {decision}.\n- Tests: {test} passes; the regression test is in place.",
    "Done for now. We fixed the {issue} in {func} ({file}); {decision_lc}. Next: watch the metrics after deploy.",
    "Wrap-up: reproduced the {issue}, fixed it ({fix}), added a regression test in {test}.",
)
PROGRESS = (
    "I've updated {file}. Next I'll check {file2} for other callers of {func} so we don't leave a second copy of the bug.",
    "Progress so far: the fix for the {issue} is in {func}, tests are green locally. Remaining: clean up the old workaround in {other} and update the docs.",
    "Before committing I ran the linters and the type checker; both are clean. The diff touches {file} and {test} only.",
    "I re-read the change with fresh eyes: the edge case where {symptom} is covered now, and the error `{error_head}` can no longer be raised from {func}.",
)
SYSTEM = (
    "Context compacted: earlier messages were summarised to free up the context window.",
    "PostToolUse hook: ruff format reformatted 1 file.",
    "Session resumed after the terminal was idle.",
)


@dataclass(slots=True)
class SessionContext:
    """What a session is about, plus the template fields derived from it."""

    project: str
    topic: Topic
    issue: Issue
    phase: int
    """0: first look at the issue, 1: implementing the fix, 2: follow-up."""
    cwd: str
    branch: str
    fields: dict[str, str]


def make_context(
    project: str, topic: Topic, issue: Issue, phase: int, rng: random.Random
) -> SessionContext:
    """The session's topic, issue and template fields."""
    other = next((f for f in topic.funcs if f != issue.func), topic.funcs[0])
    file = topic.files[0]
    fields = {
        "proj": project,
        "topic": topic.name,
        "issue": issue.title,
        "symptom": issue.symptom,
        "error": issue.error,
        "error_head": issue.error.split(":", 1)[0],
        "cause": issue.cause,
        "cause_cap": issue.cause[0].upper() + issue.cause[1:],
        "fix": issue.fix,
        "decision": issue.decision,
        "decision_lc": issue.decision[0].lower() + issue.decision[1:],
        "func": issue.func,
        "other": other,
        "file": file,
        "file2": topic.files[1 % len(topic.files)],
        "test": topic.tests[0],
    }
    slug = "-".join(issue.title.lower().split()[:3])
    branch = f"{('fix', 'fix', 'chore')[phase]}/{topic.key}-{slug}"
    return SessionContext(project, topic, issue, phase, f"/home/dev/{project}", branch, fields)


def _say(
    event_type: str, role: str, templates: tuple[str, ...], ctx: SessionContext, rng: random.Random
) -> Item:
    return (event_type, role, rng.choice(templates).format_map(ctx.fields), {})


def _user(templates: tuple[str, ...], ctx: SessionContext, rng: random.Random) -> Item:
    return _say("user_message", "user", templates, ctx, rng)


def _assistant(templates: tuple[str, ...], ctx: SessionContext, rng: random.Random) -> Item:
    return _say("assistant_message", "assistant", templates, ctx, rng)


def session_start(ctx: SessionContext) -> Item:
    """The first event: where the session runs."""
    return (
        "session_start",
        "system",
        f"Session started in {ctx.cwd} on branch {ctx.branch}",
        {"cwd": ctx.cwd, "git_branch": ctx.branch, "source": "startup"},
    )


def session_end(ctx: SessionContext, count: int) -> Item:
    """The last event."""
    return ("session_end", "system", f"Session ended ({count} events)", {"reason": "exit"})


def opening(ctx: SessionContext, rng: random.Random) -> Item:
    """The user's ask that starts the thread."""
    return _user(OPENING[ctx.phase], ctx, rng)


def summary(ctx: SessionContext, rng: random.Random) -> Item:
    """The agent's closing summary."""
    return _assistant(SUMMARY, ctx, rng)


def body(ctx: SessionContext, rng: random.Random) -> Iterator[Item]:
    """The events between the opening ask and the summary; endless, the caller cuts it."""
    t, i, cwd, r = ctx.topic, ctx.issue, ctx.cwd, rng.random
    yield _assistant(PLAN, ctx, rng)
    for _ in range(rng.randrange(1, 4)):
        yield from (tools.read_file(rng, t, cwd) if r() < 0.6 else tools.grep(rng, t, cwd))
    if ctx.phase < 2:
        yield from tools.run_tests(rng, t, i, cwd, fail=True)
        if r() < 0.35:
            yield _assistant(WRONG, ctx, rng)
            yield _user(CORRECTION, ctx, rng)
            yield _assistant(ACK_CORRECTION, ctx, rng)
        else:
            yield _assistant(EXPLAIN, ctx, rng)
            if r() < 0.5:
                yield _user(CONFIRM, ctx, rng)
        yield _assistant(PROPOSE, ctx, rng)
        if r() < 0.6:
            yield _user(DECISION, ctx, rng)
            yield _assistant(ACK_DECISION, ctx, rng)
    while True:
        yield from _work_cycle(ctx, rng)


def _work_cycle(ctx: SessionContext, rng: random.Random) -> Iterator[Item]:
    """One round of follow-up work: an edit and test run, exploration, git, or a question."""
    t, i, cwd = ctx.topic, ctx.issue, ctx.cwd
    pick = rng.random()
    if pick < 0.3:
        for _ in range(rng.randrange(1, 3)):
            yield from tools.edit_file(rng, t, i, cwd)
        fail = rng.random() < 0.25
        yield from tools.run_tests(rng, t, i, cwd, fail=fail)
        yield _assistant(FAILED_AGAIN if fail else PASSED, ctx, rng)
        if not fail and rng.random() < 0.4:
            yield _user(CONFIRM, ctx, rng)
    elif pick < 0.55:
        for _ in range(rng.randrange(1, 3)):
            yield from (
                tools.read_file(rng, t, cwd) if rng.random() < 0.6 else tools.grep(rng, t, cwd)
            )
    elif pick < 0.7:
        yield from tools.run_command(rng, t, i, cwd)
    elif pick < 0.8:
        yield _user(QUESTION, ctx, rng)
        yield _assistant(ANSWER, ctx, rng)
    elif pick < 0.87:
        yield from tools.write_test(rng, t, i, cwd)
        yield from tools.run_tests(rng, t, i, cwd, fail=False)
    elif pick < 0.9:
        yield _assistant(PROGRESS, ctx, rng)
    elif pick < 0.97:
        yield _assistant(EXPLAIN if rng.random() < 0.3 else PROGRESS, ctx, rng)
    else:
        yield ("system", "system", rng.choice(SYSTEM), {})
