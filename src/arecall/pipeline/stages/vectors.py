"""Stage `vectors`: filtered vector search on an index.

``corpus=vectors`` runs verity's experiment on faiss HNSW with the auto planner's rows; a text
corpus with ``index=hnsw|exact`` measures its dense embeddings with each principal's ACL as the
filter. As a DVC stage its configuration is conf/corpus/vectors.yaml with conf/index/hnsw.yaml
(declared as params files in dvc.yaml), so the text pipeline's params.yaml stays the corpus it
measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from arecall.data.collection import Collection
from arecall.io.atomic import write_text, write_with
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage
from arecall.pipeline.vector_search import curve_frame, run_text_index, run_vector_corpus
from arecall.retrievers import make_retriever

__all__ = ["vector_search"]


def vector_search(cfg: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """Filtered vector search on an index: corpus=vectors (verity's experiment), or a text
    corpus's dense embeddings with each principal's ACL as the filter."""
    from arecall.vector import deterministic_columns, plot_experiment, render_markdown

    if cfg["corpus"]["name"] == "vectors":
        table = run_vector_corpus(cfg)
        caption = (
            f"corpus `vectors` · index `{cfg['index']['name']}`: "
            f"{cfg['corpus']['n_docs']:,} × {cfg['corpus']['dims']} vectors, "
            f"{cfg['corpus']['n_queries']} queries, k = {table.attrs['k']}"
        )
    else:
        collection = Collection.load(layout.corpus)
        retriever = make_retriever(cfg["retriever"]).fit(collection.documents["text"].tolist())
        table = run_text_index(
            cfg,
            retriever,
            collection.queries["text"].tolist(),
            np.asarray(collection.acl_matrix().toarray(), dtype=bool),
            collection.principal_names,
            max(ks_of(cfg)),
        )
        caption = (
            f"corpus `{cfg['corpus']['name']}` · retriever `{cfg['retriever']['name']}` "
            f"· index `{cfg['index']['name']}`: one row per principal and placement"
        )
    steady = deterministic_columns(table)
    markdown = f"{caption}\n\n" + render_markdown(table)
    if "principal" in table:
        markdown += (
            "\nRows are in principal order: " + ", ".join(dict.fromkeys(table["principal"])) + ".\n"
        )
    write_text(layout.vector_table, markdown)
    write_with(layout.vector_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    curve = curve_frame(table)
    write_with(layout.vector_curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    plot_experiment(table, layout.vector_plot)
    return table


def _dvc_experiment(cfg: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    from arecall.pipeline.config import default_config

    return vector_search(default_config(["corpus=vectors", "index=hnsw"]), layout)


def _show(table: pd.DataFrame, layout: Layout) -> None:
    print(layout.vector_table.read_text(encoding="utf-8"))
    print(table[["selectivity", "mode", "qps"]].to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(run_stage(_dvc_experiment, show=_show))
