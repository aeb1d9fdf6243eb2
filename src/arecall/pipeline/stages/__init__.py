"""The pipeline's stages, one module each, with their bodies: generate → rank → filter → score →
prove → report (then track; vectors is the filtered-vector-search experiment).

Each module holds the stage function (``cfg, layout -> result``) that ``arecall run`` calls
in-process, and a ``__main__`` block that DVC runs (``python -m arecall.pipeline.stages.<name>``):
read ``params.yaml`` once, run the function on the repository layout, turn a user error into one
line. A stage's DVC deps are its module and what it imports, so a code change reruns exactly the
stages it can affect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from arecall.core.errors import ArecallError, print_error
from arecall.pipeline.layout import Layout

__all__ = ["run_stage"]

Stage = Callable[[Mapping[str, Any], Layout], Any]


def run_stage(stage: Stage, show: Callable[[Any, Layout], None] | None = None) -> int:
    """Run ``stage`` as DVC does, on params.yaml and the repository layout; return the exit status.

    ``show`` prints the stage's result for the console (e.g. the tables); user errors are one
    line and exit status 2.
    """
    from arecall.pipeline.config import load_params

    try:
        layout = Layout.dvc()
        result = stage(load_params("params.yaml"), layout)
        if show is not None:
            show(result, layout)
    except ArecallError as exc:
        return print_error(exc)
    return 0
