"""The ``arecall`` command.

``arecall run [overrides]`` runs the whole pipeline in one process for a Hydra-composed config
(``-m`` sweeps); ``arecall evaluate`` / ``arecall fuse`` work on TREC runs; ``arecall readme``
keeps the README's tables in step with reports/. User errors end as one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from arecall.core.errors import ArecallError

__all__ = ["main"]

USAGE = """usage: arecall COMMAND [ARGS]

commands:
  run [OVERRIDES] [-m]   run the pipeline in-process for a Hydra config (outputs in hydra.run.dir)
  evaluate ...           authorized metrics for a TREC run + qrels (+ ACL); see --help
  fuse RUN... --out F    reciprocal rank fusion of TREC runs
  readme [--check]       splice reports/tables.md into README.md (or check they agree)
"""


def _fail(message: str) -> int:
    print(f"arecall: error: {message}", file=sys.stderr)
    return 2


def _run(argv: Sequence[str]) -> int:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    from arecall.pipeline.config import CONF_DIR
    from arecall.pipeline.run import Layout, run_all

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
            sys.exit(_fail(str(exc)))
        print(result["tables"])
        if "metrics" not in result:
            return None
        k_max = list(result["metrics"]["k"])[-1]
        value = result["metrics"]["k"][k_max]["arecall_pre_nonempty"]
        return None if value is None else float(value)

    _check_group_choices(argv, CONF_DIR)
    sys.argv = ["arecall run", *argv]
    task()
    return 0


def _check_group_choices(argv: Sequence[str], conf_dir: Any) -> None:
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


def _readme(argv: Sequence[str]) -> int:
    from arecall.cli.readme import sync_readme

    check = "--check" in argv
    agreed = sync_readme(check=check)
    if check and not agreed:
        return _fail("README.md: the tables differ from reports/tables.md; run `arecall readme`")
    return 0


def _evaluate(argv: Sequence[str]) -> int:
    from arecall.cli.evaluate import evaluate_main

    return evaluate_main(list(argv))


def _fuse(argv: Sequence[str]) -> int:
    from arecall.cli.evaluate import fuse_main

    return fuse_main(list(argv))


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "run": _run,
    "evaluate": _evaluate,
    "fuse": _fuse,
    "readme": _readme,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``arecall`` console script."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        return _fail(f"unknown command {command!r}\n{USAGE}")
    try:
        return COMMANDS[command](rest)
    except ArecallError as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    raise SystemExit(main())
