"""Stage `rank`: fit the retriever and rank every query, as deep as exact pre lists need.

Besides ``ranking.npz`` it writes ``rank.json`` beside it: how the ranking is stored (per query,
head + tails or ranked to the needed depth, whichever has fewer entries; see
`arecall.core.ranking`), with both totals, and prints the same as one line
(``arecall: rank: kept … entries …``) where the stage lines show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arecall.core.engine import Engine, make_engine
from arecall.core.rank_blocks import RankSettings, rank_by_block
from arecall.core.ranking import Ranking
from arecall.data.collection import Collection
from arecall.io.atomic import write_json
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import progress_shown, run_stage
from arecall.retrievers import (
    document_shard,
    fit_on,
    make_retriever,
    query_inputs,
    ranks_every_document,
)

if TYPE_CHECKING:
    from arecall.pipeline.schema import EngineConfig, ExperimentConfig

__all__ = [
    "REPRESENTATION_KEY",
    "rank",
    "rank_engine",
    "representation",
    "representation_line",
    "representation_of",
]

#: rank.json's key for how the ranking is stored (what tracking logs).
REPRESENTATION_KEY = "representation"


def representation(ranking: Ranking, depth: int | None) -> dict[str, Any]:
    """How ``ranking`` is stored, for rank.json: totals of both representations and the choice.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from arecall.core.ranking import rank_queries
    >>> acl = sp.csr_matrix([[False, False, True], [False, True, True], [False, True, False]])
    >>> r = rank_queries([sp.csr_matrix([[0.9, 0.8, 0.7]])], n_queries=1, depth=1, acl=acl,
    ...                  k_max=1)  # 1 head + 3 tails, or the 3 documents ranked
    >>> rep = representation(r, 1)
    >>> rep["chosen"], rep["entries"], rep["if_head_and_tails"]
    ('ranked to the needed depth', 3, 4)
    """
    return representation_of(
        {**ranking.sizes, "queries": ranking.sizes.get("queries", ranking.n_queries)},
        ranked_entries=len(ranking.doc_index),
        tail_entries=len(ranking.tail_doc),
        depth=depth,
    )


def representation_of(
    s: Mapping[str, int], *, ranked_entries: int, tail_entries: int, depth: int | None
) -> dict[str, Any]:
    """`representation` from the ranking's sizes and entry counts, without the ranking itself
    (the rank stage writes it in blocks and does not hold it)."""
    queries = int(s["queries"])
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
        "entries": int(ranked_entries + tail_entries),
        "ranked_entries": int(ranked_entries),
        "tail_entries": int(tail_entries),
        "queries": queries,
        "queries_head_and_tails": as_tails,
        "queries_ranked_to_needed_depth": queries - as_tails,
        "if_head_and_tails": int(s.get("head_entries", 0) + s.get("tail_entries", 0)),
        "if_ranked_to_needed_depth": int(s.get("depth_entries", ranked_entries)),
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


def rank(cfg: ExperimentConfig, layout: Layout) -> dict[str, Any]:
    """Fit the retriever on the documents and rank every query, as deep as exactness needs;
    return how the ranking is stored (rank.json's `representation`).

    The queries rank in blocks, and the documents in shards if asked, on the engine
    ``evaluation.engine`` names (`arecall.core.rank_blocks`): the ranking file is byte-identical
    whatever the engine, block size and shards.

    ``cfg`` is the checked configuration: a ``retriever.depth`` below the largest K was refused
    there (`arecall.pipeline.schema.check_depth`), once, before any stage ran."""
    collection = Collection.load(layout.corpus)
    check_lists_memory(
        cfg, n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    rcfg = cfg.retriever
    retriever = fit_on(make_retriever(rcfg), collection.documents, collection.queries)
    n_docs = len(collection.documents)
    # a dense retriever's chunk is queries × documents floats: cap it at ~64M cells
    chunk = max(1, min(rcfg.chunk_queries, (1 << 26) // max(n_docs, 1)))
    settings = RankSettings(
        n_docs=n_docs,
        depth=rcfg.depth,
        k_max=max(ks_of(cfg)),
        every_entry=ranks_every_document(retriever),
        chunk=chunk,
    )
    ecfg = cfg.evaluation.engine
    with rank_engine(ecfg) as engine:
        sizes = rank_by_block(
            retriever,
            query_inputs(retriever, collection.queries),
            layout.ranking,
            settings=settings,
            engine=engine,
            block_queries=ecfg.block_queries,
            doc_shards=ecfg.doc_shards,
            acl=collection.acl_matrix(),
            relevance=collection.relevance_matrix(),
            shard_of=document_shard,
        )
    rep = representation_of(
        sizes,
        ranked_entries=sizes["stored_ranked"],
        tail_entries=sizes["stored_tails"],
        depth=rcfg.depth,
    )
    write_json(layout.rank_info, {REPRESENTATION_KEY: rep})
    if progress_shown():
        print(f"arecall: rank: {representation_line(rep)}", flush=True)
    return rep


def rank_engine(ecfg: EngineConfig) -> Engine:
    """The engine of ``evaluation.engine`` for ranking: its blocks are ``block_queries``
    queries (``block_principals`` sizes the score and prove stages' blocks, not these)."""
    return make_engine(ecfg.name, ecfg.scheduler or None)


if __name__ == "__main__":
    raise SystemExit(run_stage(rank))
