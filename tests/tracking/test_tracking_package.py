"""Tracking is a package of its own that every product reaches, and that reaches none of them.

The pipeline, ``arecall evaluate`` and the sweep launchers pass it what a run logs (a config,
report files, a summary); if it imported back into `arecall.pipeline` or `arecall.cli`, evaluate
would depend on pipeline internals and a change there would rerun the DVC ``track`` stage.
"""

from __future__ import annotations

from tests.helpers import SRC, stage_modules

TRACKING = SRC / "arecall" / "tracking"


def test_no_tracking_module_imports_the_pipeline_or_the_cli():
    modules = sorted(TRACKING.glob("*.py"))
    assert len(modules) > 1
    climbing = {}
    for path in modules:
        entry = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        reached = {
            p.relative_to(SRC).as_posix()
            for p in stage_modules(entry)
            if p.relative_to(SRC).parts[1] in ("pipeline", "cli")
        }
        if reached:
            climbing[path.name] = sorted(reached)
    assert not climbing, climbing


def test_evaluate_reaches_tracking_without_the_pipeline():
    files = {p.relative_to(SRC).as_posix() for p in stage_modules("arecall.tracking.evaluate")}
    assert "arecall/tracking/run.py" in files  # the walk does see tracking's own modules
    assert not [f for f in files if f.startswith("arecall/pipeline/")]
