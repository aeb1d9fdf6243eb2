"""What ``arecall evaluate --mlflow`` logs: one run per evaluation of a user's TREC run.

Metrics are ``<measure>_at_<k>`` (and ``gap_ci_low_at_<k>`` etc.) plus the evaluation's counts;
the per-K table is an MLflow table (``summary.json``), the whole summary a JSON artifact
(``evaluation.json``), and a compared run's table ``comparison.json``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arecall.core.measures import mlflow_metrics
from arecall.tracking.ends import interruptible
from arecall.tracking.run import TrackedRun
from arecall.tracking.store import tracking_uri

__all__ = ["evaluation_metrics", "log_evaluation"]


def evaluation_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """An ``evaluate`` summary as MLflow metrics: its counts, then every per-K value."""
    flat: dict[str, float] = {}
    for key in (
        "queries",
        "queries_without_relevant",
        "queries_missing_from_run",
        "run_queries_not_judged",
        "pairs",
        "pairs_without_authorized_relevant",
    ):
        if key in summary:
            flat[key] = float(summary[key])
    keys = dict.fromkeys(key for row in summary["k"].values() for key in row)
    keys.pop("significance", None)
    flat.update(mlflow_metrics(summary["k"], keys))
    return flat


def log_evaluation(
    summary: dict[str, Any],
    table: Any,
    *,
    params: Mapping[str, str],
    comparison: Any = None,
) -> tuple[str, str]:
    """Log an ``arecall evaluate`` summary as one MLflow run; return (run id, tracking URI).

    Metrics are ``<measure>_at_<k>`` (and ``gap_ci_low_at_<k>`` etc.), the per-K table is an
    MLflow table (``summary.json``) and the whole summary a JSON artifact. The store is
    MLFLOW_TRACKING_URI, else ``sqlite:///mlflow.db`` in the working directory; the experiment
    is MLFLOW_EXPERIMENT_NAME, else ``arecall-evaluate``. A store that cannot be written is one
    `TrackingError` line (the report was already written).
    """
    uri = tracking_uri(Path.cwd())
    run = TrackedRun(
        uri,
        os.environ.get("MLFLOW_EXPERIMENT_NAME") or "arecall-evaluate",
        run_name=f"evaluate {Path(params.get('run', 'run')).name}",
        tags={"arecall.entry": "arecall evaluate"},
        params=params,
    )

    def artifacts(client: Any, run_id: str) -> None:
        client.log_table(run_id, table, artifact_file="summary.json")
        client.log_dict(run_id, summary, "evaluation.json")
        if comparison is not None:
            client.log_table(run_id, comparison, artifact_file="comparison.json")

    with interruptible(), run:
        run.start()
        run_id = run.finish(evaluation_metrics(summary), artifacts=artifacts)
    assert run_id is not None  # on_error is "fail": a failure raised
    return run_id, uri
