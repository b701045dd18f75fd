"""Layers import downward only (docs/architecture.md): an AST check over every module."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "memtoc"

RANK = {
    "errors": 0,
    "clock": 0,
    "ids": 0,
    "model": 0,
    "config": 0,
    "workspace": 0,
    "text": 1,
    "store": 2,
    "projects": 3,
    "ingest": 3,
    "pipeline": 3,
    "retrieval": 4,
    "services": 5,
    "forgetting": 5,
    "forget_log": 5,
    "derived": 5,
    "merging": 5,
    "memory": 6,
    "eval": 7,
    "surfaces": 7,
    "__init__": 8,
    "__main__": 8,
}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_layers_import_downward_only() -> None:
    violations = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts)
        if module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        own = layer(module) if module != "memtoc" else "__init__"
        own = own.removesuffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if not name.startswith("memtoc.") or name == "memtoc":
                    continue
                target = layer(name)
                if target == own:
                    continue
                if RANK[target] > RANK[own]:
                    violations.append(f"{module} imports {name} ({own} → {target})")
    assert not violations, "\n".join(sorted(violations))


def test_every_top_level_module_has_a_layer() -> None:
    names = {p.stem for p in SRC.iterdir() if p.suffix == ".py"} | {
        p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert names <= set(RANK), names - set(RANK)


# -- the store owns its SQL (issue 18) ---------------------------------------------------------------
CONCRETE_STORES = {"SqliteStore", "PostgresStore"}
PRIVATE_SQL = {"_query", "_exec", "_many", "_query_planned", "connection"}
ENTRY_POINTS = ("surfaces", "eval", "__main__")
"""Where a concrete store may be named: the surfaces and the evaluation tools build and inspect
the store a user names; everything else receives a store typed by a protocol
(``store/base.py``, ``store/capabilities.py``)."""
NOT_YET: dict[str, str] = {}
"""Modules that still name a concrete store or its SQL, each with why: the list only shrinks (a
module leaving it must be removed from it, and no other module may join)."""


def _store_leaks(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_SQL:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in CONCRETE_STORES:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom) and node.module in (
            "memtoc.store.sqlite",
            "memtoc.store.postgres",
        ):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names
                      if a.name in CONCRETE_STORES]  # fmt: skip
        elif isinstance(node, ast.Constant) and node.value in CONCRETE_STORES:
            found.append(f"line {node.lineno}: '{node.value}'")
    return found


def test_no_sql_and_no_concrete_store_above_the_store() -> None:
    """No ``_query``/``_exec``/``.connection`` and no ``SqliteStore``/``PostgresStore`` outside
    ``store/`` and the entry points; ``Memory.sqlite_store`` is gone."""
    leaks: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("").as_posix()
        if rel.startswith(("store/", *ENTRY_POINTS)):
            continue
        found = _store_leaks(path)
        if found:
            leaks[rel] = found
    unexpected = {m: f for m, f in leaks.items() if m not in NOT_YET}
    assert not unexpected, unexpected
    stale = sorted(set(NOT_YET) - set(leaks))
    assert not stale, f"clean now, remove from NOT_YET: {stale}"
    assert "def sqlite_store" not in (SRC / "memory.py").read_text(encoding="utf-8")
