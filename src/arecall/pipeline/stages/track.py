"""Stage `track`: log the run's params, metrics and reports to MLflow (DVC's last stage).

DVC runs it on every ``dvc repro`` and experiment (``always_changed``): a DVC experiment is
findable in MLflow by its name even when DVC skipped every other stage (a queued experiment
whose config equals the workspace's). What is in the store already is not logged again: the
same results (`arecall.tracking.pipeline.reports_digest`) of the same DVC experiment, or, for a
plain ``dvc repro``, of any DVC-made run; the stage then names the run that holds them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NoReturn

from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["main", "track"]


def track(cfg: ExperimentConfig, layout: Layout) -> list[str] | None:
    """Log this repository's reports as one MLflow run (and its vector run); the lines saying so.

    None when tracking is disabled. The results are already in ``reports/``; if the store
    cannot be written the one-line message says so and that ``arecall log .`` (params.yaml +
    reports/) logs them later. The run's entry point, command and times are the DVC
    invocation's (`arecall.pipeline.invocation`).
    """
    if not cfg.tracking.enabled:
        return None
    import time

    from arecall.pipeline.invocation import Invocation, dvc_invocation, invocation_times
    from arecall.tracking.pipeline import experiment_name, log_run, logged_runs, reports_digest
    from arecall.tracking.provenance import command_line
    from arecall.tracking.run import logged_line
    from arecall.tracking.store import tracking_uri

    started = int(time.time() * 1000)
    params = cfg.params()  # what the run logs: the checked config's plain values
    invocation = dvc_invocation() or Invocation("dvc repro", command_line(), "")
    reports = layout.report_files()
    name = os.environ.get("DVC_EXP_NAME")
    uri = tracking_uri(".")
    found = [
        run_id
        for run_id in logged_runs(
            uri, experiment_name(params), reports_digest(reports), dvc_experiment=name
        )
        if name is not None or _made_by_dvc(uri, run_id)
    ]
    if found:
        return [
            f"mlflow: these results are logged already (run {found[0]} in {uri}); "
            "nothing new to log"
        ]
    times = invocation_times(invocation) or (started, int(time.time() * 1000))
    nested: dict[str, str | None] = {}
    run_id = log_run(
        params,
        reports,
        run_name="dvc-repro",
        entry=invocation.entry,
        command=invocation.command,
        results=(f"{layout.reports}/", str(layout.reports.parent)),
        rank_info=layout.rank_info,
        corpus=layout.corpus,
        times=times,
        vector_times=invocation_times(invocation, ("vectors",)),
        nested=nested,
    )
    if run_id is None:
        return None
    return [logged_line(run_id, uri)] + [
        logged_line(child, uri, f"{what}, nested in {run_id}")
        for what, child in nested.items()
        if child is not None
    ]


def _made_by_dvc(uri: str, run_id: str) -> bool:
    from arecall.tracking.store import open_store

    with open_store(uri, orphans=False) as client:
        entry = client.get_run(run_id).data.tags.get("arecall.entry", "")
    return str(entry).startswith("dvc")


def _show(lines: list[str] | None, layout: Layout) -> None:
    for line in lines or ():
        print(line)


def _recorded(cfg: ExperimentConfig, layout: Layout) -> list[str] | None:
    """DVC's entry: track, then record what was tracked in ``data/track/run.json``, the output.

    The record holds the config hash, not the run id, so it is the same bytes on every machine
    and a fresh clone's ``dvc repro`` leaves dvc.lock unchanged (the run id is printed and is
    in MLflow).
    """
    from arecall.io.atomic import write_json
    from arecall.tracking.provenance import config_hash

    lines = track(cfg, layout)
    record = {"config_hash": config_hash(cfg.params()), "tracked": lines is not None}
    write_json(layout.track_record, record)
    return lines


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
