"""Stage `rank`: fit the retriever and rank every query, as deep as exact pre lists need.

Besides ``ranking.npz`` it writes ``rank.json`` beside it: how the ranking is stored (per query,
head + tails or ranked to the needed depth, whichever has fewer entries; see
`arecall.core.ranking`), with both totals, and prints the same as one line
(``arecall: rank: kept … entries …``) where the stage lines show.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.ranking import Ranking, rank_queries
from arecall.data.collection import Collection
from arecall.io.atomic import write_json
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import progress_shown, run_stage
from arecall.retrievers import fit_on, make_retriever, query_inputs, ranks_every_document

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["REPRESENTATION_KEY", "rank", "representation", "representation_line"]

#: rank.json's key for how the ranking is stored (what tracking logs).
REPRESENTATION_KEY = "representation"


def representation(ranking: Ranking, depth: int | None) -> dict[str, Any]:
    """How ``ranking`` is stored, for rank.json: totals of both representations and the choice.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> acl = sp.csr_matrix([[False, False, True], [False, True, True], [False, True, False]])
    >>> r = rank_queries([sp.csr_matrix([[0.9, 0.8, 0.7]])], n_queries=1, depth=1, acl=acl,
    ...                  k_max=1)  # 1 head + 3 tails, or the 3 documents ranked
    >>> rep = representation(r, 1)
    >>> rep["chosen"], rep["entries"], rep["if_head_and_tails"]
    ('ranked to the needed depth', 3, 4)
    """
    s = ranking.sizes
    queries = int(s.get("queries", ranking.n_queries))
    as_tails = int(s.get("queries_as_tails", 0))
    if depth is None:
        chosen = "full ranking"
    elif as_tails == 0:
        chosen = "ranked to the needed depth"
    elif as_tails == queries:
        chosen = "head + tails"
    else:
        chosen = "mixed"
    return {
        "depth": depth,
        "chosen": chosen,
        "entries": int(len(ranking.doc_index) + len(ranking.tail_doc)),
        "ranked_entries": len(ranking.doc_index),
        "tail_entries": len(ranking.tail_doc),
        "queries": queries,
        "queries_head_and_tails": as_tails,
        "queries_ranked_to_needed_depth": queries - as_tails,
        "if_head_and_tails": int(s.get("head_entries", 0) + s.get("tail_entries", 0)),
        "if_ranked_to_needed_depth": int(s.get("depth_entries", len(ranking.doc_index))),
    }


def representation_line(rep: Mapping[str, Any]) -> str:
    """The one line the stage prints about its choice.

    Examples
    --------
    >>> line = representation_line({"depth": 100, "chosen": "head + tails", "entries": 900,
    ...     "queries": 2, "queries_head_and_tails": 2, "queries_ranked_to_needed_depth": 0,
    ...     "if_head_and_tails": 900, "if_ranked_to_needed_depth": 5000})
    >>> line.split(" (")[0]
    'kept 900 entries: head + tails for 2 queries, ranked to the needed depth for 0'
    """
    if rep["depth"] is None:
        return f"kept {rep['entries']:,} entries: every query's full ranking (retriever.depth=null)"
    return (
        f"kept {rep['entries']:,} entries: head + tails for {rep['queries_head_and_tails']:,} "
        f"queries, ranked to the needed depth for {rep['queries_ranked_to_needed_depth']:,} "
        f"(head + tails everywhere: {rep['if_head_and_tails']:,}; ranked to the needed depth "
        f"everywhere: {rep['if_ranked_to_needed_depth']:,})"
    )


def _score_chunks(retriever: Any, texts: list[str], chunk: int) -> Iterator[sp.spmatrix]:
    """The retriever's scores, chunk by chunk; a bar past one chunk, on a terminal only (tqdm's
    ``disable=None``: none into a redirected stderr)."""
    bar = len(texts) > chunk
    for start in tqdm(
        range(0, len(texts), chunk), desc="rank", unit="chunk", disable=None if bar else True
    ):
        yield retriever.score(texts[start : start + chunk])


def rank(cfg: ExperimentConfig, layout: Layout) -> Ranking:
    """Fit the retriever on the documents and rank every query, as deep as exactness needs.

    ``cfg`` is the checked configuration: a ``retriever.depth`` below the largest K was refused
    there (`arecall.pipeline.schema.check_depth`), once, before any stage ran."""
    collection = Collection.load(layout.corpus)
    check_lists_memory(
        cfg, n_principals=len(collection.principals), n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    rcfg = cfg.retriever
    retriever = fit_on(make_retriever(rcfg), collection.documents, collection.queries)
    n_docs = len(collection.documents)
    # a dense retriever's chunk is queries × documents floats: cap it at ~64M cells
    chunk = max(1, min(rcfg.chunk_queries, (1 << 26) // max(n_docs, 1)))
    ranking = rank_queries(
        _score_chunks(retriever, query_inputs(retriever, collection.queries), chunk),
        n_queries=len(collection.queries),
        depth=rcfg.depth,
        acl=collection.acl_matrix(),
        k_max=max(ks_of(cfg)),
        relevance=collection.relevance_matrix(),
        every_entry=ranks_every_document(retriever),
    )
    ranking.save(layout.ranking)
    rep = representation(ranking, rcfg.depth)
    write_json(layout.rank_info, {REPRESENTATION_KEY: rep})
    if progress_shown():
        print(f"arecall: rank: {representation_line(rep)}", flush=True)
    return ranking


if __name__ == "__main__":
    raise SystemExit(run_stage(rank))
