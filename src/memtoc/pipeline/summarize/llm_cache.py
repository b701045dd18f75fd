"""A cache of LLM summaries keyed by a hash of what was asked.

The key is ``sha256(backend name, model, prompt)`` (``cache_key``), so a changed prompt, model or
summariser version misses. Only validated summaries are stored; degraded ones never are.

``SummaryCache`` is deliberately narrow (``get``/``put``) so the main store can host it later.
Two implementations: ``MemorySummaryCache`` (a dict, for tests and one-shot runs) and
``SqliteSummaryCache`` (one table in a SQLite file; safe across threads and processes).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol

from memtoc.clock import Clock, SystemClock
from memtoc.errors import SummarizerError
from memtoc.model import Summary


class SummaryCache(Protocol):
    """Where validated LLM summaries are kept, keyed by ``cache_key``."""

    def get(self, key: str) -> Summary | None: ...

    def put(self, key: str, summary: Summary) -> None: ...


def cache_key(backend: str, model: str, prompt: str) -> str:
    """The cache key of one request: hex sha256 over the backend name, the model and the prompt."""
    payload = json.dumps([backend, model, prompt], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def summary_to_json(summary: Summary) -> str:
    """The summary's fields as compact JSON (``degraded`` is not kept: only good results are)."""
    return json.dumps(
        {
            "title": summary.title,
            "bullets": list(summary.bullets),
            "keywords": list(summary.keywords),
            "abstract": summary.abstract,
            "overview": summary.overview,
            "backend": summary.backend,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def summary_from_json(raw: str) -> Summary | None:
    """Parse ``summary_to_json`` output; None when the stored value is unreadable."""
    try:
        data: Any = json.loads(raw)
        strs = ("title", "abstract", "overview", "backend")
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in strs):
            return None
        bullets, keywords = data.get("bullets"), data.get("keywords")
        if not isinstance(bullets, list) or not isinstance(keywords, list):
            return None
        if not all(isinstance(x, str) for x in [*bullets, *keywords]):
            return None
        return Summary(
            title=data["title"],
            bullets=tuple(bullets),
            keywords=tuple(keywords),
            abstract=data["abstract"],
            overview=data["overview"],
            backend=data["backend"],
        )
    except ValueError:
        return None


class MemorySummaryCache:
    """A dict-backed cache (lost when the process ends)."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> Summary | None:
        with self._lock:
            raw = self._data.get(key)
        return None if raw is None else summary_from_json(raw)

    def put(self, key: str, summary: Summary) -> None:
        raw = summary_to_json(summary)
        with self._lock:
            self._data[key] = raw


class SqliteSummaryCache:
    """A cache in one SQLite table (``llm_summary_cache``), created on first use.

    ``path`` may be the main store's file or a dedicated one (e.g. ``<home>/llm-cache.db``).
    """

    def __init__(self, path: str | Path, *, clock: Clock | None = None) -> None:
        self.path = Path(path)
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        try:
            # the data directory may not exist yet (a store given by --db elsewhere)
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS llm_summary_cache ("
                " key TEXT PRIMARY KEY, summary TEXT NOT NULL, created_ms INTEGER NOT NULL)"
            )
            self._conn.commit()
        except (sqlite3.Error, OSError) as exc:
            raise SummarizerError(
                f"cannot open the LLM summary cache at {self.path}: {exc}"
            ) from exc

    def __len__(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT count(*) FROM llm_summary_cache").fetchone()
        return int(row[0])

    def get(self, key: str) -> Summary | None:
        try:
            with self._lock:
                row = self._conn.execute(
                    "SELECT summary FROM llm_summary_cache WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise SummarizerError(
                f"cannot read the LLM summary cache at {self.path}: {exc}"
            ) from exc
        return None if row is None else summary_from_json(str(row[0]))

    def put(self, key: str, summary: Summary) -> None:
        raw = summary_to_json(summary)
        try:
            with self._lock, self._conn:
                self._conn.execute(
                    "INSERT OR REPLACE INTO llm_summary_cache (key, summary, created_ms)"
                    " VALUES (?, ?, ?)",
                    (key, raw, self._clock.now_ms()),
                )
        except sqlite3.Error as exc:
            raise SummarizerError(
                f"cannot write the LLM summary cache at {self.path}: {exc}"
            ) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()
