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
