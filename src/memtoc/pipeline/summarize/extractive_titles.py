"""Titles for the extractive summariser: what a segment or period was about, in one line.

A **coding segment** title says what was done, from the strongest evidence it holds:

1. a commit: its subject in the past tense ("Added Cursor support: rules and skills detection");
2. the user's request (a plan's heading, else the opening sentence without its politeness), in
   the past tense when the segment shows the work done (edits, a commit, passing tests, a fix
   concluded): "Fixed the diff viewer column layout"; a correction says so ("Correction: …");
3. else an error and whether it was then fixed, with the topic and where::

       Fixed order dependence (AssertionError) in db_fixture
       Debugging connection error (ConnectionRefusedError) in wait_for_queue

4. else a proposed plan, the agent's conclusion, a question put to the user, a test run, the
   files edited or read — and a segment holding only a tool's output is titled by what that
   output was ("Read `src/engine.ts` (845 lines, defining runRemediation…)"), never ``(empty)``.

A **conversation** names its speakers and topics: "Caroline & Melanie: support group, adoption".

Period titles are built from threads (``extractive_periods``). Titles are at most
``MAX_TITLE`` characters.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memtoc.model import Event
from memtoc.pipeline.summarize.extractive_facts import Fact, clean_sentence, request_phrase
from memtoc.text.keyphrases import is_code_token

MAX_TITLE = 80
PATHLIKE = re.compile(
    r"[\w.-]+/[\w./-]+|[\w-]+\.(?:py|js|ts|tsx|rs|go|java|rb|md|json|toml|yaml|yml|sql|sh|c|h|cpp|"
    r"tf)\b|^(?:Dockerfile|Makefile)$"
)
_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")


def shorten(text: str, limit: int = MAX_TITLE) -> str:
    """At most ``limit`` characters: cut at a word boundary, without a dangling little word
    ("… to run tests and") or an open code span, and marked as cut ("…"; a code span cut is
    closed after it)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 2]  # room for the mark: "…" or, in a code span, "…`"
    words = head.rsplit(" ", 1)[0] if " " in head and text[limit - 2] != " " else head
    words = words.rstrip(" .,;:-&(…")
    while " " in words and words.rsplit(" ", 1)[1].lower().strip(",;:") in _DANGLING:
        words = words.rsplit(" ", 1)[0].rstrip(" ,;:-&(")
    words = words or head
    return words + ("…`" if words.count("`") % 2 else "…")


_DANGLING = frozenset(
    """
    a an the and or nor but so yet with without to of for in on at by from into onto about as than
    that which who whose whom when where while if because its his her their our your my this these
    those is are was were be been can could would should will shall may might must do does did
    not no via per vs
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Words a cut title must not end on: they announce a word the cut left out."""


def and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1].islower() and not is_code_token(text) else text


def _is_path(keyword: str) -> bool:
    return PATHLIKE.search(keyword) is not None


def _is_test_path(path: str) -> bool:
    return path.startswith("tests/") or "/test_" in path or path.startswith("test_")


