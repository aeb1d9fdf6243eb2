"""Stage `score`: every measure for every query-principal pair, K and placement, and Δ@K's
significance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from arecall.core.placement import PlacedLists
from arecall.core.ranking import Ranking
from arecall.core.scoring import PairScores, score_pairs, summarise
from arecall.core.significance import delta_significance
from arecall.data.collection import Collection
from arecall.io.atomic import write_json, write_parquet
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

__all__ = ["pair_scores", "score"]


def pair_scores(cfg: Mapping[str, Any], layout: Layout) -> tuple[Collection, PairScores]:
    """Score every pair from what generate, rank and filter wrote (score and prove share it)."""
    collection = Collection.load(layout.corpus)
    ranking = Ranking.load(layout.ranking)
    lists = PlacedLists.load(layout.lists)
    scores = score_pairs(
        ranking, lists, collection.relevance_matrix(), collection.acl_matrix(), ks_of(cfg)
    )
    return collection, scores


def score(cfg: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Score every pair, K and placement; write the per-pair table and metrics.json."""
    collection, scores = pair_scores(cfg, layout)
    frame = scores.to_frame(collection.query_ids, collection.principal_names)
    write_parquet(layout.pairs, frame)
    metrics = summarise(scores, n_documents=len(collection.documents))
    _add_significance(metrics, scores, cfg["evaluation"]["significance"])
    write_json(layout.metrics, metrics)
    return metrics


def _add_significance(metrics: dict[str, Any], scores: PairScores, scfg: Mapping[str, Any]) -> None:
    """Δ@K = pre − post per pair: paired bootstrap CI and randomization p, both conventions."""
    nonempty = scores.n_authorized_relevant > 0
    confidence, resamples, seed = scfg["confidence"], scfg["resamples"], scfg["seed"]

    def test(pre: np.ndarray, post: np.ndarray) -> dict[str, Any]:
        return delta_significance(
            pre, post, confidence=confidence, n_resamples=resamples, seed=seed
        )

    for i, k in enumerate(scores.ks):
        pre = scores.metrics["arecall_pre"][:, :, i]
        post = scores.metrics["arecall_post"][:, :, i]
        sig = {"gap": test(pre.ravel(), post.ravel())}
        if nonempty.any():
            sig["gap_nonempty"] = test(pre[nonempty], post[nonempty])
        metrics["k"][str(k)]["significance"] = sig


if __name__ == "__main__":
    raise SystemExit(run_stage(score))
