"""Stage `score`: every measure for every query-principal pair, K and placement, and Δ@K's
significance: metrics.json holds all of it, headline.json the numbers runs are compared on.

Blocks of principals run on the engine ``evaluation.engine`` names and are reduced where they
run (`arecall.core.scoring.reduce_pairs`): each reads its lists from the filter stage's file,
writes its rows of the per-pair table and sends back exact sums and Δ histograms, which merge
into the same bytes whatever the engine and block size. Nothing per pair comes back here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from arecall.core.engine import Engine, engine_from_config
from arecall.core.ranking import Ranking
from arecall.core.scoring import PairSums, reduce_pairs, summary_of
from arecall.core.significance import delta_significance_counts
from arecall.core.tables import HEADLINE, headline
from arecall.data.collection import Collection
from arecall.io.atomic import write_json
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig, SignificanceConfig

__all__ = ["HEADLINE", "headline", "score"]


@contextmanager
def _engine(cfg: ExperimentConfig, engine: Engine | None) -> Iterator[Engine]:
    """The engine given, else the one the config names (closed afterwards)."""
    if engine is not None:
        yield engine
        return
    with engine_from_config(cfg.evaluation.engine) as made:
        yield made


def score(cfg: ExperimentConfig, layout: Layout, engine: Engine | None = None) -> dict[str, Any]:
    """Score every pair, K and placement; write the per-pair table and metrics.json."""
    collection = Collection.load(layout.corpus, text=False)
    ranking = Ranking.load(layout.ranking)
    with _engine(cfg, engine) as run:
        reduced = reduce_pairs(
            ranking,
            layout.lists,
            collection.relevance_matrix(),
            collection.acl_matrix(),
            ks_of(cfg),
            engine=run,
            pairs_out=layout.pairs,
            query_ids=collection.query_ids,
            principals=collection.principal_names,
        )
    metrics = summary_of(
        reduced.sums,
        reciprocal_rank=reduced.queries.reciprocal_rank,
        n_relevant=reduced.queries.n_relevant,
        n_queries=ranking.n_queries,
        n_documents=len(collection.documents),
    )
    _add_significance(metrics, reduced.sums, cfg.evaluation.significance)
    write_json(layout.metrics, metrics)
    write_json(layout.headline, headline(metrics))
    return metrics


def _add_significance(metrics: dict[str, Any], sums: PairSums, scfg: SignificanceConfig) -> None:
    """Δ@K = pre − post per pair: paired bootstrap CI and randomization p, both conventions,
    from the histograms of Δ merged over every block."""

    def test(histogram: tuple[Any, Any]) -> dict[str, Any]:
        return delta_significance_counts(
            *histogram, confidence=scfg.confidence, n_resamples=scfg.resamples, seed=scfg.seed
        )

    for i, k in enumerate(sums.ks):
        sig = {"gap": test(sums.gap[i])}
        if sums.n_nonempty:
            sig["gap_nonempty"] = test(sums.gap_nonempty[i])
        metrics["k"][str(k)]["significance"] = sig


if __name__ == "__main__":
    raise SystemExit(run_stage(score))
