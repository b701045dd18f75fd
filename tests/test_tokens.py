"""Token counting: exact cl100k, a heuristic that never under-counts it, truncation."""

from __future__ import annotations

import gzip
import inspect
import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtoc.text import tokens
from memtoc.text.tokens import (
    HeuristicCounter,
    TiktokenCounter,
    default_counter,
    truncate_to_tokens,
)

LOCOMO = Path("/work/shared/datasets/locomo/locomo10.json")


@pytest.fixture(scope="module")
def exact() -> TiktokenCounter:
    return TiktokenCounter()


@pytest.fixture(scope="module")
def heuristic() -> HeuristicCounter:
    return HeuristicCounter()


def test_tiktoken_counts_known_text(exact: TiktokenCounter) -> None:
    assert exact.name == "cl100k"
    assert exact.count("") == 0
    assert exact.count("hello world") == 2
    # Special-token text is ordinary text, never a special token.
    assert exact.count("<|endoftext|>") > 1
    # Lone surrogates do not raise (tiktoken repairs them).
    assert exact.count("a\ud800b") >= 2


def test_default_counter_is_exact_here() -> None:
    counter = default_counter()
    assert counter.name == "cl100k"
    assert counter.count("def encode_ordinary(self, text):") > 0


def test_bundled_table_holds_only_single_tokens(exact: TiktokenCounter) -> None:
    enc = exact.encoding
    data = (Path(tokens.__file__).parent / "cl100k_known.txt.gz").read_bytes()
    entries = [ln.decode("unicode_escape") for ln in gzip.decompress(data).split(b"\n") if ln]
    assert len(entries) > 10_000
    for entry in entries:  # raises KeyError unless the entry is one cl100k token
        enc.encode_single_token(entry.encode("ascii"))
    # Completeness for short entries is what the partition bound relies on.
    short = {
        t.decode("ascii") for t in enc._mergeable_ranks if len(t) <= 3 and all(b < 128 for b in t)
    }
    assert short <= set(entries)


def _check(heuristic: HeuristicCounter, exact: TiktokenCounter, text: str) -> None:
    assert heuristic.count(text) >= exact.count(text), repr(text)


CODE_ALPHABET = string.printable + "_" * 5 + " " * 10
CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
EMOJI = st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF)
PIECES = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=CODE_ALPHABET, max_size=60),
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=30),
    st.text(alphabet=string.digits + " ,.", max_size=30),
    st.text(alphabet=CJK, max_size=20),
    st.text(alphabet=EMOJI, max_size=10),
    st.sampled_from(
        [
            "snake_case_name",
            "camelCaseName",
            "src/app/auth.py",
            "--until-idle",
            "TypeError",
            " \n\n  ",
            "\t\t",
            "''",
            "'s",
            "'LL",
            "éàü",
            "ÿ",
        ]
    ),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=6).map("".join))
def test_heuristic_never_undercounts_mixed(
    heuristic: HeuristicCounter, exact: TiktokenCounter, text: str
) -> None:
    _check(heuristic, exact, text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_heuristic_never_undercounts_arbitrary_unicode(
    heuristic: HeuristicCounter, exact: TiktokenCounter, text: str
) -> None:
    _check(heuristic, exact, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.ascii_letters + " '", min_size=1, max_size=50))
def test_heuristic_never_undercounts_random_letters(
    heuristic: HeuristicCounter, exact: TiktokenCounter, text: str
) -> None:
    # Random letter strings are BPE's worst case (no long vocabulary entries apply).
    _check(heuristic, exact, text)


def _ordinary_corpus() -> tuple[list[str], list[str]]:
    """English (LoCoMo turns, else stdlib docstrings) and code (stdlib sources) in 30-300 chars."""
    import argparse
    import json as json_mod
    import textwrap

    code: list[str] = []
    for module in (argparse, json_mod.decoder, textwrap, inspect):
        src = inspect.getsource(module)
        code += [src[i : i + 240] for i in range(0, len(src), 240)]
    english: list[str] = []
    if LOCOMO.exists():
        conv = json.loads(LOCOMO.read_text())[0]["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                english += [f"{t['speaker']}: {t['text']}" for t in turns]
    else:
        english = [inspect.getdoc(f) or "" for f in (inspect.getsource, json.dumps, str.split)]
    return english, code


def test_heuristic_overcount_ratio_on_ordinary_text(
    heuristic: HeuristicCounter, exact: TiktokenCounter
) -> None:
    english, code = _ordinary_corpus()
    ratios = {}
    for name, texts in (("english", english), ("code", code)):
        h = sum(heuristic.count(t) for t in texts)
        x = sum(exact.count(t) for t in texts)
        assert h >= x
        ratios[name] = h / x
    print(f"heuristic/cl100k over-count: {ratios}")
    assert all(1.0 <= r <= 1.6 for r in ratios.values()), ratios


def test_heuristic_edge_cases(heuristic: HeuristicCounter, exact: TiktokenCounter) -> None:
    assert heuristic.name == "heuristic"
    assert heuristic.count("") == 0
    for text in ["a\ud800b", "\x00\x01", " " * 300, "x" * 500, "9" * 100, "\r\n" * 50]:
        _check(heuristic, exact, text)
    # A known word is one token exactly.
    assert heuristic.count(" the") == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=40))
def test_truncate_never_exceeds(exact: TiktokenCounter, text: str, limit: int) -> None:
    out = truncate_to_tokens(exact, text, limit)
    assert exact.count(out) <= limit
    assert text.startswith(out)


def test_truncate_cuts_on_word_boundary(exact: TiktokenCounter) -> None:
    text = "The quick brown fox jumps over the lazy dog near src/app/auth.py today"
    out = truncate_to_tokens(exact, text, 6)
    assert out and exact.count(out) <= 6
    assert text[len(out)] == " "  # the cut falls on whitespace
    assert truncate_to_tokens(exact, text, 1000) == text
    assert truncate_to_tokens(exact, "a" * 400, 3) == "a" * len(
        truncate_to_tokens(exact, "a" * 400, 3)
    )
    assert exact.count(truncate_to_tokens(exact, "a" * 400, 3)) <= 3


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + "\x0b\x1c\x1f", max_size=80))
def test_stdlib_pattern_matches_cl100k_on_ascii(text: str) -> None:
    import regex

    # The no-`regex` fallback splits ASCII text exactly like cl100k's pre-tokeniser.
    assert tokens._stdlib_pattern().findall(text) == regex.findall(tokens.CL100K_PATTERN, text)


def test_heuristic_without_regex_module_stays_safe(
    monkeypatch: pytest.MonkeyPatch, exact: TiktokenCounter
) -> None:
    monkeypatch.setattr(tokens, "_compile_pattern", lambda: (tokens._stdlib_pattern(), False))
    fallback = HeuristicCounter()
    for text in ["def refresh_token(self):\n    return 42", "naïve café 東京 🎉", "x" * 50]:
        assert fallback.count(text) >= exact.count(text)
    assert fallback.count("naïve") == len("naïve".encode())
