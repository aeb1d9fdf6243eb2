"""What the vector experiment logs: a run of its own, nested in the pipeline run that ran it.

The filtered-vector-search table (`arecall.pipeline.stages.vectors` writes it as
``reports/vector_search.csv``; ``arecall run`` passes it with its wall-clock ``qps``) is logged,
only when the config asks for the experiment (``vector_search.enabled``), as the run
``vector_search`` nested in the pipeline's: the ``vector_search`` section as params, one metric
per mode, measure and filter (``vector_<mode>_<column>_s<selectivity %>pct``; on a text corpus
one per principal, keyed by `arecall.tracking.run.safe_key`, the mapping logged as
``keys.json``), its table (an MLflow table and, at the top, ``vector_search.md`` — also the
run's description — and ``vector_search.png``), and ``diagnostics.json`` (whether the table came
from the experiment's cache). The pipeline run keeps only the Authorized-Recall headline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arecall.core.measures import VECTOR
from arecall.tracking.run import TrackedRun, flatten, safe_key, staged_artifacts

__all__ = [
    "TABLE",
    "VECTOR_REPORTS",
    "cache_note",
    "log_vector_run",
    "read_vector_table",
    "vector_metrics",
]

#: The vector table's MLflow artifact (an MLflow table).
TABLE = "tables/vector_search.json"
#: The report files of the vector experiment (`arecall.pipeline.layout.Layout` names): its own
#: run's, never the pipeline run's.
VECTOR_REPORTS = ("vector_table", "vector_csv", "vector_curve", "vector_plot")
#: The pipeline run's tags its vector run repeats: where both came from.
_INHERITED = (
    "arecall.entry",
    "arecall.command",
    "arecall.dvc_experiment",
    "arecall.git_dirty",
    "arecall.run_dir",
    "mlflow.source.name",
    "mlflow.source.type",
    "mlflow.source.git.commit",
)


def read_vector_table(reports: Mapping[str, Path], vector: Any = None) -> Any:
    """The vector table to log: ``vector`` as given (with its ``qps``), else ``vector_csv``'s."""
    if vector is None and reports.get("vector_csv"):
        import pandas as pd

        vector = pd.read_csv(reports["vector_csv"])
    return vector


def cache_note(vector: Any) -> str | None:
    """Whether the table came from the experiment's cache: ``hit <key>`` / ``miss <key>``."""
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


def log_vector_run(
    parent: TrackedRun,
    section: Mapping[str, Any],
    table: Any,
    reports: Mapping[str, Path],
    *,
    times: tuple[int, int] | None = None,
) -> str | None:
    """Log the vector experiment as a run nested in ``parent`` (finished); return its id.

    ``section`` is the config's ``vector_search`` section (its params), ``table`` the
    experiment's table, ``reports`` the run's report files (the vector experiment's are logged
    here), ``times`` when the experiment ran (epoch ms). A store failure is reported as the
    parent's would be (``tracking.on_error``).
    """
    from arecall.io.digest import json_digest

    metrics, keys = vector_metrics(table)
    tags = {k: v for k, v in parent.tags.items() if k in _INHERITED}
    tags.update(
        {
            "mlflow.parentRunId": str(parent.run_id),
            "arecall.kind": "vector_search",
            "arecall.config_hash": json_digest(dict(section))[:12],
            "mlflow.loggedArtifacts": json.dumps([{"path": TABLE, "type": "table"}]),
        }
    )
    own = {name: Path(reports[name]) for name in VECTOR_REPORTS if reports.get(name)}
    if own.get("vector_table"):
        tags["mlflow.note.content"] = own["vector_table"].read_text(encoding="utf-8")
    documents: dict[str, Any] = {}
    if keys:
        documents["keys.json"] = keys
    cache = cache_note(table)
    if cache:
        documents["diagnostics.json"] = {"cache": cache}
    top = {own[n].name: own[n] for n in ("vector_table", "vector_plot") if n in own}
    files: dict[str, Path] = {n: own[n] for n in ("vector_csv", "vector_curve") if n in own}
    params = flatten({"vector_search": {k: v for k, v in section.items() if k != "enabled"}})
    run = TrackedRun(
        parent.uri,
        parent.experiment,
        run_name="vector_search",
        tags=tags,
        params=params,
        results=parent.results,
        on_error=parent.on_error,
        start_time=times[0] if times else parent.start_time,
    )

    def artifacts(client: Any, run_id: str) -> None:
        staged_artifacts(client, run_id, {TABLE: table}, documents, files, top)

    with run:
        run.start()
        return run.finish(metrics, artifacts=artifacts, end_time=times[1] if times else None)
