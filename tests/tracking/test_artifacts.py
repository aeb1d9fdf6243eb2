"""A run's artifacts: beside the store they belong to, and published whole or not at all.

Two defects. A sqlite store's experiment put its artifacts in ``./mlruns`` of whatever
directory created it, so every test that logged to its own store from the repository wrote
artifact directories into the repository's ``mlruns/1`` that no row of ``mlflow.db`` points to.
And MLflow's ``log_artifacts`` copies into a local store file by file in place: a disk that
filled during the upload left a truncated PNG in ``mlruns/``. A full disk is injected where
MLflow copies (half of the PNG is written, then ENOSPC), in this process for ``arecall log`` and
through a ``sitecustomize`` for the tracker process of a real ``arecall run``.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow import MlflowClient

from arecall.tracking.run import TrackedRun

from tests.helpers import FAST_PROOF, ROOT, VENV_BIN

pytestmark = pytest.mark.slow


def _entries(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.is_dir() else set()


def test_a_sqlite_stores_artifacts_live_beside_it_whatever_the_working_directory(
    tmp_path, monkeypatch
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"

    def artifacts(client, run_id):
        client.log_text(run_id, "hello", "notes/hello.txt")

    with TrackedRun(uri, "demo", run_name="r") as run:
        run.start()
        run_id = run.finish({"m": 1.0}, artifacts=artifacts)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("demo")
    assert experiment.artifact_location == str(
        tmp_path / "store" / "mlruns" / experiment.experiment_id
    )
    assert (tmp_path / "store" / "mlruns" / experiment.experiment_id / run_id).is_dir()
    assert list(elsewhere.iterdir()) == []


def test_a_tracked_run_from_the_repository_writes_nothing_into_its_mlruns(
    tmp_path, mlflow_store, arecall
):
    assert Path.cwd() == ROOT  # where `make test` runs every in-process test
    before = _entries(ROOT / "mlruns")
    proc = arecall("run", f"hydra.run.dir={tmp_path}/out", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(mlflow_store)
    (run,) = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    assert client.list_artifacts(run.info.run_id, "reports")  # logged, into the test's store
    assert _entries(ROOT / "mlruns") == before


def _fill_disk_at(monkeypatch, suffix: str) -> None:
    """Copying a file ending in ``suffix`` writes half of it, then finds the disk full."""

    def half(src: str | os.PathLike[str], dst_file) -> None:
        data = Path(src).read_bytes()
        dst_file.write(data[: len(data) // 2])
        dst_file.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    copyfile, copyfileobj = shutil.copyfile, shutil.copyfileobj

    def copyfile_(src, dst, *args, **kwargs):
        if str(src).endswith(suffix):
            with open(dst, "wb") as out:
                half(src, out)
        return copyfile(src, dst, *args, **kwargs)

    def copyfileobj_(fsrc, fdst, *args, **kwargs):
        name = getattr(fsrc, "name", "")
        if isinstance(name, str) and name.endswith(suffix):
            half(name, fdst)
        return copyfileobj(fsrc, fdst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile_)
    monkeypatch.setattr(shutil, "copyfileobj", copyfileobj_)


def test_a_disk_that_fills_during_the_upload_leaves_no_partial_artifact(
    tmp_path, mlflow_store, monkeypatch, arecall
):
    out = tmp_path / "out"
    proc = arecall("run", f"hydra.run.dir={out}", "tracking.enabled=false", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    with monkeypatch.context() as patch:
        _fill_disk_at(patch, ".png")
        proc = arecall("log", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr
    client = MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("arecall")
    (failed,) = client.search_runs([experiment.experiment_id])
    assert failed.info.status == "FAILED"
    store = Path(experiment.artifact_location) / failed.info.run_id / "artifacts"
    assert _entries(store) == set(), _entries(store)  # nothing half-written, nothing half-set
    # with room again, `arecall log` logs it whole
    proc = arecall("log", str(out))
    assert proc.returncode == 0, proc.stderr
    runs = client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'")
    (done,) = runs
    png = Path(experiment.artifact_location) / done.info.run_id / "artifacts" / "reports"
    assert (png / "arecall_at_k.png").read_bytes() == (out / "arecall_at_k.png").read_bytes()


INJECTOR = """
import errno, os, shutil

if os.environ.get("ARECALL_TEST_FULL_AT"):
    _suffix = os.environ["ARECALL_TEST_FULL_AT"]
    _copyfile, _copyfileobj = shutil.copyfile, shutil.copyfileobj

    def _half(src, out):
        with open(src, "rb") as fh:
            data = fh.read()
        out.write(data[: len(data) // 2])
        out.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def copyfile(src, dst, *args, **kwargs):
        if str(src).endswith(_suffix) and "mlruns" in str(dst):
            with open(dst, "wb") as out:
                _half(src, out)
        return _copyfile(src, dst, *args, **kwargs)

    def copyfileobj(fsrc, fdst, *args, **kwargs):
        name = getattr(fsrc, "name", "")
        into = getattr(fdst, "name", None)  # MLflow stages into a file opened from a descriptor
        if isinstance(name, str) and name.endswith(_suffix) and not isinstance(into, str):
            _half(name, fdst)
        return _copyfileobj(fsrc, fdst, *args, **kwargs)

    shutil.copyfile, shutil.copyfileobj = copyfile, copyfileobj
"""


@pytest.mark.faults
def test_a_full_artifact_store_under_arecall_run_ends_failed_with_nothing_half_written(
    tmp_path, mlflow_store
):
    injector = tmp_path / "inject"
    injector.mkdir()
    (injector / "sitecustomize.py").write_text(INJECTOR)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": mlflow_store,
        "PYTHONPATH": str(injector),
        "ARECALL_TEST_FULL_AT": ".png",
    }
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(VENV_BIN / "arecall"), "run", f"hydra.run.dir={out}", FAST_PROOF],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("arecall: error: ") == 1 and "No space left" in proc.stderr
    client = MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("arecall")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]  # never RUNNING
    pngs = list(Path(experiment.artifact_location).rglob("*.png"))
    assert pngs == []  # no truncated PNG
    assert (out / "arecall_at_k.png").is_file()  # the results are kept for `arecall log`
