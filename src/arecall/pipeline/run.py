"""The whole pipeline in one process: what ``arecall run`` and the Python API call.

The stage functions are the ones DVC runs one process per stage (`arecall.pipeline.stages`);
here they run in order on one `Layout`, so both paths write the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from arecall.pipeline.config import default_config
from arecall.pipeline.layout import Layout
from arecall.pipeline.schema import ExperimentConfig
from arecall.pipeline.stages import run_announced
from arecall.pipeline.stages.filter import filter_lists
from arecall.pipeline.stages.generate import generate
from arecall.pipeline.stages.index_search import index_search
from arecall.pipeline.stages.prove import prove
from arecall.pipeline.stages.rank import rank
from arecall.pipeline.stages.report import report
from arecall.pipeline.stages.score import score
from arecall.pipeline.stages.vectors import vector_search

__all__ = [
    "STAGES",
    "Layout",
    "filter_lists",
    "generate",
    "index_search",
    "prove",
    "rank",
    "report",
    "run_all",
    "run_in_memory",
    "score",
    "vector_search",
]

#: Every stage but track, in DVC's order (vectors needs nothing the others write).
STAGES = {
    "generate": generate,
    "rank": rank,
    "filter": filter_lists,
    "score": score,
    "prove": prove,
    "report": report,
    "index_search": index_search,
}


def run_all(cfg: ExperimentConfig, layout: Layout) -> dict[str, Any]:
    """Run every stage of the checked configuration ``cfg`` in order in this process; return
    metrics, proof and tables.

    ``vector`` is the vector experiment's table (with its wall-clock ``qps``), None unless the
    config asks for it (``vector_search.enabled``); ``times`` are when the first stage started
    and the last text stage ended, ``vector_times`` when the vector experiment ran (epoch
    milliseconds): the pipeline's own times, which its MLflow runs report.
    """
    import time

    def now() -> int:
        return int(time.time() * 1000)

    started = now()
    for name, stage in STAGES.items():  # each between its start and end lines
        run_announced(name, stage, cfg, layout)
    ended = now()
    tables = layout.tables.read_text(encoding="utf-8")
    if cfg.index.name != "none":
        tables += "\n" + layout.index_table.read_text(encoding="utf-8")
    vector_times = None
    if cfg.vector_search.enabled:
        vector = run_announced("vectors", vector_search, cfg, layout)
        vector_times = (ended, now())
    else:  # the same files DVC's stage writes, without a stage line for work not done
        vector = vector_search(cfg, layout)
    return {
        "vector": vector,
        "times": (started, ended),
        "vector_times": vector_times,
        "metrics": json.loads(layout.metrics.read_text(encoding="utf-8")),
        "proof": json.loads(layout.proof.read_text(encoding="utf-8")),
        "tables": tables,
    }


def run_in_memory(cfg: ExperimentConfig | None = None) -> dict[str, Any]:
    """Run a configuration (default: conf/'s defaults) in a temporary directory.

    Examples
    --------
    >>> out = run_in_memory(default_config(["evaluation.proof.max_examples=5"]))
    >>> round(out["metrics"]["k"]["5"]["arecall_pre_nonempty"], 3)
    0.96
    >>> {c["examples"] for c in out["proof"]["claims"] if c["kind"] == "property"}
    {5}
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return run_all(cfg if cfg is not None else default_config(), Layout.run(tmp))
