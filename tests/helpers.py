"""What the tests import: paths, the fast config, generated seed-layout corpora, git and dvc.

Plain functions and constants (pytest's fixtures and hooks stay in ``conftest.py``). Test files
import them as ``from tests.helpers import …``.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from arecall.pipeline.config import default_config
from arecall.pipeline.schema import ExperimentConfig

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from arecall.vector.generator import BenchData

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


# -- config options ---------------------------------------------------------------------------

#: The settings each option that reads files requires, to compose.
REQUIRED = {
    ("corpus", "seed_json"): ["corpus.path=/some/dir"],
    ("corpus", "beir"): ["corpus.path=/some/dir"],
    ("profiles", "acl_file"): ["profiles.path=/some/acl.tsv"],
    ("retriever", "embeddings"): ["retriever.documents=d.npy", "retriever.queries=q.npy"],
    ("retriever", "model2vec"): ["retriever.model=/some/model"],
}


# -- a real mlflow server on 127.0.0.1 ------------------------------------------------------------


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mlflow_server(
    tmp_path: Path, template: Path, store: Path | None = None
) -> tuple[str, subprocess.Popen]:
    """A server on a copy of ``template`` (a migrated empty store), or on ``store`` itself."""
    port = free_port()
    db = store if store is not None else tmp_path / "server.db"
    if store is None:
        shutil.copyfile(template, db)  # migrated already: starts sooner
    # no background job runner: the test only logs and reads runs, and it starts seconds sooner
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    with (tmp_path / "server.log").open("w") as log:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "mlflow"),
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--backend-store-uri",
                f"sqlite:///{db}",
                "--artifacts-destination",
                str(tmp_path / "artifacts"),
                "--workers",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return url, proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_mlflow_server(proc)
            pytest.fail("mlflow server did not start:\n" + (tmp_path / "server.log").read_text())
        time.sleep(0.5)


def stop_mlflow_server(proc: subprocess.Popen) -> None:
    """Stop a server `start_mlflow_server` started (its whole process group)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=3)  # the test is over: no need to wait out a graceful shutdown
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# -- the arecall modules an entry point imports (DVC deps, tracking's layering) ----------------

#: The package sources (what DVC stages depend on).
SRC = ROOT / "src"


def _module_file(name: str) -> Path | None:
    base = SRC / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that can run: ``if TYPE_CHECKING:`` bodies are for type checkers only."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


@cache
def _lazy_names(path: Path) -> dict[str, str]:
    """A package's ``_LAZY`` table (public name -> defining module), if it has one."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_LAZY":
            return ast.literal_eval(node.value)
    return {}


_FACTORY = re.compile(r"^(arecall(?:\.\w+)+):[\w.]+$")


def _calls_load(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load"
        for n in ast.walk(node)
    )


@cache
def _registry(path: Path) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """A registry module's component modules (its ``Registered`` factory paths), its registry
    names (``X = Registry(...)``) and its loaders: functions that call ``load()``, directly or
    through another loader of the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    factories: set[str] = set()
    registries: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registered":
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    match = _FACTORY.match(arg.value)
                    if match:
                        factories.add(match.group(1))
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "Registry"
        ):
            registries.update(t.id for t in node.targets if isinstance(t, ast.Name))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    loaders = {name for name, fn in functions.items() if _calls_load(fn)}
    while True:
        more = {
            name
            for name, fn in functions.items()
            if name not in loaders
            and any(
                getattr(c.func, "id", None) in loaders
                for c in ast.walk(fn)
                if isinstance(c, ast.Call)
            )
        }
        if not more:
            break
        loaders |= more
    return frozenset(factories), frozenset(registries), frozenset(loaders)


