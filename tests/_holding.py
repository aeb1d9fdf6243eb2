"""Hold a real ``arecall`` run open at a known point, from outside the product.

A ``sitecustomize`` on PYTHONPATH (as test_faults_dvc.py injects its own) makes the prove stage
wait before publishing proof.json until a gate file exists. A test can then act while the run is
certainly RUNNING, whatever the machine's speed, and let it go on by opening the gate.
"""

from __future__ import annotations

import subprocess
import time
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


#: Hold one process of a run at one point of its logging, from outside the product: the point
#: (``ARECALL_TEST_HOLD_AT``) is reached, a ``ready`` file appears, and the process waits there
#: until the gate opens (or 120 s), so a test can signal or kill it at that very moment.
#: ``ARECALL_TEST_HOLD_IN`` picks the process: the tracker, the run's own process, or the DVC
#: ``track`` stage.
POINTS = """
import os, sys, time

_point, _who = os.environ.get("ARECALL_TEST_HOLD_AT"), os.environ.get("ARECALL_TEST_HOLD_IN")
_argv = " ".join(getattr(sys, "orig_argv", sys.argv))
_mine = {
    "tracker": "arecall.tracking.tracker" in _argv,
    "run": "arecall.tracking.tracker" not in _argv and " run " in f"{_argv} ",
    "track": os.environ.get("DVC_STAGE") == "track",
}.get(_who or "", False)


def _hold():
    open(os.environ["ARECALL_TEST_READY"], "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["ARECALL_TEST_GATE"]) and time.monotonic() < deadline:
        time.sleep(0.05)


if _point and _mine:
    if _point in ("created", "uploading"):
        from mlflow.tracking.client import MlflowClient

        if _point == "created":  # the run exists in the store; its id is on its way back
            _create = MlflowClient.create_run

            def create_run(self, *args, **kwargs):
                run = _create(self, *args, **kwargs)
                _hold()
                return run

            MlflowClient.create_run = create_run
        else:  # params and metrics are logged; the artifacts are next (the first file of them)
            from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

            _artifact, _held = LocalArtifactRepository.log_artifact, []

            def log_artifact(self, *args, **kwargs):
                if not _held:
                    _held.append(True)
                    _hold()
                return _artifact(self, *args, **kwargs)

            LocalArtifactRepository.log_artifact = log_artifact
    elif _point == "logged":  # the run is ended FINISHED; its process is not done yet
        import builtins
        import pathlib

        _read, _replace, _print = pathlib.Path.read_text, os.replace, builtins.print

        def read_text(self, *args, **kwargs):
            if self.name == "vector_search.md":  # `arecall run` prints it after logging
                _hold()
            return _read(self, *args, **kwargs)

        def print(*args, **kwargs):  # `arecall run` prints its run's id after logging it
            _print(*args, **kwargs)
            if args and str(args[0]).startswith("mlflow: logged run "):
                _hold()

        if _who == "run":
            builtins.print = print

        def replace(src, dst, *args, **kwargs):
            if str(dst).endswith("track/run.json"):  # the DVC stage's record of the run
                _hold()
            return _replace(src, dst, *args, **kwargs)

        pathlib.Path.read_text, os.replace = read_text, replace
"""


def holding_at(cwd: Path, point: str, process: str) -> dict[str, str]:
    """Environment entries that hold ``process`` (tracker, run, track) at ``point`` (created,
    uploading, logged) until `release`; ``cwd / "ready"`` appears when it gets there."""
    inject = cwd / "inject-points"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(POINTS)
    return {
        "PYTHONPATH": str(inject),
        "ARECALL_TEST_HOLD_AT": point,
        "ARECALL_TEST_HOLD_IN": process,
        "ARECALL_TEST_READY": str(cwd / "ready"),
        "ARECALL_TEST_GATE": str(cwd / "gate"),
    }


def wait_ready(cwd: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Wait until the held process is at its point (its ``ready`` file), failing if it exited."""
    deadline = time.monotonic() + timeout
    while not (cwd / "ready").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the hold point was never reached"
        time.sleep(0.05)
