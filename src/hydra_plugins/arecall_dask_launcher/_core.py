"""Ship sweep points to a Dask cluster, run them there with Hydra's `run_job`, bring them back.

As Hydra's Ray launcher does: each point's config is composed here, in the launching process
(so ``${now:}`` and the sweep directory resolve once, as for the other launchers), and shipped
with the task function, the Hydra context and Hydra's global state, pickled with cloudpickle
(the task function of ``arecall run`` is a closure: plain pickle refuses it). A worker process
runs one point at a time under a lock, because Hydra's state is process-global, with the
launching process's ``ARECALL_*``/``MLFLOW_*`` environment and command line; what the point
prints is sent back and printed here, in point order.

The sweep's MLflow runs are written by the workers: a sqlite store is a file on this machine,
so points on other hosts are refused unless MLFLOW_TRACKING_URI names a tracking server.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import secrets
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import (
    JobReturn,
    JobStatus,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict

from arecall.core.errors import note_user_error

log = logging.getLogger(__name__)

#: One point at a time per worker process: Hydra's config, the environment, sys.argv and
#: sys.stdout are process-global.
_JOB_LOCK = threading.Lock()


class ClusterError(CompactHydraException):
    """The cluster could not run the sweep (one line, as Hydra prints compact errors)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"arecall: error: {message}")
        self.message = message
        note_user_error(message)  # so arecall run exits 2, not Hydra's 1

    def __reduce__(self) -> tuple[Any, ...]:  # travels back from a worker pickled
        return (ClusterError, (self.message,))


# -- the worker side ------------------------------------------------------------------------------


@contextlib.contextmanager
def _environment(env: Mapping[str, str], prefixes: Sequence[str]) -> Iterator[None]:
    """The launching process's variables with ``prefixes``, and no others with them."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(tuple(prefixes))}
    for key in saved:
        del os.environ[key]
    os.environ.update(env)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith(tuple(prefixes))]:
            del os.environ[key]
        os.environ.update(saved)


@contextlib.contextmanager
def _job_process_state(argv: Sequence[str]) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The job's sys.argv, captured stdout/stderr, and the worker's logging restored after."""
    root = logging.getLogger()
    handlers, level, old_argv = root.handlers[:], root.level, sys.argv[:]
    out, err = io.StringIO(), io.StringIO()
    sys.argv = list(argv)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        sys.argv = old_argv
        for handler in root.handlers[:]:  # Hydra's job logging: a file in the job's directory
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def _shared(payload: bytes) -> bytes:
    """What every point of a sweep shares, as a task's result: lost with a worker, it is
    computed again from the task graph rather than lost for good (as scattered data is)."""
    return payload


