"""Stage `report`: the Markdown tables, the ARecall@K curve's CSV and its PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from arecall.io.atomic import write_text, write_with
from arecall.pipeline.layout import Layout
from arecall.pipeline.report import curve_frame, render_tables
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["report"]


def report(cfg: ExperimentConfig, layout: Layout) -> str:
    """Write the Markdown tables, the curve's CSV and its PNG."""
    metrics = json.loads(layout.metrics.read_text(encoding="utf-8"))
    tables = render_tables(metrics, cfg)
    write_text(layout.tables, tables)
    curve = curve_frame(metrics)
    write_with(layout.curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    write_with(layout.plot, lambda tmp: _plot(curve, tmp))
    return tables


def _plot(curve: pd.DataFrame, path: Path) -> None:
    """Draw the curve on matplotlib's Agg canvas directly: no pyplot, no global backend.

    pyplot costs about a second to import and is not needed to write one PNG; the bytes are
    the same as pyplot's Agg output (test_progress_and_imports.py checks the committed plot).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot(curve["k"], curve["arecall_pre"], marker="o", label="ARecall@K, pre (filter first)")
    ax.plot(curve["k"], curve["arecall_post"], marker="s", label="ARecall@K, post (top-K first)")
    ax.plot(curve["k"], curve["recall"], linestyle="--", color="grey", label="Recall@K (blind)")
    ax.set_xlabel("K")
    ax.set_xticks(list(curve["k"]))
    ax.set_ylabel("mean over query-principal pairs")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    # below the axes: inside them it hid the low curves of a corpus with little authorized
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, format="png", metadata={"Software": None})


if __name__ == "__main__":
    raise SystemExit(run_stage(report, show=lambda tables, layout: print(tables)))
