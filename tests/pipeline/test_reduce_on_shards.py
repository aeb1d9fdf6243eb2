"""The pipeline's filter, score and prove stages reduce on the shards (issue 36): each block of
principals reads and writes files where it runs and sends back summaries only, and the files
are the bytes the one-process path writes, whatever the engine and block size.

The one-process path is spelled out here as it was before: `place_all` saved whole,
`score_pairs` → `to_frame` → Parquet, `summarise` and `delta_significance` on the per-pair
arrays, `check_run` on the loaded lists. The cluster case is in tests/core/test_sharded_engine.py
(``long``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arecall.core.engine import LocalEngine
from arecall.core.placed_lists import PlacedLists, place_all, place_to_file
from arecall.core.ranking import Ranking, rank_queries
from arecall.core.scoring import PairSums, exact_mean, score_pairs, summarise
from arecall.core.significance import delta_significance
from arecall.data.collection import Collection
from arecall.io.atomic import write_parquet, write_parquet_groups
from arecall.pipeline import proof
from arecall.pipeline.config import default_config, ks_of
from arecall.pipeline.run import Layout, filter_lists, generate, prove, rank, score

from tests.helpers import FAST_PROOF

BLOCKS = (1, 2, 3, None)


class Recording(LocalEngine):
    """This process's engine, keeping what every block sent back."""

    def __init__(self, block: int | None = None) -> None:
        super().__init__(block=block)
        self.returned: list[Any] = []

    def map_blocks(self, fn: Any, n: int, **kwargs: Any) -> list[Any]:
        out = super().map_blocks(fn, n, **kwargs)
        self.returned.extend(out)
        return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """generate → rank once, and the one-process path's files beside it."""
    cfg = default_config([FAST_PROOF])
    layout = Layout.run(tmp_path_factory.mktemp("reduce"))
    generate(cfg, layout)
    rank(cfg, layout)
    old = tmp_path_factory.mktemp("one-process")
    c = Collection.load(layout.corpus, text=False)
    ranking = Ranking.load(layout.ranking)
    lists = place_all(ranking, c.acl_matrix(), max(ks_of(cfg)))
    lists.save(old / "lists.npz")
    s = score_pairs(ranking, lists, c.relevance_matrix(), c.acl_matrix(), ks_of(cfg))
    write_parquet(old / "pairs.parquet", s.to_frame(c.query_ids, c.principal_names))
    metrics = summarise(s, n_documents=len(c.documents))
    sig = cfg.evaluation.significance
    nonempty = s.n_authorized_relevant > 0
    for i, k in enumerate(s.ks):
        pre, post = s.metrics["arecall_pre"][:, :, i], s.metrics["arecall_post"][:, :, i]
        opts = {"confidence": sig.confidence, "n_resamples": sig.resamples, "seed": sig.seed}
        got = {"gap": delta_significance(pre.ravel(), post.ravel(), **opts)}
        if nonempty.any():
            got["gap_nonempty"] = delta_significance(pre[nonempty], post[nonempty], **opts)
        metrics["k"][str(k)]["significance"] = got
    (old / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    names = {
        "query_ids": c.query_ids,
        "principals": c.principal_names,
        "doc_ids": c.doc_ids,
    }
    claims = proof.check_run(lists, s, c.acl_matrix(), **names)
    return cfg, layout, old, claims


@pytest.mark.parametrize("block", BLOCKS)
def test_filter_score_and_prove_by_block_write_the_one_process_bytes(run, block, monkeypatch):
    cfg, layout, old, claims = run
    engine = Recording(block)
    monkeypatch.setattr("arecall.pipeline.stages.filter.engine_from_config", lambda _: engine)
    monkeypatch.setattr("arecall.pipeline.stages.prove.engine_from_config", lambda _: engine)
    filter_lists(cfg, layout)
    assert Path(layout.lists).read_bytes() == (old / "lists.npz").read_bytes()
    score(cfg, layout, engine)
    assert Path(layout.pairs).read_bytes() == (old / "pairs.parquet").read_bytes()
    assert Path(layout.metrics).read_bytes() == (old / "metrics.json").read_bytes()
    prove(cfg, layout)
    written = json.loads(Path(layout.proof).read_text())["claims"]
    assert [c for c in written if c["kind"] == "data"] == [c.as_dict() for c in claims]
    # nothing per pair came back: each block sent its sums, counterexamples or part name
    n_pairs = json.loads(Path(layout.metrics).read_text())["pairs"]
    assert engine.returned and n_pairs > 50
    for value in engine.returned:
        assert not any(isinstance(v, np.ndarray) and v.size >= n_pairs for v in _leaves(value)), (
            value
        )


def _leaves(value: Any) -> list[Any]:
    """Every array, number and string inside a block's answer."""
    if dataclasses.is_dataclass(value):
        return _leaves(dataclasses.asdict(value))
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _leaves(v)]
    return [value]


