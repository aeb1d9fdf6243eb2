"""A run directory arecall cannot write is one line naming it, and nothing is left half-written.

Before, Hydra made the directory, wrote ``.hydra/`` and opened its log before arecall spoke: a
read-only file system, a full disk (0 or 8 KiB free) or a file-size limit ended in Hydra's
traceback, with a half-written ``.hydra/`` left behind. The kernel's own refusals are used
where a test can cause them (sysfs takes no files, even from root; RLIMIT_FSIZE makes a write
past the limit fail as a full disk does); a disk that fills after the check, while Hydra writes
``.hydra/``, is injected.
"""

from __future__ import annotations

import errno
import resource
import subprocess
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.helpers import FAST_PROOF, VENV_BIN, dvc_env

pytestmark = pytest.mark.slow

#: sysfs refuses to create files for every user, root included.
REFUSING = Path("/sys/arecall-test-run")


def _one_line(proc, start: str, reason: str = "") -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"arecall: error: {start}"), proc.stderr
    assert reason in proc.stderr, proc.stderr


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_a_directory_the_file_system_refuses_is_one_line_and_no_run_is_logged(
    sweep, mlflow_store, arecall
):
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    what = "sweep" if sweep else "run"
    proc = arecall("run", *(["-m"] if sweep else []), f"{key}={REFUSING}/x", FAST_PROOF)
    _one_line(proc, f"{REFUSING}/x: cannot write the {what} directory: ")
    client = MlflowClient(mlflow_store)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def _limited(limit: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


@pytest.mark.faults
@pytest.mark.parametrize("limit", [0, 8 * 1024], ids=["0-bytes", "8-KiB"])
def test_a_file_size_limit_below_a_runs_needs_is_one_line_naming_the_directory(tmp_path, limit):
    out = tmp_path / "run"
    proc = subprocess.run(
        [str(VENV_BIN / "arecall"), "run", f"hydra.run.dir={out}", "tracking.enabled=false"],
        cwd=tmp_path,
        env=dvc_env(),
        preexec_fn=_limited(limit),
        capture_output=True,
        text=True,
        timeout=300,
    )
    _one_line(proc, f"{out}: cannot write the run directory: ", "File too large")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no probe, no directory


def _filling_disk(monkeypatch, after: str) -> None:
    """Hydra's ``_save_config`` writes half of ``after`` and then finds the disk full."""
    import hydra.core.utils as hydra_utils

    save = hydra_utils._save_config

    def full(cfg, filename, output_dir):
        if filename == after:
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / filename).write_text("hydra:\n  run:\n")
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(cfg, filename, output_dir)

    monkeypatch.setattr(hydra_utils, "_save_config", full)


def test_a_disk_that_fills_while_hydra_writes_leaves_no_directory(
    tmp_path, monkeypatch, mlflow_store, arecall
):
    _filling_disk(monkeypatch, "hydra.yaml")
    out = tmp_path / "outputs" / "day" / "run"
    proc = arecall("run", f"hydra.run.dir={out}", FAST_PROOF)
    _one_line(proc, f"{out}: cannot write the run directory: No space left on device")
    assert not (tmp_path / "outputs").exists()  # the parents Hydra made are gone too
    client = MlflowClient(mlflow_store)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_in_a_directory_that_existed_only_what_hydra_added_is_removed(
    tmp_path, monkeypatch, arecall
):
    _filling_disk(monkeypatch, "overrides.yaml")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file\n")
    proc = arecall("run", f"hydra.run.dir={out}", "tracking.enabled=false", FAST_PROOF)
    _one_line(proc, f"{out}: cannot write the run directory: No space left on device")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
