"""Stage `track`: log the run's params, metrics and reports to MLflow (DVC's last stage)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

__all__ = ["track"]


def track(cfg: Mapping[str, Any], layout: Layout) -> str | None:
    """Log this repository's reports as one MLflow run; None when tracking is disabled.

    The results are already in ``reports/``; if the store cannot be written the one-line
    message says so and that ``arecall log .`` (params.yaml + reports/) logs them later.
    """
    if not cfg["tracking"]["enabled"]:
        return None
    from arecall.tracking.pipeline import log_run

    return log_run(
        cfg,
        layout.report_files(),
        run_name="dvc-repro",
        tags={"arecall.entry": "dvc repro"},
        results=(f"{layout.reports}/", str(layout.reports.parent)),
        rank_info=layout.rank_info,
    )


def _show(run_id: str | None, layout: Layout) -> None:
    if run_id is not None:
        print(f"mlflow run {run_id}")


def _recorded(cfg: Mapping[str, Any], layout: Layout) -> str | None:
    """DVC's entry: track, then record what was tracked in ``data/track/run.json``, the output.

    With an output (and params and report deps, not ``always_changed``) DVC reruns this stage
    only when the config or a report changed: a no-op ``dvc repro`` logs nothing new. The record
    holds the config hash, not the run id, so it is the same bytes on every machine and a fresh
    clone's ``dvc repro`` leaves dvc.lock unchanged (the run id is printed and is in MLflow).
    """
    from arecall.io.atomic import write_json
    from arecall.tracking.provenance import config_hash

    run_id = track(cfg, layout)
    record = {"config_hash": config_hash(cfg), "tracked": run_id is not None}
    write_json(layout.track_record, record)
    return run_id


if __name__ == "__main__":
    raise SystemExit(run_stage(_recorded, show=_show))
