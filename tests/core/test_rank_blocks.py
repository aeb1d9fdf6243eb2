"""Rank by block (issue 36): queries in blocks and documents in shards, on the local engine and on
a Dask cluster, write the bytes of the one-process ranking.

The reference is `rank_queries` over every query's scores at once, saved by `Ranking.save` —
what the rank stage wrote before it ranked by block. Document shards are checked on corpora
where most scores tie exactly (a few score levels), with finite depths, many principals and
relevance, so the merge's tie rule (score descending, then document id) and its exact-prefix
check (a query the merged entries cannot settle is ranked again from whole rows) are both
exercised; every retriever runs through the stage with blocks and shards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arecall.core.rank_blocks as rank_blocks
from arecall.core.engine import DaskEngine, LocalEngine
from arecall.core.errors import ArecallError
from arecall.core.rank_blocks import RankSettings, auto_block, rank_by_block
from arecall.core.ranking import Ranking, rank_queries
from arecall.core.schema import ConfigProblem
from arecall.data.collection import Collection
from arecall.io.vectors import write_vectors
from arecall.pipeline.config import default_config, ks_of, load_params
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages.generate import generate
from arecall.pipeline.stages.rank import rank
from arecall.retrievers import (
    document_shard,
    fit_on,
    make_retriever,
    query_inputs,
    ranks_every_document,
)

from tests.core.test_sharded_engine import local_cluster
from tests.helpers import write_seed_dir
from tests.retrievers.test_retriever_model2vec import tiny_model


class Matrix:
    """A 'retriever' whose scores are a given matrix (queries named by row number)."""

    def __init__(self, scores: sp.csr_matrix) -> None:
        self.scores = scores

    def score(self, rows: list[str]) -> sp.csr_matrix:
        return self.scores[[int(r) for r in rows]]

    def document_shard(self, start: int, stop: int) -> Matrix:
        return Matrix(self.scores[:, start:stop])


def _reference(scores, *, depth, acl, k_max, rel, every_entry, path: Path) -> bytes:
    whole = rank_queries(
        [scores],
        n_queries=scores.shape[0],
        depth=depth,
        acl=acl,
        k_max=k_max,
        relevance=rel,
        every_entry=every_entry,
    )
    whole.save(path)
    SIZES[path] = dict(whole.sizes)
    return path.read_bytes()


#: The reference rankings' sizes, by file (what rank.json reports is computed from them).
SIZES: dict[Path, dict[str, int]] = {}


@st.composite
def tied_worlds(draw: Any) -> dict[str, Any]:
    """Scores on a few levels (most entries tie exactly), an ACL, relevance, a depth."""
    n_q = draw(st.integers(1, 14))
    n_d = draw(st.integers(1, 40))
    n_p = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    levels = draw(st.integers(1, 4))
    every_entry = draw(st.booleans())
    rng = np.random.default_rng(seed)
    if every_entry:  # a dense retriever: every document scored, negatives and zeros too
        values = rng.integers(-levels, levels + 1, size=(n_q, n_d)) / levels
        scores = sp.csr_matrix(
            (values.ravel(), np.tile(np.arange(n_d), n_q), np.arange(0, n_q * n_d + 1, n_d)),
            shape=(n_q, n_d),
        )
    else:
        values = rng.integers(0, levels + 1, size=(n_q, n_d)) / levels
        scores = sp.csr_matrix(values * (rng.random((n_q, n_d)) < draw(st.floats(0.1, 1.0))))
    return {
        "scores": scores,
        "acl": sp.csr_matrix(rng.random((n_p, n_d)) < rng.random((n_p, 1))),
        "rel": sp.csr_matrix(rng.random((n_q, n_d)) < 0.15),
        "depth": draw(st.sampled_from([None, 1, 2, 3, 6])),
        "k_max": draw(st.integers(1, 6)),
        "every_entry": every_entry,
        "block": draw(st.integers(0, 6)),
        "shards": draw(st.integers(1, 8)),
        "chunk": draw(st.integers(1, 5)),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=tied_worlds())
def test_document_shards_and_query_blocks_write_the_unsharded_bytes_ties_included(
    world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    where = tmp_path_factory.mktemp("shards")
    scores = world["scores"]
    want = _reference(
        scores,
        depth=world["depth"],
        acl=world["acl"],
        k_max=world["k_max"],
        rel=world["rel"],
        every_entry=world["every_entry"],
        path=where / "whole.npz",
    )
    sizes = rank_by_block(
        Matrix(scores),
        [str(i) for i in range(scores.shape[0])],
        where / "blocked.npz",
        settings=RankSettings(
            n_docs=scores.shape[1],
            depth=world["depth"],
            k_max=world["k_max"],
            every_entry=world["every_entry"],
            chunk=world["chunk"],
        ),
        engine=LocalEngine(),
        block_queries=world["block"],
        doc_shards=world["shards"],
        acl=world["acl"],
        relevance=world["rel"],
        shard_of=document_shard,
    )
    assert (where / "blocked.npz").read_bytes() == want
    whole = Ranking.load(where / "whole.npz")
    assert {k: sizes[k] for k in SIZES[where / "whole.npz"]} == SIZES[where / "whole.npz"]
    assert (sizes["stored_ranked"], sizes["stored_tails"]) == (
        len(whole.doc_index),
        len(whole.tail_doc),
    )
    assert sorted(p.name for p in where.iterdir()) == ["blocked.npz", "whole.npz"]  # no temp


def test_a_query_the_merged_prefix_cannot_settle_is_ranked_again_from_whole_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All ties, depth 1, a principal authorized only for the last documents: the shards'
    first entries stop short of its pre list, so the second pass must run (and be exact)."""
    n_q, n_d = 3, 12
    scores = sp.csr_matrix(np.ones((n_q, n_d)))
    acl = sp.csr_matrix(np.array([[False] * 10 + [True, True], [True] * n_d]))
    want = _reference(
        scores, depth=1, acl=acl, k_max=1, rel=None, every_entry=False, path=tmp_path / "w.npz"
    )
    passes: list[bool] = []
    original = rank_blocks._shard_entries

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes.append(kwargs.get("only") is not None)
        return original(*args, **kwargs)

    monkeypatch.setattr(rank_blocks, "_shard_entries", counted)
    # shards of 3: the principal's documents are all in the last one, whose first entry (d9)
    # ranks 9th of 12; the other shards' cut at depth 1 leaves the global rank of d10 unknown
    rank_by_block(
        Matrix(scores),
        [str(i) for i in range(n_q)],
        tmp_path / "b.npz",
        settings=RankSettings(n_docs=n_d, depth=1, k_max=1),
        engine=LocalEngine(),
        block_queries=2,
        doc_shards=4,
        acl=acl,
        shard_of=document_shard,
    )
    assert (tmp_path / "b.npz").read_bytes() == want
    assert True in passes  # the whole-row pass ran


