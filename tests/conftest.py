"""Shared fixtures: environment hygiene and generated seed-layout corpora."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DVC_NO_ANALYTICS"] = "1"

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(os.sys.executable).parent

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "red",
    "green",
    "blue",
    "cyan",
    "amber",
]


def write_seed_dir(
    path: Path, seed: int, *, n_docs: int = 30, n_queries: int = 8, n_profiles: int = 4
) -> Path:
    """A random corpus in the seed's JSON layout (varied texts, relevance and grants)."""
    rng = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    datasets = []
    for i in range(n_docs):
        words = rng.choices(WORDS, k=rng.randint(2, 12))
        datasets.append(
            {
                "dataset": f"ds-{i:03d}-{rng.choice(WORDS)}",
                "domain": rng.choice(["a", "b", "c"]),
                "description": " ".join(words) + ".",
                "schemas": [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}"],
                "capabilities": [
                    {
                        "name": "search",
                        "sensitivity": "internal",
                        "description": f"search over {rng.choice(WORDS)}",
                    }
                ],
            }
        )
    ids = [d["dataset"] for d in datasets]
    queries = [
        {
            "query": " ".join(rng.choices([*WORDS, "unseenword"], k=rng.randint(1, 5))),
            "domain": "a",
            "relevant": rng.sample(ids, rng.randint(0, 6)),
        }
        for _ in range(n_queries)
    ]
    profiles = {
        f"p{j}": {
            "principal_class": f"p{j}",
            "clearance": "internal",
            "grants": {d: ["search"] for d in rng.sample(ids, rng.randint(0, n_docs))},
        }
        for j in range(n_profiles)
    }
    (path / "corpus.json").write_text(json.dumps({"datasets": datasets}, indent=1))
    (path / "queries.json").write_text(json.dumps({"queries": queries}, indent=1))
    (path / "profiles.json").write_text(json.dumps({"profiles": profiles}, indent=1))
    return path


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    return write_seed_dir(tmp_path / "seed", 7)


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes to the repository's own mlflow.db."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow-test.db")
