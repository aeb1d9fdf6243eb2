"""Any error while Hydra composes or launches a config is one line naming the override and key.

Before: ``+key=`` merges into the typed profiles configs ended in OmegaConf's AttributeError
traceback, a ``_target_`` Hydra refuses in InstantiationException's stack, an interpolation in
the run directory in Hydra's stack, and a syntax error or ``+`` on an existing key named every
override given. Single runs and sweeps (``-m``) alike; nothing is written.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

QUIET = "tracking.enabled=false"


def _one_line(proc, *expected: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("arecall: error: "), lines[0]
    for part in expected:
        assert part in lines[0], lines[0]
    return lines[0]


CASES = {
    "+ merge into a typed mapping": (
        ["profiles=clearance", "+profiles.clearances={external-auditor:top}"],
        [
            "+profiles.clearances={external-auditor:top}: profiles.clearances.external-auditor: "
            "must be one of profiles.levels (internal, confidential, restricted), got 'top'"
        ],
    ),
    "a blocklisted callback target": (
        ["+hydra.callbacks.x._target_=os.system"],
        [
            "+hydra.callbacks.x._target_=os.system: hydra.callbacks.x._target_: "
            "Target 'os.system' is blocklisted"
        ],
    ),
    "our callback's target replaced": (
        ["hydra.callbacks.mlflow_sweep._target_=subprocess.Popen"],
        ["hydra.callbacks.mlflow_sweep._target_: Target 'subprocess.Popen' is blocklisted"],
    ),
    "a callback target that does not exist": (
        ["+hydra.callbacks.x._target_=nope.Nope"],
        ["hydra.callbacks.x._target_: Error locating target 'nope.Nope'", "No module named"],
    ),
    "a callback that is not a mapping": (
        ["+hydra.callbacks.x=5"],
        ["+hydra.callbacks.x=5: hydra.callbacks.x: must be a mapping with a _target_"],
    ),
    "+ on a key that exists": (
        ["evaluation.ks=[1,5]", "+tracking.on_error=warn"],
        ["arecall: error: +tracking.on_error=warn: Could not append to config", "'++"],
    ),
    "a syntax error": (
        ["evaluation.ks=[1,5]", "retriever.depth=[10"],
        ["arecall: error: retriever.depth=[10: "],
    ),
    "a failing interpolation": (
        ["corpus=seed_json", "corpus.path=${oc.env:ARECALL_NO_SUCH_VARIABLE}"],
        ["corpus.path=${oc.env:ARECALL_NO_SUCH_VARIABLE}: corpus.path: ", "ARECALL_NO_SUCH_VAR"],
    ),
}


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_composition_error_is_one_line_naming_the_override_and_key(
    tmp_path, case, sweep, arecall
):
    overrides, expected = CASES[case]
    where = f"hydra.sweep.dir={tmp_path}/sweep" if sweep else f"hydra.run.dir={tmp_path}/run"
    proc = arecall("run", *(["-m"] if sweep else []), QUIET, where, *overrides)
    _one_line(proc, *expected)
    assert not list(tmp_path.iterdir())  # nothing written, not even the directory


def test_an_interpolation_hydra_cannot_resolve_in_the_run_directory_is_one_line(arecall):
    proc = arecall("run", QUIET, "hydra.run.dir=${oc.env:ARECALL_NO_SUCH_VARIABLE}")
    _one_line(
        proc,
        "hydra.run.dir=${oc.env:ARECALL_NO_SUCH_VARIABLE}: hydra.run.dir: ",
        "ARECALL_NO_SUCH_VARIABLE",
    )


def test_a_failing_interpolation_in_the_sweep_directory_is_one_line(arecall):
    proc = arecall("run", "-m", QUIET, "hydra.sweep.dir=${oc.env:ARECALL_NO_SUCH_VARIABLE}")
    _one_line(proc, "hydra.sweep.dir: ", "ARECALL_NO_SUCH_VARIABLE")
