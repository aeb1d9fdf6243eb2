"""Stage `filter`: both placements (post and pre) for every principal and query at the largest K.

It needs the ACL and the collection's sizes, not the texts, so it reads only the id columns of
the documents and queries (the texts are most of a corpus: seconds at a million documents).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from arecall.core.errors import ArecallError
from arecall.core.placement import PlacedLists, place_all
from arecall.core.ranking import Ranking
from arecall.data.collection import Collection
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

__all__ = ["filter_lists", "load_authorization"]

#: The columns of each table the filter reads (None: all).
_COLUMNS: dict[str, list[str] | None] = {
    "documents": ["doc_id"],
    "queries": ["query_id"],
    "qrels": ["query_id", "doc_id", "relevance"],
    "principals": None,
    "acl": None,
}


def load_authorization(directory: str | Path) -> Collection:
    """The collection in ``directory`` without its texts (ids, qrels, principals, ACL).

    Examples
    --------
    >>> import tempfile
    >>> from arecall.data.sources import load_corpus
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     load_corpus({"name": "discovery"}).save(tmp)
    ...     c = load_authorization(tmp)
    >>> "text" in c.documents.columns, c.acl_matrix().shape[1] == len(c.documents)
    (False, True)
    """
    frames = {}
    for name, columns in _COLUMNS.items():
        path = Path(directory) / f"{name}.parquet"
        if not path.is_file():
            raise ArecallError(f"{path}: missing; run the generate stage first")
        frames[name] = pd.read_parquet(path, columns=columns)
    return Collection(**frames)


def filter_lists(cfg: Mapping[str, Any], layout: Layout) -> PlacedLists:
    """Apply both placements for every principal and query at the largest K."""
    collection = load_authorization(layout.corpus)
    check_lists_memory(
        cfg, n_principals=len(collection.principals), n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    lists = place_all(Ranking.load(layout.ranking), collection.acl_matrix(), max(ks_of(cfg)))
    lists.save(layout.lists)
    return lists


if __name__ == "__main__":
    raise SystemExit(run_stage(filter_lists))