@cache
def _imports(path: Path) -> set[str]:
    """Every arecall module an import anywhere in the file (function-level too) can load."""
    found: set[str] = set()
    package = ".".join(path.relative_to(SRC).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    loads_here = _calls_load(tree)
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("arecall"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            if base.startswith("arecall"):
                found.add(base)
                init = _module_file(base)
                lazy = _lazy_names(init) if init is not None else {}
                found.update(lazy.get(a.name, f"{base}.{a.name}") for a in node.names)
                if init is not None:  # a registry's components, where this module loads them
                    factories, registries, loaders = _registry(init)
                    names = {a.name for a in node.names}
                    if names & loaders or (loads_here and names & registries):
                        found.update(factories)
    return found


def stage_modules(entry: str) -> set[Path]:
    """The files of ``entry`` and of every arecall module it imports, with parent packages."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
            path = _module_file(".".join(parts[:i]))
            if path is not None and path not in seen:
                seen.add(path)
                todo.extend(_imports(path))
    return seen


# -- the clustered vector corpus the store audits share (Chroma, Milvus) ------------------------

N_DOCS, DIMS, N_CLUSTERS, N_QUERIES, K = 1200, 32, 40, 30, 10
AUTHORIZED = range(12)  # 30% of the clusters
WITHOUT_AUTO = ["post", "pushdown", "pre"]


def clustered(seed: int = 0) -> tuple[BenchData, npt.NDArray[np.int64]]:
    """Clustered corpus; ``draws`` put whole clusters under each threshold (a correlated ACL).

    Cluster c's documents all draw (c + 0.5) / N_CLUSTERS, so ``Below("draw", 0.3)`` is
    ``InSet("group", range(12))``; queries come from clusters 20..39, never authorized at 30%.
    """
    import numpy as np

    from arecall.vector.generator import BenchData, l2_normalise

    rng = np.random.default_rng(seed)
    centers = l2_normalise(rng.normal(size=(N_CLUSTERS, DIMS)))
    group = rng.integers(0, N_CLUSTERS, N_DOCS)
    spread = 0.6 / np.sqrt(DIMS)
    vectors = l2_normalise(centers[group] + spread * rng.normal(size=(N_DOCS, DIMS)))
    home = rng.integers(N_CLUSTERS // 2, N_CLUSTERS, N_QUERIES)
    queries = l2_normalise(centers[home] + spread * rng.normal(size=(N_QUERIES, DIMS)))
    draws = (group + 0.5) / N_CLUSTERS
    return BenchData(vectors=vectors, queries=queries, draws=draws, seed=seed), group


def rows_by_mode(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A measurement's rows by placement (``mode``)."""
    return {row["mode"]: row for row in rows}


# -- the comparison table (arecall compare) ---------------------------------------------------------


def parse_table(text: str, *, bold: bool = False) -> list[dict[str, str]]:
    """The rows of the comparison's Markdown table by header (bold marks removed unless
    ``bold``)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(
            zip(
                header,
                (c.strip() if bold else c.strip().strip("*") for c in line.strip("|").split("|")),
                strict=True,
            )
        )
        for line in lines[2:]
    ]


def check_against_headlines(text: str, headlines: dict[str, dict]) -> None:
    """Every row's numbers are its run's headline.json, as printed (3 decimals)."""
    rows = parse_table(text)
    assert len(rows) == sum(len(h["k"]) for h in headlines.values())
    for row in rows:
        line = headlines[row["run"]]["k"][row["K"]]
        assert row["Recall"] == f"{line['recall']:.3f}"
        assert row["ARecall post"] == f"{line['arecall_post']:.3f}"
        assert row["ARecall pre"] == f"{line['arecall_pre']:.3f}"
        assert row["gap"] == f"{line['gap']:+.3f}"
        assert row["gap R_A≠∅ [CI]"] == (
            f"{line['gap_nonempty']:+.3f} "
            f"[{line['gap_nonempty_low']:+.3f}, {line['gap_nonempty_high']:+.3f}]"
        )


# -- a model2vec model built here (no download) -------------------------------------------------


def tiny_model(directory: Path, seed: int = 0, dims: int = 8) -> Path:
    """A model2vec model in the library's own format: the test corpus's words plus [UNK] and
    [PAD], a seeded embedding matrix, a lower-casing whitespace word tokenizer."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(sorted(set(WORDS)))}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(seed).normal(size=(len(vocab), dims)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(directory)
    return directory
