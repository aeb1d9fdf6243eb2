"""Stage `index_search`: the text corpus's dense embeddings in the ``index`` group's index.

With ``index=hnsw|exact`` and a dense retriever (``retriever=dense_lsa``, ``embeddings`` or
``model2vec``) each principal's ACL is the filter of a vector index over the documents'
embeddings, in the retriever's metric: one row per principal and placement. With
``index=none`` (the default) it writes one line saying so and the CSV's header only (an empty
file would be a DVC warning, not a table), so DVC's outputs exist and say nothing they did not
measure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from arecall.data.collection import Collection
from arecall.io.atomic import write_text, write_with
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage
from arecall.pipeline.vector_search import run_text_index
from arecall.retrievers import fit_on, make_retriever, query_inputs

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["COLUMNS", "index_search"]

#: The header of ``index_search.csv`` (the deterministic columns of the per-principal table).
COLUMNS = ("principal", "selectivity", "gls", "matching", "mode", "returned", "recall", "short",
           "arecall", "u_at_k", "plan")  # fmt: skip

NO_INDEX = (
    "index `none`: no vector index (index=hnsw or index=exact with a dense retriever, "
    "retriever=dense_lsa, measures this corpus's embeddings through one).\n"
)


def index_search(cfg: ExperimentConfig, layout: Layout) -> pd.DataFrame | None:
    """Measure the corpus's embeddings through the configured index; None for ``index=none``.

    Examples
    --------
    >>> import tempfile
    >>> from arecall.pipeline.config import default_config
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     layout = Layout.run(tmp)
    ...     index_search(default_config(), layout) is None, layout.index_csv.read_text()
    (True, 'principal,selectivity,gls,matching,mode,returned,recall,short,arecall,u_at_k,plan\\n')
    """
    if cfg.index.name == "none":
        write_text(layout.index_table, NO_INDEX)
        write_text(layout.index_csv, ",".join(COLUMNS) + "\n")
        return None
    from arecall.vector import deterministic_columns, render_markdown

    collection = Collection.load(layout.corpus)
    retriever = fit_on(make_retriever(cfg.retriever), collection.documents, collection.queries)
    table = run_text_index(
        cfg,
        retriever,
        query_inputs(retriever, collection.queries),
        np.asarray(collection.acl_matrix().toarray(), dtype=bool),
        collection.principal_names,
        max(ks_of(cfg)),
    )
    caption = (
        f"corpus `{cfg.corpus.name}` · retriever `{cfg.retriever.name}` "
        f"· index `{cfg.index.name}`: one row per principal and placement"
    )
    markdown = f"{caption}\n\n" + render_markdown(table)
    markdown += (
        "\nRows are in principal order: " + ", ".join(dict.fromkeys(table["principal"])) + ".\n"
    )
    write_text(layout.index_table, markdown)
    steady = deterministic_columns(table)
    write_with(layout.index_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    return table


if __name__ == "__main__":
    raise SystemExit(
        run_stage(index_search, show=lambda t, layout: print(layout.index_table.read_text()))
    )
