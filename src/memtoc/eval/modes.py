"""Pluggable retrieval modes for ``memtoc eval``: the ``Mode`` protocol and its registry.

A *mode* answers a question with a ranked list of ``RetrievedItem``s — each a piece of context
(``text``) plus the events whose text it includes (``event_ids``, in order) and its token count.
The harness scores turn recall on the items' event ids and budget recall on their text.

Adding a mode::

    from memtoc.eval.modes import ModeContext, register_mode

    class MyMode:
        name = "my-mode"
        def prepare(self, memory, project): ...          # optional: build per-project state
        def retrieve(self, query, project, ref_ms, k): ...

    def _factory(ctx: ModeContext) -> MyMode:
        return MyMode(ctx)           # raise ModeUnavailable("why") to be skipped with a reason

    register_mode("my-mode", _factory)

Modes registered from a module named ``memtoc.eval.<anything>_modes`` (or ``baselines``) are
found by ``load_modes()`` without editing this file; others register on import.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memtoc.errors import ConfigError
from memtoc.text.tokens import TokenCounter

if TYPE_CHECKING:
    from memtoc.memory import Memory
    from memtoc.text.embed import Embedder, FloatMatrix


@dataclass(frozen=True, slots=True)
class RetrievedItem:
    """One piece of returned context and the events whose text it includes (in order)."""

    text: str
    event_ids: tuple[str, ...]
    tokens: int


@runtime_checkable
class Mode(Protocol):
    """A retrieval strategy under evaluation."""

    @property
    def name(self) -> str: ...

    def retrieve(self, query: str, project: str, ref_ms: int, k: int) -> list[RetrievedItem]:
        """Items for ``query`` in ``project``, best first, covering at least ``k`` turns when the
        project has that many (``ref_ms`` is "now" for time-aware modes)."""
        ...


@runtime_checkable
class PreparedMode(Protocol):
    """The optional ability to build per-project state once, before the project's questions."""

    def prepare(self, memory: Memory, project: str) -> None: ...


@runtime_checkable
class BudgetedMode(Protocol):
    """The optional ability to assemble context for a token budget itself (``memtoc recall``).

    The harness asks such a mode once per budget ``B`` and scores ``budget_recall@B`` /
    ``budget_tokens@B`` on what it returns (items in any order, their tokens summing to at most
    ``B``); ``retrieve`` still gives the ranked list that recall@k is scored on.
    """

    def retrieve_budget(
        self, query: str, project: str, ref_ms: int, budget: int
    ) -> list[RetrievedItem]: ...


@runtime_checkable
class NotedMode(Protocol):
    """The optional ability to add lines to the report (what the mode saw, caveats)."""

    def notes(self) -> list[str]: ...


@runtime_checkable
class TalliedMode(Protocol):
    """Notes built from counts, which projects evaluated in worker processes add up: a worker's
    copy hands its ``tally()`` back and the run's mode ``absorb``s it before ``notes()``."""

    def tally(self) -> dict[str, int]: ...

    def absorb(self, tally: dict[str, int]) -> None: ...


def mode_notes(modes: Sequence[Mode]) -> list[str]:
    """Every note of the modes that have some."""
    return [n for m in modes if isinstance(m, NotedMode) for n in m.notes()]


class ModeUnavailable(Exception):
    """Raised by a mode factory when the mode cannot run here; the reason goes into the report."""


