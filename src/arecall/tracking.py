"""MLflow tracking: one run per pipeline execution, with everything a comparison needs.

A run carries the flattened config as params; every metric per K and placement (both as
``arecall_pre_at_5``-style names and as ``arecall_pre`` stepped by K, so the UI draws the curve);
the tables as MLflow tables and as Markdown; the proof results; and the report files. The store
is MLFLOW_TRACKING_URI when set, else the embedded ``sqlite:///mlflow.db`` in the working
directory. Telemetry is off unless the environment turns it on. mlflow is imported only here, so
stages that do not track do not pay for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arecall.config import flatten
from arecall.report import main_table, restricted_table

__all__ = ["METRIC_KEYS", "log_run", "tracking_uri"]

METRIC_KEYS = (
    "recall",
    "precision",
    "ndcg",
    "unusable",
    "arecall_post",
    "arecall_pre",
    "gap",
    "arecall_post_nonempty",
    "arecall_pre_nonempty",
    "gap_nonempty",
    "returned_post",
    "returned_pre",
)


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
    stepped = []
    for k, row in metrics["k"].items():
        for key in METRIC_KEYS:
            if row.get(key) is not None:
                flat[f"{key}_at_{k}"] = float(row[key])
                stepped.append((key, float(row[key]), int(k)))
        flat[f"n_nonempty_at_{k}"] = float(row["n_nonempty"])
        for key, sig in (row.get("significance") or {}).items():
            flat[f"{key}_ci_low_at_{k}"] = float(sig["low"])
            flat[f"{key}_ci_high_at_{k}"] = float(sig["high"])
            flat[f"{key}_p_value_at_{k}"] = float(sig["p_value"])
    return flat, stepped


def log_run(
    cfg: Mapping[str, Any],
    reports: Mapping[str, Path],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
) -> str:
    """Log one pipeline execution to MLflow and return its run id.

    Parameters
    ----------
    cfg : mapping
        The composed configuration (logged flattened as params).
    reports : mapping of name → path
        Must include ``metrics``, ``proof`` and ``tables``; every existing file is logged as an
        artifact under ``reports/``.
    root : path
        Where the default sqlite store lives.

    Examples
    --------
    >>> from arecall.pipeline import Layout, run_all  # doctest: +SKIP
    >>> log_run(cfg, {"metrics": ..., "proof": ..., "tables": ...})  # doctest: +SKIP
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    metrics = json.loads(Path(reports["metrics"]).read_text(encoding="utf-8"))
    proof = json.loads(Path(reports["proof"]).read_text(encoding="utf-8"))
    tables_md = Path(reports["tables"]).read_text(encoding="utf-8")
    flat, stepped = _metrics(metrics)
    claims = proof["claims"]
    flat["proof_claims_passed"] = float(sum(c["passed"] for c in claims))
    flat["proof_claims_failed"] = float(sum(not c["passed"] for c in claims))

    mlflow.set_tracking_uri(tracking_uri(root))
    mlflow.set_experiment(str(cfg.get("tracking", {}).get("experiment") or "arecall"))
    run_tags = {
        "arecall.corpus": str(cfg["corpus"]["name"]),
        "arecall.retriever": str(cfg["retriever"]["name"]),
        "arecall.profiles": str(cfg["profiles"]["name"]),
        **(tags or {}),
    }
    if parent_run_id:
        run_tags["mlflow.parentRunId"] = parent_run_id
    with mlflow.start_run(run_name=run_name, tags=run_tags) as run:
        mlflow.log_params(flatten({k: v for k, v in cfg.items() if k != "hydra"}))
        mlflow.log_metrics(flat)
        for key, value, step in stepped:
            mlflow.log_metric(key, value, step=step)
        mlflow.log_table(main_table(metrics), artifact_file="tables/arecall_at_k.json")
        mlflow.log_table(
            restricted_table(metrics), artifact_file="tables/arecall_at_k_nonempty.json"
        )
        mlflow.log_table(_proof_frame(claims), artifact_file="tables/proof.json")
        mlflow.log_text(tables_md, "tables/tables.md")
        mlflow.log_dict(proof, "proof/proof.json")
        for path in reports.values():
            if Path(path).is_file():
                mlflow.log_artifact(str(path), artifact_path="reports")
        return str(run.info.run_id)


def _proof_frame(claims: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "claim": c["claim"],
                "statement": c["statement"],
                "kind": c["kind"],
                "examples": c["examples"],
                "passed": c["passed"],
                "counterexample": c["counterexample"] or "",
            }
            for c in claims
        ]
    )
