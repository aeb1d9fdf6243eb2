"""Every DVC entry point logs to the repository's MLflow store, under its name, saying how it ran.

``dvc repro``, a workspace ``dvc exp run``, queued experiments (one whose config equals the
workspace's, so DVC skips every stage but ``track``) and a ``--temp`` one: DVC runs the last two
kinds in a temporary copy of the repository (``.dvc/tmp/exps/…``) and the ``track`` stage must
still log into the original repository's ``mlflow.db`` (the store ``make ui`` opens), resolved
from $DVC_ROOT. Each run says its real entry point and command (not the stage's module path),
has the pipeline's own times (a held stage shows in Duration), the corpus as its dataset, and
is found by its experiment's name. The store is then read back through the REST API of a real
``mlflow server`` started on it, as the UI reads it. Run end to end with the real ``dvc`` on a
snapshot of this repository (no outer MLFLOW_TRACKING_URI): minutes, so ``long``.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from arecall.pipeline.config import default_config
from arecall.tracking.provenance import config_hash

from tests import _rest as rest
from tests._holding import holding_env, release
from tests.helpers import (
    FAST_PROOF,
    dvc,
    git,
    snapshot_repo,
    start_mlflow_server,
    stop_mlflow_server,
)

#: dvc, asserting it succeeded
dvc_ok = partial(dvc, check=True)

pytestmark = [pytest.mark.slow, pytest.mark.long]

#: Seconds the first `dvc repro` holds its prove stage: its run's Duration must show them.
HELD = 3.0


def _held_repro(repo: Path, work: Path) -> Any:
    """``dvc repro`` with its prove stage held for `HELD` seconds."""
    gate = threading.Timer(HELD, release, args=(work,))
    gate.start()
    try:
        return dvc_ok(repo, "repro", **holding_env(work))
    finally:
        gate.cancel()
        release(work)


def _no_store_but_the_repositorys(repo: Path) -> None:
    stray = [p for p in repo.rglob("mlflow.db") if p != repo / "mlflow.db"]
    assert stray == []  # none inside DVC's temporary workspaces


def test_every_dvc_entry_point_is_in_mlflow_under_its_name_and_says_how_it_ran(
    tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path
):
    repo = snapshot_repo(tmp_path_factory.mktemp("dvc-exps") / "arecall")
    work = tmp_path_factory.mktemp("hold")
    head = git(repo, "rev-parse", "HEAD").strip()
    outputs = [_held_repro(repo, work)]
    random = ["profiles=random", FAST_PROOF]
    outputs.append(dvc_ok(repo, "exp", "run", "-n", "ws-random", *(f"-S{o}" for o in random)))
    # queued: one whose config is the workspace's (DVC skips every stage but track), one not
    outputs.append(
        dvc_ok(repo, "exp", "run", "--queue", "-n", "queued-same", *(f"-S{o}" for o in random))
    )
    domains = ["profiles=domains", FAST_PROOF]
    outputs.append(
        dvc_ok(repo, "exp", "run", "--queue", "-n", "queued-domains", *(f"-S{o}" for o in domains))
    )
    outputs.append(dvc_ok(repo, "exp", "run", "--run-all"))
    status = dvc_ok(repo, "queue", "status")
    assert "queued-same" in status.stdout and "Success" in status.stdout
    opened = ["profiles=open", FAST_PROOF]
    outputs.append(
        dvc_ok(repo, "exp", "run", "--temp", "-n", "temp-open", *(f"-S{o}" for o in opened))
    )
    # a no-op repro logs nothing new, and says where the results are
    again = dvc_ok(repo, "repro")
    assert "mlflow: these results are logged already (run " in again.stdout
    for proc in [*outputs, again]:  # an empty table is not a DVC warning
        assert "is empty" not in proc.stdout + proc.stderr
    _no_store_but_the_repositorys(repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=no") != ""  # ws-random applied

    url, server = start_mlflow_server(
        tmp_path_factory.mktemp("server"), mlflow_template, repo / "mlflow.db"
    )
    try:
        kind = rest.tags_of(rest.experiment(url))["mlflow.experimentKind"]
        runs = rest.runs(url)
    finally:
        stop_mlflow_server(server)
    assert kind == "custom_model_development"
    pipeline = {
        rest.tags_of(r)["mlflow.runName"]: r
        for r in runs
        if rest.tags_of(r)["arecall.kind"] == "pipeline"
    }
    assert sorted(pipeline) == sorted(
        ["dvc-repro", "ws-random", "queued-same", "queued-domains", "temp-open"]
    )  # every experiment, cached or not, by its name; the no-op repro added none
    expected = {
        "dvc-repro": ("dvc repro", "dvc repro", []),
        "ws-random": (
            "dvc exp run",
            "dvc exp run -n ws-random -Sprofiles=random -Sevaluation.proof.max_examples=5",
            random,
        ),
        "queued-same": ("dvc exp run --queue", "dvc exp run --run-all", random),
        "queued-domains": ("dvc exp run --queue", "dvc exp run --run-all", domains),
        "temp-open": (
            "dvc exp run --temp",
            "dvc exp run --temp -n temp-open -Sprofiles=open -Sevaluation.proof.max_examples=5",
            opened,
        ),
    }
    for name, (entry, command, overrides) in expected.items():
        run = pipeline[name]
        tags = rest.tags_of(run)
        assert run["info"]["status"] == "FINISHED", name
        assert tags["arecall.entry"] == tags["mlflow.source.name"] == entry, name
        assert tags["arecall.command"] == command, name
        assert tags["mlflow.source.git.commit"] == head, name
        assert tags["arecall.config_hash"] == config_hash(default_config(overrides).params()), name
        if name != "dvc-repro":
            assert tags["arecall.dvc_experiment"] == name
        (dataset,) = rest.datasets(run)
        assert dataset["name"] == "discovery", name
        assert rest.metrics(run)["arecall_pre_at_5"] > 0, name
    # Duration: the pipeline's (the held prove stage in it), not the track stage's
    first = pipeline["dvc-repro"]["info"]
    assert (int(first["end_time"]) - int(first["start_time"])) / 1000 >= HELD
    # the vector experiment, which the DVC pipeline's config asks for, in a run of its own
    vectors = [r for r in runs if rest.tags_of(r)["arecall.kind"] == "vector_search"]
    parents = {rest.tags_of(r)["mlflow.parentRunId"] for r in vectors}
    assert pipeline["dvc-repro"]["info"]["run_id"] in parents
    assert all(rest.tags_of(r)["mlflow.runName"] == "vector_search" for r in vectors)