def execute(shared: bytes, job: bytes) -> bytes:
    """Run one sweep point on this worker; its `JobReturn` and output, pickled.

    ``shared``: the Hydra context, task function, Hydra's global state, the environment and
    the command line (the same for every point); ``job``: the point's composed config.
    """
    import cloudpickle

    with _JOB_LOCK:
        hydra_context, task_function, singleton_state, env, prefixes, argv = cloudpickle.loads(
            shared
        )
        sweep_config = cloudpickle.loads(job)
        setup_globals()
        Singleton.set_state(singleton_state)
        HydraConfig.instance().set_config(sweep_config)
        with _environment(env, prefixes), _job_process_state(argv) as (out, err):
            ret = run_job(
                hydra_context=hydra_context,
                task_function=task_function,
                config=sweep_config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
        where = f"{socket.gethostname()} pid {os.getpid()}"
        result: bytes = cloudpickle.dumps((ret, out.getvalue(), err.getvalue(), where))
        return result


# -- the launching side ---------------------------------------------------------------------------


def _connect(launcher: Any) -> tuple[Any, Any]:
    """A client of the configured scheduler, or of a local cluster on 127.0.0.1 started here
    (whose workers get :class:`~._closing.QuietClose`)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError(
            "hydra/launcher=dask needs Dask: pip install 'arecall[cluster]'"
        ) from None
    import dask

    cluster = None
    # unset: Dask's own setting (DASK_SCHEDULER_ADDRESS), else a cluster of our own
    address = launcher.address or dask.config.get("scheduler-address", None)
    try:
        if not address:
            cluster = LocalCluster(
                n_workers=launcher.n_workers,
                threads_per_worker=launcher.threads_per_worker,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                worker_dashboard_address="127.0.0.1:0",
            )
            address = cluster.scheduler_address
        client = Client(address, timeout=launcher.connect_timeout)
    except OSError:  # distributed's connect timeout is an OSError
        if cluster is not None:
            cluster.close()
        raise ClusterError(
            f"hydra.launcher.address={address}: no Dask scheduler answered within "
            f"{launcher.connect_timeout:g} s"
        ) from None
    try:
        client.wait_for_workers(1, timeout=launcher.connect_timeout)
    except OSError:
        _close(client, cluster)
        raise ClusterError(
            f"hydra.launcher.address={address}: the scheduler has no workers after "
            f"{launcher.connect_timeout:g} s (start some: dask worker {address})"
        ) from None
    # a point's stages run on a worker: its allocator tuned and Dask's profiler off, as for
    # the blocks of arecall's Dask engine (arecall.core.dask_workers)
    from arecall.core.dask_workers import register

    register(client)
    if cluster is not None:
        # Our own workers close with the sweep: their shutdown must not print a traceback.
        from hydra_plugins.arecall_dask_launcher._closing import QuietClose

        client.register_plugin(QuietClose())
    return client, cluster


#: What distributed's nannies say when they end the workers of a cluster being closed: for the
#: launcher's own cluster, once its sweep is over, the expected end, not the user's business.
_OWN_WORKERS_ENDING = ("Worker process still alive after", "Worker process ")


class _OwnWorkersEnding(logging.Filter):
    """Drops the nannies' lines about ending workers (stopping slowly, killed) while the
    launcher closes the cluster it started; any other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("distributed."):
            return True
        message = record.getMessage()
        return not (
            message.startswith(_OWN_WORKERS_ENDING[0])
            or (message.startswith(_OWN_WORKERS_ENDING[1]) and "killed by" in message)
        )


def _close(client: Any, cluster: Any) -> None:
    with contextlib.suppress(Exception):
        client.close()
    if cluster is not None:
        ending = _OwnWorkersEnding()
        handlers = logging.getLogger().handlers + logging.getLogger("distributed").handlers
        for handler in handlers:
            handler.addFilter(ending)
        try:
            with contextlib.suppress(Exception):
                cluster.close()
        finally:
            for handler in handlers:
                handler.removeFilter(ending)


def _check_store(client: Any, config: DictConfig) -> None:
    """Refuse a sweep whose workers on other hosts would write a sqlite file of this host."""
    if not OmegaConf.select(config, "tracking.enabled", default=False):
        return
    from arecall.tracking.store import tracking_uri

    uri = tracking_uri(".")
    if uri.startswith(("http://", "https://")):
        return
    here = socket.gethostname()
    elsewhere = sorted({h for h in client.run(socket.gethostname).values() if h != here})
    if elsewhere:
        raise ClusterError(
            f"the MLflow store {uri} is a file on {here}; the workers on "
            f"{', '.join(elsewhere)} cannot write it: start an mlflow server and set "
            "MLFLOW_TRACKING_URI=http://HOST:PORT (docs: Run on a cluster)"
        )


def _sweep_config(launcher: Any, overrides: Sequence[str], idx: int) -> DictConfig:
    """A point's config, composed here; the sweep directory made absolute (workers' cwd differs)."""
    sweep_config = launcher.hydra_context.config_loader.load_sweep_config(
        launcher.config, list(overrides)
    )
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
        sweep_dir = Path(str(sweep_config.hydra.sweep.dir)).absolute()
        sweep_config.hydra.sweep.dir = str(sweep_dir)
    assert isinstance(sweep_config, DictConfig)
    return sweep_config


def _failed(overrides: Sequence[str], error: BaseException) -> JobReturn:
    ret = JobReturn(overrides=list(overrides), status=JobStatus.FAILED)
    ret.return_value = error
    return ret


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> Sequence[JobReturn]:
    """Run every point on the cluster; their `JobReturn` in order (Hydra's launcher contract).

    A point the cluster lost (its worker died, the scheduler went away) is a failed point,
    named; the other points still run.
    """
    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None
    assert launcher.task_function is not None
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)

    # Dask's INFO lines (the scheduler starting, workers coming and going) would pass into
    # Hydra's log of the sweep: only their warnings and errors are the user's business
    with _quiet("distributed", "dask"):
        return _run(launcher, job_overrides, initial_job_idx, sweep_dir)


