"""``make ui`` stops whole: Ctrl-C or SIGTERM to its process group leaves no process behind.

``mlflow ui`` is a tree of processes (the CLI, uvicorn and its workers, a job runner and its
huey consumers); stopped with SIGTERM to the terminal's process group it used to leave ``mlflow
ui`` and 7 huey consumers running. ``make ui`` runs it under ``arecall ui``, which stops the
server's whole group. The test starts ``make ui`` as a terminal would (a process group of its
own), waits until the UI answers, signals the group, and then finds none of the processes it
saw (every descendant, also those that left the group) alive. Which process of the tree hangs
in its shutdown depends on timing; the test makes it certain: the ``mlflow ui`` process starts
one more child that ignores SIGTERM and SIGINT, as a process caught mid-shutdown does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests._docs import link_venv, shell_env, wait_http
from tests.helpers import ROOT, free_port

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: Injected into every Python process of ``make ui`` (PYTHONPATH): ``mlflow ui`` starts a child
#: that ignores the stopping signals and stays in its process group.
_STUBBORN = """
import os, subprocess, sys
_cmd = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if b"mlflow" in b" ".join(_cmd[:3]) and b"ui" in _cmd and not os.environ.get("STUBBORN_STARTED"):
    os.environ["STUBBORN_STARTED"] = "1"
    subprocess.Popen([sys.executable, "-c", (
        "import signal, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
        "time.sleep(600)\\n")])
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_make_ui_stops_every_process_it_started(tmp_path: Path, sig: signal.Signals):
    work = link_venv(tmp_path)
    (work / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    (work / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    os.utime(work / "pyproject.toml", (0, 0))  # older than the venv's install stamp
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(_STUBBORN)
    port = free_port()
    make = subprocess.Popen(
        ["make", "ui", f"PORT={port}"],
        cwd=work,
        env=shell_env(PYTHONPATH=str(inject)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the terminal's foreground group
    )
    seen: dict[int, psutil.Process] = {}
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=240)
        for child in psutil.Process(make.pid).children(recursive=True):
            seen[child.pid] = child
        assert any("mlflow" in " ".join(p.cmdline()) for p in seen.values())
        assert any("SIG_IGN" in " ".join(p.cmdline()) for p in seen.values())
        os.killpg(make.pid, sig)  # Ctrl-C or SIGTERM reaches the whole group
        make.wait(timeout=60)
        _, alive = psutil.wait_procs(list(seen.values()), timeout=30)
        assert alive == [], [" ".join(p.cmdline())[:120] for p in alive]
    finally:
        for process in seen.values():
            with contextlib.suppress(psutil.Error):
                process.kill()
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(timeout=10)
