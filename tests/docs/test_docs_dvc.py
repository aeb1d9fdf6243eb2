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
        "make exps",
        "dvc exp show --no-pager",
        timeout=2400,
    )
    assert "sklearn_tfidf" in out.stdout and "bm25" in out.stdout  # the experiments, side by side
    assert "is empty" not in out.stdout + out.stderr  # an empty table is not a DVC warning
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    # the pipeline's runs (each holds its vector experiment as a nested run of its own)
    pipeline = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert {r.data.params["retriever.name"] for r in pipeline} >= {"sklearn_tfidf", "bm25"}
    assert {r.info.status for r in runs} == {"FINISHED"}
    params = yaml.safe_load((repo / "params.yaml").read_text())
    assert params["vector_search"]["corpus"]["n_docs"] == 5000  # the last one is in the workspace

    # make exps: one screen, at most 25 columns, the retriever of every experiment visible
    exps = sh(repo, "make exps")
    rows = [line for line in exps.stdout.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(header) <= 25 and header[:2] == ["experiment", "retriever"], header
    shown = {line.split("|")[2].strip() for line in rows[2:]}
    assert {"tfidf", "sklearn_tfidf", "bm25"} <= shown
    assert {line.split("|")[1].strip() for line in rows[2:]} >= {"workspace"}
    assert (
        max(len(line) for line in rows) <= 200
    )  # a screen's width, not dvc exp show's 124 columns

    refused = sh(repo, "make repro", check=False)
    assert refused.returncode != 0 and "vector_search.corpus.n_docs: 5000" in refused.stderr
    sh(repo, "git checkout params.yaml", "make repro", timeout=1500)
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "reports" / "vector_search.md").read_bytes() == (
        ROOT / "reports" / "vector_search.md"
    ).read_bytes()
