"""``memtoc eval redaction``: the corpus (≥ 100 kinds, every secret in its line) and the command,
run for real — every placement ingested through the importer into scratch stores."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memtoc.eval.redaction_corpus import KINDS, clean, clean_paths, planted
from memtoc.eval.redaction_eval import PLACEMENTS
from memtoc.surfaces.cli import app


def test_the_corpus_is_wide_and_well_formed() -> None:
    samples = planted()
    assert len(KINDS) >= 100 and len({k.name for k in KINDS}) == len(KINDS)
    assert {s.kind for s in samples} == {k.name for k in KINDS}
    for sample in samples:
        assert sample.secret and sample.secret in sample.line.replace("\\n", "\n"), sample
    assert len({s.secret for s in samples}) == len(samples)  # each secret is its case's alone
    assert planted() == samples  # a seed makes the same corpus
    assert len(clean()) >= 150 and len(clean_paths()) >= 40


def test_the_command_reports_rates_for_every_placement(hermetic_env: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "redaction", "--json", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kinds"] >= 100 and set(report["placements"]) == set(PLACEMENTS)
    for name, score in report["placements"].items():
        assert score["planted"] == report["samples"], name
        assert score["detection"] >= 0.99, (name, score["misses"])
        assert score["flagged"] == 0, (name, score["false_positives"])
    assert report["placements"]["path"]["not_applicable"] > 0  # URLs cannot be paths
    assert list(tmp_path.iterdir()) == []  # the scratch stores are gone
    human = CliRunner().invoke(app, ["eval", "redaction", "--workdir", str(tmp_path)])
    assert human.exit_code == 0 and "metadata_key" in human.output and "total" in human.output
