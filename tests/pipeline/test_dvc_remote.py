"""A DVC remote shares data/ across machines: push from one clone, pull into another, no recompute.

The team's workflow, end to end on a clean clone: one member reproduces the pipeline and pushes
its cached outputs (data/, which git ignores) to a remote (a local directory here; S3, GCS, SSH
or a shared drive in practice); another clones the git repository, pulls, and finds every
computing stage up to date: `dvc repro` recomputes nothing, its `track` stage (which runs on every
repro) logs the pulled results once to the clone's MLflow store and not again, and `git status`
is clean.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import partial
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers import dvc, git, snapshot_repo

#: dvc, asserting it succeeded
dvc_ok = partial(dvc, check=True)

pytestmark = pytest.mark.long

STAGES = (
    "generate",
    "rank",
    "filter",
    "score",
    "prove",
    "report",
    "index_search",
    "vectors",
    "track",
)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "data").rglob("*"))
        if p.is_file() and p.name != ".gitignore"
    }


def test_push_from_one_clone_pull_into_another_and_nothing_is_recomputed(tmp_path: Path):
    origin = snapshot_repo(tmp_path / "origin")
    dvc_ok(origin, "repro")
    remote = tmp_path / "remote"
    dvc_ok(origin, "remote", "add", "-d", "shared", str(remote))
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results, remote")
    pushed = dvc_ok(origin, "push")
    assert remote.is_dir() and any(p.is_file() for p in remote.rglob("*")), pushed.stdout
    produced = _digests(origin)
    assert {name.split("/")[1] for name in produced} >= {
        "corpus",
        "rank",
        "filter",
        "score",
        "track",
    }

    subprocess.run(
        ["git", "clone", "-q", str(origin), str(tmp_path / "clone")], check=True, timeout=120
    )
    clone = tmp_path / "clone"
    assert not (clone / "data" / "corpus").exists()  # git alone does not carry data/
    dvc_ok(clone, "pull")
    assert _digests(clone) == produced

    status = dvc_ok(clone, "status")
    assert status.stdout.split() == ["track:", "always", "changed"], status.stdout
    for attempt in range(2):
        repro = dvc_ok(clone, "repro")
        ran = [line for line in repro.stdout.splitlines() if line.startswith("Running stage")]
        assert ran == ["Running stage 'track':"], repro.stdout  # nothing recomputed
        for stage in STAGES[:-1]:
            assert f"Stage '{stage}' didn't change, skipping" in repro.stdout, repro.stdout
        assert git(clone, "status", "--porcelain") == ""
        assert _digests(clone) == produced
        store = MlflowClient(tracking_uri=f"sqlite:///{clone / 'mlflow.db'}")
        experiment = store.get_experiment_by_name("arecall")
        pipeline_runs = [
            r
            for r in store.search_runs([experiment.experiment_id])
            if "mlflow.parentRunId" not in r.data.tags
        ]
        assert len(pipeline_runs) == 1, attempt  # logged once, by the first repro only
