"""Stage `score`: every measure for every query-principal pair, K and placement, and Δ@K's
significance: metrics.json holds all of it, headline.json the numbers runs are compared on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from arecall.core.engine import Engine, engine_from_config
from arecall.core.placed_lists import PlacedLists
from arecall.core.ranking import Ranking
from arecall.core.scoring import PairScores, score_pairs, summarise
from arecall.core.significance import delta_significance
from arecall.core.tables import HEADLINE, headline
from arecall.data.collection import Collection
from arecall.io.atomic import write_json, write_parquet
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig, SignificanceConfig

__all__ = ["HEADLINE", "headline", "pair_scores", "score"]


def pair_scores(
    cfg: ExperimentConfig, layout: Layout, engine: Engine | None = None
) -> tuple[Collection, PlacedLists, PairScores]:
    """Score every pair from what generate, rank and filter wrote (score and prove share it).

    The per-principal part runs on ``engine`` (default: the one ``evaluation.engine`` names);
    the lists come back too, so prove reads them once.
    """
    collection = Collection.load(layout.corpus, text=False)
    ranking = Ranking.load(layout.ranking)
    lists = PlacedLists.load(layout.lists)
    with _engine(cfg, engine) as run:
        scores = score_pairs(
            ranking,
            lists,
            collection.relevance_matrix(),
            collection.acl_matrix(),
            ks_of(cfg),
            engine=run,
        )
    return collection, lists, scores


@contextmanager
def _engine(cfg: ExperimentConfig, engine: Engine | None) -> Iterator[Engine]:
    """The engine given, else the one the config names (closed afterwards)."""
    if engine is not None:
        yield engine
        return
    with engine_from_config(cfg.evaluation.engine) as made:
        yield made


def score(cfg: ExperimentConfig, layout: Layout) -> dict[str, Any]:
    """Score every pair, K and placement; write the per-pair table and metrics.json."""
    collection, _, scores = pair_scores(cfg, layout)
    frame = scores.to_frame(collection.query_ids, collection.principal_names)
    write_parquet(layout.pairs, frame)
    metrics = summarise(scores, n_documents=len(collection.documents))
    _add_significance(metrics, scores, cfg.evaluation.significance)
    write_json(layout.metrics, metrics)
    write_json(layout.headline, headline(metrics))
    return metrics


def _add_significance(
    metrics: dict[str, Any], scores: PairScores, scfg: SignificanceConfig
) -> None:
    """Δ@K = pre − post per pair: paired bootstrap CI and randomization p, both conventions."""
    nonempty = scores.n_authorized_relevant > 0
    confidence, resamples, seed = scfg.confidence, scfg.resamples, scfg.seed

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
