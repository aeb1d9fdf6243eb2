"""`DaskLauncher`: Hydra's launcher interface; the work is in `_core` (imported on launch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class DaskLauncher(Launcher):
    """Runs each sweep point as one Dask task: `run_job` on a worker, the `JobReturn` back.

    Parameters are those of `config.DaskLauncherConf` (``hydra.launcher.*``).
    """

    def __init__(
        self,
        address: str | None = None,
        n_workers: int = 2,
        threads_per_worker: int = 1,
        connect_timeout: float = 30.0,
        env_prefixes: Sequence[str] = ("ARECALL_", "MLFLOW_"),
    ) -> None:
        self.address = address
        self.n_workers = int(n_workers)
        self.threads_per_worker = int(threads_per_worker)
        self.connect_timeout = float(connect_timeout)
        self.env_prefixes = tuple(str(p) for p in env_prefixes)
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from hydra_plugins.arecall_dask_launcher import _core

        result: Any = _core.launch(self, job_overrides, initial_job_idx)
        return list(result)
