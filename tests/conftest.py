"""Fixtures and hooks only: environment hygiene, private stores, the CLI in process.

What tests import (paths, the fast config, corpora, git and dvc runners) is in ``helpers.py``:
a conftest is pytest's plugin, not a module to import from.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arecall.cli import main

from tests.helpers import start_mlflow_server, stop_mlflow_server, write_seed_dir

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DVC_NO_ANALYTICS"] = "1"


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

    def spy(
        self: VectorIndex, q: Any, k: int, ef: int, mask: Any = None, bitmap: Any = None
    ) -> Any:
        if (mask is not None) == filtered:
            calls.append(len(q))
        return walk(self, q, k, ef, mask, bitmap)

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


@pytest.fixture
def mlflow_server(tmp_path: Path, mlflow_template: Path) -> Iterator[str]:
    """The URL of a real `mlflow server` on 127.0.0.1, on a fresh store, stopped afterwards."""
    url, proc = start_mlflow_server(tmp_path, mlflow_template)
    try:
        yield url
    finally:
        stop_mlflow_server(proc)
