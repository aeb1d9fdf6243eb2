"""A sweep against a real `mlflow server` on 127.0.0.1: every point, nested, readable back.

This is the comparison a user makes in the MLflow UI, done through the client: both runs of a
two-point sweep (run in parallel by Hydra's joblib launcher) with their metrics and a table.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests._holding import holding_env, release
from tests.helpers import FAST_PROOF, VENV_BIN, start_mlflow_server, stop_mlflow_server

pytestmark = pytest.mark.slow


@pytest.mark.long
def test_a_parallel_two_point_sweep_lands_in_the_server_as_nested_runs(
    tmp_path, monkeypatch, mlflow_server
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    proc = subprocess.run(
        [
            str(VENV_BIN / "arecall"),
            "run",
            "-m",
            "retriever=tfidf,sklearn_tfidf",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            f"hydra.sweep.dir={tmp_path}/sweep",
            FAST_PROOF,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("arecall")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("arecall.sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.data.params["retriever.name"] for r in children) == ["sklearn_tfidf", "tfidf"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    # the sweep ended by comparing its points, in the launching process: the parent holds it
    top = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"comparison.md", "comparison.png"} <= top
    for run in children:
        assert run.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)
        assert run.data.metrics["gap_nonempty_at_5"] == pytest.approx(0.10666666, abs=1e-6)
        path = client.download_artifacts(run.info.run_id, "tables/arecall_at_k.json", str(tmp_path))
        table = json.loads(Path(path).read_text())
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        assert [row["K"] for row in rows] == [1, 3, 5, 10]
        assert rows[2]["ARecall pre"] == pytest.approx(0.9875)


@pytest.mark.faults
def test_a_server_stopped_mid_run_ends_the_run_in_one_line_naming_the_results(
    tmp_path, mlflow_template
):
    url, server = start_mlflow_server(tmp_path, mlflow_template)
    out = tmp_path / "out"
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "MLFLOW_DISABLE_TELEMETRY": "true"}
    # the run holds before proof.json until the server is gone: the outage lands mid-run,
    # however fast or loaded the machine is
    env.update(holding_env(tmp_path))
    proc = subprocess.Popen(
        [str(VENV_BIN / "arecall"), "run", f"hydra.run.dir={out}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = MlflowClient(tracking_uri=url)
        deadline = time.monotonic() + 120
        while not (
            runs := client.search_runs(
                ["0", *[e.experiment_id for e in client.search_experiments()]]
            )
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.3)
        assert runs[0].info.status == "RUNNING"
    finally:
        stop_mlflow_server(server)
        release(tmp_path)
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=300)
    assert time.monotonic() - stopped < 120  # MLflow's own retries would take minutes
    assert (proc.returncode, err) == (
        2,
        f"arecall: error: tracking server {url} unreachable; results are in {out}; "
        f"log them later with: arecall log {out}\n",
    )
    assert (out / "metrics.json").is_file()
