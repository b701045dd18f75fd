"""``memtoc watch``: tail transcript folders and ingest new bytes as they are written.

The fallback for agents whose hooks are not installed (or not trusted, or an older version
without hooks): every ``interval`` seconds it lists the transcript files under the watched paths,
and imports those whose size or modification time changed since the last look. The importer
resumes each file from its watermark, so only new bytes are read and nothing is stored twice;
a line still being written is left for the next round.

``Watcher.run`` returns when ``stop`` is set — the CLI sets it on SIGTERM and SIGINT (Ctrl-C), so
the watcher finishes the file it is on (its batch commits) and exits cleanly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memtoc.errors import IngestError
from memtoc.ingest.importer import discover
from memtoc.memory import Memory
from memtoc.model import IngestReport

DEFAULT_INTERVAL_S = 2.0


def default_paths(user_home: Path) -> list[Path]:
    """The transcript folders of the agents memtoc reads that exist on this machine."""
    candidates = [
        user_home / ".claude" / "projects",
        user_home / ".codex" / "sessions",
        user_home / ".gemini" / "tmp",
    ]
    return [p for p in candidates if p.is_dir()]


@dataclass
class Watcher:
    """Polls ``paths`` and ingests changed transcript files into ``memory``."""

    memory: Memory
    paths: Sequence[Path]
    interval_s: float = DEFAULT_INTERVAL_S
    process: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    on_round: Callable[[IngestReport], None] | None = None
    _seen: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def changed_files(self) -> list[tuple[Path, tuple[int, int]]]:
        """Transcript files new or changed (size or mtime) since last ingested, with their key."""
        out: list[tuple[Path, tuple[int, int]]] = []
        existing = [p for p in self.paths if p.exists()]
        try:
            files = list(discover(existing))
        except IngestError:
            return out  # a path vanished between the check and the walk: next round
        for path, _root in files:
            try:
                st = path.stat()
            except OSError:
                continue
            key = (st.st_size, st.st_mtime_ns)
            if self._seen.get(path) != key:
                out.append((path, key))
        return out

    def round(self) -> IngestReport:
        """One look: ingest what changed (and process it, when asked)."""
        report = IngestReport()
        changed = self.changed_files()
        if changed:
            report = self.memory.ingest([p for p, _ in changed])
            self._seen.update(changed)  # only once ingested: a failed round is retried
            if self.process and report.ingested:
                self.memory.process()
        if self.on_round is not None:
            self.on_round(report)
        return report

    def run(self) -> None:
        """Rounds every ``interval_s`` until ``stop`` is set."""
        while not self.stop.is_set():
            self.round()
            self.stop.wait(self.interval_s)
