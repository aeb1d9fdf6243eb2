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
    # track runs on every repro (so every DVC experiment is in MLflow by its name), and names
    # the run that holds these results instead of logging them again
    assert "mlflow: these results are logged already (run " in proc.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{fresh_clone}/mlflow.db")
    experiment = client.get_experiment_by_name("arecall")
    runs = client.search_runs([experiment.experiment_id])
    kinds = sorted(r.data.tags["arecall.kind"] for r in runs)
    assert kinds == ["pipeline", "vector_search"]  # the first repro's; the no-op logged nothing
    (run,) = [r for r in runs if r.data.tags["arecall.kind"] == "pipeline"]
    assert run.info.run_id in proc.stdout
    assert run.data.tags["arecall.config_hash"] and run.data.tags["mlflow.source.git.commit"]
    assert run.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)
    assert run.data.metrics["gap_nonempty_at_5"] == pytest.approx(0.10666666, abs=1e-6)
    assert run.data.params["retriever.name"] == "tfidf"
    history = client.get_metric_history(run.info.run_id, "arecall_pre")
    assert sorted(m.step for m in history) == [1, 3, 5, 10]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert "tables/arecall_at_k.json" in artifacts
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"tables.md", "arecall_at_k.png"} <= top
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
