"""Every run is findable: it lands in the repository's store and says where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from arecall.pipeline.layout import Layout
from arecall.pipeline.run import run_all
from arecall.tracking.pipeline import log_run, pipeline_run
from arecall.tracking.provenance import config_hash

from tests.helpers import fast_config, git


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


@pytest.mark.long  # a whole process with MLflow or DVC: make test-faults
def test_a_temp_workspace_run_lands_in_the_original_repositorys_store(
    repo_and_workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    repo, workspace = repo_and_workspace
    cfg = fast_config()
    layout = Layout.run(workspace / "out")
    run_all(cfg, layout)
    cfg = cfg.params()  # what the run logs
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
    cfg = fast_config().params()
    assert config_hash(cfg) == config_hash({**cfg, "tracking": {"enabled": False}})
    assert config_hash(cfg) != config_hash(fast_config("retriever=bm25").params())
    assert config_hash(cfg) != config_hash(fast_config("evaluation.ks=[1,5]").params())


def test_a_run_is_logged_in_few_store_calls_with_every_artifact_and_table(
    tmp_path: Path, mlflow_store: str, monkeypatch: pytest.MonkeyPatch
):
    """Params, metrics and tags in one batch, the corpus in one call; the artifacts go to the
    run's artifact repository (`publish_artifacts`), not through a store call each; the UI sees
    tables."""
    from mlflow import MlflowClient as Client

    calls: dict[str, int] = {}
    for name in (
        "log_batch",
        "log_inputs",
        "log_artifacts",
        "log_artifact",
        "log_table",
        "log_dict",
        "set_tag",
    ):
        original = getattr(Client, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Client, name, spy)
    cfg = fast_config()
    layout = Layout.run(tmp_path / "out")
    result = run_all(cfg, layout)
    run_id = log_run(
        cfg.params(), layout.report_files(), vector=result["vector"], rank_info=layout.rank_info
    )
    assert calls == {"log_batch": 1}  # no corpus given: no input
    client = MlflowClient(tracking_uri=mlflow_store)
    run = client.get_run(run_id)
    assert "arecall_pre_at_5" in run.data.metrics and run.data.params["retriever.name"]
    logged = {a.path for a in client.list_artifacts(run_id, "reports")}
    vector = {"vector_search.md", "vector_search.csv", "vector_curve.csv", "vector_search.png"}
    reports = {p.name for p in layout.report_files().values()}
    assert {f"reports/{name}" for name in reports - vector} == logged  # vector: its own run
    top = {a.path for a in client.list_artifacts(run_id) if not a.is_dir}
    assert top == {"tables.md", "arecall_at_k.png", "diagnostics.json"}  # what Compare shows
    tables = [t["path"] for t in json.loads(run.data.tags["mlflow.loggedArtifacts"])]
    assert "tables/arecall_at_k.json" in tables
    loaded = client.load_table(run.info.experiment_id, "tables/arecall_at_k.json", [run_id])
    assert list(loaded["K"]) == [1, 3, 5, 10]
    proof = client.download_artifacts(run_id, "proof/proof.json", str(tmp_path / "dl"))
    assert json.loads(Path(proof).read_text()) == result["proof"]
    diagnostics = client.download_artifacts(run_id, "diagnostics.json", str(tmp_path / "dl"))
    rank = json.loads(layout.rank_info.read_text())["representation"]
    assert json.loads(Path(diagnostics).read_text()) == {"rank": rank}
    assert not [t for t in run.data.tags if t.startswith("arecall.rank.")]  # not tags any more
    assert run.data.tags["mlflow.note.content"] == layout.tables.read_text()
    calls.clear()
    log_run(cfg.params(), layout.report_files(), corpus=layout.corpus)
    assert calls == {"log_batch": 1, "log_inputs": 1}


def test_a_failed_run_keeps_its_config_in_the_one_batch_that_ends_it(
    mlflow_store: str, monkeypatch: pytest.MonkeyPatch
):
    from mlflow import MlflowClient as Client

    calls: list[str] = []
    original = Client.log_batch

    def spy(self, *args, **kwargs):
        calls.append("log_batch")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Client, "log_batch", spy)
    run = pipeline_run(fast_config("retriever=bm25").params())
    with pytest.raises(ValueError, match="boom"), run:
        run.start()
        raise ValueError("boom")
    assert calls == ["log_batch"]
    got = MlflowClient(tracking_uri=mlflow_store).get_run(run.run_id)
    assert got.info.status == "FAILED"
    assert got.data.params["retriever.name"] == "bm25"
    assert got.data.tags["arecall.error"] == "ValueError: boom"


def test_the_upload_reports_each_of_its_steps_in_order(mlflow_store: str):
    from arecall.tracking.run import UPLOAD_STEPS, TrackedRun

    seen: list[str] = []
    with TrackedRun(mlflow_store, "steps", params={"a": "1"}) as run:
        run.start()
        run_id = run.finish({"m": 1.0}, progress=seen.append)
    assert seen == list(UPLOAD_STEPS)
    assert MlflowClient(tracking_uri=mlflow_store).get_run(run_id).info.status == "FINISHED"
