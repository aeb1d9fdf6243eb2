"""Queued and ``--temp`` DVC experiments log to the repository's own MLflow store.

DVC runs both in a temporary copy of the repository (``.dvc/tmp/exps/…``); the ``track`` stage
must still log into the original repository's ``mlflow.db`` (the store ``make ui`` opens),
resolved from $DVC_ROOT, with the experiment's name as run name, the commit it ran from,
whether its tree was dirty and its config hash. Run end to end with the real ``dvc`` on a
snapshot of this repository (no outer MLFLOW_TRACKING_URI): minutes each, so ``long``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from arecall.pipeline.config import default_config
from arecall.tracking.provenance import config_hash

from tests.helpers import FAST_PROOF, dvc, git, snapshot_repo

#: dvc, asserting it succeeded
dvc_ok = partial(dvc, check=True)

pytestmark = [pytest.mark.slow, pytest.mark.long]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot_repo(tmp_path_factory.mktemp("dvc-exps") / "arecall")


def _run_named(repo: Path, name: str) -> Any:
    """The one run called ``name`` in the repository's own store."""
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("arecall")
    assert experiment is not None, "no run reached the repository's mlflow.db"
    runs = client.search_runs([experiment.experiment_id], filter_string=f"run_name = '{name}'")
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def _check_provenance(repo: Path, run: Any, name: str, overrides: list[str]) -> None:
    assert run.info.status == "FINISHED"
    assert run.data.tags["arecall.dvc_experiment"] == name
    assert run.data.tags["mlflow.source.git.commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert run.data.tags["arecall.git_dirty"] in ("true", "false")
    assert run.data.tags["arecall.config_hash"] == config_hash(default_config(overrides))
    assert "arecall_pre_at_5" in run.data.metrics


def _no_store_but_the_repositorys(repo: Path) -> None:
    stray = [p for p in repo.rglob("mlflow.db") if p != repo / "mlflow.db"]
    assert stray == []  # none inside DVC's temporary workspaces


def test_a_queued_experiment_lands_in_the_repositorys_store(repo: Path):
    overrides = ["profiles=random", FAST_PROOF]
    dvc_ok(repo, "exp", "run", "--queue", "-n", "queued-random", *(f"-S{o}" for o in overrides))
    assert not (repo / "mlflow.db").exists()  # queued, not run
    dvc_ok(repo, "exp", "run", "--run-all")
    run = _run_named(repo, "queued-random")
    _check_provenance(repo, run, "queued-random", overrides)
    assert run.data.params["profiles.name"] == "random"
    _no_store_but_the_repositorys(repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""  # workspace intact


def test_a_temp_experiment_lands_in_the_repositorys_store(repo: Path):
    overrides = ["profiles=domains", FAST_PROOF]
    dvc_ok(repo, "exp", "run", "--temp", "-n", "temp-domains", *(f"-S{o}" for o in overrides))
    run = _run_named(repo, "temp-domains")
    _check_provenance(repo, run, "temp-domains", overrides)
    assert run.data.params["profiles.name"] == "domains"
    _no_store_but_the_repositorys(repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
