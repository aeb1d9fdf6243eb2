"""Stage `filter`: both placements (post and pre) for every principal and query at the largest K.

It needs the ACL and the collection's sizes, not the texts, so it reads only the id columns of
the documents and queries (the texts are most of a corpus: seconds at a million documents).
Blocks of principals are placed on the engine ``evaluation.engine`` names, each writing its
part, and the parts are joined into the one lists file: no process holds every list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arecall.core.engine import engine_from_config
from arecall.core.placed_lists import place_to_file
from arecall.core.ranking import Ranking
from arecall.data.collection import Collection
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["filter_lists"]


def filter_lists(cfg: ExperimentConfig, layout: Layout) -> tuple[int, int, int]:
    """Apply both placements for every principal and query at the largest K; returns the lists'
    shape (principals, queries, K_max)."""
    collection = Collection.load(layout.corpus, text=False)
    check_lists_memory(
        cfg, n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    ranking = Ranking.load(layout.ranking)
    with engine_from_config(cfg.evaluation.engine) as engine:
        return place_to_file(
            ranking, collection.acl_matrix(), max(ks_of(cfg)), layout.lists, engine=engine
        )


if __name__ == "__main__":
    raise SystemExit(run_stage(filter_lists))