def _run(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, sweep_dir: Path
) -> list[JobReturn]:
    import cloudpickle

    client, cluster = _connect(launcher)
    try:
        address = str(client.scheduler.address)
        _check_store(client, launcher.config)
        log.info(f"Dask launcher: {len(job_overrides)} jobs on {address}, output in {sweep_dir}")
        env = {k: v for k, v in os.environ.items() if k.startswith(launcher.env_prefixes)}
        shared = cloudpickle.dumps(
            (
                launcher.hydra_context,
                launcher.task_function,
                Singleton.get_state(),
                env,
                launcher.env_prefixes,
                sys.argv[:],
            )
        )
        token = secrets.token_hex(4)
        # A task, not `client.scatter`: scattered data dies with the workers holding it, and Dask,
        # unable to rebuild it, cancels every point that needs it (a test run saw both points
        # of a sweep "already forgotten" after one worker was killed; dask/distributed#3149).
        # A task's result is rebuilt from the graph, which holds these bytes once.
        shared_future = client.submit(_shared, shared, key=f"arecall-shared-{token}", pure=False)
        futures = []
        for offset, overrides in enumerate(job_overrides):
            idx = initial_job_idx + offset
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            job = cloudpickle.dumps(_sweep_config(launcher, overrides, idx))
            futures.append(
                client.submit(execute, shared_future, job, key=f"arecall-job-{token}-{idx}")
            )
        returns: list[JobReturn] = []
        for offset, (overrides, future) in enumerate(zip(job_overrides, futures, strict=True)):
            idx = initial_job_idx + offset
            try:
                ret, out, err, where = cloudpickle.loads(future.result())
            except Exception as exc:
                point = " ".join(filter_overrides(overrides)) or "defaults"
                error = ClusterError(
                    f"sweep point {idx} ({point}) was lost on the cluster {address}: "
                    f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
                print(error, file=sys.stderr)
                returns.append(_failed(overrides, error))
                continue
            sys.stdout.write(out)
            sys.stderr.write(err)
            if _worker_deaths(client, future.key):
                point = " ".join(filter_overrides(overrides)) or "defaults"
                print(
                    f"arecall: sweep point {idx} ({point}) ran again, on {where}: the worker "
                    "running it died",
                    file=sys.stderr,
                )
            log.info(f"\t#{idx} ran on {where}: {ret.status.name}")
            returns.append(ret)
        return returns
    finally:
        _close(client, cluster)


def _deaths_on_scheduler(key: str, dask_scheduler: Any = None) -> int:
    """How many workers died running task ``key`` (the scheduler's own count)."""
    task = dask_scheduler.tasks.get(key) if dask_scheduler is not None else None
    return int(getattr(task, "suspicious", 0) or 0) if task is not None else 0


def _worker_deaths(client: Any, key: str) -> int:
    """How many times a point's task lost its worker (so Dask ran it again); 0 if unknown."""
    try:
        return int(client.run_on_scheduler(_deaths_on_scheduler, key=key))
    except Exception:  # a scheduler gone now: the point's result is already here
        return 0


class _BelowWarning(logging.Filter):
    """Drops the records under WARNING of the loggers named (and their children)."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self.prefixes = tuple(names) + tuple(f"{n}." for n in names)

    def filter(self, record: logging.LogRecord) -> bool:
        mine = record.name in self.prefixes or record.name.startswith(self.prefixes)
        return not mine or record.levelno >= logging.WARNING


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Only warnings and errors from the loggers ``names`` (and their children) in the block.

    A filter on the handlers that print (the root logger's, where Hydra's log goes, and the
    loggers' own), not a level: distributed's loggers get their levels and handlers from its
    config, and a cluster starting sets them again, so a level set here did not hold (a Dask
    sweep printed some forty INFO lines of the scheduler and its workers).

    Examples
    --------
    >>> import io
    >>> handler = logging.StreamHandler(stream := io.StringIO())
    >>> logging.getLogger().addHandler(handler)
    >>> with _quiet("distributed"):
    ...     logging.getLogger("distributed.scheduler").warning("kept")
    ...     logging.getLogger("distributed.scheduler").info("dropped")
    ...     logging.getLogger("arecall").warning("ours")
    >>> logging.getLogger().removeHandler(handler)
    >>> stream.getvalue().split()
    ['kept', 'ours']
    """
    below = _BelowWarning(names)
    handlers = list(logging.getLogger().handlers)
    for name in names:
        handlers += logging.getLogger(name).handlers
    for handler in handlers:
        handler.addFilter(below)
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(below)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
