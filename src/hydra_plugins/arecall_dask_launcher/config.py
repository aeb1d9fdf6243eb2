"""The launcher's config node, ``hydra/launcher=dask`` (registered when Hydra scans plugins).

No ``from __future__ import annotations`` here: Hydra's plugin scan runs this module outside
`sys.modules`, where `dataclasses` cannot resolve string annotations.
"""

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class DaskLauncherConf:
    """Where the sweep's points run, and what of the launching process they see.

    ``address`` is a running scheduler (``tcp://127.0.0.1:8786``); unset, Dask's own setting
    (DASK_SCHEDULER_ADDRESS), else a local cluster of ``n_workers`` processes on 127.0.0.1 is
    started for the sweep and stopped after it.
    ``env_prefixes``: the launching process's environment variables with these prefixes are the
    job's (the sweep's parent MLflow run id, the tracking server), whatever the worker's own.
    """

    _target_: str = "hydra_plugins.arecall_dask_launcher.dask_launcher.DaskLauncher"
    address: Optional[str] = None  # noqa: UP045 (OmegaConf reads the annotation)
    n_workers: int = 2
    threads_per_worker: int = 1
    connect_timeout: float = 30.0
    env_prefixes: list[str] = field(default_factory=lambda: ["ARECALL_", "MLFLOW_"])


ConfigStore.instance().store(
    group="hydra/launcher", name="dask", node=DaskLauncherConf, provider="arecall"
)
