"""MLflow tracking: one run per pipeline execution, with everything a comparison needs.

A run carries the flattened config as params; every metric per K and placement (both as
``arecall_pre_at_5``-style names and as ``arecall_pre`` stepped by K, so the UI draws the curve);
the tables as MLflow tables and as Markdown; the proof results; and the report files. The store
is MLFLOW_TRACKING_URI when set, else the embedded ``sqlite:///mlflow.db`` in the working
directory. Telemetry is off unless the environment turns it on. mlflow is imported only here, so
stages that do not track do not pay for it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from arecall.core.measures import PIPELINE, VECTOR, Kind, mlflow_metrics, per_k_keys
from arecall.pipeline.config import flatten
from arecall.pipeline.report import main_table, restricted_table

__all__ = ["METRIC_KEYS", "PARENT_ENV", "SweepCallback", "log_run", "store_lock", "tracking_uri"]

PARENT_ENV = "ARECALL_PARENT_RUN_ID"

#: Per-K means logged as MLflow metrics (counts are logged apart).
METRIC_KEYS = per_k_keys({n: m for n, m in PIPELINE.items() if m.kind != Kind.COUNT})


def tracking_uri(root: str | Path = ".") -> str:
    """MLFLOW_TRACKING_URI, or the embedded sqlite store ``<root>/mlflow.db``.

    Examples
    --------
    >>> import os; os.environ.pop("MLFLOW_TRACKING_URI", None) and None
    >>> tracking_uri("/repo")
    'sqlite:////repo/mlflow.db'
    """
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve()}/mlflow.db"


def _metrics(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    flat: dict[str, float] = {"mrr": metrics["mrr"]}
    if metrics["total_relevant"]:
        flat["unauthorized_relevant_share"] = (
            metrics["unauthorized_relevant"] / metrics["total_relevant"]
        )
    flat.update(mlflow_metrics(metrics["k"], (*METRIC_KEYS, "n_nonempty")))
    stepped = [
        (key, float(row[key]), int(k))
        for k, row in metrics["k"].items()
        for key in METRIC_KEYS
        if row.get(key) is not None
    ]
    return flat, stepped


def log_run(
    cfg: Mapping[str, Any],
    reports: Mapping[str, Path],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    vector: Any = None,
) -> str:
    """Log one pipeline execution to MLflow and return its run id.

    Parameters
    ----------
    cfg : mapping
        The composed configuration (logged flattened as params).
    reports : mapping of name → path
        Any of ``metrics``, ``proof``, ``tables`` (the text pipeline) and ``vector_csv`` (the
        vector-index table); every file is also logged as an artifact under ``reports/``.
    vector : DataFrame, optional
        The vector-index table with its wall-clock ``qps`` column (default: read
        ``vector_csv``, which has no timings).
    root : path
        Where the default sqlite store lives.
    parent_run_id : str, optional
        Nest this run under a sweep's parent run (default: $ARECALL_PARENT_RUN_ID, set by
        `SweepCallback` for the jobs of an ``arecall run -m`` sweep).

    Examples
    --------
    >>> import os, tempfile
    >>> from arecall.pipeline.config import default_config
    >>> from arecall.pipeline.run import Layout, run_all
    >>> where = tempfile.mkdtemp()
    >>> cfg = default_config(["evaluation.proof.max_examples=5"])
    >>> _ = run_all(cfg, Layout.run(where))
    >>> os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{where}/mlflow.db"
    >>> run_id = log_run(cfg, Layout.run(where).report_files())
    >>> del os.environ["MLFLOW_TRACKING_URI"]
    >>> len(run_id)
    32
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    def read(name: str) -> Any:
        path = reports.get(name)
        return json.loads(Path(path).read_text(encoding="utf-8")) if path else None

    metrics, proof = read("metrics"), read("proof")
    flat, stepped = _metrics(metrics) if metrics else ({}, [])
    claims = proof["claims"] if proof else []
    if proof:
        flat["proof_claims_passed"] = float(sum(c["passed"] for c in claims))
        flat["proof_claims_failed"] = float(sum(not c["passed"] for c in claims))
    if vector is None and reports.get("vector_csv"):
        import pandas as pd

        vector = pd.read_csv(reports["vector_csv"])
    if vector is not None:
        flat.update(_vector_metrics(vector))
    run_tags = {
        "arecall.corpus": str(cfg["corpus"]["name"]),
        "arecall.retriever": str((cfg.get("retriever") or {}).get("name", "")),
        "arecall.index": str((cfg.get("index") or {}).get("name", "none")),
        "arecall.profiles": str(cfg["profiles"]["name"]),
        **(tags or {}),
    }
    parent = parent_run_id or os.environ.get(PARENT_ENV)
    if parent:
        run_tags["mlflow.parentRunId"] = parent
    uri = tracking_uri(root)
    with store_lock(uri):
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(_experiment(cfg))
        with mlflow.start_run(run_name=run_name, tags=run_tags) as run:
            mlflow.log_params(flatten({k: v for k, v in cfg.items() if k != "hydra"}))
            mlflow.log_metrics(flat)
            for key, value, step in stepped:
                mlflow.log_metric(key, value, step=step)
            if metrics:
                mlflow.log_table(main_table(metrics), artifact_file="tables/arecall_at_k.json")
                mlflow.log_table(
                    restricted_table(metrics), artifact_file="tables/arecall_at_k_nonempty.json"
                )
            if proof:
                mlflow.log_table(_proof_frame(claims), artifact_file="tables/proof.json")
                mlflow.log_dict(proof, "proof/proof.json")
            if vector is not None:
                mlflow.log_table(vector, artifact_file="tables/vector_search.json")
            if reports.get("tables"):
                mlflow.log_text(
                    Path(reports["tables"]).read_text(encoding="utf-8"), "tables/tables.md"
                )
            for path in reports.values():
                if Path(path).is_file():
                    mlflow.log_artifact(str(path), artifact_path="reports")
            return str(run.info.run_id)


