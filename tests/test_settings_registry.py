"""Each setting is declared once (a ``Settings`` field) and everything else is derived from it:
the registry, the environment variables, the defaults of the components that take settings. An
AST scan checks that every setting the code reads is declared, and that none is read around the
declaration (``getattr`` / ``hasattr`` on a settings object, which mypy cannot check)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from memtoc.config import DEFAULTS, REGISTRY, Settings, load_settings
from memtoc.errors import ConfigError
from memtoc.ingest.importer import IngestOptions
from memtoc.pipeline.worker import PipelineConfig
from memtoc.retrieval.bookmark_step import BookmarkConfig
from memtoc.retrieval.hybrid import Fusion, fusion_from_settings
from memtoc.retrieval.recall import DEFAULT_TIME_LIMIT_MS

SRC = Path(__file__).resolve().parent.parent / "src" / "memtoc"
DECLARED = {f.name for f in dataclasses.fields(Settings)} - {"sources"}


def _is_settings(node: ast.expr, aliases: frozenset[str] = frozenset()) -> bool:
    """``settings``, ``self.settings``, ``memory.settings``, ``state(ctx).settings`` …, or a
    local name bound to one of them (``s = self.settings``)."""
    if isinstance(node, ast.Name):
        return node.id == "settings" or node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr == "settings"


def _aliases(scope: ast.AST) -> frozenset[str]:
    """Names a function binds to a settings object (``s = self.settings``, ``s := …``)."""
    names: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and _is_settings(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.NamedExpr) and _is_settings(node.value):
            names.add(node.target.id)
    return frozenset(names)


def _scoped(tree: ast.Module) -> list[tuple[ast.AST, frozenset[str]]]:
    """Every node of a module with the settings aliases of the function it is in."""
    out: list[tuple[ast.AST, frozenset[str]]] = [(n, frozenset()) for n in ast.walk(tree)]
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            aliases = _aliases(fn)
            if aliases:
                out += [(n, aliases) for n in ast.walk(fn)]
    return out


def _settings_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, attribute) of every read of a setting in a module."""
    return sorted(
        {
            (node.lineno, node.attr)
            for node, aliases in _scoped(tree)
            if isinstance(node, ast.Attribute) and _is_settings(node.value, aliases)
        }
    )


def _around(tree: ast.Module) -> list[ast.Call]:
    """``getattr`` / ``hasattr`` calls on a settings object."""
    return [
        node
        for node, aliases in _scoped(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and node.args
        and _is_settings(node.args[0], aliases)
    ]


def _reads() -> tuple[list[str], list[str]]:
    """(undeclared reads, reads around the declaration) over every module of src/memtoc."""
    undeclared: list[str] = []
    around: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(SRC.parent)
        for line, attr in _settings_reads(tree):
            if attr not in DECLARED | {"sources"}:
                undeclared.append(f"{where}:{line}: settings.{attr}")
        around += [f"{where}:{c.lineno}: {ast.unparse(c)}" for c in _around(tree)]
        for node in ast.walk(tree):
            if (  # load_settings({"name": …}): the overrides name declared settings
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "load_settings"
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                for key in node.args[0].keys:
                    if isinstance(key, ast.Constant) and key.value not in DECLARED:
                        undeclared.append(f"{where}:{node.lineno}: load_settings {key.value!r}")
    return undeclared, around


def test_every_setting_read_in_src_is_declared_and_read_through_the_declaration() -> None:
    undeclared, around = _reads()
    assert not undeclared, "settings read but not declared in Settings:\n" + "\n".join(undeclared)
    assert not around, "settings read with getattr/hasattr (undeclared reads hide there):\n" + (
        "\n".join(around)
    )


def test_the_scan_sees_what_it_checks() -> None:
    """The scan is not vacuous: it finds the settings the code does read, aliases included."""
    seen = {
        attr
        for path in SRC.rglob("*.py")
        for _, attr in _settings_reads(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert {"recall_time_limit_ms", "bookmark_every_messages", "fusion_k", "db"} <= seen
    assert {"embedder", "include_thinking"} <= seen  # read as ``s.embedder`` (s = self.settings)
    probe = ast.parse(
        "def f(self):\n    s = self.settings\n    return s.nonexistent_knob or getattr(s, 'x')\n"
    )
    assert (3, "nonexistent_knob") in _settings_reads(probe) and len(_around(probe)) == 1


def test_the_registry_is_derived_from_the_declaration() -> None:
    assert [s.name for s in REGISTRY] == [
        f.name for f in dataclasses.fields(Settings) if f.name != "sources"
    ]
    assert all(s.help.strip() for s in REGISTRY)
    assert len({s.env for s in REGISTRY}) == len(REGISTRY)
    for f in dataclasses.fields(Settings):
        if f.name in DEFAULTS and f.default is not dataclasses.MISSING:
            assert DEFAULTS[f.name] == f.default


def test_components_take_their_defaults_and_values_from_the_settings(tmp_path: Path) -> None:
    """``PipelineConfig``, ``Fusion`` and ``BookmarkConfig`` default to the declared defaults and
    their typed ``from_settings`` take the values given (env names derived from the field)."""
    env = {
        "MEMTOC_SEGMENT_GAP_MINUTES": "45",
        "MEMTOC_FUSION_K": "30",
        "MEMTOC_BOOKMARK_EVERY_MESSAGES": "7",
        "MEMTOC_BOOKMARKS": "off",
        "MEMTOC_RECALL_TIME_LIMIT_MS": "250",
    }
    s = load_settings({"home": str(tmp_path)}, environ=env)
    assert PipelineConfig.from_settings(s).segment_gap_minutes == 45
    assert fusion_from_settings(s).k == 30.0
    bookmarks = BookmarkConfig.from_settings(s)
    assert (bookmarks.every_messages, bookmarks.enabled) == (7, False)
    assert s.recall_time_limit_ms == 250.0 and s.sources["recall_time_limit_ms"] == "env"
    plain = load_settings({"home": str(tmp_path)}, environ={})
    assert PipelineConfig.from_settings(plain) == PipelineConfig()
    assert fusion_from_settings(plain) == Fusion()
    assert BookmarkConfig.from_settings(plain) == BookmarkConfig()
    ingest = IngestOptions()
    assert (ingest.max_event_bytes, ingest.batch_size) == (
        DEFAULTS["max_event_bytes"],
        DEFAULTS["ingest_batch"],
    )
    assert DEFAULTS["recall_time_limit_ms"] == DEFAULT_TIME_LIMIT_MS
    with pytest.raises(ConfigError, match="MEMTOC_RECALL_TIME_LIMIT_MS"):
        load_settings({"home": str(tmp_path)}, environ={"MEMTOC_RECALL_TIME_LIMIT_MS": "soon"})


def test_recall_time_limit_setting_reaches_recall(tmp_path: Path) -> None:
    """The setting ``recall_time_limit_ms`` (read through ``getattr`` before it was declared) is
    the limit ``Memory.recall`` applies: 0 ms cuts every recall short and says so."""
    from memtoc.memory import Memory

    s = load_settings({"home": str(tmp_path), "embedder": "none"}, environ={})
    s = dataclasses.replace(s, recall_time_limit_ms=0.0)
    with Memory.open(s) as memory:
        memory.remember("We keep the cache TTL at five minutes.", project="p")
        memory.process()
        result = memory.recall("cache TTL", project="p")
    assert result.truncated and "time limit 0 ms" in (result.degraded or "")
