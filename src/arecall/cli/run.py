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

__all__ = ["check_composition", "check_group_choices", "run_main", "unique_token"]

_TOKEN: list[str] = []


def unique_token() -> str:
    """This process's run-directory suffix: its pid and a random hex token, fixed per process.

    Hydra's default run directory has second resolution, so runs started together shared it
    (and one logged another's data). The pid makes the directory unique among live processes on
    this host, the random part across hosts sharing a file system.

    Examples
    --------
    >>> unique_token() == unique_token()
    True
    """
    if not _TOKEN:
        import secrets

        _TOKEN.append(f"{os.getpid()}-{secrets.token_hex(3)}")
    return _TOKEN[0]


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("arecall.unique"):
        OmegaConf.register_new_resolver("arecall.unique", unique_token)


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
            if config["tracking"]["enabled"]:
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
    check_composition(argv)
    _register_resolvers()
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


def check_composition(argv: Sequence[str]) -> None:
    """Compose and check the configuration of every run ``argv`` asks for, before any runs.

    Each point of a ``-m`` sweep is composed and checked against the schema
    (`arecall.pipeline.config.default_config`), so a bad value anywhere is one line naming the
    override and the key, and nothing is written. ``--help``-like flags skip the check.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from arecall.pipeline.config import default_config

    args = get_args_parser().parse_args(list(argv))
    if args.help or args.hydra_help or args.info or args.shell_completion:
        return
    points = [list(args.overrides)]
    if args.multirun:
        try:
            parsed = OverridesParser.create().parse_overrides(list(args.overrides))
        except HydraException as exc:
            raise ArecallError(f"{' '.join(args.overrides)}: {str(exc).splitlines()[0]}") from None
        points = [point for batch in BasicSweeper.split_arguments(parsed, None) for point in batch]
    for point in points:
        default_config(point)
