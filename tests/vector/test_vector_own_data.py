"""The vector experiment on the user's own vectors, queries and ACL: one filter per principal,
every placement and store audit against the oracle, and each principal's global-local
selectivity (GLS) computed as the docs define it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from arecall.core.errors import ArecallError
from arecall.io.vectors import write_vectors
from arecall.pipeline.config import default_config
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages.vectors import vector_search
from arecall.vector.generator import l2_normalise
from arecall.vector.schema import IndexConfig
from arecall.vector.workload import load_workload, principal_table

N_CLUSTERS, PER_CLUSTER, DIMS, N_QUERIES, K = 20, 30, 24, 12, 10


def own_files(tmp_path: Path, seed: int = 0) -> dict[str, Path]:
    """600 clustered documents; queries from clusters 0-3. Principals: ``near`` may use the
    queries' clusters, ``far`` only clusters 10-19 (none near a query), ``uniform`` every
    fourth document (independent of the clusters), ``team`` (the group ``staff`` of the groups
    file: ann and bob) clusters 0 and 10."""
    rng = np.random.default_rng(seed)
    centers = np.eye(DIMS)[:N_CLUSTERS]  # orthogonal: clusters well apart
    cluster = np.repeat(np.arange(N_CLUSTERS), PER_CLUSTER)
    docs = l2_normalise(
        centers[cluster] + 0.5 / np.sqrt(DIMS) * rng.normal(size=(len(cluster), DIMS))
    )
    home = rng.integers(0, 4, N_QUERIES)
    queries = l2_normalise(centers[home] + 0.5 / np.sqrt(DIMS) * rng.normal(size=(N_QUERIES, DIMS)))
    doc_ids = [f"doc{i:04d}" for i in range(len(cluster))]
    order = rng.permutation(len(doc_ids))  # the file's rows in no particular order
    write_vectors(tmp_path / "docs.parquet", [doc_ids[i] for i in order], docs[order])
    write_vectors(tmp_path / "queries.parquet", [f"q{i}" for i in range(N_QUERIES)], queries)
    lines = ["doc_id\tprincipal"]
    for i, c in enumerate(cluster):
        if c < 4:
            lines.append(f"{doc_ids[i]}\tnear")
        if c >= 10:
            lines.append(f"{doc_ids[i]}\tfar")
        if i % 4 == 0:
            lines.append(f"{doc_ids[i]}\tuniform")
        if c in (0, 10):
            lines.append(f"{doc_ids[i]}\tstaff")
    (tmp_path / "acl.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "groups.tsv").write_text("ann\tstaff\nbob\tstaff\n")
    np.save(tmp_path / "docs_matrix.npy", docs)  # for the test's own oracle
    np.save(tmp_path / "queries_matrix.npy", queries)
    return {
        "documents": tmp_path / "docs.parquet",
        "queries": tmp_path / "queries.parquet",
        "acl": tmp_path / "acl.tsv",
        "groups": tmp_path / "groups.tsv",
    }


def test_a_principals_gls_is_its_local_share_of_the_unfiltered_neighbours_over_its_global_share(
    tmp_path: Path,
) -> None:
    files = own_files(tmp_path)
    workload = load_workload(
        files["documents"], files["queries"], files["acl"], groups=files["groups"]
    )
    assert workload.principals == ("ann", "bob", "far", "near", "uniform")
    table = principal_table(workload, IndexConfig(placements=["post", "pre"]), k=K)
    gls = table.groupby("principal", sort=False)["gls"].first()
    # the test's own computation, from the files' matrices and the ACL's lines
    docs, queries = np.load(tmp_path / "docs_matrix.npy"), np.load(tmp_path / "queries_matrix.npy")
    top = np.argsort(-(queries.astype(np.float64) @ docs.astype(np.float64).T), axis=1)[:, :K]
    acl = pd.read_csv(files["acl"], sep="\t")
    members = {"ann": "staff", "bob": "staff"}
    for principal in workload.principals:
        granted = {
            int(d[3:]) for d in acl[acl["principal"] == members.get(principal, principal)]["doc_id"]
        }
        local = np.mean([len(granted & set(row.tolist())) / K for row in top])
        assert gls[principal] == pytest.approx(local / (len(granted) / len(docs)), rel=1e-9)
    assert gls["near"] > 3 and gls["far"] == 0.0 and 0.5 < gls["uniform"] < 1.5
    post = table[table["mode"] == "post"].set_index("principal")
    assert post.loc["far", "returned"] == 0  # nothing near a query: post returns nothing
    assert post.loc["near", "returned"] == K
    pre = table[table["mode"] == "pre"]
    assert (pre["recall"] == 1.0).all()
    # local share = 1 − U@K (the same neighbours, the same k)
    np.testing.assert_allclose(post["gls"] * post["selectivity"], 1 - post["u_at_k"])


def test_arecall_run_measures_every_placement_and_store_audit_per_principal(
    tmp_path: Path, arecall: Any
) -> None:
    files = own_files(tmp_path)
    out = tmp_path / "out"
    proc = arecall(
        "run",
        "vector_search.enabled=true",
        f"vector_search.corpus.documents={files['documents']}",
        f"vector_search.corpus.queries={files['queries']}",
        f"vector_search.corpus.acl={files['acl']}",
        f"vector_search.corpus.groups={files['groups']}",
        "vector_search.corpus.audit=[lancedb,chroma,milvus]",
        f"hydra.run.dir={out}",
        "tracking.enabled=false",
        "evaluation.proof.max_examples=5",
    )
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(out / "vector_search.csv")
    modes = ["post", "pushdown", "pre", "auto"] + [
        f"{s}/{p}" for s in ("lancedb", "chroma", "milvus") for p in ("post", "pushdown")
    ]
    for principal in ("ann", "bob", "far", "near", "uniform"):
        assert table[table["principal"] == principal]["mode"].tolist() == modes
    assert (table[table["mode"] == "pre"]["recall"] == 1.0).all()
    assert (table[table["mode"] == "auto"]["short"] == 0.0).all()
    far = table[table["principal"] == "far"].set_index("mode")
    for store in ("post", "lancedb/post", "chroma/post", "milvus/post"):
        assert far.loc[store, "returned"] == 0  # post-filtering, on every store
    markdown = (out / "vector_search.md").read_text()
    assert "| principal | selectivity | GLS |" in markdown
    assert "600 × 24 vectors (docs.parquet), 12 queries (queries.parquet), 5 principals" in markdown


def test_the_cache_key_holds_the_files_bytes(tmp_path: Path) -> None:
    files = own_files(tmp_path)
    cfg = default_config(
        [f"vector_search.corpus.{key}={path}" for key, path in files.items()]
        + ["vector_search.enabled=true", "index@vector_search.index=exact"]
        + ["vector_search.index.placements=[post,pre]"]
    )
    first = vector_search(cfg, Layout.run(tmp_path / "a"))
    assert first.attrs["cache"] == "miss"
    assert vector_search(cfg, Layout.run(tmp_path / "b")).attrs["cache"] == "hit"
    files["acl"].write_text(files["acl"].read_text().replace("\tnear\n", "\tfar\n"))
    changed = vector_search(cfg, Layout.run(tmp_path / "c"))
    assert changed.attrs["cache"] == "miss"  # same settings, another ACL: measured again
    assert "near" not in set(changed["principal"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["vector_search.corpus.documents=d.parquet"],
            r"vector_search.corpus.queries: required with corpus.documents",
        ),
        (
            ["vector_search.corpus.audit=[lancedb]"],
            r"vector_search.corpus.audit: audits stores on your own vectors",
        ),
        (
            ["vector_search.corpus.audit=[qdrant]"],
            r"vector_search.corpus.audit\[0\]: must be a store",
        ),
    ],
)
def test_an_incomplete_own_workload_is_refused_with_the_config(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ArecallError, match=message):
        default_config(overrides)


def test_an_acl_line_naming_a_document_without_a_vector_is_one_line_naming_the_acl(
    tmp_path: Path,
) -> None:
    files = own_files(tmp_path)
    with files["acl"].open("a") as acl:
        acl.write("doc9999\tnear\n")
    with pytest.raises(
        ArecallError, match=rf"^{files['acl']}: line \d+: 'doc9999' is not a document id"
    ):
        load_workload(files["documents"], files["queries"], files["acl"])


def test_npy_files_with_their_ids_give_the_same_workload_as_parquet(tmp_path: Path) -> None:
    from arecall.io.vectors import ids_file, read_vectors

    files = own_files(tmp_path)
    for side in ("documents", "queries"):
        found = read_vectors(files[side])
        np.save(tmp_path / f"{side}.npy", np.asarray(found.vectors))
        ids_file(tmp_path / f"{side}.npy").write_text("\n".join(found.ids.to_pylist()) + "\n")
    parquet = load_workload(files["documents"], files["queries"], files["acl"])
    npy = load_workload(tmp_path / "documents.npy", tmp_path / "queries.npy", files["acl"])
    assert npy.principals == parquet.principals
    np.testing.assert_array_equal(npy.masks, parquet.masks)
    np.testing.assert_array_equal(npy.vectors, parquet.vectors)
    np.testing.assert_array_equal(npy.queries, parquet.queries)


@pytest.mark.parametrize(
    ("case", "culprit", "message"),
    [
        ("dimensions", "queries", r"vectors of 23 dimensions, but the documents' \(.*\) have 24"),
        ("nan", "documents", r"id 'doc0007': NaN or infinite value"),
        ("zero", "documents", r"id 'doc0007': zero vector \(metric cosine needs a direction"),
        ("null", "queries", r"id 'q3': no vector \(null\)"),
    ],
)
def test_every_bad_vector_file_of_your_own_workload_is_one_line_naming_it(
    tmp_path: Path, case: str, culprit: str, message: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = own_files(tmp_path)
    table = pq.read_table(files[culprit]).to_pydict()
    row = table["id"].index("doc0007" if culprit == "documents" else "q3")
    if case == "dimensions":
        table["vector"] = [v[:-1] for v in table["vector"]]
    elif case == "nan":
        table["vector"][row][0] = float("nan")
    elif case == "zero":
        table["vector"][row] = [0.0] * DIMS
    else:
        table["vector"][row] = None
    pq.write_table(pa.table(table), files[culprit])
    with pytest.raises(ArecallError, match=rf"^{files[culprit]}: {message}") as raised:
        load_workload(files["documents"], files["queries"], files["acl"])
    assert "\n" not in str(raised.value)
