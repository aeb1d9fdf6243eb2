"""Every run is findable: it lands in the repository's store and says where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from arecall.pipeline.layout import Layout
from arecall.pipeline.run import run_all
from arecall.pipeline.tracking import config_hash, log_run

from conftest import fast_config, git


@pytest.fixture
def repo_and_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repository and, inside it, a temporary experiment workspace as DVC makes one."""
    repo = tmp_path / "repo"
    workspace = repo / ".dvc" / "tmp" / "exps" / "tmp1234"
    workspace.mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return repo, workspace


def test_a_temp_workspace_run_lands_in_the_original_repositorys_store(
    repo_and_workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    repo, workspace = repo_and_workspace
    cfg = fast_config()
    layout = Layout.run(workspace / "out")
    run_all(cfg, layout)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("DVC_ROOT", str(repo))  # what DVC sets for queued and --temp runs
    monkeypatch.setenv("DVC_EXP_NAME", "plush-arms")
    run_id = log_run(cfg, layout.report_files(), root=workspace, run_name="dvc-repro")
    assert not (workspace / "mlflow.db").exists()
    run = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}").get_run(run_id)
    assert run.info.run_name == "plush-arms"
    assert run.data.tags["arecall.dvc_experiment"] == "plush-arms"
    assert run.data.tags["arecall.config_hash"] == config_hash(cfg)
    assert run.data.tags["mlflow.source.git.commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert run.data.tags["arecall.git_dirty"] == "false"
    assert run.data.tags["arecall.command"]


def test_the_config_hash_ignores_tracking_and_sees_every_result_setting():
    cfg = fast_config()
    assert config_hash(cfg) == config_hash({**cfg, "tracking": {"enabled": False}})
    assert config_hash(cfg) != config_hash(fast_config("retriever=bm25"))
    assert config_hash(cfg) != config_hash(fast_config("evaluation.ks=[1,5]"))
