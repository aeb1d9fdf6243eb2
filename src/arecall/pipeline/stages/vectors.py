"""Stage `vectors`: verity's filtered-vector-search experiment, the ``vector_search`` section.

verity-retrieval 0.1.1's generator (``vector_search.corpus``, conf/corpus/vectors.yaml) on a
faiss index (``vector_search.index``, conf/index/hnsw.yaml by default) with the auto planner's
rows. The section is part of every composed configuration, so DVC (params.yaml, declared as this
stage's params) and ``arecall run`` run the same experiment with the same settings.

An unchanged experiment's outputs come from `arecall.pipeline.vector_cache` (same bytes).

It runs only where the config asks for it (``vector_search.enabled``: on in the DVC pipeline's
config, off in conf/'s defaults). Off, the stage writes its outputs as one line saying so and
tables with their header only (DVC needs its outputs to exist; an empty file would be a DVC
warning, not a table): nothing it did not measure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig, VectorSearchSection

__all__ = ["CURVE_COLUMNS", "OFF", "TABLE_COLUMNS", "vector_search"]

#: The header of ``vector_search.csv`` (the deterministic columns of the experiment's table).
TABLE_COLUMNS = ("selectivity", "matching", "mode", "returned", "recall", "short", "arecall",
                 "u_at_k", "plan")  # fmt: skip
#: The header of ``vector_curve.csv`` (`curve_frame`'s columns for the four placements).
CURVE_COLUMNS = ("selectivity", "auto_recall", "post_recall", "pre_recall", "pushdown_recall",
                 "auto_returned_k", "post_returned_k", "pre_returned_k",
                 "pushdown_returned_k")  # fmt: skip
#: What the stage's table says when the config does not ask for the experiment.
OFF = "vector experiment off (vector_search.enabled=false; `vector_search.enabled=true` runs it)\n"


def vector_search(cfg: ExperimentConfig, layout: Layout) -> pd.DataFrame | None:
    """Run the ``vector_search`` section's experiment; write its table, CSV, curve and plot.

    Reads only ``cfg.vector_search`` (dvc.yaml declares exactly that section). An unchanged
    experiment's outputs come from the cache (see the module docstring): same bytes. None, and
    placeholder outputs, when ``vector_search.enabled`` is false.

    Examples
    --------
    >>> import tempfile
    >>> layout = Layout.run(tempfile.mkdtemp())
    >>> from arecall.pipeline.config import default_config
    >>> vector_search(default_config(["vector_search.enabled=false"]), layout) is None
    True
    >>> layout.vector_csv.read_text().startswith("selectivity,matching,mode,")
    True
    """
    section = cfg.vector_search
    if not section.enabled:
        _write_off(layout)
        return None
    root = cache_dir()
    key = cache_key(section, inputs_of(section.corpus)) if root is not None else ""
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


def _compute(section: VectorSearchSection, layout: Layout) -> pd.DataFrame:
    """The experiment itself, written to the layout."""
    from arecall.vector import deterministic_columns, plot_experiment, render_markdown

    table = run_vector_corpus(section)
    corpus = section.corpus
    measured = table.attrs.get("caption") or (
        f"{corpus.n_docs:,} × {corpus.dims} vectors, {corpus.n_queries} queries"
    )
    caption = f"corpus `vectors` · index `{section.index.name}`: {measured}, k = {table.attrs['k']}"
    steady = deterministic_columns(table)
    write_text(layout.vector_table, f"{caption}\n\n" + render_markdown(table))
    write_with(layout.vector_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    curve = curve_frame(table)
    write_with(layout.vector_curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    plot_experiment(table, layout.vector_plot)
    return table


def _write_off(layout: Layout) -> None:
    """The stage's outputs when the experiment is off: one line, header-only tables, a PNG
    saying so."""
    write_text(layout.vector_table, OFF)
    write_text(layout.vector_csv, ",".join(TABLE_COLUMNS) + "\n")
    write_text(layout.vector_curve, ",".join(CURVE_COLUMNS) + "\n")
    write_with(layout.vector_plot, lambda tmp: _notice_png(tmp, OFF.strip()))


def _notice_png(tmp: Any, text: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 0.6), dpi=100)
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=8)
    fig.savefig(tmp, format="png", metadata={"Software": None})


def _show(table: pd.DataFrame | None, layout: Layout) -> None:
    print(layout.vector_table.read_text(encoding="utf-8"))
    if table is not None:
        print(table[["selectivity", "mode", "qps"]].to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(run_stage(vector_search, show=_show))
