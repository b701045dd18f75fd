"""Code-aware keyphrases and key terms."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtoc.text.keyphrases as kp
from memtoc.text.keyphrases import (
    distinct_words,
    extract_keyphrases,
    is_code_token,
    iter_words,
    key_terms,
    normalize_term,
    token_terms,
    words,
)

CODING = [
    "The JWT refresh token expires too early in src/app/auth.py",
    "I ran pytest tests/test_auth.py --until-idle and got a TypeError: 'NoneType' object",
    "Let's fix the refresh race in auth_token handling; the root cause is the session cache.",
    "ok thanks, I'll try the JWT refresh fix now",
    "Fixed by locking the session cache in refreshToken(). pytest passes now.",
    "The session cache lives in os.path.join(base, 'cache') for now.",
]


def test_identifiers_and_paths_stay_whole() -> None:
    phrases = extract_keyphrases(CODING, 10)
    assert "src/app/auth.py" in phrases
    assert "tests/test_auth.py" in phrases
    assert "--until-idle" not in phrases  # a flag is searched as typed, never a topic
    assert "auth_token" in phrases
    assert "session cache" in phrases
    # No fragment of an identifier or path appears on its own.
    assert not {"src", "app", "py", "until", "idle"} & {p.lower() for p in phrases}
    # Chat filler never becomes a keyphrase.
    assert not {"ok", "thanks", "i'll", "let's", "now"} & {p.lower() for p in phrases}


def test_flags_urls_hashes_and_placeholders_are_not_keyphrases() -> None:
    texts = [
        "Run memtoc watch --tail with https://example.com/docs and http://localhost:8080.",
        "The token was REDACTED; commit f2635a5 fixed the /Users/me/code/app/main.py loader.",
        "The tail loader reads --tail lines; the loader keeps REDACTED values redacted.",
    ]
    lowered = {p.lower() for p in extract_keyphrases(texts, 10)}
    assert not {"--tail", "http", "https", "redacted", "f2635a5"} & lowered
    assert not any(p.startswith("/") for p in lowered)
    assert "loader" in lowered


def test_keyphrases_rank_recurring_topics_first() -> None:
    phrases = extract_keyphrases(CODING, 4)
    assert len(phrases) == 4
    assert any("refresh" in p.lower() for p in phrases[:3])


def test_keyphrases_are_deterministic_and_bounded() -> None:
    first = extract_keyphrases(CODING, 7)
    assert first == extract_keyphrases(list(CODING), 7)
    assert len(first) == 7
    assert len(set(map(str.lower, first))) == len(first)
    assert extract_keyphrases(CODING, 0) == []
    assert extract_keyphrases([], 5) == []
    assert extract_keyphrases(["ok thanks, yes."], 5) == []


def test_conversation_keyphrases_keep_names_and_phrases() -> None:
    chat = [
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
        "Melanie: Wow, that's cool! What happened at the support group?",
        "Caroline: The transgender stories were so inspiring. The support group made me feel accepted.",
        "Melanie: I painted a lake sunrise last year; painting helps me relax.",
    ]
    phrases = extract_keyphrases(chat, 8)
    assert "support group" in phrases
    assert "Caroline" in phrases and "Melanie" in phrases


def test_key_terms_split_identifiers_and_stem() -> None:
    assert {"auth_token", "auth", "token"} <= key_terms("check auth_token")
    assert key_terms("tests") == key_terms("test") == {"test"}
    assert {"refreshtoken", "refresh", "token"} <= key_terms("refreshToken()")
    assert {"src/app/auth.py", "src", "app", "auth", "py"} <= key_terms("see src/app/auth.py")
    assert "typeerror" in key_terms("raised TypeError")
    assert key_terms("ok thanks, I'll do it") == set()
    assert normalize_term("fixing") == normalize_term("fixed") == "fix"
    assert normalize_term("libraries") == "library"
    assert normalize_term("running") == "run"


def test_code_token_detection() -> None:
    for token in (
        "auth_token",
        "camelCase",
        "os.path.join",
        "src/x.py",
        "--until-idle",
        "KeyError",
    ):
        assert is_code_token(token), token
    for token in ("hello", "Caroline", "API", "long-term"):
        assert not is_code_token(token), token


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=8), st.integers(min_value=0, max_value=12))
def test_never_raises_and_bounded(texts: list[str], k: int) -> None:
    phrases = extract_keyphrases(texts, k)
    assert len(phrases) <= k
    assert phrases == extract_keyphrases(texts, k)
    for text in texts:
        assert all(t == t.lower() and t for t in key_terms(text))


def test_key_terms_is_fast() -> None:
    texts = [f"{t} (variant {i})" for i in range(300) for t in CODING]
    start = time.perf_counter()
    for text in texts:
        key_terms(text)
    per_text = (time.perf_counter() - start) / len(texts)
    print(f"key_terms: {per_text * 1e6:.1f} us/text")
    assert per_text < 200e-6  # tens of microseconds in practice; loose for shared machines


def test_tool_names_and_filler_are_not_keyphrases() -> None:
    texts = [
        "Bash pytest tests/test_image.py -x -q and Edit Dockerfile",
        "Bash ran the full suite again; the command description said the full suite passes",
        "Edit push_image in docker-compose.yml so the arm64 image crashes stop",
        "The arm64 image crashes came back; the Kubernetes deploys test suite is green",
        "Then the Kubernetes deploys test suite went red",
    ]
    phrases = extract_keyphrases(texts, 10, exclude=frozenset({"bash", "edit"}))
    lowered = {p.lower() for p in phrases}
    assert not lowered & {"bash", "edit", "full suite", "command", "description", "suite"}
    assert "docker-compose.yml" in phrases  # hyphenated file names stay whole
    assert "arm64 image crashes" in phrases
    assert "kubernetes deploys" in lowered  # not "Kubernetes deploys test suite"
    # Without ``exclude`` the tool names would be there: the filter, not luck, removes them.
    assert "Bash" in extract_keyphrases(texts, 10)


def test_curly_apostrophe_contractions_are_stopwords() -> None:
    """Codex writes "I'm" with U+2019: the year of a real Codex history (user trial 4) was
    keyed "I\u2019m, AgentV, I\u2019ll" — stopwords only with a straight apostrophe."""
    texts = [
        "I'm checking the release workflow because the publish step failed.",
        "I'll patch the release workflow so the publish step retries; I'm done after that.",
        "We don't publish from the release workflow; it's the publish step that failed.",
    ]
    texts = [t.replace("'", "\u2019") for t in texts]
    phrases = {p.lower() for p in extract_keyphrases(texts, 10)}
    assert "release workflow" in phrases
    assert not {p for p in phrases if "\u2019" in p or "'" in p}, phrases


def test_pieces_of_logged_instants_are_not_keyphrases() -> None:
    """A CI log's timestamps tokenise to "T04" and "45:19.2430321": a real Codex history's
    segment was keyed "Runner Image, T04, Release, finalize, group, Compute, 45:19.2430321"."""
    texts = [
        "2026-06-18T04:45:19.2430321Z Runner Image: ubuntu-24.04 release finalize",
        "2026-06-18T04:45:20.1130421Z Runner Image provisioned; release finalize failed at 10:42",
        "2026-06-18T04:45:21.0030321Z release finalize stopped: tag v4.40.1 exists (4.40.1)",
    ]
    phrases = {p.lower() for p in extract_keyphrases(texts, 12)}
    assert "runner image" in phrases and "4.40.1" in phrases  # versions stay
    assert not {p for p in phrases if re.fullmatch(r"t\d\d|[\d:.]+:[\d.]+", p)}, phrases


_PLAIN_ALTERNATIVES = re.compile(
    r"""
    (?:~|\.{1,2})?/?(?:[\w@+-]++/)+[\w@+.-]*\w
    | --[A-Za-z][\w-]*\w
    | [^\W\d][\w-]*+(?:\.[^\W\d]\w*+)+(?:\(\))?
    | [^\W\d]\w*+(?:['\u2019-][^\W\d_]\w*+)*(?:\(\))?
    | \d+(?:[.:]\d+)*%?
    """,
    re.VERBOSE,
)
"""The tokeniser as plain alternatives (paths, flags, dotted names, words, numbers), without the
fast path for plain words or the spelled-out path prefixes: the oracle its tokens must equal."""
_TRICKY = st.sampled_from(
    ["a", "Zq", "é", "_", "9", "12", ".", "..", "/", "\\", "-", "--", "~", "@", "+", "(", ")",
     "()", "'", "\u2019", ":", "%", " ", "\n", "x.y", "日本", "Error", "foo_bar", "camelCase", "!"]
)  # fmt: skip


def test_tokens_of_paths_flags_and_names() -> None:
    text = ("see ~/x/y.py, ../a/b and /etc/hosts; os.path.join() --until-idle don't well-known "
            "v1.2.3 50% user@host/x a+b/c f() end.")  # fmt: skip
    assert words(text) == [
        "see", "~/x/y.py", "../a/b", "and", "/etc/hosts", "os.path.join()", "--until-idle",
        "don't", "well-known", "v1", "2.3", "50%", "user@host/x", "a+b/c", "f()", "end",
    ]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(_TRICKY, max_size=16).map("".join))
def test_tokens_equal_the_plain_alternatives(text: str) -> None:
    assert words(text) == _PLAIN_ALTERNATIVES.findall(text)
    assert [m.span() for m in iter_words(text)] == [
        m.span() for m in _PLAIN_ALTERNATIVES.finditer(text)
    ]


def test_distinct_words_of_long_texts_are_read_once_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = "see src/app/auth.py and src/app/auth.py again"
    assert distinct_words(short) == ("see", "src/app/auth.py", "and", "again")
    longs = [f"run {i}: " + " ".join(CODING) * 40 for i in range(4)]
    assert all(len(t) > 2_000 for t in longs)
    monkeypatch.setattr(kp, "LONG_TOKENS_MAX_CHARS", 2 * len(longs[0]) + 10)
    monkeypatch.setattr(kp, "_long_tokens", kp.OrderedDict())
    monkeypatch.setattr(kp, "_long_tokens_chars", 0)
    for text in longs:
        assert distinct_words(text) == tuple(dict.fromkeys(words(text)))
        assert distinct_words(text) is distinct_words(text)  # kept: tokenised once
        assert key_terms(text) == {t for w in words(text) for t in token_terms(w)}
    assert list(kp._long_tokens) == longs[2:]  # the oldest went first, within the bound
    assert kp._long_tokens_chars == len(longs[2]) + len(longs[3])
