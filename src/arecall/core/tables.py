"""The pipeline's per-K tables: which measures each shows, as DataFrames, and its headline.

One definition for every place they appear: the Markdown of reports/tables.md and the README
(`arecall.pipeline.report`) and the MLflow tables of a pipeline run (`arecall.tracking.pipeline`).
The main table is the mean over all query-principal pairs (R_A = ∅ counts as ARecall 1, as the
seed), the restricted one over pairs with R_A ≠ ∅ only (the excluded convention). Headers are
the registry's (`arecall.core.measures.PIPELINE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from arecall.core.measures import PIPELINE

__all__ = ["HEADLINE", "MAIN", "RESTRICTED", "headline", "main_table", "restricted_table"]

#: The main table's measure columns, in the order the README shows them (metrics.json keys):
#: which measures the headline table shows is a presentation choice, made here.
MAIN = ("recall", "arecall_post", "arecall_pre", "gap", "precision", "ndcg", "unusable")
#: The restricted table's: every measure the registry reports over pairs with R_A ≠ ∅ too.
RESTRICTED = tuple(name for name, measure in PIPELINE.items() if measure.restricted)


def main_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Per-K means over all query-principal pairs (R_A = ∅ counts as ARecall 1, as the seed)."""
    columns = (*MAIN, "returned_post")
    return pd.DataFrame(
        [
            {"K": int(k), **{PIPELINE[name].heading(): v[name] for name in columns}}
            for k, v in metrics["k"].items()
        ]
    )


def restricted_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Per-K means over pairs with R_A ≠ ∅ only (the excluded convention)."""
    return pd.DataFrame(
        [
            {
                "K": int(k),
                **{PIPELINE[name].heading(): v[PIPELINE[name].nonempty_key] for name in RESTRICTED},
            }
            for k, v in metrics["k"].items()
        ]
    )


#: The headline numbers per K (``dvc exp show``'s columns): metrics.json key -> headline key.
HEADLINE = {
    "recall": "recall",
    "arecall_post": "arecall_post",
    "arecall_pre": "arecall_pre",
    "gap": "gap",
    "gap_nonempty": "gap_nonempty",
}


def headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers a comparison of runs needs, per K: numbers only, no per-list detail.

    Recall@K, ARecall@K post and pre, the gap and the gap restricted to pairs with anything
    relevant authorized, with its confidence interval. ``metrics.json`` keeps everything; this
    is what ``dvc exp show`` shows (dvc.yaml declares it as the score stage's metrics), what a
    pipeline's MLflow run logs as metrics and what ``arecall compare`` lines up.

    Examples
    --------
    >>> sig = {"gap_nonempty": {"low": 0.0, "high": 0.5, "method": "BCa", "exact": False}}
    >>> row = {"recall": 1.0, "arecall_post": 0.5, "arecall_pre": 1.0, "gap": 0.5,
    ...        "gap_nonempty": 0.25, "n_nonempty": 3, "significance": sig}
    >>> line = headline({"datasets": 40, "k": {"5": row}})["k"]["5"]
    >>> sorted(line.items())  # doctest: +NORMALIZE_WHITESPACE
    [('arecall_post', 0.5), ('arecall_pre', 1.0), ('gap', 0.5), ('gap_nonempty', 0.25),
     ('gap_nonempty_high', 0.5), ('gap_nonempty_low', 0.0), ('recall', 1.0)]
    """
    out: dict[str, Any] = {}
    for k, row in metrics["k"].items():
        line = {name: row[key] for key, name in HEADLINE.items() if key in row}
        ci = row.get("significance", {}).get("gap_nonempty")
        if ci is not None:
            line["gap_nonempty_low"], line["gap_nonempty_high"] = ci["low"], ci["high"]
        out[k] = line
    return {"k": out}