def test_a_score_block_sends_back_the_same_bytes_for_ten_times_the_pairs(tmp_path):
    # the answer of a block is its sums and Δ histograms: its size follows the distinct
    # values, not the pairs (what the client of a cluster receives per block)
    rng = np.random.default_rng(3)
    sizes = []
    for n_q in (300, 3000):
        scores = sp.csr_matrix(rng.random((n_q, 40)) * (rng.random((n_q, 40)) < 0.5))
        rel = sp.csr_matrix((rng.random((n_q, 40)) < 0.1).astype(float))
        acl = sp.csr_matrix(rng.random((4, 40)) < 0.5)
        ranking = rank_queries([scores], n_queries=n_q, relevance=rel)
        lists = tmp_path / f"lists-{n_q}.npz"
        place_to_file(ranking, acl, 10, lists, engine=LocalEngine())
        from arecall.core.scoring import reduce_pairs

        engine = Recording()
        reduce_pairs(
            ranking, lists, rel, acl, (1, 5, 10), engine=engine,
            pairs_out=tmp_path / f"pairs-{n_q}.parquet",
            query_ids=np.array([f"q{i}" for i in range(n_q)], dtype=object),
            principals=np.array([f"p{i}" for i in range(4)], dtype=object),
        )  # fmt: skip
        assert len(engine.returned) == 1
        sizes.append(len(pickle.dumps(engine.returned[0].sums)))
    assert sizes[1] < 2 * sizes[0] < 64 << 10, sizes


def _world(draw: Any) -> tuple[Ranking, sp.csr_matrix, sp.csr_matrix, int]:
    """A small corpus ranked to a kept depth (so some pre lists need tails)."""
    n_docs = draw(st.integers(1, 30))
    n_q = draw(st.integers(1, 4))
    n_p = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.0, 0.1, 0.3, 0.7, 0.9], size=(n_q, n_docs))
    rel = sp.csr_matrix((rng.random((n_q, n_docs)) < 0.3).astype(float))
    acl = sp.csr_matrix(rng.random((n_p, n_docs)) < draw(st.sampled_from([0.1, 0.4, 0.8])))
    k_max = draw(st.integers(1, 6))
    depth = max(draw(st.integers(1, 8)), k_max)
    ranking = rank_queries(
        [sp.csr_matrix(scores)], n_queries=n_q, depth=depth, acl=acl, k_max=k_max, relevance=rel
    )
    return ranking, rel, acl, k_max


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_lists_placed_by_block_are_the_bytes_placed_whole(tmp_path_factory, data):
    ranking, _, acl, k_max = _world(data.draw)
    block = data.draw(st.sampled_from(BLOCKS))
    where = tmp_path_factory.mktemp("lists")
    place_all(ranking, acl, k_max).save(where / "whole.npz")
    shape = place_to_file(ranking, acl, k_max, where / "blocks.npz", engine=LocalEngine(block))
    assert shape == (acl.shape[0], ranking.n_queries, k_max)
    assert (where / "blocks.npz").read_bytes() == (where / "whole.npz").read_bytes()
    got = PlacedLists.read(where / "blocks.npz", 1, 3)
    assert np.array_equal(got.pre, PlacedLists.load(where / "whole.npz").pre[1:3])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sums_merged_over_any_blocks_give_the_means_of_every_pair(data):
    ranking, rel, acl, k_max = _world(data.draw)
    ks = tuple(sorted({1, k_max}))
    s = score_pairs(ranking, place_all(ranking, acl, k_max), rel, acl, ks)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, acl.shape[0]), max_size=4))))
    edges = [0, *cuts, acl.shape[0]]
    merged = PairSums(ks=ks)
    for a, b in itertools.pairwise(edges):
        merged = merged.merge(
            PairSums.of({n: m[a:b] for n, m in s.metrics.items()}, s.n_authorized_relevant[a:b], ks)
        )
    whole = PairSums.of(s.metrics, s.n_authorized_relevant, ks)
    assert merged.sums == whole.sums and merged.sums_nonempty == whole.sums_nonempty
    assert (merged.n_pairs, merged.n_nonempty) == (whole.n_pairs, whole.n_nonempty)
    for i in range(len(ks)):
        for got, want in (
            (merged.gap[i], whole.gap[i]),
            (merged.gap_nonempty[i], whole.gap_nonempty[i]),
        ):
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert float(merged.sums["arecall_pre"][i] / merged.n_pairs) == exact_mean(
            s.metrics["arecall_pre"][:, :, i]
        )
    assert summarise(s, n_documents=1)["k"] is not None