@dataclass
class ModeContext:
    """What the harness hands every mode factory: the one token counter and the embedder.

    ``embedder`` is None when the run has none (then embedding modes are unavailable). Text
    embeddings are memoised here, so modes sharing an embedder embed each project's turns once.
    Queries are not: each mode pays for embedding its question, so its latency is honest.
    """

    counter: TokenCounter
    embedder: Embedder | None = None
    embedder_label: str = "none"
    spec: tuple[str, str | None] | None = None
    """``(embedder kind, model)`` it was loaded from (``load``): lets a worker process load the
    same context (``__reduce__``); ``None`` for a context built by hand (not sent to workers)."""
    _text_cache: dict[tuple[str, str], FloatMatrix] = field(default_factory=dict)

    @classmethod
    def load(cls, kind: str, model: str | None) -> ModeContext:
        """The default token counter and the ``kind`` embedder (``none``: no embedder) loaded
        from ``model``; raises ``EmbedderError`` when it cannot load."""
        from memtoc.text.embed import load_embedder
        from memtoc.text.tokens import default_counter

        kind = kind.strip().lower()
        emb = load_embedder(kind, model)
        label = "none" if emb is None else f"{emb.name} ({model or 'default model'})"
        return cls(default_counter(), emb, label, (kind, model))

    def __reduce__(self) -> tuple[Callable[..., ModeContext], tuple[str, str | None]]:
        """Pickled as its spec; unpickling loads it again (once per process, ``_loaded``)."""
        if self.spec is None:
            raise TypeError("a ModeContext built without ModeContext.load cannot be pickled")
        return _loaded, self.spec

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ModeUnavailable("no embedder (run with --embedder static|onnx)")
        return self.embedder

    def embed_query(self, query: str) -> FloatMatrix:
        """The query's unit vector, shape ``(dim,)``."""
        vec: FloatMatrix = self.require_embedder().embed([query])[0]
        return vec

    def embed_texts(self, key: tuple[str, str], texts: Sequence[str]) -> FloatMatrix:
        """Rows for ``texts``, memoised under ``key`` (e.g. ``(project, "turns")``)."""
        mat = self._text_cache.get(key)
        if mat is None:
            mat = self.require_embedder().embed(list(texts))
            self._text_cache[key] = mat
        return mat

    def release(self, project: str) -> None:
        """Forget a finished project's cached embeddings."""
        for key in [k for k in self._text_cache if k[0] == project]:
            del self._text_cache[key]


_LOADED: dict[tuple[str, str | None], ModeContext] = {}


def _loaded(kind: str, model: str | None) -> ModeContext:
    """``ModeContext.load`` memoised per process (a worker loads its embedder once)."""
    ctx = _LOADED.get((kind, model))
    if ctx is None:
        ctx = _LOADED[(kind, model)] = ModeContext.load(kind, model)
    return ctx


ModeFactory = Callable[[ModeContext], Mode]

_REGISTRY: dict[str, ModeFactory] = {}
_NOTES: dict[str, str] = {}


def register_mode(name: str, factory: ModeFactory, *, replace: bool = False) -> None:
    """Make ``name`` selectable with ``--modes``; a second registration of a name is an error."""
    if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
        raise ConfigError(f"eval mode {name!r} is already registered", setting="--modes")
    _REGISTRY[name] = factory


def note_unregistered(name: str, reason: str) -> None:
    """Record a known mode that was not registered here, and why (shown in the report)."""
    _NOTES[name] = reason


def load_modes() -> dict[str, ModeFactory]:
    """Import the built-in baselines and every ``memtoc.eval.*_modes`` module; the registry."""
    import memtoc.eval as package

    importlib.import_module("memtoc.eval.baselines")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.endswith("_modes"):
            importlib.import_module(f"memtoc.eval.{info.name}")
    return dict(_REGISTRY)


def unregistered_notes() -> dict[str, str]:
    """Known modes left out of the registry, with the reason."""
    return dict(_NOTES)


def build_modes(names: Sequence[str] | None, ctx: ModeContext) -> tuple[list[Mode], dict[str, str]]:
    """Instantiate the named modes (all registered ones when ``names`` is None).

    Returns the modes and ``{name: reason}`` for those skipped (unavailable here or unregistered).
    An unknown name is a ``ConfigError`` listing the known ones.
    """
    registry = load_modes()
    skipped: dict[str, str] = {}
    if names is None:
        wanted = list(registry)
        skipped.update(unregistered_notes())
    else:
        wanted = []
        for name in names:
            if name in registry:
                wanted.append(name)
            elif name in _NOTES:
                skipped[name] = _NOTES[name]
            else:
                known = ", ".join(sorted(registry))
                raise ConfigError(f"unknown eval mode {name!r} (known: {known})", setting="--modes")
    modes: list[Mode] = []
    for name in wanted:
        try:
            modes.append(registry[name](ctx))
        except ModeUnavailable as exc:
            skipped[name] = str(exc)
    return modes, skipped
