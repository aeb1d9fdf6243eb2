"""Stage `track`: log the run's params, metrics and reports to MLflow (DVC's last stage)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

__all__ = ["track"]


def track(cfg: Mapping[str, Any], layout: Layout) -> str | None:
    """Log this repository's reports as one MLflow run; None when tracking is disabled."""
    if not cfg["tracking"]["enabled"]:
        return None
    from arecall.pipeline.tracking import log_run

    return log_run(
        cfg, layout.report_files(), run_name="dvc-repro", tags={"arecall.entry": "dvc repro"}
    )


def _show(run_id: str | None, layout: Layout) -> None:
    if run_id is not None:
        print(f"mlflow run {run_id}")


if __name__ == "__main__":
    raise SystemExit(run_stage(track, show=_show))
