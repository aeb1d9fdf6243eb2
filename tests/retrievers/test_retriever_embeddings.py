"""retriever=embeddings: the user's vectors rank exactly as brute-force numpy ranks them (ties by
id), every bad input is one line naming its file, and every stage runs on them unchanged.

The corpus is a seed-layout one (tests/conftest.py): 30 documents, 8 queries, 4 principals.
Vector files are written with their rows shuffled, so the reader's alignment to the corpus's
ids is exercised every time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from arecall.core.ranking import TIE_DECIMALS, Ranking
from arecall.data.collection import Collection
from arecall.io.vectors import ids_file, write_vectors
from arecall.pipeline.config import default_config
from arecall.pipeline.layout import Layout
from arecall.pipeline.run import run_all
from arecall.pipeline.stages.generate import generate
from arecall.pipeline.stages.index_search import index_search
from arecall.pipeline.stages.rank import rank

from tests.helpers import FAST_PROOF, assert_proved_on_every_pair, write_seed_dir

DIMS = 6


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Layout, Collection]:
    """A seed corpus, generated once into a layout (the rank stage reads it)."""
    root = tmp_path_factory.mktemp("embeddings")
    seed = write_seed_dir(root / "seed", 11)
    layout = Layout.run(root / "run")
    generate(default_config(["corpus=seed_json", f"corpus.path={seed}"]), layout)
    return seed, layout, Collection.load(layout.corpus)


def write(path: Path, ids: list[str], vectors: np.ndarray, fmt: str, seed: int = 0) -> Path:
    """``vectors`` keyed by ``ids`` as Parquet or .npy + .ids.txt, rows shuffled."""
    order = np.random.default_rng(seed).permutation(len(ids))
    ids, vectors = [ids[i] for i in order], vectors[order]
    if fmt == "parquet":
        write_vectors(path.with_suffix(".parquet"), ids, vectors)
        return path.with_suffix(".parquet")
    np.save(path.with_suffix(".npy"), vectors)
    ids_file(path.with_suffix(".npy")).write_text("\n".join(ids) + "\n")
    return path.with_suffix(".npy")


def brute_force(queries: np.ndarray, docs: np.ndarray, metric: str) -> list[list[int]]:
    """Every document per query by numpy alone: similarity in float64 rounded to float32 (the
    vectors' precision), ties (equal after arecall's 12-decimal rounding) by document id."""
    q, d = queries.astype(np.float64), docs.astype(np.float64)
    if metric == "cosine":
        q = q / np.sqrt((q * q).sum(axis=1, keepdims=True))
        d = d / np.sqrt((d * d).sum(axis=1, keepdims=True))
    if metric == "l2":
        s = -((q[:, None, :] - d[None, :, :]) ** 2).sum(axis=2)
    else:
        s = np.einsum("qk,dk->qd", q, d)
    s = np.round(s.astype(np.float32).astype(np.float64), TIE_DECIMALS)
    ids = np.arange(d.shape[0])  # document rows are in id order (Collection sorts them)
    return [np.lexsort((ids, -row)).tolist() for row in s]


def ranked(layout: Layout) -> list[list[int]]:
    r = Ranking.load(layout.ranking)
    return [r.doc_index[r.indptr[i] : r.indptr[i + 1]].tolist() for i in range(r.n_queries)]


@pytest.mark.parametrize("fmt", ["parquet", "npy"])
@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
@pytest.mark.parametrize("values", ["integers", "floats"])
def test_the_embeddings_ranking_equals_a_brute_force_numpy_ranking_ties_by_id(
    world: tuple[Path, Layout, Collection], tmp_path: Path, fmt: str, metric: str, values: str
) -> None:
    seed, corpus_layout, collection = world
    rng = np.random.default_rng(7)
    n_docs, n_queries = len(collection.documents), len(collection.queries)
    if values == "integers":  # few distinct values: many exact ties, broken by id
        docs = rng.integers(-2, 3, (n_docs, DIMS)).astype(np.float32)
        docs[docs.sum(axis=1) == 0, 0] = 1.0  # no zero vector (cosine refuses it)
        docs[(docs == 0).all(axis=1), 0] = 1.0
        queries = rng.integers(-2, 3, (n_queries, DIMS)).astype(np.float32)
        queries[(queries == 0).all(axis=1), 1] = 1.0
    else:
        docs = rng.normal(size=(n_docs, DIMS)).astype(np.float32)
        queries = rng.normal(size=(n_queries, DIMS)).astype(np.float32)
    doc_file = write(tmp_path / "docs", collection.doc_ids.tolist(), docs, fmt, 1)
    query_file = write(tmp_path / "queries", collection.query_ids.tolist(), queries, fmt, 2)
    layout = Layout(data=tmp_path / "data", reports=tmp_path)
    layout.corpus.parent.mkdir(parents=True)
    layout.corpus.symlink_to(corpus_layout.corpus)
    cfg = default_config(
        [
            "corpus=seed_json",
            f"corpus.path={seed}",
            "retriever=embeddings",
            f"retriever.documents={doc_file}",
            f"retriever.queries={query_file}",
            f"retriever.metric={metric}",
        ]
    )
    rank(cfg, layout)
    got = ranked(layout)
    assert got == brute_force(queries, docs, metric)
    assert all(len(row) == n_docs for row in got)  # every document, whatever its score's sign
    if values == "integers":
        assert any(len(set(np.round(r, 6))) < n_docs for r in docs @ queries.T)  # ties occurred


def _files(tmp_path: Path, collection: Collection, **change: Any) -> tuple[Path, Path]:
    """A valid pair of Parquet files, or a broken one (``change`` says how)."""
    rng = np.random.default_rng(3)
    doc_ids, query_ids = collection.doc_ids.tolist(), collection.query_ids.tolist()
    docs = rng.normal(size=(len(doc_ids), DIMS)).astype(np.float32)
    queries = rng.normal(size=(len(query_ids), DIMS)).astype(np.float32)
    if "docs" in change:
        doc_ids, docs = change["docs"](doc_ids, docs)
    if "queries" in change:
        query_ids, queries = change["queries"](query_ids, queries)
    write_vectors(tmp_path / "docs.parquet", doc_ids, docs)
    write_vectors(tmp_path / "queries.parquet", query_ids, queries)
    return tmp_path / "docs.parquet", tmp_path / "queries.parquet"


def _set(row: int, column: int, value: float):  # one value of one vector
    def change(ids: list[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
        vectors = vectors.copy()
        vectors[row, column] = value
        return ids, vectors

    return change


def _zero(row: int):
    def change(ids: list[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
        vectors = vectors.copy()
        vectors[row] = 0.0
        return ids, vectors

    return change


def _drop(row: int):
    return lambda ids, vectors: (ids[:row] + ids[row + 1 :], np.delete(vectors, row, axis=0))


def _rename(row: int, name: str):
    return lambda ids, vectors: ([*ids[:row], name, *ids[row + 1 :]], vectors)


def _extra(name: str):
    return lambda ids, vectors: ([*ids, name], np.vstack([vectors, vectors[:1]]))


def _narrow(ids: list[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    return ids, vectors[:, :-1]


BAD_FILES = {
    "dimension mismatch": (
        {"queries": _narrow},
        "queries",
        r"vectors of 5 dimensions, but the documents' \(.*docs.parquet\) have 6",
    ),
    "NaN": ({"docs": _set(3, 2, np.nan)}, "docs", r"id '.*': NaN or infinite value"),
    "infinite": ({"queries": _set(1, 0, np.inf)}, "queries", r"id 'q.*': NaN or infinite value"),
    "a document without a vector": (
        {"docs": _drop(4)},
        "docs",
        r"document '.*' of the corpus has no vector",
    ),
    "a query without a vector": (
        {"queries": _drop(0)},
        "queries",
        r"query '.*' of the corpus has no vector",
    ),
    "a vector not in the corpus": (
        {"docs": _extra("stranger")},
        "docs",
        r"id 'stranger' \(row 31\) is not a document id of the corpus",
    ),
    "a repeated id": ({"docs": _rename(5, "ds-000-x")}, "docs", r""),
    "zero vector under cosine": (
        {"docs": _zero(2)},
        "docs",
        r"id '.*': zero vector \(metric cosine needs a direction",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_every_bad_vector_file_is_one_line_naming_it(
    world: tuple[Path, Layout, Collection], tmp_path: Path, arecall: Any, case: str
) -> None:
    seed, _, collection = world
    change, culprit, message = BAD_FILES[case]
    if case == "a repeated id":
        twice = collection.doc_ids[0]
        change = {"docs": _rename(5, twice)}
        message = rf"id '{twice}' has two vectors \(rows"
    docs, queries = _files(tmp_path, collection, **change)
    proc = arecall(
        "run",
        "corpus=seed_json",
        f"corpus.path={seed}",
        "retriever=embeddings",
        f"retriever.documents={docs}",
        f"retriever.queries={queries}",
        f"hydra.run.dir={tmp_path / 'out'}",
        "tracking.enabled=false",
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    named = docs if culprit == "docs" else queries
    assert lines[0].startswith(f"arecall: error: {named}: "), lines[0]
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_every_bad_format_is_one_line_naming_the_file(
    world: tuple[Path, Layout, Collection], tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from arecall.core.errors import ArecallError
    from arecall.io.vectors import read_vectors

    cases: dict[str, tuple[Any, str]] = {
        "no_column.parquet": (pa.table({"key": ["a"], "vector": [[1.0]]}), r"no column 'id'"),
        "int_ids.parquet": (pa.table({"id": [1], "vector": [[1.0]]}), r"column 'id': type int64"),
        "texts.parquet": (
            pa.table({"id": ["a"], "vector": ["x"]}),
            r"column 'vector': type string",
        ),
        "ragged.parquet": (
            pa.table({"id": ["a", "b"], "vector": [[1.0, 2.0], [1.0]]}),
            r"id 'b': 1 values, but the first vector \('a'\) has 2",
        ),
        "null.parquet": (
            pa.table({"id": ["a", "b"], "vector": [[1.0], None]}),
            r"id 'b': no vector \(null\)",
        ),
    }
    for name, (table, message) in cases.items():
        pq.write_table(table, tmp_path / name)
        with pytest.raises(ArecallError, match=rf"^{tmp_path / name}: {message}"):
            read_vectors(tmp_path / name)
    np.save(tmp_path / "flat.npy", np.ones(3, dtype=np.float32))
    with pytest.raises(ArecallError, match=r"flat.npy: shape \(3,\), expected 2 dimensions"):
        read_vectors(tmp_path / "flat.npy")
    np.save(tmp_path / "alone.npy", np.ones((2, 3), dtype=np.float32))
    with pytest.raises(ArecallError, match=r"alone.npy: no ids file: expected alone.ids.txt"):
        read_vectors(tmp_path / "alone.npy")
    (tmp_path / "alone.ids.txt").write_text("a\n")
    with pytest.raises(ArecallError, match=r"alone.ids.txt: 1 ids for the 2 vectors of alone.npy"):
        read_vectors(tmp_path / "alone.npy")
    np.save(tmp_path / "objects.npy", np.array([[{"a": 1}]], dtype=object), allow_pickle=True)
    with pytest.raises(ArecallError, match=r"objects.npy: "):  # never unpickled
        read_vectors(tmp_path / "objects.npy")
    (tmp_path / "v.csv").write_text("id,vector\n")
    with pytest.raises(ArecallError, match=r"v.csv: unknown vector file format '.csv'"):
        read_vectors(tmp_path / "v.csv")


@pytest.mark.slow
def test_every_stage_runs_on_embeddings_with_the_corpus_principals(
    world: tuple[Path, Layout, Collection], tmp_path: Path
) -> None:
    """rank, filter, score, prove, report, and index=hnsw through the index: unchanged."""
    seed, _, collection = world
    docs, queries = _files(tmp_path, collection)
    cfg = default_config(
        [
            FAST_PROOF,
            "corpus=seed_json",
            f"corpus.path={seed}",
            "retriever=embeddings",
            f"retriever.documents={docs}",
            f"retriever.queries={queries}",
            "index=hnsw",
            "vector_search.corpus.n_docs=300",
            "vector_search.corpus.n_queries=5",
        ]
    )
    out = run_all(cfg, Layout.run(tmp_path / "run"))
    assert_proved_on_every_pair(out)
    assert "retriever `embeddings`" in out["tables"]
    table = pd.read_csv(tmp_path / "run" / "index_search.csv")
    granted = np.asarray(collection.acl_matrix().sum(axis=1)).ravel() > 0
    assert set(table["principal"]) == set(collection.principal_names[granted])
    assert (table[table["mode"] == "pre"]["recall"] == 1.0).all()


@pytest.mark.parametrize(
    ("index", "store", "metric"),
    [
        ("exact", "faiss", "cosine"),
        ("exact", "faiss", "l2"),
        ("hnsw", "faiss", "ip"),
        ("hnsw", "faiss", "l2"),
        ("hnsw", "lancedb", "cosine"),
        ("hnsw", "chroma", "l2"),
        ("hnsw", "milvus", "ip"),
    ],
)
def test_index_search_runs_on_embeddings_with_every_store_and_metric(
    world: tuple[Path, Layout, Collection], tmp_path: Path, index: str, store: str, metric: str
) -> None:
    seed, corpus_layout, collection = world
    docs, queries = _files(tmp_path, collection)
    layout = Layout(data=tmp_path / "data", reports=tmp_path)
    layout.corpus.parent.mkdir(parents=True)
    layout.corpus.symlink_to(corpus_layout.corpus)
    placements = "[post,pushdown,pre,auto]" if store == "faiss" else "[post,pushdown,pre]"
    cfg = default_config(
        [
            "corpus=seed_json",
            f"corpus.path={seed}",
            "retriever=embeddings",
            f"retriever.documents={docs}",
            f"retriever.queries={queries}",
            f"retriever.metric={metric}",
            f"index={index}",
            f"index.store={store}",
            f"index.placements={placements}",
        ]
    )
    table = index_search(cfg, layout)
    assert table is not None
    pre = table[table["mode"] == "pre"]
    assert (pre["recall"] == 1.0).all() and (pre["short"] == 0.0).all()
    if index == "exact":  # on an exact index every placement but post (k, then filter) is exact
        assert (table[table["mode"] != "post"]["recall"] == 1.0).all()
    assert set(table["mode"]) == set(placements.strip("[]").split(","))
