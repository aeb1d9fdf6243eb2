"""What ``arecall evaluate --mlflow`` logs: one run per evaluation of a user's TREC run.

Metrics are ``<measure>_at_<k>`` (and ``gap_ci_low_at_<k>`` etc.) plus the evaluation's counts;
the per-K table is an MLflow table (``summary.json``), the whole summary a JSON artifact
(``evaluation.json``), and a compared run's table ``comparison.json``. As every arecall run:
the experiment opens on MLflow's runs table, the Source column says ``arecall evaluate``, the
input files (the TREC run, its judgments and the ACL) are the run's datasets (name, content
digest, path), the report as printed is the description and the top-level ``evaluation.txt``,
and the run's times are the evaluation's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arecall.core.measures import mlflow_metrics
from arecall.tracking.ends import interruptible
from arecall.tracking.provenance import source_tags
from arecall.tracking.run import TrackedRun
from arecall.tracking.store import tracking_uri

__all__ = ["evaluation_metrics", "file_dataset", "log_evaluation"]


def file_dataset(path: str | Path, context: str) -> dict[str, str]:
    """An input file as an MLflow dataset: its name, content digest and path; ``context`` is
    its role (``run``, ``qrels``, ``acl``).

    Examples
    --------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "my.run"
    >>> _ = f.write_text("q1 Q0 d1 1 1.0 x\\n")
    >>> d = file_dataset(f, "run")
    >>> d["name"], len(d["digest"]), d["source_type"], d["context"]
    ('my.run', 12, 'local', 'run')
    """
    import json

    from arecall.io.digest import files_digest

    p = Path(path)
    return {
        "name": p.name,
        "digest": files_digest([(p.name, p)])[:12],
        "source_type": "local",
        "source": json.dumps({"uri": str(p.resolve())}),
        "context": context,
    }


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
    report: str | None = None,
    inputs: Mapping[str, str | Path] | None = None,
    times: tuple[int, int] | None = None,
) -> tuple[str, str]:
    """Log an ``arecall evaluate`` summary as one MLflow run; return (run id, tracking URI).

    Metrics are ``<measure>_at_<k>`` (and ``gap_ci_low_at_<k>`` etc.), the per-K table is an
    MLflow table (``summary.json``) and the whole summary a JSON artifact. The store is
    MLFLOW_TRACKING_URI, else ``sqlite:///mlflow.db`` in the working directory; the experiment
    is MLFLOW_EXPERIMENT_NAME, else ``arecall-evaluate``. ``report`` is the report as a table
    (the description and ``evaluation.txt``), ``inputs`` the input files by role (the run's
    datasets), ``times`` when the evaluation started and ended (epoch ms). A store that cannot
    be written is one `TrackingError` line (the report was already written).
    """
    uri = tracking_uri(Path.cwd())
    tags = {**source_tags("arecall evaluate"), "arecall.kind": "evaluate"}
    if report is not None:
        tags["mlflow.note.content"] = f"```text\n{report.rstrip()}\n```\n"
    run = TrackedRun(
        uri,
        os.environ.get("MLFLOW_EXPERIMENT_NAME") or "arecall-evaluate",
        run_name=f"evaluate {Path(params.get('run', 'run')).name}",
        tags=tags,
        params=params,
        start_time=times[0] if times else None,
    )

    def artifacts(client: Any, run_id: str) -> None:
        client.log_table(run_id, table, artifact_file="summary.json")
        client.log_dict(run_id, summary, "evaluation.json")
        if report is not None:
            client.log_text(run_id, report, "evaluation.txt")
        if comparison is not None:
            client.log_table(run_id, comparison, artifact_file="comparison.json")

    datasets = [file_dataset(path, role) for role, path in (inputs or {}).items() if path]
    with interruptible(), run:
        run.start()
        run_id = run.finish(
            evaluation_metrics(summary),
            artifacts=artifacts,
            inputs=datasets,
            end_time=times[1] if times else None,
        )
    assert run_id is not None  # on_error is "fail": a failure raised
    return run_id, uri
