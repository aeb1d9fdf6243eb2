"""A second ``dvc exp run`` in a workspace is refused before it touches it; the first runs on.

Three concurrent ``dvc exp run -n … -S …`` in one workspace mixed each other's parameters (one
ran another's profiles and K), all failed, and left params.yaml, reports/ and dvc.lock mixed:
DVC holds its experiment lock on the workspace only while it prepares an experiment, and a
second one stashed and reset the first one's files under its running stages. The first is held
in its prove stage (a gate outside the product, as in test_tracking_faults.py) so the others
certainly start while it runs, whatever the machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests._holding import holding_env, release
from tests.helpers import FAST_PROOF, VENV_BIN, dvc, dvc_env, git, snapshot_repo

pytestmark = [pytest.mark.faults, pytest.mark.long]

WATCHED = ("params.yaml", "dvc.lock", "reports/metrics.json", "reports/tables.md")


def _state(work: Path) -> dict[str, bytes]:
    return {name: (work / name).read_bytes() for name in WATCHED}


def _wait_for(predicate, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def test_a_second_workspace_experiment_is_refused_untouched_and_the_first_succeeds(
    tmp_path, arecall
):
    work = snapshot_repo(tmp_path / "repo")
    first = ["profiles=domains", "evaluation.ks=[1,5]", FAST_PROOF]
    log = tmp_path / "first.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(VENV_BIN / "dvc"), "exp", "run", "-n", "first", *(f"-S{o}" for o in first)],
            cwd=work,
            env=dvc_env(**holding_env(tmp_path)),  # the gate and its injector outside the repo
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # held in its prove stage: the workspace holds its params.yaml and half its reports
        _wait_for(lambda: "Running stage 'prove'" in log.read_text(), proc, log)
        time.sleep(1.0)
        during = _state(work)
        for others in (
            ["-n", "second", "-Sprofiles=open"],
            ["-n", "third", "-Sretriever=bm25", "-Sevaluation.ks=[3]"],
            ["--queue", "-n", "queued", "-Sretriever=bm25"],
            ["--temp", "-n", "temp", "-Sretriever=bm25"],
        ):
            refused = dvc(work, "exp", "run", *others, timeout=300)
            assert refused.returncode != 0, refused.stdout + refused.stderr
            ours = [ln.strip() for ln in refused.stderr.splitlines() if "arecall: error:" in ln]
            assert len(ours) == 1, refused.stderr
            assert "experiment 'dvc exp run -n first" in ours[0] and "--queue" in ours[0]
            assert "Traceback" not in refused.stderr
            assert _state(work) == during  # refused before it stashed anything
        assert git(work, "stash", "list") == ""
    finally:
        release(tmp_path)
    assert proc.wait(timeout=900) == 0, log.read_text()
    params = (work / "params.yaml").read_text()
    assert "name: domains" in params and "retriever:\n  name: tfidf" in params
    by_dvc = json.loads((work / "reports" / "metrics.json").read_text())
    proc_run = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}/run", *first)
    assert proc_run.returncode == 0, proc_run.stderr
    by_run = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert by_dvc["k"] == by_run["k"] and by_dvc["pairs"] == by_run["pairs"]  # its own config
    # the claim ended with the experiment: the next one runs
    lock = json.loads((work / ".dvc" / "tmp" / "exps" / "rwlock").read_text())
    assert not lock.get("read", {}).get("workspace")
    assert dvc(work, "exp", "run", "--queue", "-n", "after", "-Sretriever=bm25").returncode == 0
