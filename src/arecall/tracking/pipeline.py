"""What a pipeline run logs: its config, its Authorized-Recall metrics, proof, tables and reports.

One run per pipeline execution, whichever entry point ran it (``arecall run`` and its sweeps'
points, the DVC ``track`` stage, ``arecall log``), with everything a comparison needs: the
flattened config as params; every metric per K and placement, both as ``arecall_pre_at_5``-style
names and as ``arecall_pre`` stepped by K, so the UI draws the curve; the proof's claims; the
tables as MLflow tables (`arecall.core.tables`) and as Markdown; the vector experiment's table
and metrics (`arecall.tracking.vector`); and the report files under ``reports/``.

The run is defined by `pipeline_run` (tags, params) and finished by `finish_pipeline_run` from
the report files alone, so the tracker process (`arecall.tracking.tracker`) logs exactly what a
run in-process would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from arecall.core.measures import PIPELINE, Kind, mlflow_metrics, per_k_keys
from arecall.core.tables import main_table, restricted_table
from arecall.tracking.ends import interruptible
from arecall.tracking.provenance import provenance
from arecall.tracking.run import TrackedRun, flatten, upload_bar
from arecall.tracking.store import open_store, tracking_uri
from arecall.tracking.sweep import PARENT_ENV
from arecall.tracking.vector import TABLE as VECTOR_TABLE
from arecall.tracking.vector import cache_tag, read_vector_table, vector_metrics

__all__ = [
    "METRIC_KEYS",
    "experiment_name",
    "finish_pipeline_run",
    "log_run",
    "logged_runs",
    "pipeline_metrics",
    "pipeline_run",
    "publish_artifacts",
    "reports_digest",
    "staged_artifacts",
]

#: Per-K means logged as MLflow metrics (counts are logged apart).
METRIC_KEYS = per_k_keys({n: m for n, m in PIPELINE.items() if m.kind != Kind.COUNT})


def pipeline_metrics(
    metrics: Mapping[str, Any],
) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """A ``metrics.json`` as MLflow metrics: flat ``<measure>_at_<k>`` names, and the per-K means
    again as (name, value, K) steps, so the UI draws each curve."""
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


def pipeline_run(
    cfg: Mapping[str, Any],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    results: tuple[str, str] | None = None,
) -> TrackedRun:
    """The `TrackedRun` of one pipeline execution (not yet started): its tags and params.

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> run = pipeline_run(default_config(), root="/repo")
    >>> run.tags["arecall.corpus"], run.params["retriever.name"], run.on_error
    ('discovery', 'tfidf', 'fail')
    """
    run_tags = {
        **provenance(cfg, root),
        "arecall.corpus": str(cfg["corpus"]["name"]),
        "arecall.retriever": str((cfg.get("retriever") or {}).get("name", "")),
        "arecall.index": str((cfg.get("index") or {}).get("name", "none")),
        "arecall.profiles": str(cfg["profiles"]["name"]),
        **(tags or {}),
    }
    parent = parent_run_id or os.environ.get(PARENT_ENV)
    if parent:
        run_tags["mlflow.parentRunId"] = parent
    tracking = cfg.get("tracking") or {}
    return TrackedRun(
        tracking_uri(root),
        experiment_name(cfg),
        run_name=os.environ.get("DVC_EXP_NAME") or run_name,
        tags=run_tags,
        params=flatten({k: v for k, v in cfg.items() if k != "hydra"}),
        results=results,
        on_error=str(tracking.get("on_error", "fail")),
    )


def finish_pipeline_run(
    run: TrackedRun,
    reports: Mapping[str, Path],
    *,
    vector: Any = None,
    rank_info: Path | None = None,
    progress: Callable[[str], None] | None = None,
    end: bool = True,
) -> str | None:
    """Log a pipeline's reports (metrics, proof, tables, vector table) and end ``run`` FINISHED.

    The upload draws a tqdm bar of its `UPLOAD_STEPS` on a terminal, or tells ``progress``
    (the tracker process tells the run's process, which draws it). With ``end=False`` the run
    stays RUNNING for its owner to end (`TrackedRun.upload`: the tracker process waits for the
    run's process to say how it ended); a store failure is then left to `report_failure`.

    ``rank_info`` (the rank stage's ``rank.json``) adds how the ranking was stored as
    ``arecall.rank.<field>`` tags, so a run shows which representation its depth chose.
    """

    def read(name: str) -> Any:
        path = reports.get(name)
        return json.loads(Path(path).read_text(encoding="utf-8")) if path else None

    metrics, proof = read("metrics"), read("proof")
    flat, stepped = pipeline_metrics(metrics) if metrics else ({}, [])
    claims = proof["claims"] if proof else []
    if proof:
        flat["proof_claims_passed"] = float(sum(c["passed"] for c in claims))
        flat["proof_claims_failed"] = float(sum(not c["passed"] for c in claims))
    vector = read_vector_table(reports, vector)
    keys: dict[str, str] = {}
    if vector is not None:
        vector_flat, keys = vector_metrics(vector)
        flat.update(vector_flat)

    tables: dict[str, Any] = {}
    if metrics:
        tables["tables/arecall_at_k.json"] = main_table(metrics)
        tables["tables/arecall_at_k_nonempty.json"] = restricted_table(metrics)
    if proof:
        tables["tables/proof.json"] = _proof_frame(claims)
    if vector is not None:
        tables[VECTOR_TABLE] = vector
    documents: dict[str, Any] = {}
    if proof:
        documents["proof/proof.json"] = proof
    if keys:
        documents["keys.json"] = keys
    tags = {"arecall.reports_digest": reports_digest(reports)}
    if tables:  # what MlflowClient.log_table records, so the UI lists them as tables
        tags["mlflow.loggedArtifacts"] = json.dumps([{"path": p, "type": "table"} for p in tables])
    if rank_info is not None and Path(rank_info).is_file():
        stored = json.loads(Path(rank_info).read_text(encoding="utf-8")).get("representation", {})
        tags.update({f"arecall.rank.{field}": str(value) for field, value in stored.items()})
    cache = cache_tag(vector)
    if cache:
        tags["arecall.vectors_cache"] = cache

    def artifacts(client: Any, run_id: str) -> None:
        staged_artifacts(client, run_id, tables, documents, reports)

    if not end:
        return run.upload(flat, stepped, artifacts, tags=tags, progress=progress)
    if progress is not None:
        return run.finish(flat, stepped, artifacts, tags=tags, progress=progress)
    with upload_bar() as bar:
        return run.finish(flat, stepped, artifacts, tags=tags, progress=lambda _: bar.update(1))


def reports_digest(reports: Mapping[str, Path]) -> str:
    """SHA-256 of a run's report files (names and bytes): the same results, the same digest.

    Logged as the tag ``arecall.reports_digest``, so ``arecall log`` can tell results already in
    the store from results to log.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "metrics.json").write_text("{}")
    >>> reports_digest({"metrics": d / "metrics.json"}) == reports_digest({"m": d / "metrics.json"})
    True
    """
    from arecall.io.digest import files_digest

    paths = sorted(Path(p) for p in reports.values())
    return files_digest((path.name, path) for path in paths if path.is_file())


def logged_runs(uri: str, experiment: str, digest: str) -> list[str]:
    """Ids of the FINISHED runs of ``experiment`` whose reports have ``digest``."""
    with open_store(uri, orphans=False) as client:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return []
        runs = client.search_runs(
            [found.experiment_id],
            filter_string=(
                f"tags.`arecall.reports_digest` = '{digest}' and attributes.status = 'FINISHED'"
            ),
        )
        return [str(r.info.run_id) for r in runs]


def staged_artifacts(
    client: Any,
    run_id: str,
    tables: Mapping[str, Any],
    documents: Mapping[str, Any],
    reports: Mapping[str, Path],
) -> None:
    """Write every artifact into one staging directory, then publish it whole or not at all.

    MLflow's ``log_table`` / ``log_dict`` are a store round trip each (a ``log_table`` three:
    it reads the run back to extend a tag); the files are the same: tables as pandas'
    ``orient="split"`` JSON (what ``log_table`` writes and ``load_table`` reads), documents as
    indented JSON, ``tables.md`` under ``tables/`` and the report files under ``reports/``.
    They go to the run's artifact repository file by file (`publish_artifacts`), not with
    ``log_artifacts``, whose copy into a local store leaves a truncated file when the disk
    fills.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arecall-artifacts-") as tmp:
        root = Path(tmp)
        for name, frame in tables.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            frame.to_json(root / name, orient="split", index=False, date_format="iso")
        for name, data in documents.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        (root / "reports").mkdir()
        if reports.get("tables"):
            (root / "tables").mkdir(exist_ok=True)
            shutil.copyfile(reports["tables"], root / "tables" / "tables.md")
        for path in reports.values():
            if Path(path).is_file():
                shutil.copyfile(path, root / "reports" / Path(path).name)
        publish_artifacts(client, run_id, root)


def publish_artifacts(client: Any, run_id: str, root: Path) -> None:
    """Log every file under ``root`` as the run's artifacts: all of them whole, or none.

    Each file goes through the artifact repository's ``log_artifact``, which MLflow writes to
    a temporary file and renames into place in a local store, so no reader ever sees a
    truncated file. If any fails (a full disk, a lost server), the artifacts this call
    published are deleted again and the error is raised: the run then ends FAILED and says
    where the results are, and ``arecall log`` publishes them later, whole.
    """
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    repo = get_artifact_repository(client.get_run(run_id).info.artifact_uri)
    tops = sorted(p.name for p in root.iterdir())
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            where = path.parent.relative_to(root).as_posix()
            repo.log_artifact(str(path), None if where == "." else where)
    except BaseException:
        for top in tops:  # best effort: the error that stopped the upload is the one to tell
            with suppress(Exception):
                repo.delete_artifacts(top)
        raise


def log_run(
    cfg: Mapping[str, Any],
    reports: Mapping[str, Path],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    vector: Any = None,
    results: tuple[str, str] | None = None,
    rank_info: Path | None = None,
) -> str | None:
    """Log one finished pipeline execution to MLflow and return its run id.

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
        `arecall.tracking.sweep.start_sweep` for the jobs of an ``arecall run -m`` sweep).
    results : (where, log argument), optional
        Named by the one-line message if the store cannot be written.
    rank_info : path, optional
        The rank stage's ``rank.json``: logged as ``arecall.rank.*`` tags when it exists.

    Returns
    -------
    str or None
        The run id; None when the store failed and ``tracking.on_error`` is ``warn``.

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
    run = pipeline_run(
        cfg, root=root, run_name=run_name, tags=tags, parent_run_id=parent_run_id, results=results
    )
    with interruptible(), run:
        run.start()
        return finish_pipeline_run(run, reports, vector=vector, rank_info=rank_info)


def experiment_name(cfg: Mapping[str, Any]) -> str:
    """The MLflow experiment a config's runs go to (``tracking.experiment``, else ``arecall``).

    Examples
    --------
    >>> experiment_name({"tracking": {}})
    'arecall'
    """
    return str((cfg.get("tracking") or {}).get("experiment") or "arecall")


def _proof_frame(claims: list[dict[str, Any]]) -> Any:
    import pandas as pd

    columns = ("claim", "statement", "kind", "examples", "passed", "counterexample")
    return pd.DataFrame(
        [{c: (claim[c] if claim[c] is not None else "") for c in columns} for claim in claims]
    )
