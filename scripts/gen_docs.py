"""Regenerate the reference docs from the code: docs/cli.md and docs/settings.md.

.venv/bin/python scripts/gen_docs.py           # write them
.venv/bin/python scripts/gen_docs.py --check   # exit 1 naming the stale files (tests do this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from memtoc.surfaces.cli import reference

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, function in reference.DOCS.items():
        text = getattr(reference, function)()
        path = DOCS / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text, encoding="utf-8")
    if stale:
        verb = "stale" if check else "written"
        print(f"{verb}: {', '.join(f'docs/{n}' for n in stale)}", file=sys.stderr)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
