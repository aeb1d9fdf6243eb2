"""The Hydra callback that gives an ``arecall run -m`` sweep its MLflow parent run.

Apart from `arecall.tracking.sweep` (which holds what the parent run logs) because it imports
Hydra: logging a single run (the tracker process, the DVC track stage) does not.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback

from arecall.tracking.pipeline import experiment_name
from arecall.tracking.sweep import end_sweep, start_sweep

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
        start_sweep(experiment_name(config), [str(o) for o in config.hydra.overrides.task])

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        end_sweep("FINISHED")
