"""The settings registry: every setting declared once, read only at entry points.

Each ``Setting`` has a name, an environment variable (``MEMTOC_<NAME>``), a type, a default and a
help text. ``load_settings`` resolves them with the precedence

    explicit argument  >  environment  >  config file (``<home>/config.toml``)  >  default

and returns an immutable ``Settings``. Library code never reads the environment: it receives values.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
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


def _parse_csv(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    @property
    def env(self) -> str:
        return f"MEMTOC_{self.name.upper()}"


REGISTRY: tuple[Setting, ...] = (
    Setting("home", None, str, "Data directory (default: the platform's user data dir)."),
    Setting("db", None, str, "Store location: a SQLite file path (default <home>/memtoc.db)."),
    Setting(
        "durability",
        "full",
        _parse_choice("full", "normal", "off"),
        "full: no acknowledged write is lost on power loss; normal: safe against process crashes; "
        "off: for throwaway stores.",
    ),
    Setting("timezone", None, str, "IANA time zone for TOC periods (default: the machine's)."),
    Setting("max_event_bytes", 1_000_000, int, "Events larger than this are truncated, marked."),
    Setting("ingest_batch", 2_000, int, "Events per ingest transaction."),
    Setting("redact", True, _parse_bool, "Redact secrets before storage."),
    Setting("redact_disable", (), _parse_csv, "Comma-separated secret kinds not to redact."),
    Setting(
        "redact_helper",
        "auto",
        _parse_choice("auto", "on", "off"),
        "Run redaction's prefilter in a helper process beside the insert (large batches): "
        "auto = when this process may use a second CPU core.",
    ),
    Setting("include_thinking", False, _parse_bool, "Import model thinking blocks."),
    Setting("follow_symlinks", False, _parse_bool, "Follow symlinks that leave the ingest root."),
    Setting(
        "project",
        None,
        str,
        "The project every command uses, as --project would (reads and writes; default: the "
        "working directory's).",
    ),
    Setting("segment_gap_minutes", 30, int, "A gap this long starts a new segment."),
    Setting("segment_max_tokens", 4_000, int, "A segment never grows past this many tokens."),
    Setting("segment_overlap_minutes", 5, int, "Context overlap given to the summariser."),
    Setting("segment_overlap_tokens", 500, int, "Context overlap given to the summariser."),
    Setting(
        "rollup_day_age_minutes", 60, int, "A day is rolled up this long after its last change."
    ),
    Setting("rollup_week_age_minutes", 1_440, int, "Minimum age before a week rolls up."),
    Setting("rollup_month_age_minutes", 1_440, int, "Minimum age before a month rolls up."),
    Setting("rollup_year_age_minutes", 10_080, int, "Minimum age before a year rolls up."),
    Setting(
        "summarizer",
        "extractive",
        _parse_choice("extractive", "openai", "anthropic"),
        "Summariser backend.",
    ),
    Setting("llm_model", None, str, "Model name for the LLM summariser."),
    Setting("llm_base_url", None, str, "Base URL of an OpenAI-compatible or Anthropic API."),
    Setting("llm_api_key", None, str, "API key for the LLM summariser."),
    Setting("embedder", "static", str, "Embedder: static, onnx, none, or a model path/name."),
    Setting("embed_model", None, str, "Model path or hub name for the embedder."),
    Setting("fusion_k", 60.0, float, "Hybrid search: the RRF constant k (rank damping)."),
    Setting("fusion_w_bm25", 1.0, float, "Hybrid search: the RRF weight of the BM25 ranking."),
    Setting("fusion_w_vec", 1.0, float, "Hybrid search: the RRF weight of the vector ranking."),
)
_BY_NAME = {s.name: s for s in REGISTRY}


def default_home() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    db: str
    durability: str = "full"
    timezone: str | None = None
    max_event_bytes: int = 1_000_000
    ingest_batch: int = 2_000
    redact: bool = True
    redact_disable: tuple[str, ...] = ()
    redact_helper: str = "auto"
    include_thinking: bool = False
    follow_symlinks: bool = False
    project: str | None = None
    segment_gap_minutes: int = 30
    segment_max_tokens: int = 4_000
    segment_overlap_minutes: int = 5
    segment_overlap_tokens: int = 500
    rollup_day_age_minutes: int = 60
    rollup_week_age_minutes: int = 1_440
    rollup_month_age_minutes: int = 1_440
    rollup_year_age_minutes: int = 10_080
    summarizer: str = "extractive"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    embedder: str = "static"
    embed_model: str | None = None
    fusion_k: float = 60.0
    fusion_w_bm25: float = 1.0
    fusion_w_vec: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where each value came from (argument, env, config, default), for ``memtoc config``."""


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
    home = Path(home_raw).expanduser() if home_raw else default_home()
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
    known = {f.name for f in fields(Settings)}
    return Settings(**{k: v for k, v in values.items() if k in known}, sources=sources)
