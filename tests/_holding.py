"""Hold a real ``arecall`` run open at a known point, from outside the product.

A ``sitecustomize`` on PYTHONPATH (as test_faults_dvc.py injects its own) makes the prove stage
wait before publishing proof.json until a gate file exists. A test can then act while the run is
certainly RUNNING, whatever the machine's speed, and let it go on by opening the gate.
"""

from __future__ import annotations

from pathlib import Path

HOLDER = """
import os, time

_gate = os.environ.get("ARECALL_TEST_HOLD_UNTIL")
if _gate:
    _replace = os.replace

    def _holding_replace(src, dst, *args, **kwargs):
        if str(dst).endswith("proof.json"):
            deadline = time.monotonic() + 120
            while not os.path.exists(_gate) and time.monotonic() < deadline:
                time.sleep(0.05)
        return _replace(src, dst, *args, **kwargs)

    os.replace = _holding_replace
"""


def holding_env(cwd: Path) -> dict[str, str]:
    """Environment entries that hold a run started in ``cwd`` until `release` (or 120 s)."""
    inject = cwd / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(HOLDER)
    return {"PYTHONPATH": str(inject), "ARECALL_TEST_HOLD_UNTIL": str(cwd / "gate")}


def release(cwd: Path) -> None:
    """Open the gate: a run `holding_env` holds in ``cwd`` goes on."""
    (cwd / "gate").touch()
