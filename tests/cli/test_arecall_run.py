"""`arecall run` runs the same stages in one process, into the Hydra run directory; `-m` sweeps.

Called in-process (the `arecall` fixture): Hydra, the stages and MLflow run exactly as under the
console script, whose installation test_cli_wiring.py checks.
"""

from __future__ import annotations

import json

import pytest
from authorized_recall.experiment import run as seed_run
from mlflow.tracking import MlflowClient

from arecall.core.scoring import SEED_K_KEYS

from tests.helpers import FAST_PROOF

pytestmark = pytest.mark.slow

EMIT_KEYS = {"datasets", "queries", "profiles", "pairs", "mrr", "k"}
K_KEYS = set(SEED_K_KEYS)


def test_run_writes_seed_keys_artifacts_and_one_mlflow_run(tmp_path, mlflow_store, arecall):
    uri = mlflow_store
    out = tmp_path / "out"
    proc = arecall("run", f"hydra.run.dir={out}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) >= EMIT_KEYS
    assert set(metrics["k"]) == {"1", "3", "5", "10"}
    assert all(set(row) >= K_KEYS for row in metrics["k"].values())
    assert metrics["k"]["5"]["recall"] == pytest.approx(seed_run()["k"][5]["recall"])
    for name in ("proof.json", "tables.md", "arecall_at_k.csv", "arecall_at_k.png"):
        assert (out / name).is_file(), name
    assert "| 5 | 0.867 | 0.954 | 0.988 | +0.033 |" in proc.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    assert len(runs) == 1
    assert runs[0].data.tags["arecall.entry"] == "arecall run"


def test_multirun_sweeps_every_point_and_logs_each(tmp_path, mlflow_store, arecall):
    uri = mlflow_store
    proc = arecall(
        "run",
        "-m",
        "retriever=tfidf,sklearn_tfidf",
        f"hydra.sweep.dir={tmp_path}/sweep",
        FAST_PROOF,
    )
    assert proc.returncode == 0, proc.stderr
    results = [
        json.loads((tmp_path / "sweep" / str(i) / "metrics.json").read_text()) for i in (0, 1)
    ]
    assert results[0] == results[1]  # two implementations of one weighting: one table
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    parents = [r for r in runs if r.data.tags.get("arecall.sweep") == "parent"]
    assert sorted(r.data.params["retriever.name"] for r in children) == ["sklearn_tfidf", "tfidf"]
    assert len(parents) == 1 and len(runs) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
