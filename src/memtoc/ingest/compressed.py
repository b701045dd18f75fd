"""Compressed transcripts: read through a plain copy kept in a cache folder.

Codex zstd-compresses a rollout once it has been idle for a week (``rollout-*.jsonl`` becomes
``rollout-*.jsonl.zst``, in ``sessions/`` and ``archived_sessions/``); Codex itself reads both
transparently. memtoc does the same: a ``*.jsonl.zst`` (or ``.json.zst``, ``.ndjson.zst``) file is
decompressed once into ``<cache>/<hash of its path>-<name>.jsonl`` and that copy is what the
importer reads — sniffing, resume positions and ids included — while reports and events name the
compressed file. The copy holds exactly the bytes the plain file held, so its first line and
record offsets, hence every derived event id, are the ones the plain file gave: a rollout imported
before Codex compressed it comes back as duplicates (its position resumes from the plain file's,
found by the moved-file rule of ``ingest.positions``), never as a second copy. The copy is made
again when the compressed file changes (size or modification time), through a temporary file and
an atomic rename; a corrupt archive is a clear error for that file only.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from memtoc.errors import IngestError

SUFFIXES = (".jsonl.zst", ".json.zst", ".ndjson.zst")
_CHUNK = 1 << 20


def is_compressed(path: Path) -> bool:
    """Whether ``path`` is a zstd-compressed transcript memtoc reads."""
    return path.name.lower().endswith(SUFFIXES)


def default_cache() -> Path:
    """Where plain copies go when no memtoc home is given (a per-user temporary folder)."""
    return (
        Path(tempfile.gettempdir()) / f"memtoc-plain-{os.getuid() if hasattr(os, 'getuid') else 0}"
    )


def plain_copy(path: Path, cache: Path) -> Path:
    """The decompressed copy of ``path`` in ``cache``, made (again) when missing or stale."""
    try:
        st = path.stat()
    except OSError as exc:
        raise IngestError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    key = hashlib.blake2b(str(path.resolve()).encode("utf-8", "surrogatepass"), digest_size=8)
    target = cache / f"{key.hexdigest()}-{path.name[: -len('.zst')]}"
    stamp = target.with_name(target.name + ".source")
    wanted = f"{st.st_size} {st.st_mtime_ns}"
    try:
        if target.is_file() and stamp.read_text(encoding="utf-8") == wanted:
            return target
    except OSError:
        pass
    try:
        import zstandard  # imported here: only compressed files need it
    except ImportError as exc:  # an environment installed before the dependency was added
        raise IngestError(
            "reading .zst transcripts needs the 'zstandard' package (reinstall memtoc)",
            source=str(path),
        ) from exc
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=cache)
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as src:
            reader = zstandard.ZstdDecompressor().stream_reader(src)
            while chunk := reader.read(_CHUNK):
                out.write(chunk)
        os.replace(tmp, target)
        stamp.write_text(wanted, encoding="utf-8")
    except zstandard.ZstdError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise IngestError(f"not a readable zstd archive: {exc}", source=str(path)) from exc
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise IngestError(f"cannot decompress: {exc}", source=str(path)) from exc
    return target
