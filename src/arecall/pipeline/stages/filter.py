"""Stage `filter`: both placements (post and pre) for every principal and query at the largest K.

It needs the ACL and the collection's sizes, not the texts, so it reads only the id columns of
the documents and queries (the texts are most of a corpus: seconds at a million documents).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arecall.core.placed_lists import PlacedLists, place_all
from arecall.core.ranking import Ranking
from arecall.data.collection import Collection
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["filter_lists"]


def filter_lists(cfg: ExperimentConfig, layout: Layout) -> PlacedLists:
    """Apply both placements for every principal and query at the largest K."""
    collection = Collection.load(layout.corpus, text=False)
    check_lists_memory(
        cfg, n_principals=len(collection.principals), n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    lists = place_all(Ranking.load(layout.ranking), collection.acl_matrix(), max(ks_of(cfg)))
    lists.save(layout.lists)
    return lists


if __name__ == "__main__":
    raise SystemExit(run_stage(filter_lists))
