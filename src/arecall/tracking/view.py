"""The runs table as arecall opens it: the headline's columns, not MLflow's empty default.

MLflow's runs table starts with no metric column (a user picks them from every metric the runs
logged) and with a Models column arecall never fills. Its "shared view" is the one way to open
it otherwise: an experiment tag ``mlflow.sharedViewState.<key>`` holding the view's state as
JSON, opened by the address's ``viewStateShareKey=<key>``. arecall keeps one, `VIEW_KEY`, on the
pipeline's experiment: the config choices that differ most often (`PARAM_COLUMNS`) and ARecall
post, pre and their gap at each K (`HEADLINE_COLUMNS`); ``arecall ui`` prints that address.
The browser says it shows a shared view; "Override saved view" keeps it as the user's own,
"Exit shared view" goes back to theirs. A run whose Ks differ from the view's updates it (the
view follows the last run logged).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from arecall.core.measures import mlflow_key

__all__ = [
    "HEADLINE_COLUMNS",
    "METRIC_WIDTH",
    "PARAM_COLUMNS",
    "VIEW_KEY",
    "VIEW_TAG",
    "runs_view",
]

#: The share key of arecall's view, and the experiment tag that holds it (MLflow's prefix).
VIEW_KEY = "arecall"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
#: The headline measures shown per K (headline.json's keys, MLflow's ``<key>_at_<k>``).
HEADLINE_COLUMNS = ("arecall_post", "arecall_pre", "gap")
#: The params shown beside the Dataset column (which names the corpus).
PARAM_COLUMNS = ("retriever.name", "profiles.name")
#: A metric column's width (px): its whole name, K included (MLflow's default cuts it).
METRIC_WIDTH = 140


def _column(kind: str, key: str) -> str:
    """A runs-table column's id as MLflow's UI writes it: ``<kind>.`<key>```."""
    return f"{kind}.`{key}`"


def runs_view(ks: Iterable[int]) -> str:
    """The view's state (the tag's value): its columns for a run measured at ``ks``, in order
    (the metrics by K, not MLflow's alphabetical ``_at_1``, ``_at_10``, ``_at_3``), each metric
    column wide enough for its name.

    Examples
    --------
    >>> state = json.loads(runs_view([5, 1]))
    >>> state["selectedColumns"][:3]
    ['attributes.`Source`', 'attributes.`Dataset`', 'params.`retriever.name`']
    >>> state["selectedColumns"][-3:]
    ['metrics.`arecall_post_at_5`', 'metrics.`arecall_pre_at_5`', 'metrics.`gap_at_5`']
    """
    columns = [_column("attributes", "Source"), _column("attributes", "Dataset")]
    columns += [_column("params", key) for key in PARAM_COLUMNS]
    columns += [
        _column("metrics", mlflow_key(name, k))
        for k in sorted({int(k) for k in ks})
        for name in HEADLINE_COLUMNS
    ]
    widths = {column: METRIC_WIDTH for column in columns if column.startswith("metrics.")}
    order = [*columns[:2], "duration", *columns[2:]]  # Duration's id is its field's name
    state = {"selectedColumns": columns, "columnOrder": order, "columnWidths": widths}
    return json.dumps(state, separators=(",", ":"))
