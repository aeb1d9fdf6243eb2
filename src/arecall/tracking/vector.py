"""What the vector experiment logs: its table, and one metric per mode, measure and filter.

The filtered-vector-search table (`arecall.pipeline.stages.vectors` writes it as
``reports/vector_search.csv``; ``arecall run`` passes it with its wall-clock ``qps``) becomes
``vector_<mode>_<column>_s<selectivity %>pct`` metrics (on a text corpus one per principal,
keyed by `arecall.tracking.run.safe_key`, the mapping logged as ``keys.json``) and the MLflow
table ``tables/vector_search.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arecall.core.measures import VECTOR
from arecall.tracking.run import safe_key

__all__ = ["TABLE", "cache_tag", "read_vector_table", "vector_metrics"]

#: The vector table's MLflow artifact (an MLflow table).
TABLE = "tables/vector_search.json"


def read_vector_table(reports: Mapping[str, Path], vector: Any = None) -> Any:
    """The vector table to log: ``vector`` as given (with its ``qps``), else ``vector_csv``'s."""
    if vector is None and reports.get("vector_csv"):
        import pandas as pd

        vector = pd.read_csv(reports["vector_csv"])
    return vector


def cache_tag(vector: Any) -> str | None:
    """The ``arecall.vectors_cache`` tag: whether the table came from the experiment's cache."""
    cache = getattr(vector, "attrs", {}).get("cache")
    if not cache:
        return None
    return f"{cache} {vector.attrs.get('cache_key', '')}".strip()


def vector_metrics(table: Any) -> tuple[dict[str, float], dict[str, str]]:
    """``vector_<mode>_<column>_s<selectivity %>pct`` (text corpora: ``…_p<i>_<principal>``).

    Principal names come from the data: each is keyed by `safe_key` (its index in the table's
    principal order), returned with the mapping key → name.
    """
    out: dict[str, float] = {}
    keys: dict[str, str] = {}
    index: dict[str, str] = {}
    for row in table.to_dict("records"):
        if "principal" in row:
            name = str(row["principal"])
            if name not in index:
                index[name] = safe_key(len(index), name)
                keys[index[name]] = name
            where = index[name]
        else:
            where = f"s{float(row['selectivity']) * 100:g}pct"
        for column in (*VECTOR, "qps"):
            if column in row:
                key = f"vector_{row['mode']}_{column}_{where}"
                out["".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in key)] = float(
                    row[column]
                )
    return out, keys
