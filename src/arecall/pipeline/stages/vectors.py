"""Stage `vectors`: verity's filtered-vector-search experiment, the ``vector_search`` section.

verity-retrieval 0.1.1's generator (``vector_search.corpus``, conf/corpus/vectors.yaml) on a
faiss index (``vector_search.index``, conf/index/hnsw.yaml by default) with the auto planner's
rows. The section is part of every composed configuration, so DVC (params.yaml, declared as this
stage's params) and ``arecall run`` run the same experiment with the same settings.

An unchanged experiment's outputs come from `arecall.pipeline.vector_cache` (same bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from arecall.io.atomic import write_text, write_with
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage
from arecall.pipeline.vector_cache import (
    FILES,
    cache_dir,
    cache_key,
    copier,
    discard,
    inputs_of,
    lookup,
    publish,
)
from arecall.pipeline.vector_search import curve_frame, run_vector_corpus

__all__ = ["vector_search"]


def vector_search(cfg: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """Run the ``vector_search`` section's experiment; write its table, CSV, curve and plot.

    Reads only ``cfg["vector_search"]`` (dvc.yaml declares exactly that section). An unchanged
    experiment's outputs come from the cache (see the module docstring): same bytes.
    """
    section = cfg["vector_search"]
    root = cache_dir()
    key = cache_key(section, inputs_of(section["corpus"])) if root is not None else ""
    if root is not None:
        entry = root / key
        hit = lookup(entry) if entry.is_dir() else None
        if hit is not None:
            _, table = hit
            for name in FILES:
                target = getattr(layout, name)
                write_with(target, copier(entry / target.name))
            table.attrs.update(cache="hit", cache_key=key)
            return table
        if entry.is_dir():
            discard(entry)
    table = _compute(section, layout)
    if root is not None:
        publish(root, key, layout, table)
        table.attrs.update(cache="miss", cache_key=key)
    return table


def _compute(section: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """The experiment itself, written to the layout."""
    from arecall.vector import deterministic_columns, plot_experiment, render_markdown

    table = run_vector_corpus(section)
    corpus = section["corpus"]
    measured = table.attrs.get("caption") or (
        f"{corpus['n_docs']:,} × {corpus['dims']} vectors, {corpus['n_queries']} queries"
    )
    caption = (
        f"corpus `vectors` · index `{section['index']['name']}`: {measured}, k = {table.attrs['k']}"
    )
    steady = deterministic_columns(table)
    write_text(layout.vector_table, f"{caption}\n\n" + render_markdown(table))
    write_with(layout.vector_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    curve = curve_frame(table)
    write_with(layout.vector_curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    plot_experiment(table, layout.vector_plot)
    return table


def _show(table: pd.DataFrame, layout: Layout) -> None:
    print(layout.vector_table.read_text(encoding="utf-8"))
    print(table[["selectivity", "mode", "qps"]].to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(run_stage(vector_search, show=_show))
