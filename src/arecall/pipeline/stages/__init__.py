"""DVC stage entry points: one thin module per stage (``python -m arecall.pipeline.stages.<name>``).

Each reads ``params.yaml`` once, calls the stage function of `arecall.pipeline.run` on the
repository layout, and turns a user error into one line on stderr with exit status 2.
"""

from __future__ import annotations

import sys

from arecall.core.errors import ArecallError

__all__ = ["run_stage"]


def run_stage(name: str) -> int:
    """Run pipeline stage ``name`` (or ``track``) as DVC does; return the exit status."""
    from arecall.pipeline.config import load_params
    from arecall.pipeline.run import STAGES, Layout

    try:
        cfg = load_params("params.yaml")
        layout = Layout.dvc()
        if name == "vectors":
            from arecall.pipeline.config import default_config
            from arecall.pipeline.run import vector_search

            table = vector_search(default_config(["corpus=vectors", "index=hnsw"]), layout)
            print(layout.vector_table.read_text(encoding="utf-8"))
            print(table[["selectivity", "mode", "qps"]].to_string(index=False))
            return 0
        if name == "track":
            if cfg["tracking"].get("enabled", True):
                from arecall.pipeline.tracking import log_run

                run_id = log_run(
                    cfg,
                    layout.report_files(),
                    run_name="dvc-repro",
                    tags={"arecall.entry": "dvc repro"},
                )
                print(f"mlflow run {run_id}")
        else:
            STAGES[name](cfg, layout)
            if name == "report":
                print(layout.tables.read_text(encoding="utf-8"))
    except ArecallError as exc:
        print(f"arecall: error: {exc}", file=sys.stderr)
        return 2
    return 0
