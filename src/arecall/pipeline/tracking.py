"""MLflow tracking: one run per pipeline execution, with everything a comparison needs.

A run carries the flattened config as params; every metric per K and placement (both as
``arecall_pre_at_5``-style names and as ``arecall_pre`` stepped by K, so the UI draws the curve);
the tables as MLflow tables and as Markdown; the proof results; and the report files. The store
is MLFLOW_TRACKING_URI when set, else the embedded ``sqlite:///mlflow.db`` in the working
directory. Telemetry is off unless the environment turns it on. mlflow is imported only here, so
stages that do not track do not pay for it.

Every write to a store goes through `open_store` (one lock, one code path): ``arecall run`` and
its sweeps, ``arecall evaluate --mlflow``, ``arecall log`` and the DVC track stage. What a user
can rely on:

- an embedded sqlite store is created (its schema migrated) under the store's lock, so writers
  started together on a fresh ``mlflow.db`` take turns instead of breaking it;
- no run stays RUNNING: an exception ends it FAILED (the error as the ``arecall.error`` tag),
  SIGTERM / SIGINT end it KILLED (exit 143 / 130), and a run whose process died (kill -9) is
  closed KILLED with the tag ``arecall.orphaned`` by the next writer on its host (every run
  carries ``arecall.pid`` and ``arecall.host``);
- tracking never loses results or makes a user wait: a tracking server is probed in seconds and
  MLflow's HTTP retries are bounded; a failure is one line naming where the results are and
  ``arecall log <dir>`` to log them later (``tracking.on_error: warn`` finishes untracked);
- names from the data (principals) never become MLflow keys unescaped (see `safe_key`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError
from arecall.core.measures import PIPELINE, VECTOR, Kind, mlflow_metrics, per_k_keys
from arecall.pipeline.config import flatten
from arecall.pipeline.report import main_table, restricted_table
from arecall.pipeline.run_ends import (
    Interrupted,
    RunBlock,
    end_status,
    error_text,
    interruptible,
)

__all__ = [
    "METRIC_KEYS",
    "PARENT_ENV",
    "UPLOAD_STEPS",
    "Interrupted",
    "RunBlock",
    "TrackedRun",
    "TrackingError",
    "close_orphans",
    "end_status",
    "end_sweep",
    "error_text",
    "experiment_name",
    "interruptible",
    "log_evaluation",
    "log_run",
    "logged_runs",
    "open_store",
    "reports_digest",
    "safe_key",
    "store_lock",
    "tracking_uri",
    "upload_bar",
]

PARENT_ENV = "ARECALL_PARENT_RUN_ID"

#: What a run's upload does, in order: the steps of its progress bar.
UPLOAD_STEPS = ("params, metrics and tags", "artifacts", "status")

#: Per-K means logged as MLflow metrics (counts are logged apart).
METRIC_KEYS = per_k_keys({n: m for n, m in PIPELINE.items() if m.kind != Kind.COUNT})

#: MLflow's limits (mlflow.utils.validation): per log_batch call, and on a param value's length.
_PARAMS_PER_BATCH, _METRICS_PER_BATCH, _PARAM_VALUE_MAX, _TAG_VALUE_MAX = 100, 1000, 6000, 8000
#: Bounded HTTP behaviour for a tracking server (MLflow's defaults retry for minutes).
_HTTP_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
_PROBE_TIMEOUT = 5.0


class TrackingError(ArecallError):
    """The tracking store could not be written (one line; the results are kept)."""


def tracking_uri(root: str | Path = ".") -> str:
    """MLFLOW_TRACKING_URI, or the embedded sqlite store ``mlflow.db`` of the repository.

    The repository is $DVC_ROOT when DVC runs the stage: a queued or ``--temp`` experiment runs
    in a temporary copy under ``.dvc/tmp/exps``, and DVC points DVC_ROOT at the original
    repository, so its run lands in the store the user opens with ``make ui``. Otherwise
    ``root``.

    Examples
    --------
    >>> import os
    >>> for name in ("MLFLOW_TRACKING_URI", "DVC_ROOT"):
    ...     _ = os.environ.pop(name, None)
    >>> tracking_uri("/repo")
    'sqlite:////repo/mlflow.db'
    """
    where = Path(os.environ.get("DVC_ROOT") or root).resolve()
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{where}/mlflow.db"


def config_hash(cfg: Mapping[str, Any]) -> str:
    """A short, stable hash of everything in the config that can change a result.

    ``hydra`` (run directories) and ``tracking`` (where results go) are left out, so the same
    experiment has the same hash whichever entry point ran it.

    Examples
    --------
    >>> a = config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": True}})
    >>> a == config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": False}})
    True
    >>> len(a)
    12
    """
    from arecall.io.digest import json_digest

    return json_digest({k: v for k, v in cfg.items() if k not in ("hydra", "tracking")})[:12]


def provenance(cfg: Mapping[str, Any], root: str | Path = ".") -> dict[str, str]:
    """Tags that let a run be matched to its code and experiment.

    The git commit (DVC's baseline revision inside an experiment's temporary workspace) and
    whether the tree had uncommitted changes, the config hash, the command line, and the DVC
    experiment's name when DVC runs it.
    """
    import shlex
    import subprocess

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    tags = {"arecall.config_hash": config_hash(cfg), "arecall.command": shlex.join(sys.argv)}
    commit = os.environ.get("DVC_EXP_BASELINE_REV") or git("rev-parse", "HEAD")
    if commit:
        tags["mlflow.source.git.commit"] = commit
        status = git("status", "--porcelain", "--untracked-files=no")
        if status is not None:
            tags["arecall.git_dirty"] = str(bool(status)).lower()
    if os.environ.get("DVC_EXP_NAME"):
        tags["arecall.dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    return tags


# -- the store: one lock, created once, probed, orphans closed ------------------------------------


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise writers of one embedded sqlite store across processes (a no-op otherwise).

    Parallel sweep jobs (Hydra's joblib launcher) and concurrent commands share ``mlflow.db``;
    sqlite allows one writer at a time, MLflow does not retry a locked database, and its schema
    migration on a fresh file is not safe against a second process. An exclusive ``flock`` on
    ``<db>.lock`` makes them take turns. A tracking server needs no lock.

    Examples
    --------
    >>> import tempfile
    >>> with store_lock(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"):
    ...     pass
    """
    if not uri.startswith("sqlite:///"):
        yield
        return
    lock_path = Path(uri.removeprefix("sqlite:///") + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def _bound_http() -> None:
    """MLflow's HTTP retries and timeouts for this process, unless the environment sets them."""
    for name, value in _HTTP_ENV.items():
        os.environ.setdefault(name, value)


def _probe(uri: str) -> bool:
    """Whether a tracking server answers ``/health`` within a few seconds (True for files)."""
    if not _is_server(uri):
        return True
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=_PROBE_TIMEOUT):
            return True
    except urllib.error.HTTPError:
        return True  # it answered: some servers have no /health; the real call will tell
    except (OSError, ValueError):
        return False


