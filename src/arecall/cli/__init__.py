"""The ``arecall`` command.

``arecall run [overrides]`` runs the whole pipeline in one process for a Hydra-composed config
(``-m`` sweeps); ``arecall evaluate`` / ``arecall fuse`` work on TREC runs; ``arecall readme``
keeps the generated tables of the README and docs/ in step with reports/; ``arecall compare``
draws runs side by side. User errors end as one
line on stderr, exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from arecall.core.errors import ArecallError, print_error

__all__ = ["main"]

USAGE = """usage: arecall COMMAND [ARGS]

commands:
  run [OVERRIDES] [-m]   run the pipeline in-process for a Hydra config (outputs in hydra.run.dir)
  evaluate ...           authorized metrics for a TREC run + qrels (+ ACL); see --help
  fuse RUN... --out F    reciprocal rank fusion of TREC runs
  readme [--check]       sync the generated tables of README.md and docs/ with reports/
  log DIR                log a finished run directory (or a DVC repo: `log .`) to MLflow
  compare RUN_ID...      runs side by side: a table and a figure (--filter EXPR, --dvc [NAME...])
  ui [--port N]          MLflow's UI on this project's store (make ui); Ctrl-C stops all of it
"""


def _run(argv: Sequence[str]) -> int:
    from arecall.tracking.tracker import spawn_tracker, take_tracker, wants_tracker

    if wants_tracker(argv):  # first of all: MLflow's import overlaps Hydra and the stages
        spawn_tracker(os.getcwd())
    try:
        from arecall.cli.run import run_main

        return run_main(argv)
    finally:
        unused = take_tracker()  # the run was refused, untracked or not a single run
        if unused is not None:
            unused.close()


README_USAGE = """usage: arecall readme [--check] [--params-only]

Sync the generated tables of README.md and the docs/ pages with reports/ (what `dvc repro`
produced), after checking that params.yaml and dvc.lock hold the project's default config.
  --check        change nothing; exit 2 if a table differs from its report
  --params-only  only check that params.yaml holds the default config (make repro, first)
"""


def _readme(argv: Sequence[str]) -> int:
    from arecall.cli.readme import config_problem, sync_pages

    if any(a in ("-h", "--help") for a in argv):
        print(README_USAGE, end="")
        return 0
    unknown = [a for a in argv if a not in ("--check", "--params-only")]
    if unknown:
        raise ArecallError(f"readme: unknown argument {unknown[0]!r} (--check, --params-only)")
    problem = config_problem(lock="--params-only" not in argv)
    if problem is not None:
        return print_error(problem)
    if "--params-only" in argv:
        return 0
    differ = sync_pages(check="--check" in argv)
    if "--check" in argv and differ:
        names = ", ".join(str(p) for p in differ)
        return print_error(
            f"{names}: the generated tables differ from reports/; run `arecall readme`"
        )
    return 0


def _log(argv: Sequence[str]) -> int:
    from arecall.cli.log import log_main

    return log_main(argv)


def _compare(argv: Sequence[str]) -> int:
    from arecall.cli.compare import compare_main

    return compare_main(argv)


def _ui(argv: Sequence[str]) -> int:
    from arecall.tracking.ui import ui_main

    return ui_main(argv)


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
    "log": _log,
    "compare": _compare,
    "ui": _ui,
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
        print_error(f"unknown command {command!r}")
        print(USAGE, end="", file=sys.stderr)
        return 2
    try:
        return COMMANDS[command](rest)
    except ArecallError as exc:
        return print_error(exc)


if __name__ == "__main__":
    raise SystemExit(main())
