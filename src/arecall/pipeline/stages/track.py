"""Stage `track`: log the run's params, metrics and reports to MLflow (DVC's last stage)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

__all__ = ["main", "track"]


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


def main() -> NoReturn:
    """DVC's entry point: track, then exit at once with the status the run agrees with.

    SIGTERM / SIGINT (DVC passes on neither; a job runner or a terminal sends them to the whole
    process group) end the run KILLED and the stage 143 / 130 wherever they land: before the run
    exists nothing is logged, during the upload the run is ended KILLED, after it (while the
    record is written) the FINISHED run is ended KILLED again. The stage then exits without the
    interpreter's teardown (a second or more after MLflow), so a killer that follows SIGTERM
    with SIGKILL finds the run already ended.
    """
    import signal
    import sys

    from arecall.tracking.ends import (
        Interrupted,
        exit_promptly,
        held_signals,
        interruptible,
        outcome_scope,
    )

    with interruptible():
        try:
            with outcome_scope():
                status = run_stage(_recorded, show=_show)
        except Interrupted as exc:
            print(f"arecall: interrupted by {signal.Signals(exc.signum).name}", file=sys.stderr)
            status = 128 + exc.signum
    with held_signals():  # the status is decided: a signal from here on changes nothing
        exit_promptly(status)


if __name__ == "__main__":
    main()
