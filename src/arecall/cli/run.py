"""``arecall run [overrides] [-m]``: the whole pipeline in one process for a Hydra config.

Outputs go to Hydra's run directory; ``-m`` sweeps, each point one MLflow run nested under the
sweep's parent run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError, print_error

__all__ = ["check_group_choices", "run_main"]


def run_main(argv: Sequence[str]) -> int:
    """Compose the config from ``argv`` (Hydra overrides), run every stage, log to MLflow."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    from arecall.pipeline.config import CONF_DIR
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.run import run_all

    root = os.getcwd()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def task(cfg: DictConfig) -> float | None:
        config: Any = OmegaConf.to_container(cfg, resolve=True)
        layout = Layout.run(HydraConfig.get().runtime.output_dir)
        try:
            result = run_all(config, layout)
            if config["tracking"].get("enabled", True):
                from arecall.pipeline.tracking import log_run

                log_run(
                    config,
                    layout.report_files(),
                    vector=result.get("vector"),
                    root=root,
                    run_name=HydraConfig.get().job.override_dirname or "defaults",
                    tags={"arecall.entry": "arecall run"},
                )
        except ArecallError as exc:
            sys.exit(print_error(exc))
        print(result["tables"])
        if "metrics" not in result:
            return None
        k_max = list(result["metrics"]["k"])[-1]
        value = result["metrics"]["k"][k_max]["arecall_pre_nonempty"]
        return None if value is None else float(value)

    check_group_choices(argv, CONF_DIR)
    sys.argv = ["arecall run", *argv]
    task()
    return 0


def check_group_choices(argv: Sequence[str], conf_dir: Path) -> None:
    """Refuse ``group=option`` overrides naming no config file, in one line, before Hydra does.

    Hydra's own message for this spans a dozen lines; the check is the same (the option's YAML
    file must exist), only the message is shorter. Sweeps (``a,b``) check each choice.
    """
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or "." in key or key.startswith(("+", "~", "-", "hydra")):
            continue
        group = conf_dir / key
        if not group.is_dir():
            continue
        for option in value.split(","):
            if not (group / f"{option}.yaml").is_file():
                known = ", ".join(sorted(p.stem for p in group.glob("*.yaml")))
                raise ArecallError(f"{key}={option}: no such {key} config (known: {known})")
