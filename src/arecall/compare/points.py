"""The runs a comparison lines up: MLflow runs (ids, a sweep's parent, a filter) or DVC experiments.

Whatever their source, each is a `Point`: a label, its config flattened to dotted keys, and its
headline (``headline.json``'s shape: per K, Recall, ARecall post and pre, the gaps and the
restricted gap's confidence interval). An MLflow run's headline is read back from its metrics
(`arecall.tracking.pipeline.headline_from_metrics`, the inverse of what it logged); a DVC
experiment's is its ``reports/headline.json`` as DVC recorded it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError

__all__ = ["Point", "dvc_points", "mlflow_points", "short_labels", "split_overrides"]

#: Config sections a comparison never lines up: where runs ran and were logged, and the vector
#: experiment (a run of its own).
_NOT_CHOICES = ("hydra.", "tracking.", "vector_search.")


@dataclass(frozen=True)
class Point:
    """One run or experiment of a comparison.

    Attributes
    ----------
    label : str
        Its name: the MLflow run's name, or the DVC experiment's.
    config : dict
        Its config, flattened to dotted keys with string values (as MLflow params are).
    headline : dict
        ``{"k": {"5": {"arecall_pre": …, …}}}``, as ``headline.json``.
    run_id : str or None
        The MLflow run, when it came from MLflow.
    """

    label: str
    config: dict[str, str]
    headline: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None

    @property
    def choices(self) -> dict[str, str]:
        """The config keys a comparison may show (not where it ran or was logged)."""
        return {k: v for k, v in self.config.items() if not k.startswith(_NOT_CHOICES)}


# -- MLflow ---------------------------------------------------------------------------------------


def _is_pipeline_run(run: Any) -> bool:
    tags = run.data.tags
    return tags.get("arecall.sweep") != "parent" and tags.get("arecall.kind", "pipeline") in (
        "pipeline",
        "",
    )


def _point(run: Any) -> Point:
    from arecall.tracking.pipeline import headline_from_metrics

    return Point(
        label=str(run.info.run_name or run.info.run_id[:8]),
        config=dict(run.data.params),
        headline=headline_from_metrics(run.data.metrics),
        run_id=str(run.info.run_id),
    )


def mlflow_points(
    client: Any,
    run_ids: Sequence[str] = (),
    *,
    filter_string: str | None = None,
    experiment: str = "arecall",
) -> tuple[list[Point], str | None]:
    """The FINISHED pipeline runs named (a sweep's parent stands for its points), or matching
    ``filter_string`` in ``experiment``; and the sweep's parent run id, when one was named.

    Runs keep the order given (a sweep's points: their order in the sweep); a filter's come
    oldest first. One `ArecallError` line for an unknown run, a bad filter or no match.
    """
    points: list[Point] = []
    parent: str | None = None
    for run_id in run_ids:
        try:
            run = client.get_run(run_id)
        except Exception:
            raise ArecallError(f"run {run_id}: not found in {client.tracking_uri}") from None
        if run.data.tags.get("arecall.sweep") == "parent":
            parent = run_id if len(run_ids) == 1 else None
            children = client.search_runs(
                [run.info.experiment_id],
                filter_string=f"tags.mlflow.parentRunId = '{run_id}' and "
                "attributes.status = 'FINISHED'",
                order_by=["attributes.start_time ASC"],
                max_results=10000,
            )
            points += sorted(
                (_point(c) for c in children if _is_pipeline_run(c)),
                key=lambda p: _sweep_order(children, p),
            )
        elif run.info.status != "FINISHED":
            raise ArecallError(f"run {run_id}: {run.info.status}, not FINISHED: nothing to compare")
        else:
            points.append(_point(run))
    if filter_string is not None:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise ArecallError(f"--experiment {experiment}: no such MLflow experiment")
        try:
            runs = client.search_runs(
                [found.experiment_id],
                filter_string=f"{filter_string} and attributes.status = 'FINISHED'",
                order_by=["attributes.start_time ASC"],
                max_results=10000,
            )
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ArecallError(f"--filter {filter_string!r}: {first}") from None
        points += [_point(r) for r in runs if _is_pipeline_run(r)]
        if not points:
            raise ArecallError(f"--filter {filter_string!r}: no finished pipeline run matches")
    return short_labels(points), parent


def short_labels(points: Sequence[Point]) -> list[Point]:
    """``points`` with the overrides every sweep point shares cut from their labels.

    A sweep point's run is named after its overrides (``evaluation.proof.max_examples=5,
    retriever=bm25``); the ones all points share say nothing in a comparison.

    Examples
    --------
    >>> shown = short_labels([Point("a=1,r=tfidf", {}), Point("a=1,r=bm25", {})])
    >>> [p.label for p in shown]
    ['r=tfidf', 'r=bm25']
    >>> [p.label for p in short_labels([Point("k=[1,5],r=x", {}), Point("k=[1,5],r=y", {})])]
    ['r=x', 'r=y']
    """
    parts = [split_overrides(p.label) for p in points]
    if len(points) < 2 or not all(all("=" in x for x in part) for part in parts):
        return list(points)
    shared = set.intersection(*(set(part) for part in parts))
    return [
        replace(p, label=",".join(x for x in part if x not in shared) or "defaults")
        for p, part in zip(points, parts, strict=True)
    ]


def split_overrides(label: str) -> list[str]:
    """A run name made of Hydra overrides (``override_dirname``), one per item; commas inside
    brackets are a value's.

    Examples
    --------
    >>> split_overrides("evaluation.ks=[1,5],retriever=bm25")
    ['evaluation.ks=[1,5]', 'retriever=bm25']
    """
    items, depth, current = [], 0, ""
    for ch in label:
        depth += (ch in "[{(") - (ch in "]})")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    return [*items, current]


def _sweep_order(children: Sequence[Any], point: Point) -> tuple[int, str]:
    """A sweep point's position: its job number from its run directory, else its start."""
    for i, child in enumerate(children):
        if child.info.run_id == point.run_id:
            run_dir = child.data.tags.get("arecall.run_dir", "")
            tail = Path(run_dir).name
            return (int(tail), "") if tail.isdigit() else (10**6 + i, point.label)
    return (10**9, point.label)


# -- DVC ------------------------------------------------------------------------------------------


def _flat(data: Mapping[str, Any]) -> dict[str, str]:
    from arecall.tracking.run import flatten

    return flatten(data)


def _states(root: Path) -> Iterator[tuple[str, Any]]:
    """(name, the experiment's recorded data) for the workspace, its baseline and every
    experiment of that baseline, as ``dvc exp show`` lists them."""
    from dvc.exceptions import DvcException, NotDvcRepoError
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            states = [state.dumpd() for state in repo.experiments.show()]
    except NotDvcRepoError:
        raise ArecallError(f"{root}: not a DVC repository") from None
    except DvcException as exc:
        raise ArecallError(f"{root}: dvc cannot list its experiments: {exc}") from None
    for state in states:
        name = "workspace" if state["rev"] == "workspace" else state.get("name") or state["rev"][:7]
        yield name, state
        for exp_range in state.get("experiments") or ():
            for rev in exp_range.get("revs") or ():
                yield rev.get("name") or rev["rev"][:7], rev


def dvc_points(root: str | Path = ".", names: Sequence[str] = ()) -> tuple[list[Point], list[str]]:
    """The DVC experiments named (default: all of the baseline's, the baseline and the
    workspace) with results; and the names of those without (queued, running, failed).

    One `ArecallError` line naming an unknown experiment.
    """
    points: list[Point] = []
    pending: list[str] = []
    seen: list[str] = []
    for name, state in _states(Path(root)):
        seen.append(name)
        if names and name not in names:
            continue
        data = state.get("data") or {}
        params = ((data.get("params") or {}).get("params.yaml") or {}).get("data")
        headline = ((data.get("metrics") or {}).get("reports/headline.json") or {}).get("data")
        if not params or not headline:
            pending.append(name)
            continue
        points.append(Point(label=name, config=_flat(params), headline=headline))
    unknown = [n for n in names if n not in seen]
    if unknown:
        known = ", ".join(dict.fromkeys(seen)) or "none"
        raise ArecallError(f"dvc experiment {unknown[0]}: not found (known: {known})")
    return points, pending
