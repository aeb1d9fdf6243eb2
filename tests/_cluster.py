"""A real Dask cluster for tests: a scheduler and worker processes, every socket on 127.0.0.1.

`dask_cluster` starts ``dask scheduler`` and ``dask worker`` processes (each worker a nanny and
its worker process, one thread), waits until every worker has registered, and stops them all
when the block ends, however it ends: SIGTERM to each process group, SIGKILL after a grace
period. Every wait is bounded. As a last resort against a test process killed outright, the
scheduler exits after ``idle_timeout`` seconds without work and a worker 60 s after losing its
scheduler.

The HTTP servers of Dask's scheduler and workers (health, metrics, the dashboard) listen on all
interfaces unless given an address, even with ``--no-dashboard``: they are bound to 127.0.0.1
like the rest, and `DaskCluster.listening` is how a test checks it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.helpers import VENV_BIN

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Listening:
    """One listening socket of a cluster process."""

    pid: int
    command: str
    ip: str
    port: int


@dataclass
class DaskCluster:
    """A running cluster: its scheduler's address and the processes started for it."""

    address: str
    scheduler_file: Path
    processes: list[subprocess.Popen[bytes]]

    def listening(self) -> list[Listening]:
        """Every listening TCP socket and bound UDP socket of the cluster's processes and children."""
        found = []
        for popen in self.processes:
            try:
                top = psutil.Process(popen.pid)
                family = [top, *top.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in family:
                try:
                    command = " ".join(proc.cmdline()[:4])
                    connections = proc.net_connections(kind="inet")
                except psutil.NoSuchProcess:
                    continue
                for c in connections:
                    if c.status == psutil.CONN_LISTEN or (
                        not c.raddr and c.type == socket.SOCK_DGRAM
                    ):
                        found.append(Listening(proc.pid, command, c.laddr.ip, c.laddr.port))
        return found

    def worker_pids(self) -> dict[str, int]:
        """The pid of each worker process (the one that runs tasks), by worker address."""
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            return dict(client.run(os.getpid))


def _env() -> dict[str, str]:
    """The workers' own environment: nothing of the test's MLflow or sweep settings."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "ARECALL_", "DASK_"))
    }
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    return env


def _spawn(args: Sequence[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            list(args), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def stop(processes: Sequence[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """SIGTERM every process group, then SIGKILL what is left after ``grace`` seconds."""
    for proc in processes:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in processes:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        # the nanny's worker child is in the same group: make sure none outlives its nanny
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def dask_cluster(
    where: Path,
    n_workers: int = 2,
    *,
    timeout: float = 120.0,
    idle_timeout: int = 900,
    worker_env: dict[str, str] | None = None,
) -> Iterator[DaskCluster]:
    """A scheduler and ``n_workers`` one-thread worker processes on 127.0.0.1, stopped after.

    ``worker_env`` adds variables to the workers' environment (which has none of the test's
    MLFLOW_*/ARECALL_* variables).
    """
    where.mkdir(parents=True, exist_ok=True)
    scheduler_file = where / "scheduler.json"
    env = _env()
    dask = str(VENV_BIN / "dask")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            _spawn(
                [
                    dask,
                    "scheduler",
                    "--host",
                    LOOPBACK,
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--dashboard-address",
                    f"{LOOPBACK}:0",
                    "--scheduler-file",
                    str(scheduler_file),
                    "--idle-timeout",
                    str(idle_timeout),
                ],
                where / "scheduler.log",
                env,
            )
        )
        deadline = time.monotonic() + timeout
        while not scheduler_file.is_file() or not scheduler_file.read_text().strip():
            if processes[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "dask scheduler did not start:\n" + (where / "scheduler.log").read_text()
                )
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written in one go, but give it a moment
        address = json.loads(scheduler_file.read_text())["address"]
        for i in range(n_workers):
            processes.append(
                _spawn(
                    [
                        dask,
                        "worker",
                        address,
                        "--host",
                        LOOPBACK,
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--dashboard-address",
                        f"{LOOPBACK}:0",
                        "--local-directory",
                        str(where / f"worker-{i}"),
                        "--death-timeout",
                        "60",
                    ],
                    where / f"worker-{i}.log",
                    {**env, **(worker_env or {})},
                )
            )
        from distributed import Client

        with Client(address, timeout=timeout) as client:
            client.wait_for_workers(n_workers, timeout=max(1.0, deadline - time.monotonic()))
        yield DaskCluster(address, scheduler_file, processes)
    finally:
        stop(processes[1:])  # workers first: a worker without its scheduler waits to reconnect
        stop(processes[:1])
