"""The docs' multi-step recipes, run as written on a clean clone: minutes each, so ``long``.

- Share results through a DVC remote: push from one clone, pull into another, nothing reruns.
  The recipe the README used to show stopped at `git commit` ("nothing to commit") on a clean
  clone, so `dvc push` never ran; the test shows that too.
- Regenerate the numbers after an experiment: `make repro` refuses a workspace holding another
  corpus (what `dvc exp run -S corpus=…` leaves behind) before anything runs, and the reset it
  names gets back the committed numbers byte for byte.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests._docs import clone_of, link_venv, sh, shell_env
from tests.helpers import ROOT, dvc, git, write_seed_dir

pytestmark = pytest.mark.long


def _data(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "data").rglob("*"))
        if p.is_file() and p.name != ".gitignore"
    }


def _committed(repo: Path) -> None:
    assert git(repo, "status", "--porcelain") == "", git(repo, "status", "--porcelain")


def test_the_dvc_remote_recipe_runs_as_written_from_one_clone_to_another(tmp_path: Path):
    origin = clone_of(tmp_path)
    remote = tmp_path / "team-remote"
    sh(origin, "make repro", timeout=1500)
    _committed(origin)  # a reproduced clone has nothing to commit...

    # ...so the README's old recipe stopped at the commit and never pushed
    old = subprocess.run(
        ["bash", "-c", 'git add dvc.lock reports && git commit -m "results" && .venv/bin/dvc push'],
        cwd=origin,
        env=shell_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert old.returncode == 1 and "nothing to commit" in old.stdout
    assert not remote.exists()

    env = {"DVC_REMOTE": str(remote), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    sh(
        origin,
        '.venv/bin/dvc remote add -d shared "$DVC_REMOTE"',
        'git add .dvc/config && git commit -m "DVC remote"',
        **env,
    )
    sh(
        origin,
        ".venv/bin/dvc push",
        'git add dvc.lock reports && git diff --cached --quiet || git commit -m "results"',
        **env,
    )
    assert any(p.is_file() for p in remote.rglob("*"))
    _committed(origin)
    produced = _data(origin)
    assert {name.split("/")[1] for name in produced} >= {"corpus", "rank", "filter", "score"}

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    link_venv(clone)
    assert not (clone / "data" / "corpus").exists()  # git alone does not carry data/
    out = sh(clone, ".venv/bin/dvc pull", ". .venv/bin/activate && dvc repro", timeout=900)
    ran = [line for line in out.stdout.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'track':"], out.stdout  # nothing recomputed
    assert "Stage 'score' didn't change, skipping" in out.stdout, out.stdout
    assert _data(clone) == produced
    _committed(clone)
    assert (clone / "mlflow.db").exists()  # the pulled results, in this clone's MLflow store


def test_make_repro_after_a_dvc_experiment_refuses_then_the_reset_restores_the_numbers(
    tmp_path: Path,
):
    repo = clone_of(tmp_path)
    corpus = write_seed_dir(tmp_path / "their-corpus", 5, n_docs=36)
    dvc(repo, "exp", "run", "-S", "corpus=seed_json", "-S", f"corpus.path={corpus}", check=True)
    changed = git(repo, "status", "--porcelain")
    assert " params.yaml" in changed and " reports/tables.md" in changed  # applied to the workspace
    readme, tables = (repo / "README.md").read_bytes(), (repo / "reports/tables.md").read_bytes()
    assert b"corpus `seed_json`" in tables

    refused = sh(repo, "make repro", check=False)
    assert refused.returncode != 0
    errors = [line for line in refused.stderr.splitlines() if line.startswith("arecall: error:")]
    assert len(errors) == 1, refused.stderr
    assert (
        "params.yaml is not conf/'s default config (corpus.name: seed_json, not discovery"
        in errors[0]
    )
    assert "`git checkout params.yaml`" in errors[0]
    assert "Running stage" not in refused.stdout  # refused before dvc ran anything
    assert (repo / "README.md").read_bytes() == readme  # the README kept the discovery numbers
    assert (repo / "reports/tables.md").read_bytes() == tables

    sh(repo, "git checkout params.yaml", "make repro", timeout=1500)
    _committed(repo)  # README, reports/ and dvc.lock: the committed bytes again
    assert (repo / "README.md").read_bytes() == (ROOT / "README.md").read_bytes()
