"""`dvc repro` on a fresh copy regenerates the committed reports byte for byte and logs MLflow.

The copy is a new git repository holding exactly the files git would clone, so this is the
clean-clone check in miniature: no stray local state can make it pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers import ROOT, dvc, git, snapshot_repo

# every test here runs `dvc repro` on a fresh copy (30 s and more): `make test-faults`, in CI
pytestmark = [pytest.mark.slow, pytest.mark.long]

REPORTS = (
    "metrics.json",
    "headline.json",
    "proof.json",
    "tables.md",
    "arecall_at_k.csv",
    "arecall_at_k.png",
    "vector_search.csv",
    "index_search.md",
)


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot_repo(tmp_path_factory.mktemp("clone") / "arecall")


def test_dvc_repro_regenerates_the_committed_reports_and_leaves_git_clean(fresh_clone: Path):
    for name in REPORTS:
        (fresh_clone / "reports" / name).unlink()
    proc = dvc(fresh_clone, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in REPORTS:
        assert (fresh_clone / "reports" / name).read_bytes() == (
            ROOT / "reports" / name
        ).read_bytes(), name
    assert git(fresh_clone, "status", "--porcelain") == ""


def test_a_repro_with_changes_logs_one_run_and_a_no_op_repro_none(fresh_clone: Path):
    proc = dvc(fresh_clone, "repro")  # nothing changed since the repro above
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "track" not in dvc(fresh_clone, "status").stdout  # not "always changed"
    client = MlflowClient(tracking_uri=f"sqlite:///{fresh_clone}/mlflow.db")
    experiment = client.get_experiment_by_name("arecall")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # the first repro's; the no-op logged nothing
    run = runs[0]
    assert run.data.tags["arecall.config_hash"] and run.data.tags["mlflow.source.git.commit"]
    assert run.data.metrics["arecall_pre_nonempty_at_5"] == pytest.approx(0.96)
    assert run.data.metrics["proof_claims_failed"] == 0
    assert run.data.params["retriever.name"] == "tfidf"
    history = client.get_metric_history(run.info.run_id, "arecall_pre")
    assert sorted(m.step for m in history) == [1, 3, 5, 10]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert "tables/arecall_at_k.json" in artifacts and "tables/tables.md" in artifacts
    logged = Path(client.download_artifacts(run.info.run_id, "proof/proof.json"))
    assert json.loads(logged.read_text()) == json.loads(
        (ROOT / "reports" / "proof.json").read_text()
    )
    assert git(fresh_clone, "status", "--porcelain") == ""


def test_dvc_exp_run_with_sklearn_tfidf_gives_the_same_table(fresh_clone: Path):
    before = json.loads((fresh_clone / "reports" / "metrics.json").read_text())
    # the property search is checked at full strength by the repro above: 5 examples here
    fast = "evaluation.proof.max_examples=5"
    proc = dvc(fresh_clone, "exp", "run", "-S", "retriever=sklearn_tfidf", "-S", fast)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    params = (fresh_clone / "params.yaml").read_text()
    assert "sklearn_tfidf" in params
    after = json.loads((fresh_clone / "reports" / "metrics.json").read_text())
    assert after == before
