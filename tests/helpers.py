"""What the tests import: paths, the fast config, generated seed-layout corpora, git and dvc.

Plain functions and constants (pytest's fixtures and hooks stay in ``conftest.py``). Test files
import them as ``from tests.helpers import …``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from arecall.pipeline.config import default_config
from arecall.pipeline.schema import ExperimentConfig

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

#: For tests that run the pipeline for its numbers: a 5-example property search instead of the
#: configured 200. The property claims are checked at full strength in test_proof.py, and the
#: committed proof.json end to end by test_pipeline_end_to_end.py.
FAST_PROOF = "evaluation.proof.max_examples=5"


def fast_config(*overrides: str) -> ExperimentConfig:
    """`default_config` with the fast property search (later overrides win)."""
    return default_config([FAST_PROOF, *overrides])


def with_vector_search(section: dict[str, Any]) -> ExperimentConfig:
    """conf/'s defaults with this ``vector_search`` section (``corpus``, ``index``), enabled and
    checked as every entry point checks a configuration."""
    from arecall.pipeline.config import checked

    return checked({**default_config().params(), "vector_search": {**section, "enabled": True}})


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "red",
    "green",
    "blue",
    "cyan",
    "amber",
]


def write_seed_dir(
    path: Path, seed: int, *, n_docs: int = 30, n_queries: int = 8, n_profiles: int = 4
) -> Path:
    """A random corpus in the seed's JSON layout (varied texts, relevance and grants)."""
    rng = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    datasets = []
    for i in range(n_docs):
        words = rng.choices(WORDS, k=rng.randint(2, 12))
        datasets.append(
            {
                "dataset": f"ds-{i:03d}-{rng.choice(WORDS)}",
                "domain": rng.choice(["a", "b", "c"]),
                "description": " ".join(words) + ".",
                "schemas": [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}"],
                "capabilities": [
                    {
                        "name": "search",
                        "sensitivity": "internal",
                        "description": f"search over {rng.choice(WORDS)}",
                    }
                ],
            }
        )
    ids = [d["dataset"] for d in datasets]
    queries = [
        {
            "query": " ".join(rng.choices([*WORDS, "unseenword"], k=rng.randint(1, 5))),
            "domain": "a",
            "relevant": rng.sample(ids, rng.randint(0, 6)),
        }
        for _ in range(n_queries)
    ]
    profiles = {
        f"p{j}": {
            "principal_class": f"p{j}",
            "clearance": "internal",
            "grants": {d: ["search"] for d in rng.sample(ids, rng.randint(0, n_docs))},
        }
        for j in range(n_profiles)
    }
    (path / "corpus.json").write_text(json.dumps({"datasets": datasets}, indent=1))
    (path / "queries.json").write_text(json.dumps({"queries": queries}, indent=1))
    (path / "profiles.json").write_text(json.dumps({"profiles": profiles}, indent=1))
    return path


def assert_proved_on_every_pair(out: dict[str, Any]) -> None:
    """The prove stage checked this run's own lists on every query-principal pair and K.

    (That the claims held needs no assertion: the prove stage raises on a counterexample.)
    """
    pairs, n_k = out["metrics"]["pairs"], len(out["metrics"]["k"])
    data = {c["claim"]: c["examples"] for c in out["proof"]["claims"] if c["kind"] == "data"}
    assert data == {
        "run_post_subset_of_pre": pairs * n_k,
        "run_gap_non_negative": pairs * n_k,
        "run_lists_authorized": pairs,
    }


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd``; its stdout."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def snapshot_repo(work: Path) -> Path:
    """A new git repository at ``work`` holding exactly the files git would clone from ROOT.

    The clean-clone check in miniature: no ignored local state (data/, mlflow.db, .venv) comes
    along, so a test on it cannot pass because of something only this checkout has.
    """
    files = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, files.split("\0")):
        src = ROOT / name
        if not src.exists() and not src.is_symlink():
            continue
        dst = work / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, dst)
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    return work


def dvc_env(**extra: str) -> dict[str, str]:
    """The environment a user's `dvc` sees: the venv first on PATH, no telemetry, no outer store."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    env["DVC_NO_ANALYTICS"] = "1"
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    env.update(extra)
    return env


def dvc(
    work: Path, *args: str, check: bool = False, timeout: float = 1500, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the venv's ``dvc`` in ``work`` as a user would (`dvc_env`); ``check``: assert exit 0."""
    proc = subprocess.run(
        [str(VENV_BIN / "dvc"), *args],
        cwd=work,
        env=dvc_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, f"dvc {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def rank_world(scores: Any, rel_m: Any, acl_m: Any, ks: Any, depth: int | None) -> tuple[Any, Any]:
    """A random world's full ranking (padded) and the pipeline's ranking kept to ``depth``.

    The batch kernels are tested at every kept depth against the full ranking: a shallow ranking
    is extended exactly as far as the pre placement needs.
    """
    import scipy.sparse as sp

    from arecall.core.ranking import rank_queries, rank_scores

    ranked_all = rank_scores(sp.csr_matrix(scores)).padded()
    ranking = rank_queries(
        [sp.csr_matrix(scores)],
        n_queries=len(scores),
        depth=depth,
        acl=acl_m,
        k_max=max(ks),
        relevance=rel_m,
    )
    return ranked_all, ranking
