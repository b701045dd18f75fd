"""The settings registry: every setting declared once, read only at entry points.

Each setting is declared once, as a field of ``Settings`` (type, default, help text, parser);
``REGISTRY`` (one ``Setting`` per field, with its environment variable ``MEMTOC_<NAME>``) and
``DEFAULTS`` are derived from the fields, and components take their values through typed
``from_settings`` constructors. ``load_settings`` resolves them with the precedence

    explicit argument  >  environment  >  config file (``<home>/config.toml``)  >  default

and returns an immutable ``Settings``. Library code never reads the environment: it receives values.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from memtoc.errors import ConfigError

APP_NAME = "memtoc"


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in {"1", "true", "yes", "on"}:
        return True
    if low in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def _parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")
        return value

    return parse


def _parse_workers(raw: str) -> str:
    """``auto`` or a number of processes (>= 0), as text."""
    value = str(raw).strip().lower()
    if value == "auto" or (value.isdigit() and value.isascii()):
        return value if value == "auto" else str(int(value))
    raise ValueError(f"{raw!r} is not 'auto' or a number of processes (0 = none)")


def _parse_csv(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as the registry lists it (derived from a ``Settings`` field)."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    @property
    def env(self) -> str:
        return f"MEMTOC_{self.name.upper()}"


def _setting(default: Any, text: str, parse: Callable[[str], Any] | None = None) -> Any:
    """A ``Settings`` field that is a setting: its default, help text and parser (from the default's
    type when not given: bool, int, float, else str) — the one place it is declared."""
    if parse is None:
        kind = type(default) if default is not None else str
        parse = _parse_bool if kind is bool else kind
    return field(default=default, metadata={"help": text, "parse": parse})


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting, declared once: name, type, default, help and parser. ``REGISTRY``, the
    environment variables, the config file's keys, the CLI's global options and the settings table
    in docs/settings.md are derived from these fields; components take theirs through typed
    ``from_settings`` constructors."""

    home: Path = field(
        metadata={"help": "Data directory (default: the platform's user data dir).", "parse": str}
    )
    db: str = field(
        metadata={
            "help": "Store location: a SQLite file path (default <home>/memtoc.db) or a "
            "postgresql:// URL.",
            "parse": str,
        }
    )
    durability: str = _setting(
        "full",
        "full: no acknowledged write is lost on power loss; normal: safe against process crashes; "
        "off: for throwaway stores.",
        _parse_choice("full", "normal", "off"),
    )
    timezone: str | None = _setting(
        None, "IANA time zone for TOC periods (default: the machine's)."
    )
    max_event_bytes: int = _setting(1_000_000, "Events larger than this are truncated, marked.")
    ingest_batch: int = _setting(2_000, "Events per ingest transaction.")
    redact: bool = _setting(True, "Redact secrets before storage.")
    redact_disable: tuple[str, ...] = _setting(
        (), "Comma-separated secret kinds not to redact.", _parse_csv
    )
    redact_helper: str = _setting(
        "auto",
        "Run redaction's prefilter in a helper process beside the insert (large batches): "
        "auto = when this process may use a second CPU core.",
        _parse_choice("auto", "on", "off"),
    )
    include_thinking: bool = _setting(False, "Import model thinking blocks.")
    follow_symlinks: bool = _setting(False, "Follow symlinks that leave the ingest root.")
    project: str | None = _setting(
        None,
        "The project every command uses, as --project would (reads and writes; default: the "
        "working directory's).",
    )
    segment_gap_minutes: int = _setting(30, "A gap this long starts a new segment.")
    segment_max_tokens: int = _setting(
        4_000, "A segment never grows past this many tokens, but one of tool outputs alone."
    )
    segment_overlap_minutes: int = _setting(5, "Context overlap given to the summariser.")
    segment_overlap_tokens: int = _setting(500, "Context overlap given to the summariser.")
    rollup_day_age_minutes: int = _setting(
        60, "A day is rolled up this long after its last change."
    )
    rollup_week_age_minutes: int = _setting(1_440, "Minimum age before a week rolls up.")
    rollup_month_age_minutes: int = _setting(1_440, "Minimum age before a month rolls up.")
    rollup_year_age_minutes: int = _setting(10_080, "Minimum age before a year rolls up.")
    pipeline_workers: str = _setting(
        "auto",
        "Processes that summarise large batches of segments and periods beside the pipeline "
        "(extractive summariser): auto = the CPU cores this process may use; 0 = none.",
        _parse_workers,
    )
    summarizer: str = _setting(
        "extractive",
        "Summariser backend.",
        _parse_choice("extractive", "openai", "anthropic"),
    )
    llm_model: str | None = _setting(None, "Model name for the LLM summariser.")
    llm_base_url: str | None = _setting(None, "Base URL of an OpenAI-compatible or Anthropic API.")
    llm_api_key: str | None = field(
        default=None,
        repr=False,
        metadata={"help": "API key for the LLM summariser.", "parse": str},
    )
    embedder: str = _setting("static", "Embedder: static, onnx, none, or a model path/name.")
    embed_model: str | None = _setting(None, "Model path or hub name for the embedder.")
    fusion_k: float = _setting(60.0, "Hybrid search: the RRF constant k (rank damping).")
    fusion_w_bm25: float = _setting(1.0, "Hybrid search: the RRF weight of the BM25 ranking.")
    fusion_w_vec: float = _setting(1.0, "Hybrid search: the RRF weight of the vector ranking.")
    recall_time_limit_ms: float = _setting(
        1_000.0, "Recall returns the best context found so far after this many ms (marked cut)."
    )
    bookmarks: bool = _setting(True, "Detect bookmarks (salient moments) while processing.")
    bookmark_every_messages: int = _setting(
        20, "A session's bookmark pass runs after this many new messages."
    )
    bookmark_every_tokens: int = _setting(
        4_000, "… or after this many new tokens, whichever comes first."
    )
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where each value came from (argument, env, config, default)."""


REGISTRY: tuple[Setting, ...] = tuple(
    Setting(f.name, None if f.default is MISSING else f.default, f.metadata["parse"],
            f.metadata["help"])
    for f in fields(Settings)
    if "help" in f.metadata
)  # fmt: skip
"""Every setting, in declaration order (derived from ``Settings``)."""
_BY_NAME = {s.name: s for s in REGISTRY}
DEFAULTS: Mapping[str, Any] = {s.name: s.default for s in REGISTRY}
"""Each setting's default, for the components' own defaults (``PipelineConfig``, ``Fusion``…)."""


def setting(name: str) -> Setting:
    """The registry's entry for ``name`` (``KeyError`` when no such setting is declared)."""
    return _BY_NAME[name]


