"""MLflow's Compare view, read as the UI reads it: the REST API of a real `mlflow server`.

Two ``arecall run`` (the corpus's own grants, and random ones) log to a server on 127.0.0.1; the test reads them back with
plain HTTP — ``POST /api/2.0/mlflow/runs/search`` (the runs table the Compare view starts from)
and ``GET /api/2.0/mlflow/runs/get`` (each run's page) — and checks that both carry the same
headline metrics, side by side, with the values of each run's own ``headline.json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests._rest import get, post
from tests.helpers import FAST_PROOF

pytestmark = [pytest.mark.slow, pytest.mark.long]

#: headline.json key -> MLflow metric name part (`arecall.core.measures.mlflow_metrics` names
#: a confidence interval ``<name>_ci_low`` / ``<name>_ci_high``).
_CI = {"gap_nonempty_low": "gap_nonempty_ci_low", "gap_nonempty_high": "gap_nonempty_ci_high"}


def _headline_metrics(run_dir: Path) -> dict[str, float]:
    """The headline numbers of a run directory, under the names its MLflow run must use."""
    headline = json.loads((run_dir / "headline.json").read_text(encoding="utf-8"))
    return {
        f"{_CI.get(key, key)}_at_{k}": float(value)
        for k, row in headline["k"].items()
        for key, value in row.items()
        if value is not None
    }


def _params(run: dict[str, Any]) -> dict[str, str]:
    return {p["key"]: p["value"] for p in run["data"].get("params", [])}


def _metrics(run: dict[str, Any]) -> dict[str, float]:
    return {m["key"]: float(m["value"]) for m in run["data"].get("metrics", [])}


def test_two_runs_show_the_same_headline_metrics_side_by_side_through_the_rest_api(
    tmp_path,
    monkeypatch,
    arecall,
    mlflow_server,
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    choices = ("corpus", "random")  # two authorization profiles: different headlines
    expected = {}
    for choice in choices:
        out = tmp_path / choice
        proc = arecall("run", f"profiles={choice}", f"hydra.run.dir={out}", FAST_PROOF)
        assert proc.returncode == 0, proc.stderr
        expected[choice] = _headline_metrics(out)
    # the headline is one set of names whatever the config: what Compare lines up
    assert expected["corpus"].keys() == expected["random"].keys()
    assert {"arecall_pre_at_5", "gap_nonempty_ci_low_at_5"} <= expected["corpus"].keys()

    (experiment,) = [
        e
        for e in get(mlflow_server, "/api/2.0/mlflow/experiments/search", max_results="100")[
            "experiments"
        ]
        if e["name"] == "arecall"
    ]
    found = post(
        mlflow_server,
        "/api/2.0/mlflow/runs/search",
        {"experiment_ids": [experiment["experiment_id"]], "max_results": 10},
    )["runs"]
    assert len(found) == 2
    by_choice = {_params(run)["profiles.name"]: run for run in found}
    assert set(by_choice) == set(choices)

    side_by_side = {}
    for choice, listed in by_choice.items():
        run_id = listed["info"]["run_id"]
        run = get(mlflow_server, "/api/2.0/mlflow/runs/get", run_id=run_id)["run"]
        assert run["info"]["status"] == "FINISHED"
        assert _metrics(listed) == _metrics(run)  # the table and the run page agree
        logged = _metrics(run)
        want = expected[choice]
        assert want.keys() <= logged.keys(), sorted(want.keys() - logged.keys())
        for key, value in want.items():
            assert math.isclose(logged[key], value, rel_tol=0, abs_tol=1e-12), (key, choice)
        side_by_side[choice] = {key: logged[key] for key in want}
    # a comparison worth making: the two runs differ on some headline number
    assert side_by_side["corpus"] != side_by_side["random"]