def test_a_failing_block_leaves_no_block_file_and_a_killed_runs_are_removed_next_time(
    tmp_path: Path,
) -> None:
    class Failing(Matrix):
        def score(self, rows: list[str]) -> sp.csr_matrix:
            if "4" in rows:
                raise RuntimeError("scoring failed")
            return super().score(rows)

    stale = tmp_path / ".ranking.npz.999999999.deadbeef.tmp"  # a kill -9'd run's blocks
    stale.mkdir()
    (stale / "block-000000000000.npz").write_bytes(b"partial")
    with pytest.raises(RuntimeError, match="scoring failed"):
        rank_by_block(
            Failing(sp.csr_matrix(np.ones((6, 3)))),
            [str(i) for i in range(6)],
            tmp_path / "ranking.npz",
            settings=RankSettings(n_docs=3, depth=None, k_max=1),
            engine=LocalEngine(),
            block_queries=2,
        )
    assert list(tmp_path.iterdir()) == []  # neither the stale blocks, nor this run's, nor a ranking


def test_the_automatic_block_is_sized_from_score_cells() -> None:
    assert auto_block(10**6, 64) == 67  # 64M cells over a million documents
    assert auto_block(100, 1024) == (1 << 26) // 100
    assert auto_block(10**9, 8) == 8  # never below one chunk


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("evaluation.engine.doc_shards=0", "doc_shards: must be a positive integer, got 0"),
        ("evaluation.engine.block_queries=-3", "block_queries: must be"),
        ("evaluation.engine.block_queries=many", "block_queries: must be"),
    ],
)
def test_block_and_shard_settings_are_checked_in_the_config_one_line(
    override: str, problem: str, arecall: Any, tmp_path: Path
) -> None:
    cfg = default_config(
        ["evaluation.engine.block_queries=500", "evaluation.engine.doc_shards=4"]
    ).params()
    assert cfg["evaluation"]["engine"]["block_queries"] == 500
    assert cfg["evaluation"]["engine"]["doc_shards"] == 4
    with pytest.raises(ConfigProblem, match=rf"evaluation\.engine\.{problem}"):
        default_config([override])
    # params.yaml, as DVC reads it: the same check
    key, value = override.split("=")
    data = default_config([]).params()
    data["evaluation"]["engine"][key.rsplit(".", 1)[1]] = yaml.safe_load(value)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ArecallError, match=rf"evaluation\.engine\.{problem}"):
        load_params(tmp_path / "params.yaml")
    # the command line: one line, exit 2, nothing run
    result = arecall("run", override, f"hydra.run.dir={tmp_path / 'out'}")
    assert result.returncode == 2, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("arecall: error: "), result.stderr
    assert f"evaluation.engine.{problem}" in lines[0]
    assert not (tmp_path / "out" / "data").exists()


