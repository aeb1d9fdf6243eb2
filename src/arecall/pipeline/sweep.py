"""The MLflow parent run of an ``arecall run -m`` sweep: a Hydra callback.

Apart from `arecall.pipeline.tracking` so that logging a single run (the tracker process, the DVC
track stage) does not import Hydra.
"""

from __future__ import annotations

import os
from typing import Any

from hydra.experimental.callback import Callback

from arecall.pipeline.tracking import (
    PARENT_ENV,
    TrackedRun,
    end_sweep,
    experiment_name,
    tracking_uri,
)

__all__ = ["SweepCallback"]


class SweepCallback(Callback):
    """Hydra callback: an ``arecall run -m`` sweep gets one MLflow parent run.

    Started before the launcher spawns any job, so every job (in-process or joblib workers,
    which inherit the environment) finds its id in $ARECALL_PARENT_RUN_ID and nests under it;
    ended when the sweep ends: FAILED if any point failed, else FINISHED (`end_sweep`). The
    sweep's overrides are the parent's params. A store that cannot be written leaves the sweep
    untracked here; each point reports it.
    """

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        if not (config.get("tracking") or {}).get("enabled", True):
            return
        overrides = [str(o) for o in config.hydra.overrides.task]
        run = TrackedRun(
            tracking_uri("."),
            experiment_name(config),
            run_name="sweep " + " ".join(overrides),
            tags={"arecall.entry": "arecall run -m", "arecall.sweep": "parent"},
            params={f"sweep.override.{i}": o for i, o in enumerate(overrides)},
        )
        run.start()
        run.log_params()
        if run.run_id is not None:
            os.environ[PARENT_ENV] = run.run_id

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        end_sweep("FINISHED")
