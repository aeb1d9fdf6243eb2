"""The runs table's view (`arecall.tracking.view`): kept on the experiment, following the Ks."""

from __future__ import annotations

import json

from mlflow import MlflowClient

from arecall.tracking.run import TrackedRun
from arecall.tracking.ui import runs_page
from arecall.tracking.view import VIEW_KEY, VIEW_TAG, runs_view


def _view(client: MlflowClient) -> list[str]:
    experiment = client.get_experiment_by_name("arecall")
    return json.loads(experiment.tags[VIEW_TAG])["selectedColumns"]


def _run(uri: str, ks: list[int]) -> None:
    with TrackedRun(uri, "arecall", experiment_tags={VIEW_TAG: runs_view(ks)}) as run:
        run.start()


def test_the_view_follows_the_ks_of_the_last_run_and_is_not_rewritten_when_they_agree(
    mlflow_store: str, monkeypatch
):
    client = MlflowClient(tracking_uri=mlflow_store)
    _run(mlflow_store, [1, 5])  # a new experiment: created with it
    assert [c for c in _view(client) if c.startswith("metrics.")] == [
        "metrics.`arecall_post_at_1`", "metrics.`arecall_pre_at_1`", "metrics.`gap_at_1`",
        "metrics.`arecall_post_at_5`", "metrics.`arecall_pre_at_5`", "metrics.`gap_at_5`",
    ]  # fmt: skip
    _run(mlflow_store, [10])
    assert [c for c in _view(client) if c.startswith("metrics.")][-1] == "metrics.`gap_at_10`"

    calls: list[tuple] = []
    original = MlflowClient.set_experiment_tag

    def spy(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "set_experiment_tag", spy)
    _run(mlflow_store, [10])
    assert calls == []  # the same Ks: the experiment is left alone


def test_arecall_ui_opens_the_view_on_the_runs_table():
    page = runs_page("127.0.0.1", 5000, "1", VIEW_KEY)
    assert page.endswith(
        "/#/experiments/1/runs?workflowType=machine_learning&viewStateShareKey=arecall"
    )
