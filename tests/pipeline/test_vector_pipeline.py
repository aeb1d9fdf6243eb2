"""Filtered vector search inside the pipeline: verity's table via `arecall run`, text corpora
through an index, the DVC stage's reproducibility and the MLflow record."""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from arecall.core.errors import ArecallError
from arecall.pipeline.config import default_config
from arecall.pipeline.run import Layout, run_all, run_in_memory
from arecall.pipeline.stages.index_search import COLUMNS

pytestmark = pytest.mark.slow


def test_arecall_run_corpus_vectors_prints_verity_table_with_auto_rows(
    tmp_path, mlflow_store, arecall
):
    uri = mlflow_store
    out = tmp_path / "out"
    proc = arecall("run", f"hydra.run.dir={out}", "vector_search.enabled=true")
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(out / "vector_search.csv")
    assert list(table.groupby("selectivity")["matching"].first()) == [21, 79, 228, 611, 2000]
    post = table[table["mode"] == "post"].set_index("selectivity")
    assert (post.loc[post.index < 1.0, "returned"] < 10).all()  # post under-returns
    pre = table[table["mode"] == "pre"]
    assert (pre["returned"] == 10).all() and (pre["recall"] == 1.0).all()
    auto = table[table["mode"] == "auto"]
    assert (auto["returned"] == 10).all() and (auto["recall"] >= 0.95).all()
    assert "| 1% | 21 | `post` |" in proc.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    by_kind = {r.data.tags["arecall.kind"]: r for r in runs}
    assert set(by_kind) == {"pipeline", "vector_search"}
    # the vector experiment is a run of its own, nested in the pipeline's; the pipeline's run
    # keeps the Authorized-Recall headline only
    run = by_kind["vector_search"]
    assert run.data.tags["mlflow.parentRunId"] == by_kind["pipeline"].info.run_id
    assert not [m for m in by_kind["pipeline"].data.metrics if m.startswith("vector_")]
    assert run.data.params["vector_search.corpus.n_docs"] == "2000"
    assert run.data.metrics["vector_auto_recall_s1pct"] >= 0.95
    assert "vector_post_qps_s1pct" in run.data.metrics
    assert "tables/vector_search.json" in {
        a.path for a in client.list_artifacts(run.info.run_id, "tables")
    }


def test_vector_reports_are_byte_identical_between_runs(tmp_path):
    cfg = default_config(["vector_search.corpus.n_queries=10", "evaluation.proof.max_examples=5"])
    a, b = Layout.run(tmp_path / "a"), Layout.run(tmp_path / "b")
    run_all(cfg, a)
    run_all(cfg, b)
    for name in ("vector_table", "vector_csv", "vector_curve", "vector_plot"):
        assert getattr(a, name).read_bytes() == getattr(b, name).read_bytes(), name


def test_a_text_corpus_is_measured_through_the_index_principal_by_principal(tmp_path):
    layout = Layout.run(tmp_path)
    out = run_all(
        default_config(
            [
                "retriever=dense_lsa",
                "retriever.n_components=16",
                "index=hnsw",
                "evaluation.proof.max_examples=5",
            ]
        ),
        layout,
    )
    table = pd.read_csv(layout.index_csv)
    assert set(table["principal"]) == {
        "process-engineer",
        "analyst",
        "clinical-reviewer",
        "external-auditor",
    }
    pre = table[table["mode"] == "pre"]
    assert (pre["recall"] == 1.0).all()
    assert (table[table["mode"] == "post"]["returned"] <= 10).all()
    assert "`pushdown`" in out["tables"]
    # index=none writes only the header: it must be the header a measured table has
    assert tuple(table.columns) == COLUMNS


def test_vectors_as_the_text_corpus_and_a_sparse_retriever_with_an_index_are_refused():
    with pytest.raises(ArecallError, match=r"^corpus=vectors is the vector experiment.s corpus"):
        run_in_memory(default_config(["corpus=vectors", "index=hnsw"]))
    with pytest.raises(ArecallError, match=r"needs a .*dense"):
        run_in_memory(default_config(["index=exact", "evaluation.proof.max_examples=5"]))
