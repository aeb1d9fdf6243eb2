"""The sweep guide's DVC experiments, run as written on a clean clone, and the way back.

Minutes (four DVC experiments, one queued, then `make repro`), so ``long``.
"""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests._docs import clone_of, sh
from tests.helpers import ROOT, git

pytestmark = pytest.mark.long


def test_the_sweep_guides_dvc_experiments_run_as_written_and_make_repro_gets_back(tmp_path):
    repo = clone_of(tmp_path)
    out = sh(
        repo,
        ". .venv/bin/activate",
        "dvc exp run -S retriever=sklearn_tfidf",
        "dvc exp run --queue -S retriever=bm25 && dvc exp run --run-all",
        "dvc exp run -S 'index@vector_search.index=exact' -S vector_search.corpus.n_docs=5000",
        "dvc exp show --no-pager",
        timeout=2400,
    )
    assert "sklearn_tfidf" in out.stdout and "bm25" in out.stdout  # the experiments, side by side
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    assert {r.data.params["retriever.name"] for r in runs} >= {"sklearn_tfidf", "bm25"}
    assert {r.info.status for r in runs} == {"FINISHED"}
    params = yaml.safe_load((repo / "params.yaml").read_text())
    assert params["vector_search"]["corpus"]["n_docs"] == 5000  # the last one is in the workspace

    exps = sh(repo, "make exps", COLUMNS="250")  # what it shows at which width: issue 32 item 5
    assert "workspace" in exps.stdout

    refused = sh(repo, "make repro", check=False)
    assert refused.returncode != 0 and "vector_search.corpus.n_docs: 5000" in refused.stderr
    sh(repo, "git checkout params.yaml", "make repro", timeout=1500)
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "reports" / "vector_search.md").read_bytes() == (
        ROOT / "reports" / "vector_search.md"
    ).read_bytes()
