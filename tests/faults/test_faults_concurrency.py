"""Eight `arecall run` processes started together in one directory never share state.

Each has different overrides and all log to one fresh sqlite store; every logged run must carry
exactly the numbers its own config gives when run alone, and its own run directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from arecall.core.measures import mlflow_key
from arecall.pipeline.run import run_in_memory

from tests.helpers import VENV_BIN, fast_config

POINTS = [
    (retriever, profiles)
    for retriever in ("tfidf", "bm25", "sklearn_tfidf", "dense_lsa")
    for profiles in ("corpus", "open")
]
#: the headline each run logs as metrics (the rest of metrics.json is its artifact)
CHECKED = ("recall", "arecall_post", "arecall_pre", "gap", "gap_nonempty")


@pytest.mark.faults
def test_eight_concurrent_runs_each_log_their_own_numbers(tmp_path: Path):
    store = tmp_path / "mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    procs = [
        subprocess.Popen(
            [
                str(VENV_BIN / "arecall"),
                "run",
                f"retriever={retriever}",
                f"profiles={profiles}",
                "evaluation.proof.max_examples=5",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for retriever, profiles in POINTS
    ]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(POINTS), errors

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=100
    )
    assert len(runs) == len(POINTS)
    assert {r.info.status for r in runs} == {"FINISHED"}
    run_dirs = list((tmp_path / "outputs").glob("*/*"))
    assert len(run_dirs) == len(POINTS)  # one directory per process, none shared
    for retriever, profiles in POINTS:
        (run,) = [
            r
            for r in runs
            if r.data.params["retriever.name"] == retriever
            and r.data.params["profiles.name"] == profiles
        ]
        alone = run_in_memory(fast_config(f"retriever={retriever}", f"profiles={profiles}"))[
            "metrics"
        ]["k"]
        for k, row in alone.items():
            for key in CHECKED:
                if row.get(key) is not None:
                    logged = run.data.metrics[mlflow_key(key, k)]
                    assert logged == pytest.approx(row[key], abs=1e-12), (
                        retriever,
                        profiles,
                        key,
                        k,
                    )


def test_the_run_directory_is_unique_per_process():
    out = subprocess.run(
        [sys.executable, "-c", "from arecall.cli.run import unique_token; print(unique_token())"],
        capture_output=True,
        text=True,
        check=True,
    )
    from arecall.cli.run import unique_token

    assert out.stdout.strip() != unique_token()
    assert unique_token().startswith(f"{os.getpid()}-")