def test_a_retriever_without_document_shards_is_one_line() -> None:
    class Plain:
        def score(self, texts: list[str]) -> sp.csr_matrix:
            return sp.csr_matrix((len(texts), 2))

    with pytest.raises(ArecallError, match=r"doc_shards: Plain cannot score a shard.*=1$"):
        document_shard(Plain(), 0, 1)


# -- every retriever through the rank stage ------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A small synthetic corpus, generated once (each test ranks into its own layout)."""
    layout = Layout.run(tmp_path_factory.mktemp("corpus"))
    generate(
        default_config(["corpus=synthetic", "corpus.n_docs=120", "corpus.n_principals=9"]),
        layout,
    )
    return layout


@pytest.fixture(scope="module")
def words_layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A seed-layout corpus written in the test model2vec model's words."""
    root = tmp_path_factory.mktemp("words")
    layout = Layout.run(root / "run")
    seed = write_seed_dir(root / "seed", 11)
    generate(default_config(["corpus=seed_json", f"corpus.path={seed}"]), layout)
    return layout


def _retriever_overrides(name: str, where: Path, corpus: Path) -> list[str]:
    if name == "embeddings":
        collection = Collection.load(corpus)
        rng = np.random.default_rng(3)
        docs = where / "docs.parquet"
        queries = where / "queries.parquet"
        ids = collection.documents["doc_id"].astype(str).tolist()
        # few distinct integer vectors, inner product: many documents tie exactly
        write_vectors(docs, ids, rng.integers(-2, 3, size=(len(ids), 4)).astype(np.float32))
        qids = collection.queries["query_id"].astype(str).tolist()
        write_vectors(queries, qids, rng.normal(size=(len(qids), 4)).astype(np.float32))
        return [
            "retriever=embeddings",
            f"retriever.documents={docs}",
            f"retriever.queries={queries}",
            "retriever.metric=ip",
        ]
    if name == "model2vec":
        model = tiny_model(where / "model")
        return ["retriever=model2vec", f"retriever.model={model}", f"retriever.cache={where}/c"]
    if name == "dense_lsa":
        return ["retriever=dense_lsa", "retriever.n_components=8"]
    return [f"retriever={name}"]


def _stage(corpus: Layout, where: Path, overrides: list[str]) -> bytes:
    layout = Layout.run(where)
    layout.corpus.parent.mkdir(parents=True, exist_ok=True)
    if not layout.corpus.exists():
        layout.corpus.symlink_to(corpus.corpus, target_is_directory=True)
    rank(default_config(overrides), layout)
    return layout.ranking.read_bytes()