def _topics(keywords: Sequence[str], skip: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(plain phrases, identifiers, paths) among ``keywords``, in keyword order."""
    plain: list[str] = []
    idents: list[str] = []
    paths: list[str] = []
    for k in keywords:
        if k.lower() in skip or k.startswith("-"):
            continue
        if _is_path(k):
            paths.append(k)
        elif is_code_token(k) or (any(c.isdigit() for c in k) and " " not in k):
            if _ERROR_NAME.fullmatch(k) is None:
                idents.append(k)
        else:
            plain.append(k)
    return plain, idents, paths


def _asked_at(phrase: str, asked: str) -> int:
    """Where the user first said ``phrase`` (-1: never)."""
    needle = phrase.lower()
    at = asked.find(needle)
    while at >= 0:
        end = at + len(needle)
        if (at == 0 or not asked[at - 1].isalnum()) and (
            end == len(asked) or not asked[end].isalnum()
        ):
            return at
        at = asked.find(needle, at + 1)
    return -1


def _main_topic(plain: Sequence[str], avoid: str, asked: str) -> str:
    """What the segment was about: among the leading plain keyphrases, the multi-word phrase the
    user said first (the opening ask names the task), else the first multi-word phrase, else
    the word the user said first, else the first keyphrase."""
    usable = [p for p in plain if not avoid or avoid.lower() not in p.lower()][:6]
    said = sorted((at, k) for k, p in enumerate(usable) if (at := _asked_at(p, asked)) >= 0)
    multi = [usable[k] for _, k in said if " " in usable[k]]
    if multi:
        return multi[0]
    lead = usable[:4]
    return next(
        (p for p in lead if " " in p),
        next((usable[k] for _, k in said if k < 4), lead[0] if lead else ""),
    )


def _verb(facts: Sequence[Fact], kinds: Counter[str]) -> str:
    errors = [f.position for f in facts if f.kind == "error"]
    if errors:
        last = max(errors)
        fixed = any(
            f.position > last
            and (f.fix or (f.kind == "tally" and "failed" not in f.text and "error" not in f.text))
            for f in facts
        )
        return "Fixed" if fixed else "Debugging"
    if kinds["edit"]:
        return "Editing"
    if kinds["command"] or kinds["tally"]:
        return "Running"
    if kinds["question"] > len(facts) / 4:
        return "Questions on"
    if any(f.decision for f in facts):
        return "Deciding on"
    return "Discussing"


def segment_title(facts: Sequence[Fact], keywords: Sequence[str], events: Sequence[Event]) -> str:
    """A descriptive title for a segment's facts (see the module docstring)."""
    speakers = Counter(f.speaker for f in facts if f.speaker)
    names = [n for n, _ in sorted(speakers.items(), key=lambda kv: (-kv[1], kv[0]))][:2]
    kinds = Counter(f.kind for f in facts)
    skip = {n.lower() for n in speakers}
    plain, idents, paths = _topics(keywords, skip)
    if names and not (kinds["command"] or kinds["edit"] or kinds["error"]):
        who = " & ".join(sorted(names)) if len(names) > 1 else names[0]
        topics = (plain or idents)[:3]
        while len(topics) > 1 and len(f"{who}: {and_list(topics)}") > MAX_TITLE:
            topics.pop()
        title = f"{who}: {and_list(topics) or 'conversation'}"
    else:
        title = _done_title(facts, kinds, imperative=True)
        if not title and kinds["error"]:
            asked = " ".join(e.text[:2000] for e in events if e.role == "user").lower()
            title = _coding_title(facts, kinds, plain, idents, paths, len(events), asked)
        title = title or _done_title(facts, kinds, imperative=False) or _activity_title(facts)
        if not title:
            asked = " ".join(e.text[:2000] for e in events if e.role == "user").lower()
            title = _coding_title(facts, kinds, plain, idents, paths, len(events), asked)
    return shorten(title)


def _coding_title(
    facts: Sequence[Fact],
    kinds: Counter[str],
    plain: list[str],
    idents: list[str],
    paths: list[str],
    n_events: int,
    asked: str,
) -> str:
    verb = _verb(facts, kinds)
    names = Counter(m for f in facts if f.kind == "error" for m in _ERROR_NAME.findall(f.text))
    error = min(names.items(), key=lambda kv: (-kv[1], kv[0]))[0] if names else ""
    if not error:  # no exception name: the message's last clause ("exec format error")
        first = next((f.text for f in facts if f.kind == "error"), "")
        tail = first.rsplit(" in `", 1)[0].rsplit(": ", 1)[-1].strip(" .`")
        if tail.count(")") > tail.count("("):
            tail = tail.rstrip(")")
        error = tail if first and 0 < len(tail.split()) <= 5 else ""
    topic = _main_topic(plain, error, asked)
    if topic and " " not in topic and _asked_at(topic, asked) < 0:
        topic = ""  # one word nobody asked about ("regular", "three") names no topic
    source_paths = [p for p in paths if not _is_test_path(p)] or paths
    where = idents[0] if idents else source_paths[0] if source_paths else ""
    if not topic:
        topic, where = (error, where) if error else (where, "")
        error = ""
    if not topic:
        return f"{verb} ({n_events} events)"
    detail = f" ({error})" if error and error.lower() not in topic.lower() else ""
    if verb == "Editing" and where:
        options = [f"Editing {where} for {topic}", f"Editing {where}", f"Editing {topic}"]
    else:
        options = [
            f"{verb} {topic}{detail} in {where}" if where else "",
            f"{verb} {topic}{detail}",
            f"{verb} {topic} in {where}" if where else "",
            f"{verb} {topic}",
        ]
    return next((o for o in options if o and len(o) <= MAX_TITLE), options[-1])


_CLAUSE_BREAKS = (": ", " — ", " \u2013 ", " - ", "; ", " because ", " so that ", ", so ", ", which ",
                  ", and ", ", but ", " (", ", ")  # fmt: skip


def headline(text: str, limit: int = MAX_TITLE) -> str:
    """A sentence as a title: markdown, the agent's name and politeness ("Hey Claude, can you
    please …") and trailing punctuation dropped; a text longer than ``limit`` is cut at its
    first sentence end, else its first clause boundary, never inside a code span, else at a
    word boundary (``shorten``)."""
    text = clean_sentence(text, 30)
    cut = text.endswith("…")  # a title cut before (a child's, read by its period) stays marked
    text = text.rstrip(" .…:;,!") + ("…" if cut else "")
    addressed = _ADDRESS.sub("", text, count=1)
    if addressed != text:
        text = request_phrase(addressed)
        if _POLITE_ASK.match(addressed):  # "Claude, can you please add X?" asks for X
            end = _SENTENCE_END.search(text)
            if end is not None and text[end.start()] == "?":
                text = f"{text[: end.start()]}.{text[end.start() + 1 :]}"
            elif text.endswith("?") and text.count("?") == 1:
                text = text[:-1]
    if len(text) <= limit:
        return text
    code = _code_spans(text)
    for mark in _CLAUSE_BREAKS:
        if mark == "; ":  # after a label or a dash: the first sentence's end
            end = next((m for m in _SENTENCE_END.finditer(text, 20) if m.start() not in code), None)
            if end is not None and end.start() < limit:
                return text[: end.start() + (text[end.start()] == "?")].rstrip(" .,;:")
        at = text.find(mark, 20)
        while at in code:
            at = text.find(mark, at + 1)
        if 0 < at <= limit:
            return text[:at].rstrip(" .,;:")
    return shorten(text, limit)


_ADDRESS = re.compile(
    r"^(?:(?:hey|hi|hello|ok(?:ay)?|so)[,!.]?\s+)?(?:claude|codex|gemini)\b[,!:.]?\s+",
    re.IGNORECASE,
)
"""The user addressing the agent by name: not what was asked."""
_POLITE_ASK = re.compile(r"(?:can|could|would|will) you\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=\w\w)[.?!](?=\s+[A-Z`\"'(\[])")
"""A sentence's end: after a word of two letters or more (not "A.I.M. Platform", "e.g. Foo")."""


def _unaddressed(text: str) -> str:
    """A request without the agent's name before it ("Claude, can you please add …" → "Add …")."""
    addressed = _ADDRESS.sub("", text, count=1)
    return request_phrase(addressed) if addressed != text else text


def _code_spans(text: str) -> set[int]:
    """Positions inside `code` spans (a clause break there is part of a command, not prose)."""
    inside: set[int] = set()
    at = text.find("`")
    while at >= 0:
        end = text.find("`", at + 1)
        if end < 0:
            break
        inside.update(range(at, end + 1))
        at = text.find("`", end + 1)
    return inside


_IRREGULAR = {
    "make": "made", "run": "ran", "write": "wrote", "rewrite": "rewrote", "build": "built",
    "rebuild": "rebuilt", "set": "set", "reset": "reset", "get": "got", "find": "found",
    "take": "took", "put": "put", "keep": "kept", "split": "split", "let": "let", "read": "read",
    "shut": "shut", "cut": "cut", "undo": "undid", "redo": "redid", "do": "did", "go": "went",
    "show": "showed", "give": "gave", "send": "sent", "bring": "brought", "hold": "held",
    "feed": "fed", "lead": "led", "think": "thought", "choose": "chose", "teach": "taught",
    "hide": "hid", "commit": "committed", "submit": "submitted", "refer": "referred",
    "prefer": "preferred", "control": "controlled", "begin": "began", "forbid": "forbade",
}  # fmt: skip
_VERBS = frozenset(
    """
    add fix update remove delete implement change create refactor rename move test investigate
    check debug improve use replace switch support handle show hide display enable disable allow
    prevent ensure clean convert extract merge simplify document migrate upgrade bump revert review
    explain analyze analyse design plan deploy release publish install configure drop skip ignore
    limit increase reduce optimize speed cache log parse generate render format lint sort filter
    group wrap expose export import commit push pull rebase tag stop start restart open close call
    pass return retry look verify validate rework restructure reorganize split introduce integrate
    wire hook register replace tighten loosen harden shorten extend expand collapse align center
    adjust tweak polish fill list count measure benchmark profile track detect catch raise throw
    normalize dedupe deduplicate unify separate inline rewrite restore recover backfill seed mock
    stub patch port translate localize style color resize scroll persist store save load fetch
    sync upload download attach link unlink promote surface highlight warn block unblock re-run
    rerun investigate audit apply copy try deploy
    """.split()  # noqa: SIM905 - a word list reads better as text
) | frozenset(_IRREGULAR)
"""Verbs a request commonly starts with (a request starting with another word is kept as is)."""


def past_tense(phrase: str) -> str:
    """ "Fix the layout" → "Fixed the layout" when the phrase starts with a known verb; else the
    phrase unchanged."""
    word, sep, rest = phrase.partition(" ")
    low = word.lower()
    if low not in _VERBS or (not word.isalpha() and "-" not in word):
        return phrase
    if low in _IRREGULAR:
        past = _IRREGULAR[low]
    elif low.endswith("e"):
        past = low + "d"
    elif low.endswith("y") and low[-2:-1] not in "aeiou":
        past = low[:-1] + "ied"
    elif (
        len(low) <= 4
        and low[-1] not in "aeiouwxy"
        and low[-2:-1] in tuple("aeiou")
        and low[-3:-2] not in tuple("aeiou")
    ):
        past = low + low[-1] + "ed"  # stop, drop, plan, ship
    else:
        past = low + "ed"
    return past.capitalize() + sep + rest


def _finished(facts: Sequence[Fact]) -> bool:
    """Whether a segment shows work done: edits, a commit, passing tests, a fix concluded."""
    for f in facts:
        if f.kind in ("edit", "commit", "changed"):
            return True
        if f.kind == "tests" and _FAILED.search(f.text) is None:
            return True
        if f.kind == "conclusion" and f.fix:
            return True
    return False


_FAILED = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")


def _done_title(facts: Sequence[Fact], kinds: Counter[str], *, imperative: bool) -> str:
    """A title from a commit or the user's request (see the module docstring), else ''.
    ``imperative``: only a request asking for work ("Fix …", a plan's heading), not one asking
    a question or reporting a problem (an error in the segment then says more)."""
    commit = next((f for f in facts if f.kind == "commit"), None)
    if commit is not None:
        message = commit.text.split(": ", 1)[1] if ": " in commit.text else commit.text
        return past_tense(headline(message.split(" (", 1)[0]))
    requests = [f for f in facts if f.kind in ("request", "correction") and len(f.terms) >= 2]
    if imperative:  # a bare "Fix push_image" says less than the error it was about
        requests = [
            f
            for f in requests
            if f.heading
            or f.kind == "correction"
            or (_asks_work(_unaddressed(f.text)) and len(_PLEASE.sub("", f.text).split()) > 3)
        ]
    if requests:
        best = next((f for f in requests if f.heading), requests[0])
        phrase = headline(_PLEASE.sub("", best.text))
        if best.kind == "correction":
            return f"Correction: {phrase}"
        if phrase.endswith("?") or not _finished(facts):
            return phrase
        return past_tense(phrase)
    return ""


_PLEASE = re.compile(r",?\s*please\b[.!]?$|^please,?\s+", re.IGNORECASE)
_INQUIRY = frozenset(
    """
    look check investigate explain review analyze analyse find see tell understand figure commit
    push pull rebase merge tag run test lint continue proceed go retry rerun re-run
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Requests that ask to look or to run the workflow, not for a change: they name no work."""


def _asks_work(text: str) -> bool:
    """Whether a request starts with a verb asking for a change (not an inquiry)."""
    word = text.split(" ", 1)[0].lower()
    return word in _VERBS and word not in _INQUIRY and not text.rstrip().endswith("?")


def _activity_title(facts: Sequence[Fact]) -> str:
    """A title from what the agent did when nothing else says more: a plan, a conclusion, a
    question to the user, a test run, edits, reads, a tool's output."""
    for kinds in (("plan",), ("conclusion",), ("ask",), ("tests",), ("edit",), ("changed",),
                  ("command",), ("read", "output"), ("prose", "question", "intent")):  # fmt: skip
        chosen = [f for f in facts if f.kind in kinds]
        if chosen:
            best = max(chosen, key=lambda f: (f.score, -f.position))
            text = best.text
            if best.kind in ("edit", "read") and len(text) > MAX_TITLE:
                text = _TICKED_PATH.sub(lambda m: f"`{m.group(1).rsplit('/', 1)[-1]}`", text)
            return headline(text)
    return ""


_TICKED_PATH = re.compile(r"`([^`\s]+/[^`\s]+)`")
