"""Titles for the extractive summariser: what a segment or period was about, in one line.

A **segment** title says what happened to what: an activity (from the kinds of facts — errors
that were then fixed, errors still open, edits, runs, questions, decisions), the segment's main
topic (its best plain keyphrase, a multi-word one when there is one), the error it was about and
where (the main identifier, else the main non-test file)::

    Fixed order dependence (AssertionError) in db_fixture
    Debugging connection error (ConnectionRefusedError) in wait_for_queue
    Caroline & Melanie: support group, adoption and painting

A **period** title names its dominant topics — the plain keyphrases carried by most children —
rather than paths or tool names ("Flaky CI, Docker builds and cloud infra"); a period with one
child keeps the child's title. Titles are at most ``MAX_TITLE`` characters and never the opening
words of the first message.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memtoc.model import Event, Summary
from memtoc.pipeline.summarize.extractive_facts import Fact
from memtoc.text.keyphrases import is_code_token

MAX_TITLE = 80
PATHLIKE = re.compile(
    r"[\w.-]+/[\w./-]+|[\w-]+\.(?:py|js|ts|tsx|rs|go|java|rb|md|json|toml|yaml|yml|sql|sh|c|h|cpp|"
    r"tf)\b|^(?:Dockerfile|Makefile)$"
)
_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")


def shorten(text: str, limit: int = MAX_TITLE) -> str:
    """Cut at a word or comma boundary to at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    cut = text[: limit + 1].rsplit(" ", 1)[0].rstrip(" ,;:-&(")
    return cut or text[:limit]


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
        asked = " ".join(e.text[:2000] for e in events if e.role == "user").lower()
        title = _coding_title(facts, kinds, plain, idents, paths, len(events), asked)
    title = shorten(title)
    first = next((e.text.strip() for e in events if e.text.strip()), "")
    if first.lower().startswith(title.lower()):
        title = shorten(f"On {title}")
    return title


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


def period_title(children: Sequence[Summary], keywords: Sequence[str]) -> str:
    """The dominant topics of a period's children (their merged ``keywords``, best first)."""
    if len(children) == 1:
        return children[0].title
    prefixes = Counter(c.title.split(": ", 1)[0] for c in children if ": " in c.title)
    prefix, n = min(prefixes.items(), key=lambda kv: (-kv[1], kv[0])) if prefixes else ("", 0)
    conversation = (bool(prefix) and "&" in prefix) or (bool(prefix) and prefix.istitle())
    names = set(prefix.lower().split(" & ")) if conversation and n * 2 >= len(children) else set()
    plain, idents, paths = _topics(keywords, names)
    topics = plain[:3]
    topics += idents[: max(0, 2 - len(topics))]
    topics += paths[: max(0, 1 - len(topics))]
    head = f"{prefix}: " if names else ""
    while len(topics) > 1 and len(head + and_list(topics)) > MAX_TITLE:
        topics.pop()
    if not topics:
        return shorten(children[0].title)
    return shorten(head + _capital(and_list(topics)) if not head else head + and_list(topics))