def _vector_metrics(table: Any) -> dict[str, float]:
    """``<mode>_<column>_s<selectivity %>`` (text corpora: ``…_<principal>``) for MLflow."""
    out: dict[str, float] = {}
    for row in table.to_dict("records"):
        where = (
            f"p_{row['principal']}"
            if "principal" in row
            else f"s{float(row['selectivity']) * 100:g}pct"
        )
        for column in (*VECTOR, "qps"):
            if column in row:
                name = f"vector_{row['mode']}_{column}_{where}"
                out["".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in name)] = float(
                    row[column]
                )
    return out


def _experiment(cfg: Mapping[str, Any]) -> str:
    return str((cfg.get("tracking") or {}).get("experiment") or "arecall")


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise writers of one embedded sqlite store across processes (a no-op otherwise).

    Parallel sweep jobs (Hydra's joblib launcher) share ``mlflow.db``; sqlite allows one writer
    at a time and MLflow does not retry a locked database, so a run could be lost. An exclusive
    ``flock`` on ``<db>.lock`` makes them take turns. A tracking server needs no lock.
    """
    if not uri.startswith("sqlite:///"):
        yield
        return
    lock_path = Path(uri.removeprefix("sqlite:///") + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _proof_frame(claims: list[dict[str, Any]]) -> Any:
    import pandas as pd

    columns = ("claim", "statement", "kind", "examples", "passed", "counterexample")
    return pd.DataFrame(
        [{c: (claim[c] if claim[c] is not None else "") for c in columns} for claim in claims]
    )


class SweepCallback(Callback):
    """Hydra callback: an ``arecall run -m`` sweep gets one MLflow parent run.

    Started before the launcher spawns any job, so every job (in-process or joblib workers,
    which inherit the environment) finds its id in $ARECALL_PARENT_RUN_ID and nests under it;
    finished when the sweep ends. The sweep's overrides are the parent's params.
    """

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        if not (config.get("tracking") or {}).get("enabled", True):
            return
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        import mlflow

        overrides = [str(o) for o in config.hydra.overrides.task]
        uri = tracking_uri(".")
        with store_lock(uri):
            client = mlflow.MlflowClient(tracking_uri=uri)
            mlflow.set_tracking_uri(uri)
            experiment = mlflow.set_experiment(_experiment(config))
            run = client.create_run(
                experiment.experiment_id,
                run_name="sweep " + " ".join(overrides),
                tags={"arecall.entry": "arecall run -m", "arecall.sweep": "parent"},
            )
            for i, override in enumerate(overrides):
                client.log_param(run.info.run_id, f"sweep.override.{i}", override)
        os.environ[PARENT_ENV] = run.info.run_id

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        run_id = os.environ.pop(PARENT_ENV, None)
        if run_id is None:
            return
        import mlflow

        uri = tracking_uri(".")
        with store_lock(uri):
            mlflow.MlflowClient(tracking_uri=uri).set_terminated(run_id, "FINISHED")
