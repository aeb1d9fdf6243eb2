"""``arecall ui`` (``make ui``): MLflow's UI on the project's store, stopped whole on Ctrl-C.

``mlflow ui`` is a tree of processes (the CLI, uvicorn's parent and workers, a job runner and
its huey consumers); a Ctrl-C or a SIGTERM to the terminal's process group reaches them all at
once, and some, caught mid-shutdown, kept running (``mlflow ui`` waiting for a worker, the huey
consumers orphaned). Here ``mlflow ui`` runs in a session of its own, with one worker and no job
runner (arecall logs no GenAI jobs), and this process owns its ending: on SIGINT, SIGTERM or
SIGHUP it sends SIGTERM to the server's whole process group, gives it `GRACE` seconds, then
SIGKILLs what is left, and exits 130 / 143 / 129 only when nothing of it runs.

It prints the address of the ``arecall`` experiment's runs table. MLflow 3.17's UI opens an
experiment on its GenAI overview unless the browser chose "Model training" (its top-left switch,
remembered by the browser) or the address says ``workflowType=machine_learning``; the
experiment's ``mlflow.experimentKind`` tag, which arecall sets, does not decide the landing page
in that version. The address also names arecall's view of the table (``viewStateShareKey``,
`arecall.tracking.view`), so it opens on the headline's columns.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["GRACE", "runs_page", "serve", "ui_main"]

#: Seconds the server gets to stop on SIGTERM before the rest of its group is killed.
GRACE = 5.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait until the server and every process of its group are gone; whether they are."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(proc.pid):
            return True
        time.sleep(0.1)
    return False


def _stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace`` s."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)  # the session leader's pid is its group's id
        if _wait_group(proc, wait):
            return


def runs_page(host: str, port: int, experiment_id: str | None, view: str | None = None) -> str:
    """The address of an experiment's runs table in MLflow's "Model training" view.

    ``view``: the share key of a view the experiment holds (`arecall.tracking.view.VIEW_KEY`).

    Examples
    --------
    >>> runs_page("127.0.0.1", 5000, "1", "arecall").split("#")[1]
    '/experiments/1/runs?workflowType=machine_learning&viewStateShareKey=arecall'
    >>> runs_page("127.0.0.1", 5000, None)
    'http://127.0.0.1:5000/#/experiments?workflowType=machine_learning'
    """
    where = f"experiments/{experiment_id}/runs" if experiment_id else "experiments"
    shared = f"&viewStateShareKey={view}" if experiment_id and view else ""
    return f"http://{host}:{port}/#/{where}?workflowType=machine_learning{shared}"


def serve(
    uri: str,
    host: str = "127.0.0.1",
    port: int = 5000,
    grace: float = GRACE,
    experiment_id: str | None = None,
    view: str | None = None,
) -> int:
    """Run ``mlflow ui`` on ``uri`` until it exits or this process is told to stop.

    Returns the exit status: the server's own, or 128 + the signal that stopped it.
    """
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)

    env = dict(os.environ)
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [
        sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
        "--host", host, "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    stopping = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, stop) for sig in stopping}
    try:
        proc = subprocess.Popen(command, env=env, start_new_session=True)
        print(
            f"arecall: MLflow UI on {uri}; the runs: {runs_page(host, port, experiment_id, view)} "
            "(Ctrl-C stops it)",
            flush=True,
        )
        while proc.poll() is None and not received:
            time.sleep(0.2)
        _stop_group(proc, grace)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        return 128 + received[0]
    return int(proc.returncode or 0)


def ui_main(argv: Sequence[str]) -> int:
    """``arecall ui [--port N] [--host H]``: the UI on this project's store."""
    from arecall.tracking.store import open_store, tracking_uri
    from arecall.tracking.view import VIEW_KEY, VIEW_TAG

    parser = argparse.ArgumentParser(
        prog="arecall ui",
        description="MLflow's UI on the project's store (MLFLOW_TRACKING_URI, else "
        "sqlite:///mlflow.db); Ctrl-C or SIGTERM stops it and every process it started.",
    )
    parser.add_argument("--port", type=int, default=5000, help="default: 5000")
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    args = parser.parse_args(list(argv))
    uri = tracking_uri(".")
    if uri.startswith(("http://", "https://")):
        print(f"arecall: the store is a tracking server: open {uri}", file=sys.stderr)
        return 0
    with open_store(uri, orphans=False) as client:  # made whole before the UI opens it
        found = client.get_experiment_by_name("arecall")
    experiment_id = found.experiment_id if found else None
    view = VIEW_KEY if found and VIEW_TAG in (found.tags or {}) else None
    return serve(uri, args.host, args.port, experiment_id=experiment_id, view=view)
