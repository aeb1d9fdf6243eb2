"""On synthetic corpora, arecall's engine gives the seed reference algorithm's numbers exactly.

The reference is authorized-recall 0.1.0's own TF-IDF index and metric loop (the dev-only seed
package), run by benchmarks/seed_reference.py; the benchmark runs the same at 10,000 documents.
"""

from __future__ import annotations

import sys

import pytest

from arecall.pipeline.config import default_config

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import arecall_metrics, compare, seed_overrides
from seed_reference import seed_reference

from arecall.data.authorization import apply_profiles
from arecall.data.sources import load_corpus


@pytest.mark.parametrize("depth", [None, 10])
def test_engine_equals_the_seed_reference_on_a_synthetic_corpus(depth):
    overrides = [*seed_overrides(800, 32, 4), f"corpus.seed={7 if depth else 3}"]
    if depth:
        overrides.append(f"retriever.depth={depth}")  # shallow head + exact pre tails
    cfg = default_config(overrides)
    ours, _ = arecall_metrics(cfg)
    collection = apply_profiles(load_corpus(cfg.corpus), cfg.profiles)
    compare(ours, seed_reference(collection, (1, 3, 5, 10)))
