"""How a run ends: the statuses, the signals that end it, and a run used as a block.

Apart from `arecall.tracking.run` and the products' modules so that ``arecall run`` can start its
tracker process (`arecall.tracking.tracker`) before importing anything heavy.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Self

__all__ = ["Interrupted", "RunBlock", "end_status", "error_text", "interruptible"]


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
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class RunBlock:
    """A run used as a context manager ends as its block ended (`end_status`): the one rule
    for `TrackedRun` and the tracker process's `arecall.tracking.tracker.RemoteRun`."""

    def end(self, status: str, error: BaseException | str | None = None) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end(*end_status(exc))


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
