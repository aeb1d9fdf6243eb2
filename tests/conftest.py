"""Shared fixtures: environment hygiene, generated seed-layout corpora, fast configs, the CLI."""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arecall.cli import main
from arecall.pipeline.config import default_config

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DVC_NO_ANALYTICS"] = "1"

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

#: For tests that run the pipeline for its numbers: a 5-example property search instead of the
#: configured 200. The property claims are checked at full strength in test_proof.py, and the
#: committed proof.json end to end by test_pipeline_end_to_end.py.
FAST_PROOF = "evaluation.proof.max_examples=5"


def fast_config(*overrides: str) -> dict[str, Any]:
    """`default_config` with the fast property search (later overrides win)."""
    return default_config([FAST_PROOF, *overrides])


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


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    return write_seed_dir(tmp_path / "seed", 7)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs share a vector-experiment cache within the session, never the user's ~/.cache."""
    saved = os.environ.get("ARECALL_CACHE_DIR")
    os.environ["ARECALL_CACHE_DIR"] = str(tmp_path_factory.mktemp("arecall-cache"))
    yield
    if saved is None:
        os.environ.pop("ARECALL_CACHE_DIR", None)
    else:
        os.environ["ARECALL_CACHE_DIR"] = saved


# Why the two hooks below: a full garbage collection walks every tracked object, some 500,000
# once MLflow, DVC, Hydra, pandas and faiss are imported: 1-6 s per collection on a loaded
# 2-core machine. pytest collects twice more after an xdist worker has reported its results
# (its last search for unraisable exceptions), and execnet, xdist's transport, gives a worker
# 5 s to end once told to, then sends it SIGINT: the KeyboardInterrupt landed in Hypothesis's gc
# callback, the traceback (PytestUnraisableExceptionWarning) a passing `make test` printed.


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what the imports made (`gc.freeze`): module state, alive to the end anyway, is
    never walked again, so every full collection during the run covers what tests make."""
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Do the last full collection before the worker reports (xdist sends its results after
    every ``pytest_sessionfinish``), with pytest's unraisable-exception hook still catching
    finalizers, then freeze the survivors: pytest's own passes after the report are quick."""
    gc.collect()
    gc.freeze()


def _dispose_engines(tmp_path: Path) -> None:
    """Close MLflow's pooled connections to this test's sqlite stores (cached per URI for the
    life of the process: a session of tests kept one engine per test)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engines = getattr(SqlAlchemyStore, "_engine_map", {})
    for uri in [u for u in engines if str(tmp_path) in u]:
        engines.pop(uri).dispose()


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test writes to the repository's own mlflow.db (nor, the store being in tmp_path, to
    its mlruns/: a sqlite store's artifacts live beside it); its store's engines end with it."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow-test.db")
    yield
    if "mlflow.store.tracking.sqlalchemy_store" in sys.modules:
        _dispose_engines(tmp_path)


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite store with every schema migration applied, made once a session.

    Creating a store runs MLflow's migrations (seconds); a copy of this file opens at once.
    """
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_template: Path) -> str:
    """This test's own MLflow store (a copy of the template), set as MLFLOW_TRACKING_URI."""
    path = tmp_path / "store.db"
    shutil.copyfile(mlflow_template, path)
    uri = f"sqlite:///{path}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def _walks(monkeypatch: pytest.MonkeyPatch, filtered: bool) -> list[int]:
    """Queries per HNSW walk (``VectorIndex._walk``, where every graph search of an ``hnsw``
    index goes) from here on: the pushdowns when ``filtered``, else the unfiltered walks."""
    from arecall.vector.index import VectorIndex

    calls: list[int] = []
    walk = VectorIndex._walk

    def spy(self: VectorIndex, q: Any, k: int, ef: int, mask: Any = None) -> Any:
        if (mask is not None) == filtered:
            calls.append(len(q))
        return walk(self, q, k, ef, mask)

    monkeypatch.setattr(VectorIndex, "_walk", spy)
    return calls


@pytest.fixture
def graph_lists(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Queries per unfiltered graph walk from here on: the top-ef lists ``auto`` reads (its
    walks that carry a certificate), by ``search`` or by its direct plan. Calibrating a
    planner searches too: clear the list before the call being counted."""
    return _walks(monkeypatch, filtered=False)


@pytest.fixture
def pushdowns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Queries per pushdown walk from here on: ``auto``'s pushdowns, by ``search_filtered``
    or by its direct plan (its list walks are counted by :func:`graph_lists`)."""
    return _walks(monkeypatch, filtered=True)


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


@dataclass(frozen=True)
class Result:
    """What a command did: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def arecall(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Result]]:
    """Run ``arecall ARGS`` in this process, as the console script would (exit status included).

    The console script is ``sys.exit(main())``; a subprocess adds only the entry point's
    installation, which test_cli_wiring.py and the DVC tests check once.
    """

    monkeypatch.delenv("COLUMNS", raising=False)  # a table printed whole, as into a pipe

    def run(*args: str) -> Result:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["arecall", *args])  # `arecall run` rewrites it
        try:
            code = main(list(args))
        except SystemExit as exc:  # raised inside Hydra's task, as in the console script
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return Result(code, out, err)

    # Hydra configures the root logger for its job (a handler on this test's captured stdout
    # and a log file): undo that, so later tests do not log into a closed stream.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield run
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


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
