"""The TOC must not depend on the process: same events, any PYTHONHASHSEED, same summaries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import hashlib
from itertools import islice
from memtoc.eval.synth import SynthConfig, generate
from memtoc.pipeline.summarize.extractive import ExtractiveSummarizer
from memtoc.text.tokens import default_counter
s = ExtractiveSummarizer(default_counter())
import json, sys
from memtoc.model import Event
events = list(generate(SynthConfig(seed=3, events=2000)))
locomo = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else []
for sample in locomo[:2]:
    conv = sample["conversation"]
    n = 1
    while f"session_{n}" in conv:
        for j, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            events.append(Event(f"L{n}-{j}", f"s{n}", "p", "a", n * 10**7 + j, "user_message", "user", text))
        n += 1
out = []
sums = []
for i in range(0, len(events), 40):
    summ = s.summarize_events(events[i:i + 40])
    sums.append(summ)
    out.append(repr(summ))
out.append(repr(s.summarize_children(sums[:20])))
print(hashlib.sha256("\\n".join(out).encode()).hexdigest())
"""


def test_summaries_do_not_depend_on_the_hash_seed() -> None:
    data = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
    locomo = [str(data)] if data.exists() else []
    digests = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, *locomo],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1