def default_home() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def _read_config_file(home: Path) -> dict[str, Any]:
    path = home / "config.toml"
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    unknown = sorted(set(data) - set(_BY_NAME))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    return data


def _coerce(setting: Setting, value: Any, origin: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return setting.parse(value)
        except ValueError as exc:
            raise ConfigError(f"{exc} (from {origin})", setting=setting.env) from exc
    if setting.parse is _parse_csv and isinstance(value, list):
        return tuple(str(v) for v in value)
    if setting.parse is _parse_workers and isinstance(value, int) and not isinstance(value, bool):
        return _coerce(setting, str(value), origin)  # `pipeline_workers = 2` in TOML
    expected = type(setting.default) if setting.default is not None else str
    if expected in (int, float) and isinstance(value, bool):
        raise ConfigError(f"expected a number, got {value!r} (from {origin})", setting=setting.env)
    if expected is float and isinstance(value, int):
        return float(value)  # `fusion_k = 60` in TOML is an int; a float setting takes it
    if not isinstance(value, expected):
        raise ConfigError(
            f"expected {expected.__name__}, got {value!r} (from {origin})", setting=setting.env
        )
    return value


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting: argument > environment > config file > default."""
    env = os.environ if environ is None else environ
    args = {k: v for k, v in (overrides or {}).items() if v is not None}
    for key in args:
        if key not in _BY_NAME:
            raise ConfigError(f"unknown setting {key!r}")
    home_raw = args.get("home") or env.get("MEMTOC_HOME")
    # absolute: a path memtoc prints (the MCP command, hooks, the store) must work from any folder
    home = Path(home_raw).expanduser().absolute() if home_raw else default_home()
    file_values = _read_config_file(home)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in REGISTRY:
        if setting.name in args:
            values[setting.name] = _coerce(setting, args[setting.name], "argument")
            sources[setting.name] = "argument"
        elif setting.env in env:
            values[setting.name] = _coerce(setting, env[setting.env], setting.env)
            sources[setting.name] = "env"
        elif setting.name in file_values:
            values[setting.name] = _coerce(
                setting, file_values[setting.name], str(home / "config.toml")
            )
            sources[setting.name] = "config"
        else:
            values[setting.name] = setting.default
            sources[setting.name] = "default"
    values["home"] = home
    if not values.get("db"):
        values["db"] = str(home / "memtoc.db")
    elif "://" not in values["db"] and not values["db"].startswith("file:"):
        values["db"] = str(Path(values["db"]).expanduser().absolute())  # a SQLite file's path
    known = {f.name for f in fields(Settings)}
    return Settings(**{k: v for k, v in values.items() if k in known}, sources=sources)
