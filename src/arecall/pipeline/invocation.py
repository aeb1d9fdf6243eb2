"""Which DVC command is running the pipeline's stages, and when each of its stages ran.

DVC runs each stage as its own process and tells it little: ``DVC_STAGE`` (the stage),
``DVC_ROOT`` and, inside an experiment, ``DVC_EXP_NAME``. What a tracked run must say —
its entry point (``dvc repro``, ``dvc exp run``, a queued or a ``--temp`` experiment), the
command a user typed, and how long the pipeline took — is read here from the process tree:
each stage's nearest ancestor that is a ``dvc`` command is the invocation running it (a queued
experiment's is DVC's ``exp exec-run``, under a queue worker under the ``dvc exp run --run-all``
or ``dvc queue start`` that started it).

`record_stage` keeps each stage's start and end, with the invocation's identity (its pid and
start time), under ``.dvc/tmp/arecall/stages/`` of the workspace DVC runs it in (not in git, not
a DVC output); `invocation_times` gives the track stage the first start and last end of the
stages *this* invocation ran, so the MLflow run's Duration is the pipeline's.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Invocation", "dvc_invocation", "invocation_times", "record_stage"]

_TIMES = Path(".dvc") / "tmp" / "arecall" / "stages"


@dataclass(frozen=True)
class Invocation:
    """A DVC command running stages: what it is, as a user would name it, and who it is.

    Attributes
    ----------
    entry : str
        ``dvc repro``, ``dvc exp run``, ``dvc exp run --queue`` or ``dvc exp run --temp``.
    command : str
        The command the user typed (for a queued experiment: the one that ran the queue).
    ident : str
        The invocation's process id and start time: the same for every stage it runs.
    """

    entry: str
    command: str
    ident: str


def _dvc_args(cmdline: list[str]) -> list[str] | None:
    """The arguments after ``dvc`` when ``cmdline`` runs DVC (``dvc …``, ``python …/dvc …``,
    ``python -m dvc …``), else None.

    Examples
    --------
    >>> _dvc_args(["/venv/bin/python", "/venv/bin/dvc", "exp", "run", "-S", "a=1"])
    ['exp', 'run', '-S', 'a=1']
    >>> _dvc_args(["python", "-m", "dvc", "repro"]), _dvc_args(["python", "probe.py"])
    (['repro'], None)
    """
    for i, arg in enumerate(cmdline[:3]):
        if Path(arg).name != "dvc":
            continue
        if i == 0 or Path(cmdline[0]).name.startswith("python"):
            return cmdline[i + 1 :]
    return None


def _ancestors() -> Iterator[tuple[int, float, list[str]]]:
    """This process's ancestors, nearest first: (pid, start time, command line)."""
    import psutil

    process = psutil.Process().parent()
    while process is not None:
        try:
            yield process.pid, process.create_time(), process.cmdline()
            process = process.parent()
        except psutil.Error:
            return


def _display(args: list[str]) -> str:
    return shlex.join(["dvc", *args])


def dvc_invocation() -> Invocation | None:
    """The DVC command running this stage, or None when DVC does not run it.

    Examples
    --------
    >>> import os
    >>> "DVC_STAGE" in os.environ or dvc_invocation() is None
    True
    """
    if not os.environ.get("DVC_STAGE"):
        return None
    chain = list(_ancestors())
    for i, (pid, started, cmdline) in enumerate(chain):
        args = _dvc_args(cmdline)
        if args is None:
            continue
        ident = f"{pid}-{started:.3f}"
        if args[:2] == ["exp", "exec-run"]:  # a queued experiment, run by a queue worker
            users = (_dvc_args(c) for _, _, c in chain[i + 1 :])
            user = next((a for a in users if a and a[:2] != ["exp", "queue-worker"]), None)
            command = _display(user) if user else "dvc exp run --queue"
            return Invocation("dvc exp run --queue", command, ident)
        if args[:2] == ["exp", "run"]:
            entry = "dvc exp run --temp" if "--temp" in args else "dvc exp run"
            return Invocation(entry, _display(args), ident)
        return Invocation(f"dvc {args[0]}" if args else "dvc", _display(args), ident)
    return Invocation("dvc repro", "dvc repro", f"{os.getppid()}-0")


def record_stage(name: str, started: int, ended: int) -> None:
    """Keep when stage ``name`` ran (epoch ms) for this invocation (under DVC only).

    Best effort: the stage's results never depend on it.
    """
    invocation = dvc_invocation()
    if invocation is None:
        return
    from arecall.io.atomic import write_json

    try:
        record = {"started": started, "ended": ended, "invocation": invocation.ident}
        write_json(_TIMES / f"{name}.json", record)
    except OSError:
        pass


def invocation_times(
    invocation: Invocation, stages: tuple[str, ...] | None = None, *, exclude: str = "track"
) -> tuple[int, int] | None:
    """The first start and last end of the stages ``invocation`` ran (all, or ``stages``).

    None when it ran none of them (every one was unchanged: DVC skipped it).
    """
    spans = []
    for path in sorted(_TIMES.glob("*.json")) if _TIMES.is_dir() else ():
        if path.stem == exclude or (stages is not None and path.stem not in stages):
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if record.get("invocation") == invocation.ident:
            spans.append((int(record["started"]), int(record["ended"])))
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)
