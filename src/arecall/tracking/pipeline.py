"""What a pipeline run logs: its headline, the corpus it measured, its tables and reports.

One run per pipeline execution, whichever entry point ran it (``arecall run`` and its sweeps'
points, the DVC ``track`` stage, ``arecall log``), written to read like an experiment tracker's:

- **metrics**: the Authorized-Recall headline only — ``headline.json``'s numbers per K
  (``arecall_pre_at_5``, ``gap_nonempty_ci_low_at_5``…, `headline_metrics`) and the curves
  ``arecall_post``, ``arecall_pre`` and ``recall`` stepped by K, so the UI draws them. The full
  detail (every measure, count and p-value) is ``reports/metrics.json``;
- **params**: the text pipeline's config, flattened (the vector experiment's are its own run's);
- **the corpus** as an MLflow dataset input (`corpus_dataset`: name, content digest, source),
  so the runs table's Dataset column names it and runs filter by it (``dataset.name``);
- **the description** (``mlflow.note.content``): the run's tables in Markdown, shown first on
  the run page;
- **times**: the pipeline's own (its first stage's start, its last stage's end), so Duration is
  what the user waited for the results, not how long logging took;
- **artifacts**: ``tables.md`` and ``arecall_at_k.png`` at the top (MLflow's Compare shows top-
  level artifacts side by side), the tables as MLflow tables, the proof, the report files under
  ``reports/``, and ``diagnostics.json`` (how the rank stage stored the ranking);
- **tags**: where the run came from (`arecall.tracking.provenance`) and what the store needs.

The vector experiment, when the config asks for it (``vector_search.enabled``), is a run of its
own nested in this one (`arecall.tracking.vector`). The run is defined by `pipeline_run` (tags,
params) and finished by `finish_pipeline_run` from the report files alone, so the tracker
process (`arecall.tracking.tracker`) logs exactly what a run in-process would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arecall.core.tables import headline, main_table, restricted_table
from arecall.tracking.ends import interruptible
from arecall.tracking.provenance import provenance, source_tags
from arecall.tracking.run import TrackedRun, flatten, staged_artifacts, upload_bar
from arecall.tracking.store import open_store, tracking_uri
from arecall.tracking.sweep import PARENT_ENV
from arecall.tracking.vector import VECTOR_REPORTS, log_vector_run, read_vector_table
from arecall.tracking.view import VIEW_TAG, runs_view

__all__ = [
    "CURVES",
    "HEADLINE_CI",
    "corpus_dataset",
    "experiment_name",
    "finish_pipeline_run",
    "headline_from_metrics",
    "headline_metrics",
    "log_nested_runs",
    "log_run",
    "logged_runs",
    "pipeline_run",
    "reports_digest",
]

#: The headline's curves, logged again stepped by K (the UI draws them): what the plot shows.
CURVES = ("arecall_post", "arecall_pre", "recall")
#: headline.json's confidence-interval keys → their MLflow names, as `mlflow_metrics` names the
#: CI of every other per-K value (``<name>_ci_low``).
HEADLINE_CI = {
    "gap_nonempty_low": "gap_nonempty_ci_low",
    "gap_nonempty_high": "gap_nonempty_ci_high",
}


def headline_metrics(
    headline: Mapping[str, Any],
) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """A ``headline.json`` as MLflow metrics: ``<key>_at_<k>``, and `CURVES` stepped by K.

    Examples
    --------
    >>> row = {"arecall_pre": 0.9, "gap_nonempty_low": 0.1}
    >>> flat, stepped = headline_metrics({"k": {"5": row}})
    >>> flat, stepped
    ({'arecall_pre_at_5': 0.9, 'gap_nonempty_ci_low_at_5': 0.1}, [('arecall_pre', 0.9, 5)])
    """
    from arecall.core.measures import mlflow_key

    flat: dict[str, float] = {}
    for k, row in headline["k"].items():
        for key, value in row.items():
            if value is not None:
                flat[mlflow_key(HEADLINE_CI.get(key, key), k)] = float(value)
    stepped = [
        (key, float(row[key]), int(k))
        for k, row in headline["k"].items()
        for key in CURVES
        if row.get(key) is not None
    ]
    return flat, stepped


def headline_from_metrics(metrics: Mapping[str, float]) -> dict[str, Any]:
    """A run's headline back from its MLflow metrics: ``headline.json``'s shape and keys.

    Examples
    --------
    >>> headline_from_metrics({"arecall_pre_at_5": 0.9, "gap_nonempty_ci_low_at_5": 0.1,
    ...                        "arecall_pre": 0.9, "mrr": 1.0})
    {'k': {'5': {'arecall_pre': 0.9, 'gap_nonempty_low': 0.1}}}
    """
    import re

    back = {mlflow_name: key for key, mlflow_name in HEADLINE_CI.items()}
    per_k: dict[int, dict[str, float]] = {}
    for name, value in metrics.items():
        match = re.fullmatch(r"(?P<key>\w+?)_at_(?P<k>\d+)", name)
        if match is None:
            continue
        key = back.get(match["key"], match["key"])
        per_k.setdefault(int(match["k"]), {})[key] = float(value)
    return {"k": {str(k): per_k[k] for k in sorted(per_k)}}


def corpus_dataset(cfg: Mapping[str, Any], corpus_dir: str | Path) -> dict[str, str] | None:
    """The corpus a run measured, as an MLflow dataset: name, content digest, source, profile.

    The digest is of the generated collection (documents, queries, judgments and the ACL the
    authorization model applied): two runs with the same digest measured the same data. The
    name is the corpus option, with its directory for one read from disk
    (``seed_json:my_corpus``). None when the collection was not written.

    Examples
    --------
    >>> corpus_dataset({"corpus": {"name": "discovery"}}, "/nonexistent") is None
    True
    """
    from arecall.io.digest import files_digest

    files = sorted(Path(corpus_dir).glob("*.parquet"))
    if not files:
        return None
    corpus = dict(cfg["corpus"])
    where = corpus.get("path")
    name = f"{corpus['name']}:{Path(str(where)).name}" if where else str(corpus["name"])
    source: dict[str, Any]
    if where:
        source_type, source = "local", {"uri": str(Path(str(where)).resolve())}
    else:
        source_type = "code"
        source = {"generator": f"arecall.data.sources.{corpus['name']}", "config": corpus}
    profile = {"profiles": (cfg.get("profiles") or {}).get("name"), **_sizes(files)}
    return {
        "name": name,
        "digest": files_digest((f.name, f) for f in files)[:12],
        "source_type": source_type,
        "source": json.dumps(source, default=str, sort_keys=True),
        "profile": json.dumps(profile),
        "context": "evaluation",
    }


def _sizes(files: Sequence[Path]) -> dict[str, int]:
    """Documents, queries and principals of a collection, from its Parquet footers."""
    import pyarrow.parquet as pq

    by_name = {f.stem: f for f in files}
    return {
        table: pq.read_metadata(by_name[table]).num_rows
        for table in ("documents", "queries", "principals")
        if table in by_name
    }


def pipeline_run(
    cfg: Mapping[str, Any],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    entry: str = "arecall run",
    command: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    results: tuple[str, str] | None = None,
    start_time: int | None = None,
) -> TrackedRun:
    """The `TrackedRun` of one pipeline execution (not yet started): its tags and params.

    ``entry`` is the entry point that ran it (``arecall run``, ``arecall run -m``, ``dvc exp
    run --queue``…) and ``command`` what the user typed (default: this process's command
    line); ``start_time`` when its first stage started (epoch ms).

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> params = default_config().params()  # the checked config's plain values
    >>> run = pipeline_run(params, root="/repo", entry="dvc repro", command="dvc repro")
    >>> run.tags["mlflow.source.name"], run.params["retriever.name"], run.on_error
    ('dvc repro', 'tfidf', 'fail')
    >>> any(key.startswith("vector_search.") for key in run.params)
    False
    """
    run_tags = {
        **provenance(cfg, root),
        **source_tags(entry, command),
        "arecall.kind": "pipeline",
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
        params=flatten({k: v for k, v in cfg.items() if k not in ("hydra", "vector_search")}),
        results=results,
        on_error=str(tracking.get("on_error", "fail")),
        start_time=start_time,
        experiment_tags={VIEW_TAG: runs_view((cfg.get("evaluation") or {}).get("ks") or [])},
    )


def finish_pipeline_run(
    run: TrackedRun,
    reports: Mapping[str, Path],
    *,
    config: Mapping[str, Any] | None = None,
    corpus: Path | None = None,
    vector: Any = None,
    rank_info: Path | None = None,
    end_time: int | None = None,
    vector_times: tuple[int, int] | None = None,
    progress: Callable[[str], None] | None = None,
    end: bool = True,
) -> str | None:
    """Log a pipeline's reports and end ``run`` FINISHED; then its vector run, if asked for.

    ``config`` is the run's composed config (the corpus's dataset, whether the vector
    experiment is on, its section); ``corpus`` the generated collection's directory;
    ``rank_info`` the rank stage's ``rank.json`` (into ``diagnostics.json``); ``end_time``
    when the last stage ended (epoch ms). The vector experiment's run (`log_vector_run`) is
    nested in this one, timed by ``vector_times``; its id is ``run.nested["vector_search"]``.

    The upload draws a tqdm bar of its `UPLOAD_STEPS` on a terminal, or tells ``progress``
    (the tracker process tells the run's process, which draws it). With ``end=False`` the run
    stays RUNNING for its owner to end (`TrackedRun.upload`: the tracker process waits for the
    run's process to say how it ended, then logs the nested runs, `log_nested_runs`); a store
    failure is then left to `report_failure`.
    """

    def read(name: str) -> Any:
        path = reports.get(name)
        return json.loads(Path(path).read_text(encoding="utf-8")) if path else None

    metrics, proof, line = read("metrics"), read("proof"), read("headline")
    if line is None and metrics:  # results from before headline.json: the same numbers
        line = headline(metrics)
    flat, stepped = headline_metrics(line) if line else ({}, [])

    tables: dict[str, Any] = {}
    if metrics:
        tables["tables/arecall_at_k.json"] = main_table(metrics)
        tables["tables/arecall_at_k_nonempty.json"] = restricted_table(metrics)
    if proof:
        tables["tables/proof.json"] = _proof_frame(proof["claims"])
    documents: dict[str, Any] = {}
    if proof:
        documents["proof/proof.json"] = proof
    if rank_info is not None and Path(rank_info).is_file():
        stored = json.loads(Path(rank_info).read_text(encoding="utf-8"))
        documents["diagnostics.json"] = {"rank": stored.get("representation", {})}
    own = {name: path for name, path in reports.items() if name not in VECTOR_REPORTS}
    tags = {"arecall.reports_digest": reports_digest(reports)}
    if tables:  # what MlflowClient.log_table records, so the UI lists them as tables
        tags["mlflow.loggedArtifacts"] = json.dumps([{"path": p, "type": "table"} for p in tables])
    if own.get("tables"):
        tags["mlflow.note.content"] = Path(own["tables"]).read_text(encoding="utf-8")
    top = {Path(own[n]).name: Path(own[n]) for n in ("tables", "plot") if own.get(n)}
    dataset = corpus_dataset(config, corpus) if config and corpus is not None else None

    def artifacts(client: Any, run_id: str) -> None:
        staged_artifacts(client, run_id, tables, documents, own, top)

    inputs = [dataset] if dataset else []

    def finish(step: Callable[[str], None]) -> str | None:
        run_id = run.finish(
            flat, stepped, artifacts, tags=tags, progress=step, inputs=inputs, end_time=end_time
        )
        if run_id is not None:
            log_nested_runs(run, reports, config=config, vector=vector, times=vector_times)
        return run_id

    if not end:
        return run.upload(flat, stepped, artifacts, tags=tags, progress=progress, inputs=inputs)
    if progress is not None:
        return finish(progress)
    with upload_bar() as bar:
        return finish(lambda _: bar.update(1))


def log_nested_runs(
    run: TrackedRun,
    reports: Mapping[str, Path],
    *,
    config: Mapping[str, Any] | None,
    vector: Any = None,
    times: tuple[int, int] | None = None,
) -> None:
    """Log the runs nested in a finished pipeline run: the vector experiment's, when the
    config asks for it (``vector_search.enabled``); their ids go to ``run.nested``."""
    section = (config or {}).get("vector_search") or {}
    if run.run_id is None or not section.get("enabled"):
        return
    table = read_vector_table(reports, vector)
    if table is not None:
        run.nested["vector_search"] = log_vector_run(run, section, table, reports, times=times)


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


def logged_runs(
    uri: str, experiment: str, digest: str, *, dvc_experiment: str | None = None
) -> list[str]:
    """Ids of the FINISHED pipeline runs of ``experiment`` whose reports have ``digest``.

    With ``dvc_experiment``, only the runs of that DVC experiment (its name is their
    ``arecall.dvc_experiment`` tag).
    """
    with open_store(uri, orphans=False) as client:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return []
        where = f"tags.`arecall.reports_digest` = '{digest}' and attributes.status = 'FINISHED'"
        if dvc_experiment is not None:
            name = dvc_experiment.replace("'", "\\'")
            where += f" and tags.`arecall.dvc_experiment` = '{name}'"
        runs = client.search_runs([found.experiment_id], filter_string=where)
        return [str(r.info.run_id) for r in runs]


def log_run(
    cfg: Mapping[str, Any],
    reports: Mapping[str, Path],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    entry: str = "arecall run",
    command: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    vector: Any = None,
    results: tuple[str, str] | None = None,
    rank_info: Path | None = None,
    corpus: Path | None = None,
    times: tuple[int, int] | None = None,
    vector_times: tuple[int, int] | None = None,
    nested: dict[str, str | None] | None = None,
) -> str | None:
    """Log one finished pipeline execution to MLflow and return its run id.

    Parameters
    ----------
    cfg : mapping
        The composed configuration (the text pipeline's logged flattened as params).
    reports : mapping of name → path
        Any of `arecall.pipeline.layout.Layout.REPORTS` (``metrics``, ``headline``, ``tables``,
        ``vector_csv``…); the pipeline's files are logged under ``reports/``, the vector
        experiment's in its own nested run.
    entry, command : str
        The entry point that ran it and the command (`pipeline_run`).
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
        The rank stage's ``rank.json``: logged in ``diagnostics.json`` when it exists.
    corpus : path, optional
        The generated collection: logged as the run's dataset input.
    times, vector_times : (start, end) in epoch ms, optional
        When the pipeline's stages (and the vector experiment) ran: the runs' own times.
    nested : dict, optional
        Filled with the ids of the runs nested in this one, by name (``vector_search``).

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
    >>> run_id = log_run(cfg.params(), Layout.run(where).report_files())
    >>> del os.environ["MLFLOW_TRACKING_URI"]
    >>> len(run_id)
    32
    """
    run = pipeline_run(
        cfg,
        root=root,
        run_name=run_name,
        entry=entry,
        command=command,
        tags=tags,
        parent_run_id=parent_run_id,
        results=results,
        start_time=times[0] if times else None,
    )
    with interruptible(), run:
        run.start()
        run_id = finish_pipeline_run(
            run,
            reports,
            config=cfg,
            corpus=corpus,
            vector=vector,
            rank_info=rank_info,
            end_time=times[1] if times else None,
            vector_times=vector_times,
        )
    if nested is not None:
        nested.update(run.nested)
    return run_id


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
