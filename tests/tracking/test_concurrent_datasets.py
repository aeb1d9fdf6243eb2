"""Sweep points that log the same new dataset at the same moment (issue found in CI, stop 48).

The points of a sweep on a cluster start together and log the same corpus as their input. The
store inserts a dataset it has not seen, and two points that both find it missing both insert
it: a real `mlflow server` refused the second with ``UNIQUE constraint failed:
datasets.experiment_id, datasets.name, datasets.digest``, and that point's run ended FAILED with
its results left to log by hand. The dataset exists by then, so logging it again links it.
"""

from __future__ import annotations

import threading

import pytest
from mlflow.tracking import MlflowClient

from arecall.tracking.run import _log_inputs

pytestmark = pytest.mark.faults


def test_points_logging_the_same_new_dataset_at_once_all_log_it(mlflow_server) -> None:
    points, rounds = 6, 4
    clients = [MlflowClient(tracking_uri=mlflow_server) for _ in range(points)]
    experiment = clients[0].create_experiment("racing")
    errors: list[BaseException] = []
    for r in range(rounds):
        # A dataset no point has logged yet: each round is a new race to insert it.
        inputs = [{"name": "corpus", "digest": f"d{r}", "source_type": "local", "source": "c"}]
        runs = [c.create_run(experiment).info.run_id for c in clients]
        start = threading.Barrier(points)

        def log(client: MlflowClient, run_id: str, inputs=inputs, start=start) -> None:
            start.wait()
            try:
                _log_inputs(client, run_id, inputs)
            except BaseException as exc:  # collected, asserted below
                errors.append(exc)

        threads = [
            threading.Thread(target=log, args=pair) for pair in zip(clients, runs, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for run_id in runs:
            got = clients[0].get_run(run_id).inputs.dataset_inputs
            assert [(d.dataset.name, d.dataset.digest) for d in got] == [("corpus", f"d{r}")]
    assert not errors, errors[0]
