"""The pipeline's two per-K tables: which measures each shows, as DataFrames.

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

__all__ = ["MAIN", "RESTRICTED", "main_table", "restricted_table"]

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