#: Stores this process has opened (made or migrated) already: a second open skips that query.
_OPENED: set[str] = set()


@contextmanager
def open_store(uri: str, *, orphans: bool = True) -> Iterator[Any]:
    """An `mlflow.MlflowClient` on ``uri``, under the store's lock, ready to write.

    The one way this package writes to a store. Under the lock: a server is probed (unreachable:
    `TrackingError` at once, not after MLflow's retries), a sqlite store is opened (so its schema
    is created or migrated by one process at a time), and runs of dead processes on this host are
    closed (`close_orphans`).

    Examples
    --------
    >>> import tempfile
    >>> with open_store(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db") as client:
    ...     [e.name for e in client.search_experiments()]
    ['Default']
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    _bound_http()
    # creating a fresh store is routine, not news: MLflow's and alembic's INFO lines about it
    # would otherwise stand before (and break) the one-line error of a run that then fails
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with store_lock(uri):
        if not _probe(uri):
            raise TrackingError(f"tracking server {uri} unreachable")
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        if orphans or uri not in _OPENED:
            experiments = client.search_experiments()  # creates/migrates a sqlite store, here
            _OPENED.add(uri)
            if orphans:
                close_orphans(client, [e.experiment_id for e in experiments])
        yield client


def _host() -> str:
    return socket.gethostname()


def _alive(pid: int, started_ms: int) -> bool:
    """Whether ``pid`` is a live process that may own a run started at ``started_ms``."""
    if pid == os.getpid():
        return True
    try:
        import psutil
    except ImportError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        # a pid reused by a process started after the run is not the run's owner
        return bool(proc.create_time() * 1000 <= started_ms + 1000)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def close_orphans(client: Any, experiment_ids: Sequence[str]) -> list[str]:
    """End KILLED the RUNNING runs of this host whose process is gone; return their ids.

    A process killed with SIGKILL cannot end its run; the next writer on the same host does, with
    the tag ``arecall.orphaned`` as evidence (the run's ``arecall.pid`` and ``arecall.host``).

    Examples
    --------
    >>> import tempfile
    >>> with open_store(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db", orphans=False) as client:
    ...     close_orphans(client, ["0"])
    []
    """
    if not experiment_ids:
        return []
    host = _host().replace("'", "\\'")
    runs = client.search_runs(
        list(experiment_ids),
        filter_string=f"attributes.status = 'RUNNING' and tags.`arecall.host` = '{host}'",
    )
    closed = []
    for run in runs:
        try:
            pid = int(run.data.tags.get("arecall.pid", ""))
        except ValueError:
            continue
        if _alive(pid, int(run.info.start_time or 0)):
            continue
        client.set_tag(
            run.info.run_id,
            "arecall.orphaned",
            f"process {pid} on {_host()} ended without closing the run; closed by {os.getpid()}",
        )
        client.set_terminated(run.info.run_id, "KILLED")
        closed.append(run.info.run_id)
    return closed


# -- signals ---------------------------------------------------------------------------------------


# -- keys and params -------------------------------------------------------------------------------


def safe_key(index: int, name: str, *, width: int = 40) -> str:
    """An MLflow-safe key part for a name from the data: its index plus a readable remainder.

    The index (the name's position in a fixed order) makes keys distinct whatever the names;
    the rest keeps letters, digits, ``_`` and ``-`` only, truncated to ``width``. The mapping key
    → name is logged with the run (``keys.json``).

    Examples
    --------
    >>> safe_key(3, "a:b"), safe_key(4, "a;b"), safe_key(0, "../../x")
    ('p003_a_b', 'p004_a_b', 'p000_x')
    >>> len(safe_key(1, "n" * 300))
    45
    """
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:width]
    return f"p{index:03d}_{readable}" if readable else f"p{index:03d}"


def _params(flat: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Params within MLflow's value limit, and the full values of the ones cut short."""
    out, cut = {}, {}
    for key, value in flat.items():
        if len(value) > _PARAM_VALUE_MAX:
            note = f"... ({len(value)} characters; in full in params_full.json)"
            out[key], cut[key] = value[: _PARAM_VALUE_MAX - len(note)] + note, value
        else:
            out[key] = value
    return out, cut


# -- one run ---------------------------------------------------------------------------------------

Artifacts = Callable[[Any, str], None]


class TrackedRun(RunBlock):
    """One MLflow run, written through `open_store`; ends FAILED or KILLED if the block fails.

    `start` creates the run (tags, params); `finish` logs the metrics in batches and the
    artifacts and ends it FINISHED. Used as a context manager, an exception ends the run FAILED
    (with ``arecall.error``) and `Interrupted` / KeyboardInterrupt KILLED. A store that cannot be
    written does not stop the work: the failure is remembered and reported once by `finish`, as
    `TrackingError` (``on_error="fail"``) or a warning (``"warn"``), naming ``results`` — the
    directory holding the results — and the ``arecall log`` argument that logs them later.

    Examples
    --------
    >>> import tempfile
    >>> uri = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
    >>> with TrackedRun(uri, "demo", run_name="r", params={"a": "1"}) as run:
    ...     run.start()
    ...     run_id = run.finish({"m": 0.5})
    >>> from mlflow import MlflowClient
    >>> got = MlflowClient(uri).get_run(run_id)
    >>> got.info.status, got.data.metrics, got.data.params
    ('FINISHED', {'m': 0.5}, {'a': '1'})
    """

    def __init__(
        self,
        uri: str,
        experiment: str,
        *,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        results: tuple[str, str] | None = None,
        on_error: str = "fail",
    ) -> None:
        self.uri, self.experiment, self.run_name = uri, experiment, run_name
        self.tags = {"arecall.pid": str(os.getpid()), "arecall.host": _host(), **(tags or {})}
        self.params = dict(params or {})
        self.results, self.on_error = results, on_error
        self.run_id: str | None = None
        self._failure: BaseException | None = None
        self._ended = False

    def start(self) -> None:
        """Create the run with its tags (a store failure is kept for `finish`).

        The params travel with the run's one `log_batch`, at its end whatever the end: with the
        metrics (`finish`) or with the error (`end`); only a kill -9 of the process that writes
        leaves a run without them (its tags still hold the command and the config hash).
        """
        try:
            with open_store(self.uri) as client:
                experiment = _experiment_id(client, self.experiment)
                run = client.create_run(experiment, run_name=self.run_name, tags=self.tags)
                self.run_id = str(run.info.run_id)
        except Exception as exc:  # any store failure: the results come first
            self._failure = exc

    def log_params(self) -> None:
        """Log the params now, for a run with no end of its own to carry them (a sweep's parent)."""
        if self.run_id is None or self._failure is not None:
            return
        try:
            with open_store(self.uri, orphans=False) as client:
                self._log_params_with(client)
        except Exception as exc:  # as in start: kept, the points report the store
            self._failure = exc

    def _log_params_with(
        self,
        client: Any,
        *,
        metrics: Mapping[str, float] | None = None,
        stepped: Sequence[tuple[str, float, int]] = (),
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """The run's params with its last metrics and tags: one `log_batch` in MLflow's limits."""
        assert self.run_id is not None
        params, cut = _params(self.params)
        _log_batches(
            client, self.run_id, params=params, metrics=metrics, stepped=stepped, tags=tags
        )
        if cut:
            client.log_dict(self.run_id, cut, "params_full.json")

    def finish(
        self,
        metrics: Mapping[str, float] | None = None,
        stepped: Sequence[tuple[str, float, int]] = (),
        artifacts: Artifacts | None = None,
        *,
        tags: Mapping[str, str] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> str | None:
        """Log params, metrics and ``tags`` (one batch) and artifacts; end FINISHED; the run id.

        None when the store could not be written and ``on_error`` is ``warn``. ``progress`` is
        told each of the `UPLOAD_STEPS` as it is done (a bar for a slow store).
        """
        done = progress or (lambda step: None)
        if self._failure is None:
            try:
                with open_store(self.uri, orphans=False) as client:
                    assert self.run_id is not None
                    self._log_params_with(client, metrics=metrics, stepped=stepped, tags=tags)
                    done(UPLOAD_STEPS[0])
                    if artifacts is not None:
                        artifacts(client, self.run_id)
                    done(UPLOAD_STEPS[1])
                    client.set_terminated(self.run_id, "FINISHED")
                    done(UPLOAD_STEPS[2])
                    self._ended = True
                    return self.run_id
            except Exception as exc:
                self.end("FAILED", exc)  # best effort: a store that is down stays RUNNING
                self._failure = exc
        self._report(self._failure)
        return None

    def _report(self, exc: BaseException) -> None:
        if _is_server(self.uri) and (isinstance(exc, TrackingError) or not _probe(self.uri)):
            what = f"tracking server {self.uri} unreachable"
        else:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            what = f"tracking store {self.uri} failed: {type(exc).__name__}: {first}"
        if self.results is not None:
            where, target = self.results
            what += f"; results are in {where}; log them later with: arecall log {target}"
        if self.on_error == "warn":
            print(f"arecall: warning: {what}", file=sys.stderr)
            return None
        raise TrackingError(what) from None

    def end(self, status: str, error: BaseException | str | None = None) -> None:
        """End the run with ``status`` (FAILED, KILLED), the error as a tag; never raises.

        ``error`` is the exception, or its ``Type: message`` text (sent by another process).
        """
        if self.run_id is None or self._ended or self._failure is not None:
            return
        self._ended = True
        try:
            with open_store(self.uri, orphans=False) as client:
                tags = {}
                if error is not None:
                    tags["arecall.error"] = error_text(error)
                self._log_params_with(client, tags=tags)
                client.set_terminated(self.run_id, status)
        except Exception:  # the run's own error is the one to report
            pass


def _experiment_id(client: Any, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    try:
        return str(client.create_experiment(name))
    except Exception:  # created meanwhile by another client of a server
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


def _log_batches(
    client: Any,
    run_id: str,
    *,
    params: Mapping[str, str] | None = None,
    metrics: Mapping[str, float] | None = None,
    stepped: Sequence[tuple[str, float, int]] = (),
    tags: Mapping[str, str] | None = None,
) -> int:
    """Params, metrics and tags in as few `log_batch` calls as MLflow's limits allow.

    Each call takes up to 1000 metrics, 100 params and 100 tags (1000 entities in all): a
    pipeline run's metrics and tags are one call. Returns the number of calls made.
    """
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    plist = [Param(k, v) for k, v in (params or {}).items()]
    mlist = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
    mlist += [Metric(k, float(v), now, step) for k, v, step in stepped]
    tlist = [RunTag(k, v[:_TAG_VALUE_MAX]) for k, v in (tags or {}).items()]
    calls = 0
    while plist or mlist or tlist:
        p, plist = plist[:_PARAMS_PER_BATCH], plist[_PARAMS_PER_BATCH:]
        t, tlist = tlist[:_PARAMS_PER_BATCH], tlist[_PARAMS_PER_BATCH:]
        room = _METRICS_PER_BATCH - len(p) - len(t)
        m, mlist = mlist[:room], mlist[room:]
        client.log_batch(run_id, metrics=m, params=p, tags=t)
        calls += 1
    return calls


# -- the pipeline's runs ---------------------------------------------------------------------------


def _metrics(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    flat: dict[str, float] = {"mrr": metrics["mrr"]}
    if metrics["total_relevant"]:
        flat["unauthorized_relevant_share"] = (
            metrics["unauthorized_relevant"] / metrics["total_relevant"]
        )
    flat.update(mlflow_metrics(metrics["k"], (*METRIC_KEYS, "n_nonempty")))
    stepped = [
        (key, float(row[key]), int(k))
        for k, row in metrics["k"].items()
        for key in METRIC_KEYS
        if row.get(key) is not None
    ]
    return flat, stepped


def pipeline_run(
    cfg: Mapping[str, Any],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    results: tuple[str, str] | None = None,
) -> TrackedRun:
    """The `TrackedRun` of one pipeline execution (not yet started): its tags and params.

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> run = pipeline_run(default_config(), root="/repo")
    >>> run.tags["arecall.corpus"], run.params["retriever.name"], run.on_error
    ('discovery', 'tfidf', 'fail')
    """
    run_tags = {
        **provenance(cfg, root),
        "arecall.corpus": str(cfg["corpus"]["name"]),
        "arecall.retriever": str((cfg.get("retriever") or {}).get("name", "")),
        "arecall.index": str((cfg.get("index") or {}).get("name", "none")),
        "arecall.profiles": str(cfg["profiles"]["name"]),
        **(tags or {}),
    }
    parent = parent_run_id or os.environ.get(PARENT_ENV)
    if parent:
        run_tags["mlflow.parentRunId"] = parent
    tracking = cfg.get("tracking") or {}
    return TrackedRun(
        tracking_uri(root),
        _experiment(cfg),
        run_name=os.environ.get("DVC_EXP_NAME") or run_name,
        tags=run_tags,
        params=flatten({k: v for k, v in cfg.items() if k != "hydra"}),
        results=results,
        on_error=str(tracking.get("on_error", "fail")),
    )


def finish_pipeline_run(
    run: TrackedRun,
    reports: Mapping[str, Path],
    *,
    vector: Any = None,
    rank_info: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> str | None:
    """Log a pipeline's reports (metrics, proof, tables, vector table) and end ``run`` FINISHED.

    The upload draws a tqdm bar of its `UPLOAD_STEPS` on a terminal, or tells ``progress``
    (the tracker process tells the run's process, which draws it).

    ``rank_info`` (the rank stage's ``rank.json``) adds how the ranking was stored as
    ``arecall.rank.<field>`` tags, so a run shows which representation its depth chose.
    """

    def read(name: str) -> Any:
        path = reports.get(name)
        return json.loads(Path(path).read_text(encoding="utf-8")) if path else None

    metrics, proof = read("metrics"), read("proof")
    flat, stepped = _metrics(metrics) if metrics else ({}, [])
    claims = proof["claims"] if proof else []
    if proof:
        flat["proof_claims_passed"] = float(sum(c["passed"] for c in claims))
        flat["proof_claims_failed"] = float(sum(not c["passed"] for c in claims))
    if vector is None and reports.get("vector_csv"):
        import pandas as pd

        vector = pd.read_csv(reports["vector_csv"])
    keys: dict[str, str] = {}
    if vector is not None:
        vector_flat, keys = _vector_metrics(vector)
        flat.update(vector_flat)

    tables: dict[str, Any] = {}
    if metrics:
        tables["tables/arecall_at_k.json"] = main_table(metrics)
        tables["tables/arecall_at_k_nonempty.json"] = restricted_table(metrics)
    if proof:
        tables["tables/proof.json"] = _proof_frame(claims)
    if vector is not None:
        tables["tables/vector_search.json"] = vector
    documents: dict[str, Any] = {}
    if proof:
        documents["proof/proof.json"] = proof
    if keys:
        documents["keys.json"] = keys
    tags = {"arecall.reports_digest": reports_digest(reports)}
    if tables:  # what MlflowClient.log_table records, so the UI lists them as tables
        tags["mlflow.loggedArtifacts"] = json.dumps([{"path": p, "type": "table"} for p in tables])
    if rank_info is not None and Path(rank_info).is_file():
        stored = json.loads(Path(rank_info).read_text(encoding="utf-8")).get("representation", {})
        tags.update({f"arecall.rank.{field}": str(value) for field, value in stored.items()})
    cache = getattr(vector, "attrs", {}).get("cache")
    if cache:
        tags["arecall.vectors_cache"] = f"{cache} {vector.attrs.get('cache_key', '')}".strip()

    def artifacts(client: Any, run_id: str) -> None:
        staged_artifacts(client, run_id, tables, documents, reports)

    if progress is not None:
        return run.finish(flat, stepped, artifacts, tags=tags, progress=progress)
    with upload_bar() as bar:
        return run.finish(flat, stepped, artifacts, tags=tags, progress=lambda _: bar.update(1))


@contextmanager
def upload_bar() -> Iterator[Any]:
    """The MLflow upload's tqdm bar (`UPLOAD_STEPS`), drawn on a terminal only."""
    from tqdm import tqdm

    with tqdm(total=len(UPLOAD_STEPS), desc="mlflow", unit="step", disable=None) as bar:
        yield bar


def reports_digest(reports: Mapping[str, Path]) -> str:
    """SHA-256 of a run's report files (names and bytes): the same results, the same digest.

    Logged as the tag ``arecall.reports_digest``, so ``arecall log`` can tell results already in
    the store from results to log.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "metrics.json").write_text("{}")
    >>> reports_digest({"metrics": d / "metrics.json"}) == reports_digest({"m": d / "metrics.json"})
    True
    """
    from arecall.io.digest import files_digest

    paths = sorted(Path(p) for p in reports.values())
    return files_digest((path.name, path) for path in paths if path.is_file())


def logged_runs(uri: str, experiment: str, digest: str) -> list[str]:
    """Ids of the FINISHED runs of ``experiment`` whose reports have ``digest``."""
    with open_store(uri, orphans=False) as client:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return []
        runs = client.search_runs(
            [found.experiment_id],
            filter_string=(
                f"tags.`arecall.reports_digest` = '{digest}' and attributes.status = 'FINISHED'"
            ),
        )
        return [str(r.info.run_id) for r in runs]


def staged_artifacts(
    client: Any,
    run_id: str,
    tables: Mapping[str, Any],
    documents: Mapping[str, Any],
    reports: Mapping[str, Path],
) -> None:
    """Write every artifact into one staging directory and log it with one call.

    MLflow's ``log_table`` / ``log_dict`` / ``log_artifact`` are a store round trip each (a
    ``log_table`` three: it reads the run back to extend a tag), about two seconds for a
    pipeline run; the files are the same: tables as pandas' ``orient="split"`` JSON (what
    ``log_table`` writes and ``load_table`` reads), documents as indented JSON, ``tables.md``
    under ``tables/`` and the report files under ``reports/``.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arecall-artifacts-") as tmp:
        root = Path(tmp)
        for name, frame in tables.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            frame.to_json(root / name, orient="split", index=False, date_format="iso")
        for name, data in documents.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        (root / "reports").mkdir()
        if reports.get("tables"):
            (root / "tables").mkdir(exist_ok=True)
            shutil.copyfile(reports["tables"], root / "tables" / "tables.md")
        for path in reports.values():
            if Path(path).is_file():
                shutil.copyfile(path, root / "reports" / Path(path).name)
        client.log_artifacts(run_id, str(root))


def log_run(
    cfg: Mapping[str, Any],
    reports: Mapping[str, Path],
    *,
    root: str | Path = ".",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    parent_run_id: str | None = None,
    vector: Any = None,
    results: tuple[str, str] | None = None,
    rank_info: Path | None = None,
) -> str | None:
    """Log one finished pipeline execution to MLflow and return its run id.

    Parameters
    ----------
    cfg : mapping
        The composed configuration (logged flattened as params).
    reports : mapping of name → path
        Any of ``metrics``, ``proof``, ``tables`` (the text pipeline) and ``vector_csv`` (the
        vector-index table); every file is also logged as an artifact under ``reports/``.
    vector : DataFrame, optional
        The vector-index table with its wall-clock ``qps`` column (default: read
        ``vector_csv``, which has no timings).
    root : path
        Where the default sqlite store lives.
    parent_run_id : str, optional
        Nest this run under a sweep's parent run (default: $ARECALL_PARENT_RUN_ID, set by
        `arecall.pipeline.sweep.SweepCallback` for the jobs of an ``arecall run -m`` sweep).
    results : (where, log argument), optional
        Named by the one-line message if the store cannot be written.
    rank_info : path, optional
        The rank stage's ``rank.json``: logged as ``arecall.rank.*`` tags when it exists.

    Returns
    -------
    str or None
        The run id; None when the store failed and ``tracking.on_error`` is ``warn``.

    Examples
    --------
    >>> import os, tempfile
    >>> from arecall.pipeline.config import default_config
    >>> from arecall.pipeline.run import Layout, run_all
    >>> where = tempfile.mkdtemp()
    >>> cfg = default_config(["evaluation.proof.max_examples=5"])
    >>> _ = run_all(cfg, Layout.run(where))
    >>> os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{where}/mlflow.db"
    >>> run_id = log_run(cfg, Layout.run(where).report_files())
    >>> del os.environ["MLFLOW_TRACKING_URI"]
    >>> len(run_id)
    32
    """
    run = pipeline_run(
        cfg, root=root, run_name=run_name, tags=tags, parent_run_id=parent_run_id, results=results
    )
    with interruptible(), run:
        run.start()
        return finish_pipeline_run(run, reports, vector=vector, rank_info=rank_info)


def _vector_metrics(table: Any) -> tuple[dict[str, float], dict[str, str]]:
    """``vector_<mode>_<column>_s<selectivity %>pct`` (text corpora: ``…_p<i>_<principal>``).

    Principal names come from the data: each is keyed by `safe_key` (its index in the table's
    principal order), returned with the mapping key → name.
    """
    out: dict[str, float] = {}
    keys: dict[str, str] = {}
    index: dict[str, str] = {}
    for row in table.to_dict("records"):
        if "principal" in row:
            name = str(row["principal"])
            if name not in index:
                index[name] = safe_key(len(index), name)
                keys[index[name]] = name
            where = index[name]
        else:
            where = f"s{float(row['selectivity']) * 100:g}pct"
        for column in (*VECTOR, "qps"):
            if column in row:
                key = f"vector_{row['mode']}_{column}_{where}"
                out["".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in key)] = float(
                    row[column]
                )
    return out, keys


def experiment_name(cfg: Mapping[str, Any]) -> str:
    """The MLflow experiment a config's runs go to (``tracking.experiment``, else ``arecall``).

    Examples
    --------
    >>> experiment_name({"tracking": {}})
    'arecall'
    """
    return str((cfg.get("tracking") or {}).get("experiment") or "arecall")


_experiment = experiment_name


def _proof_frame(claims: list[dict[str, Any]]) -> Any:
    import pandas as pd

    columns = ("claim", "statement", "kind", "examples", "passed", "counterexample")
    return pd.DataFrame(
        [{c: (claim[c] if claim[c] is not None else "") for c in columns} for claim in claims]
    )


# -- arecall evaluate --mlflow ---------------------------------------------------------------------


def _evaluation_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    flat: dict[str, float] = {}
    for key in (
        "queries",
        "queries_without_relevant",
        "queries_missing_from_run",
        "run_queries_not_judged",
        "pairs",
        "pairs_without_authorized_relevant",
    ):
        if key in summary:
            flat[key] = float(summary[key])
    keys = dict.fromkeys(key for row in summary["k"].values() for key in row)
    keys.pop("significance", None)
    flat.update(mlflow_metrics(summary["k"], keys))
    return flat


def log_evaluation(
    summary: dict[str, Any],
    table: Any,
    *,
    params: Mapping[str, str],
    comparison: Any = None,
) -> tuple[str, str]:
    """Log an ``arecall evaluate`` summary as one MLflow run; return (run id, tracking URI).

    Metrics are ``<measure>_at_<k>`` (and ``gap_ci_low_at_<k>`` etc.), the per-K table is an
    MLflow table (``summary.json``) and the whole summary a JSON artifact. The store is
    MLFLOW_TRACKING_URI, else ``sqlite:///mlflow.db`` in the working directory; the experiment
    is MLFLOW_EXPERIMENT_NAME, else ``arecall-evaluate``. A store that cannot be written is one
    `TrackingError` line (the report was already written).
    """
    uri = tracking_uri(Path.cwd())
    run = TrackedRun(
        uri,
        os.environ.get("MLFLOW_EXPERIMENT_NAME") or "arecall-evaluate",
        run_name=f"evaluate {Path(params.get('run', 'run')).name}",
        tags={"arecall.entry": "arecall evaluate"},
        params=params,
    )

    def artifacts(client: Any, run_id: str) -> None:
        client.log_table(run_id, table, artifact_file="summary.json")
        client.log_dict(run_id, summary, "evaluation.json")
        if comparison is not None:
            client.log_table(run_id, comparison, artifact_file="comparison.json")

    with interruptible(), run:
        run.start()
        run_id = run.finish(_evaluation_metrics(summary), artifacts=artifacts)
    assert run_id is not None  # on_error is "fail": a failure raised
    return run_id, uri


# -- sweeps ----------------------------------------------------------------------------------------


def end_sweep(status: str | None = None) -> None:
    """End the open sweep's parent run (if any): FAILED if a point failed, else ``status``.

    Points still RUNNING (their process interrupted) are ended KILLED. Called when the sweep
    ends, and by ``arecall run`` when it ends early (an exception, a signal).
    """
    run_id = os.environ.pop(PARENT_ENV, None)
    if run_id is None:
        return
    try:
        with open_store(tracking_uri("."), orphans=False) as client:
            parent = client.get_run(run_id)
            children = client.search_runs(
                [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'"
            )
            for child in children:
                if child.info.status == "RUNNING":
                    client.set_terminated(child.info.run_id, "KILLED")
            # a point rerun after its worker died (a Dask sweep) has a FINISHED run with the same
            # run directory: its lost attempt is not a failed point
            done = {
                c.data.tags.get("arecall.run_dir") for c in children if c.info.status == "FINISHED"
            }
            failed = any(
                c.info.status in ("FAILED", "KILLED")
                and c.data.tags.get("arecall.run_dir") not in done - {None}
                for c in children
            )
            final = status or "FINISHED"
            if final == "FINISHED" and failed:
                final = "FAILED"
            client.set_terminated(run_id, final)
    except Exception as exc:  # the points' own messages name the failure
        print(
            f"arecall: warning: could not end the sweep's MLflow run {run_id}: {exc}",
            file=sys.stderr,
        )