@pytest.mark.parametrize("block", [1, 3])
def test_a_broken_lists_file_gives_the_one_process_counterexamples(tmp_path, block):
    rng = np.random.default_rng(11)
    n_q, n_d, n_p = 6, 30, 7
    scores = sp.csr_matrix(rng.random((n_q, n_d)))
    rel = sp.csr_matrix((rng.random((n_q, n_d)) < 0.3).astype(float))
    acl = sp.csr_matrix(rng.random((n_p, n_d)) < 0.5)
    ranking = rank_queries([scores], n_queries=n_q, relevance=rel)
    lists = place_all(ranking, acl, 5)
    pre, post = lists.pre.copy(), lists.post.copy()
    dense_rel = rel.toarray() > 0
    p, q = next(
        (p, q)
        for p in range(3, n_p)
        for q in range(n_q)
        if post[p, q, 0] >= 0 and dense_rel[q, post[p, q, 0]]
    )
    pre[p, q, 0] = -1  # pre loses a relevant item its post list shows: Δ < 0 there too
    post[5, 1, 0] = int(np.flatnonzero(~acl[5].toarray()[0])[0])  # an unauthorized item
    broken = dataclasses.replace(lists, pre=pre, post=post)
    broken.save(tmp_path / "lists.npz")
    names = {
        "query_ids": np.array([f"q{i}" for i in range(n_q)], dtype=object),
        "principals": np.array([f"p{i}" for i in range(n_p)], dtype=object),
        "doc_ids": np.array([f"d{i}" for i in range(n_d)], dtype=object),
    }
    ks = (1, 3, 5)
    want = proof.check_run(broken, score_pairs(ranking, broken, rel, acl, ks), acl, **names)
    got = proof.check_run_file(
        tmp_path / "lists.npz", ranking, rel, acl, ks, **names, engine=LocalEngine(block)
    )
    assert got == want
    assert [r.passed for r in got] == [False, False, False]


def test_a_table_written_by_row_groups_is_the_bytes_written_whole(tmp_path):
    n = (1 << 20) * 2 + 123  # three row groups
    cats = pd.Index([f"p{i}" for i in range(7)])

    def rows(lo: int, hi: int) -> pd.DataFrame:
        r = np.arange(lo, hi)
        return pd.DataFrame(
            {"principal": pd.Categorical.from_codes(r % 7, categories=cats), "x": r / 3.0}
        )

    write_parquet(tmp_path / "whole.parquet", rows(0, n))
    write_parquet_groups(
        tmp_path / "groups.parquet",
        (rows(lo, min(lo + (1 << 20), n)) for lo in range(0, n, 1 << 20)),
    )
    assert (tmp_path / "groups.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
