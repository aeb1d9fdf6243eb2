"""The cluster guide and the MLflow UI commands, run as written (fixed ports 5000 and 8786).

The guide's own commands start the tracking server (port 5000) and the Dask scheduler and
workers (port 8786, every socket on 127.0.0.1), then its sweeps, the sharded run and evaluation,
and the DVC experiment on the Dask engine run against them; `make ui` and `make ui PORT=5050`
serve the MLflow UI. Minutes, and fixed ports, so ``long``; `fixed_ports` keeps two test runs on
one machine from colliding, and every process is stopped when its test ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests._docs import background, clone_of, fixed_ports, sh, wait_http, write_trec_files
from tests.helpers import ROOT

pytestmark = pytest.mark.long


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A clean clone's files with the test run's venv at .venv and the files evaluate names."""
    return write_trec_files(clone_of(tmp_path, "arecall"))


def _server_runs() -> list:
    client = MlflowClient(tracking_uri="http://127.0.0.1:5000")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_the_cluster_guide_runs_as_written(repo: Path):
    with fixed_ports(5000, 8786):
        server = background(
            repo,
            ".venv/bin/mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri "
            "sqlite:///mlflow-server.db --artifacts-destination ./mlartifacts",
            log=repo.parent / "server.log",
        )
        cluster = background(
            repo,
            ".venv/bin/dask scheduler --host 127.0.0.1 --port 8786 --no-dashboard "
            "--dashboard-address 127.0.0.1:0 &",
            ".venv/bin/dask worker tcp://127.0.0.1:8786 --host 127.0.0.1 --nworkers 2 "
            "--nthreads 1 --no-dashboard --dashboard-address 127.0.0.1:0 &",
            log=repo.parent / "cluster.log",
        )
        with server, cluster:
            wait_http("http://127.0.0.1:5000/health")
            out = sh(
                repo,
                "export MLFLOW_TRACKING_URI=http://127.0.0.1:5000",
                ".venv/bin/arecall run -m hydra/launcher=dask "
                "hydra.launcher.address=tcp://127.0.0.1:8786 retriever=tfidf,bm25 "
                "'evaluation.ks=[1,5],[5]'",
                ".venv/bin/arecall run -m hydra/launcher=dask "
                "hydra.launcher.address=tcp://127.0.0.1:8786 retriever=tfidf,bm25",
                ".venv/bin/arecall run evaluation.engine.name=dask "
                "evaluation.engine.scheduler=tcp://127.0.0.1:8786",
                ".venv/bin/arecall run evaluation.engine.name=dask "
                "evaluation.engine.scheduler=tcp://127.0.0.1:8786 "
                "evaluation.engine.block_queries=2048 evaluation.engine.doc_shards=2",
                ".venv/bin/arecall evaluate --run my.run --qrels test.qrels --acl acl.tsv "
                "--engine dask --scheduler tcp://127.0.0.1:8786",
                timeout=1500,
            )
            assert "deeper" in out.stdout  # evaluate's table, sharded on the cluster
            runs = _server_runs()
            points = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
            assert len(points) == 4 + 2  # the 2 × 2 grid, then the 2-point one
            ranked = [r for r in runs if r.data.params.get("evaluation.engine.doc_shards") == "2"]
            assert ranked and {r.info.status for r in ranked} == {"FINISHED"}  # rank by block
            assert {r.info.status for r in runs} == {"FINISHED"}
            pids = {r.data.tags.get("arecall.pid") for r in points}
            assert len(pids) >= 2  # both worker processes ran points
            assert any(r.data.params.get("evaluation.engine.name") == "dask" for r in runs)

            # the same engine through DVC, in the repository, with the venv active
            sh(
                repo,
                ". .venv/bin/activate",
                "dvc exp run -S evaluation.engine.name=dask "
                "-S evaluation.engine.scheduler=tcp://127.0.0.1:8786",
                timeout=1500,
            )
            params = yaml.safe_load((repo / "params.yaml").read_text())
            assert params["evaluation"]["engine"]["name"] == "dask"  # applied to the workspace
            for report in ("metrics.json", "proof.json"):  # any engine: the same bytes
                assert (repo / "reports" / report).read_bytes() == (
                    ROOT / "reports" / report
                ).read_bytes()


def test_make_ui_serves_the_mlflow_ui_on_loopback_on_either_port(repo: Path):
    with fixed_ports(5000), background(repo, "make ui", log=repo.parent / "ui.log"):
        wait_http("http://127.0.0.1:5000/health", timeout=180)
        wait_http("http://127.0.0.1:5000/")
    with fixed_ports(5050), background(repo, "make ui PORT=5050", log=repo.parent / "ui2.log"):
        wait_http("http://127.0.0.1:5050/health", timeout=180)
        wait_http("http://127.0.0.1:5050/")
