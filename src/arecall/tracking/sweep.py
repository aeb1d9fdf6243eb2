"""What a sweep logs: one parent run, under which every point's run nests.

``arecall run -m`` (any launcher) opens the parent run before the launcher starts a job and puts
its id in $ARECALL_PARENT_RUN_ID (`PARENT_ENV`), which every job inherits, so each point's
`arecall.tracking.pipeline.pipeline_run` nests under it. When the sweep ends, its points'
comparison is logged to it and printed (`arecall.tracking.sweep_callback.compare_points`), and
`end_sweep` ends it: FAILED if a point failed, else as the sweep ended. The Hydra callback
that calls these is `arecall.tracking.sweep_callback.SweepCallback`; this module imports no
Hydra, so logging a single run (the tracker process, the DVC track stage) does not pay for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from arecall.tracking.provenance import source_tags
from arecall.tracking.run import TrackedRun, now_ms
from arecall.tracking.store import open_store, tracking_uri

__all__ = ["PARENT_ENV", "SWEPT_ENV", "end_sweep", "start_sweep"]

PARENT_ENV = "ARECALL_PARENT_RUN_ID"
#: The keys a sweep varies (``retriever,profiles``): its points' runs are named after them.
SWEPT_ENV = "ARECALL_SWEPT_KEYS"


def start_sweep(experiment: str, overrides: Sequence[str]) -> str | None:
    """Open a sweep's parent run (its overrides as params) and export its id; return it.

    A store that cannot be written leaves the sweep untracked here (None); each point reports it.

    Examples
    --------
    >>> import os, tempfile
    >>> os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
    >>> run_id = start_sweep("demo", ["retriever=tfidf,bm25"])
    >>> os.environ[PARENT_ENV] == run_id
    True
    >>> end_sweep("FINISHED")
    >>> PARENT_ENV in os.environ
    False
    >>> del os.environ["MLFLOW_TRACKING_URI"]
    """
    run = TrackedRun(
        tracking_uri("."),
        experiment,
        run_name="sweep " + " ".join(overrides),
        tags={
            **source_tags("arecall run -m"),
            "arecall.sweep": "parent",
            "arecall.kind": "sweep",
        },
        params={f"sweep.override.{i}": o for i, o in enumerate(overrides)},
        start_time=now_ms(),
    )
    run.start()
    run.log_params()
    if run.run_id is not None:
        os.environ[PARENT_ENV] = run.run_id
    return run.run_id


def end_sweep(status: str | None = None) -> None:
    """End the open sweep's parent run (if any): FAILED if a point failed, else ``status``.

    Points still RUNNING (their process interrupted) are ended KILLED. Called when the sweep
    ends, and by ``arecall run`` when it ends early (an exception, a signal).
    """
    os.environ.pop(SWEPT_ENV, None)
    run_id = os.environ.pop(PARENT_ENV, None)
    if run_id is None:
        return
    try:
        with open_store(tracking_uri("."), orphans=False) as client:
            parent = client.get_run(run_id)
            children = client.search_runs(
                [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'"
            )
            for child in children:
                if child.info.status == "RUNNING":
                    client.set_terminated(child.info.run_id, "KILLED")
            # a point rerun after its worker died (a Dask sweep) has a FINISHED run with the same
            # run directory: its lost attempt is not a failed point
            done = {
                c.data.tags.get("arecall.run_dir") for c in children if c.info.status == "FINISHED"
            }
            failed = any(
                c.info.status in ("FAILED", "KILLED")
                and c.data.tags.get("arecall.run_dir") not in done - {None}
                for c in children
            )
            final = status or "FINISHED"
            if final == "FINISHED" and failed:
                final = "FAILED"
            client.set_terminated(run_id, final)
    except Exception as exc:  # the points' own messages name the failure
        print(
            f"arecall: warning: could not end the sweep's MLflow run {run_id}: {exc}",
            file=sys.stderr,
        )