@pytest.mark.parametrize(
    "name", ["tfidf", "sklearn_tfidf", "bm25", "dense_lsa", "embeddings", "model2vec"]
)
@pytest.mark.parametrize(
    "depth", [pytest.param("null", marks=pytest.mark.long), "3"]
)  # every entry ranked: the slow half, in `make test-faults`; the Hypothesis worlds cover it fast
def test_every_retriever_ranks_by_block_and_shard_to_the_one_process_bytes(
    name: str, depth: str, corpus_layout: Layout, words_layout: Layout, tmp_path: Path
) -> None:
    corpus = words_layout if name == "model2vec" else corpus_layout
    base = [
        *_retriever_overrides(name, tmp_path, corpus.corpus),
        f"retriever.depth={depth}",
        "evaluation.ks=[1,3]",
    ]
    cfg = default_config(base)
    collection = Collection.load(corpus.corpus)
    retriever = fit_on(make_retriever(cfg.retriever), collection.documents, collection.queries)
    inputs = query_inputs(retriever, collection.queries)
    reference = rank_queries(
        [retriever.score(inputs)],
        n_queries=len(inputs),
        depth=cfg.retriever.depth,
        acl=collection.acl_matrix(),
        k_max=max(ks_of(cfg)),
        relevance=collection.relevance_matrix(),
        every_entry=ranks_every_document(retriever),
    )
    reference.save(tmp_path / "reference.npz")
    want = (tmp_path / "reference.npz").read_bytes()
    assert _stage(corpus, tmp_path / "default", base) == want
    blocked = ["evaluation.engine.block_queries=3", "evaluation.engine.doc_shards=5"]
    assert _stage(corpus, tmp_path / "blocked", [*base, *blocked]) == want


# -- on a Dask cluster ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as c:
        yield c


@pytest.mark.long  # a cluster per module: `make test-faults`, beside the cluster guide's rank run
def test_rank_on_the_cluster_writes_the_local_bytes(
    cluster: Any, corpus_layout: Layout, tmp_path: Path
) -> None:
    """The stage on a loopback cluster (query blocks, then query blocks × document shards)
    writes the local stage's ranking file, byte for byte."""
    local = _stage(corpus_layout, tmp_path / "local", ["retriever.depth=3", "evaluation.ks=[1,3]"])
    dask = [
        "evaluation.engine.name=dask",
        f"evaluation.engine.scheduler={cluster.scheduler_address}",
        "retriever.depth=3",
        "evaluation.ks=[1,3]",
    ]
    assert (
        _stage(corpus_layout, tmp_path / "dask", [*dask, "evaluation.engine.block_queries=5"])
        == local
    )
    sharded = [*dask, "evaluation.engine.block_queries=6", "evaluation.engine.doc_shards=3"]
    assert _stage(corpus_layout, tmp_path / "dask-shards", sharded) == local
    left = sorted(p.name for p in Layout.run(tmp_path / "dask").ranking.parent.iterdir())
    assert left == ["rank.json", "ranking.npz"]  # the block files are gone


@pytest.mark.long
def test_the_dask_engine_runs_one_task_per_query_block(cluster: Any, tmp_path: Path) -> None:
    scores = sp.csr_matrix(np.random.default_rng(0).random((23, 9)))
    want = _reference(
        scores, depth=None, acl=None, k_max=1, rel=None, every_entry=False, path=tmp_path / "w"
    )
    with DaskEngine(cluster.scheduler_address) as engine:
        rank_by_block(
            Matrix(scores),
            [str(i) for i in range(23)],
            tmp_path / "b.npz",
            settings=RankSettings(n_docs=9, depth=None, k_max=1),
            engine=engine,
            block_queries=5,
        )
        assert engine.shipped[-1]["tasks"] == 5  # 23 queries in blocks of 5
        assert engine.shipped[-1]["result_bytes"] < 5_000  # sizes only: no ranking comes back
    assert (tmp_path / "b.npz").read_bytes() == want
