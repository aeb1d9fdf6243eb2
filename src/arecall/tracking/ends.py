"""How a run ends: the statuses, the signals that end it, and a run used as a block.

A run's status says what happened to the process that owned it, and agrees with its exit status:

- FINISHED: everything was logged and the process went on to exit 0;
- FAILED: an exception (its ``Type: message`` as the ``arecall.error`` tag), exit 2 or 1;
- KILLED: SIGTERM / SIGINT (exit 143 / 130, `Interrupted`) or a kill -9 (closed by the tracker
  process or by the next writer on the host), whenever it lands: while the stages run, during
  the upload, and — inside `outcome_scope` — after the run was already ended FINISHED, while its
  process was still finishing (the run is then ended KILLED again, `RunBlock.relabel`).

A signal cannot split a status write from the process's knowledge of it: a run's creation and
its FINISHED end are written with SIGTERM / SIGINT held (`held_signals`) and delivered right
after, so a run is never created without its process knowing its id (and left RUNNING), and a
FINISHED run is always one the process counts as finished.

Apart from `arecall.tracking.run` and the products' modules so that ``arecall run`` can start its
tracker process (`arecall.tracking.tracker`) before importing anything heavy.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType, TracebackType
from typing import NoReturn, Self

__all__ = [
    "Interrupted",
    "RunBlock",
    "end_status",
    "error_text",
    "exit_promptly",
    "finished",
    "held_signals",
    "interruptible",
    "outcome_scope",
]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(SystemExit):
    """SIGTERM or SIGINT: exits 128 + signal number, as a shell reports it, without a traceback.

    A `SystemExit`, so ``except Exception`` (Hydra's job runner) lets it through and the open
    run is ended KILLED on the way out.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT raise `Interrupted` inside the block, so open runs end KILLED.

    Only the main thread can set handlers; elsewhere this does nothing. The previous handlers
    come back afterwards.

    Examples
    --------
    >>> import os, signal
    >>> try:
    ...     with interruptible():
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ... except Interrupted as exc:
    ...     exc.code
    143
    """
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_interrupted) for s in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGTERM and SIGINT while the block writes; deliver them after it (main thread only).

    For a store write whose result the process must know whatever happens next: a signal in
    the middle would leave a run created but unknown to its owner (RUNNING for good), or ended
    FINISHED by a process about to exit 143.

    Examples
    --------
    >>> import os, signal
    >>> try:
    ...     with interruptible():
    ...         with held_signals():
    ...             os.kill(os.getpid(), signal.SIGTERM)
    ...             print("the write completes")
    ... except Interrupted as exc:
    ...     exc.code
    the write completes
    143
    """
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {s: signal.signal(s, hold) for s in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)  # as if it came now, to the handler it would have met


class RunBlock:
    """A run used as a context manager ends as its block ended (`end_status`): the one rule
    for `TrackedRun` and the tracker process's `arecall.tracking.tracker.RemoteRun`."""

    def end(self, status: str, error: BaseException | str | None = None) -> None:
        raise NotImplementedError

    def relabel(self, status: str, error: str) -> None:
        """End again with ``status`` a run this process ended FINISHED (a signal came after)."""
        raise NotImplementedError

    def release(self) -> None:
        """Let go of what kept the run reachable for `relabel` (the tracker process)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end(*end_status(exc))


#: One list per open `outcome_scope` (innermost last): the runs ended FINISHED inside it.
_SCOPES: list[list[RunBlock]] = []


def finished(run: RunBlock) -> None:
    """Note that ``run`` was just ended FINISHED by this process (`outcome_scope` keeps it)."""
    if _SCOPES:
        _SCOPES[-1].append(run)
    else:
        run.release()


@contextmanager
def outcome_scope() -> Iterator[None]:
    """The part of the process a run's status answers for, after the run was logged.

    A run ended FINISHED inside the block is ended KILLED if a signal (`Interrupted`,
    KeyboardInterrupt) ends the block: the process was stopped before it was done with the run
    (printing its tables, writing DVC's record), so the run's status and the process's exit
    status agree. An entry point opens one per run, inside `interruptible`; outside any scope a
    run is released as soon as it is FINISHED.

    Examples
    --------
    >>> class Run(RunBlock):
    ...     def relabel(self, status, error):
    ...         print(status, "-", error)
    >>> try:
    ...     with outcome_scope():
    ...         finished(Run())
    ...         raise Interrupted(15)
    ... except Interrupted:
    ...     pass
    KILLED - SIGTERM reached the run's process after its results were logged
    """
    runs: list[RunBlock] = []
    _SCOPES.append(runs)
    try:
        yield
    except (Interrupted, KeyboardInterrupt) as exc:
        name = signal.Signals(exc.signum).name if isinstance(exc, Interrupted) else "SIGINT"
        with held_signals():
            for run in runs:
                run.relabel(
                    "KILLED", f"{name} reached the run's process after its results were logged"
                )
        raise
    finally:
        _SCOPES.remove(runs)
        for run in runs:
            run.release()


def exit_promptly(status: int) -> NoReturn:
    """Exit with ``status`` now: flush, run the atexit handlers, skip the interpreter's teardown.

    Once a run's status is written, nothing is left to do; but a process that used MLflow's
    sqlite store spends about a second tearing its modules down (measured: 1.2 s on an idle
    machine, several under load), a second in which a killer's SIGKILL finds it still alive.

    Examples
    --------
    >>> import subprocess, sys
    >>> code = "from arecall.tracking.ends import exit_promptly; print('bye'); exit_promptly(3)"
    >>> proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    >>> proc.returncode, proc.stdout
    (3, 'bye\\n')
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def error_text(error: BaseException | str) -> str:
    """An error as the ``arecall.error`` tag holds it: ``Type: message`` (a text stays as is).

    Examples
    --------
    >>> error_text(ValueError("boom")), error_text("KeyError: 'x'")
    ('ValueError: boom', "KeyError: 'x'")
    """
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"


def end_status(exc: BaseException | None) -> tuple[str, BaseException | None]:
    """How a run whose block ended with ``exc`` ends: its status and the error to tag it with.

    Examples
    --------
    >>> end_status(None), end_status(ValueError("x"))[0], end_status(Interrupted(15))
    (('FINISHED', None), 'FAILED', ('KILLED', None))
    """
    if exc is None:
        return "FINISHED", None
    if isinstance(exc, Interrupted | KeyboardInterrupt):
        return "KILLED", exc if isinstance(exc, KeyboardInterrupt) else None
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        return "FINISHED", None
    return "FAILED", exc
