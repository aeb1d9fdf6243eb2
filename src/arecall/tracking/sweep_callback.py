"""The Hydra callback that gives an ``arecall run -m`` sweep its MLflow parent run and, at its
end, the comparison of its points.

Apart from `arecall.tracking.sweep` (which holds what the parent run logs) because it imports
Hydra and `arecall.compare`: logging a single run (the tracker process, the DVC track stage)
does not.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from arecall.tracking.pipeline import experiment_name
from arecall.tracking.run import logged_line
from arecall.tracking.store import tracking_uri
from arecall.tracking.sweep import PARENT_ENV, SWEPT_ENV, end_sweep, start_sweep

__all__ = ["SweepCallback", "compare_points", "swept_keys"]


def swept_keys(overrides: list[str]) -> list[str]:
    """The keys a sweep varies, as its points' ``override_dirname`` spells them.

    Examples
    --------
    >>> swept_keys(["corpus=synthetic", "retriever=tfidf,bm25", "index@vector_search.index=a,b"])
    ['retriever', 'index@vector_search.index']
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # Hydra reports a bad override itself
        return []
    return [
        (o.input_line or "").split("=", 1)[0].lstrip("+~") for o in parsed if o.is_sweep_override()
    ]


def compare_points(out: str | Path) -> None:
    """Compare the open sweep's finished points: log the comparison to its parent run, write it
    into ``out`` (the sweep directory) and print it with the parent run's id.

    Best effort: a comparison that cannot be made is one warning; the points are logged.
    """
    run_id = os.environ.get(PARENT_ENV)
    if run_id is None:
        return
    uri = tracking_uri(".")
    try:
        from arecall.compare import compare_sweep

        made = compare_sweep(uri, run_id, out)
    except Exception as exc:  # the points' runs are logged whatever happens here
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"arecall: warning: could not compare the sweep's points: {first}", file=sys.stderr)
        return
    if made is None:
        return
    print(made.table)
    files = ", ".join(str(f) for f in made.files)
    print(logged_line(run_id, uri, f"the sweep's parent, with its comparison: {files}"))


class SweepCallback(Callback):
    """Hydra callback: an ``arecall run -m`` sweep gets one MLflow parent run.

    Started before the launcher spawns any job, so every job (in-process or joblib workers,
    which inherit the environment) finds its id in $ARECALL_PARENT_RUN_ID and nests under it;
    ended when the sweep ends: FAILED if any point failed, else FINISHED (`end_sweep`), after
    its finished points' comparison is logged to it, written into the sweep directory and
    printed (`compare_points`). The sweep's overrides are the parent's params. A store that
    cannot be written leaves the sweep untracked here; each point reports it.
    """

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        if not (config.get("tracking") or {}).get("enabled", True):
            return
        overrides = [str(o) for o in config.hydra.overrides.task]
        os.environ[SWEPT_ENV] = ",".join(swept_keys(overrides))
        start_sweep(experiment_name(config), overrides)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        compare_points(str(config.hydra.sweep.dir))
        end_sweep("FINISHED")
