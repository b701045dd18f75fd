"""Ids, clocks, settings and the public surface."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import memtoc
from memtoc.clock import ManualClock
from memtoc.config import REGISTRY, load_settings
from memtoc.errors import ConfigError, IngestError, MemtocError
from memtoc.ids import UlidFactory, derived_ulid, encode_ulid, is_ulid, ulid_timestamp


def test_public_names_are_exported() -> None:
    for name in memtoc.__all__:
        assert hasattr(memtoc, name), name
    public = {n for n in dir(memtoc) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(memtoc.__all__), public - set(memtoc.__all__)


def test_ulids_are_monotonic_within_a_millisecond_and_when_the_clock_steps_back() -> None:
    clock = ManualClock(1_700_000_000_000)
    ids = UlidFactory(clock, random.Random(1))
    minted = [ids.new() for _ in range(1000)]
    clock.advance(-5_000)
    minted += [ids.new() for _ in range(10)]
    assert minted == sorted(minted) and len(set(minted)) == len(minted)
    assert all(is_ulid(u) for u in minted)
    assert ulid_timestamp(minted[0]) == 1_700_000_000_000


@given(st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 80) - 1))
def test_ulid_encoding_round_trips_time_and_sorts_by_time(ts: int, entropy: int) -> None:
    u = encode_ulid(ts, entropy)
    assert len(u) == 26 and ulid_timestamp(u) == ts
    assert encode_ulid(ts + 1, 0) > u if ts + 1 < (1 << 48) else True


def test_derived_ulids_are_stable_and_distinct() -> None:
    a = derived_ulid(1_700_000_000_000, "file:12")
    assert a == derived_ulid(1_700_000_000_000, "file:12")
    assert a != derived_ulid(1_700_000_000_000, "file:13")
    assert ulid_timestamp(a) == 1_700_000_000_000


def test_settings_precedence_argument_env_file_default(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text('durability = "normal"\nsegment_gap_minutes = 45\n')
    env = {"MEMTOC_HOME": str(home), "MEMTOC_SEGMENT_GAP_MINUTES": "20"}
    s = load_settings({}, env)
    assert s.durability == "normal" and s.sources["durability"] == "config"
    assert s.segment_gap_minutes == 20 and s.sources["segment_gap_minutes"] == "env"
    assert s.db == str(home / "memtoc.db")
    s2 = load_settings({"segment_gap_minutes": 10, "db": str(tmp_path / "x.db")}, env)
    assert s2.segment_gap_minutes == 10 and s2.db == str(tmp_path / "x.db")
    assert load_settings({}, {"MEMTOC_HOME": str(tmp_path / "none")}).durability == "full"


def test_bad_settings_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MEMTOC_DURABILITY"):
        load_settings({}, {"MEMTOC_HOME": str(tmp_path), "MEMTOC_DURABILITY": "maybe"})
    (tmp_path / "config.toml").write_text("no_such_setting = 1\n")
    with pytest.raises(ConfigError, match="no_such_setting"):
        load_settings({}, {"MEMTOC_HOME": str(tmp_path)})


def test_every_setting_has_an_env_var_and_help() -> None:
    assert len({s.env for s in REGISTRY}) == len(REGISTRY)
    assert all(s.help for s in REGISTRY)


def test_errors_are_rooted_and_carry_location() -> None:
    exc = IngestError("bad JSON", source="a.jsonl", line=3)
    assert isinstance(exc, MemtocError) and str(exc) == "a.jsonl:3: bad JSON"


def test_float_settings_accept_whole_numbers_from_the_config_file(tmp_path: Path) -> None:
    floats = [s for s in REGISTRY if isinstance(s.default, float)]
    assert floats, "no float setting to check"
    (tmp_path / "config.toml").write_text(f"{floats[0].name} = 3\n")
    s = load_settings({}, {"MEMTOC_HOME": str(tmp_path)})
    assert getattr(s, floats[0].name) == 3.0
