"""The directory an ``arecall run`` writes into: checked before Hydra makes it, undone if refused.

Hydra creates the run directory (or a sweep's), writes ``.hydra/`` and opens a log file before
arecall's code runs; a read-only or full file system there ended in Hydra's traceback and left
a half-written ``.hydra/``. Here the directory is tried first (`check_writable`: a file of
`PROBE_BYTES` is written and removed where the directory will be), and what Hydra created for a
run whose setup then failed is removed (`undo_on_failure`), so the user reads one line naming
the directory and finds nothing half-written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from arecall.core.errors import ArecallError

__all__ = ["PROBE_BYTES", "RunDirectoryError", "check_writable", "undo_on_failure"]

#: What a run writes before its first stage (Hydra's ``.hydra/`` files, the log) with room to
#: spare: a file system that cannot take this cannot hold a run.
PROBE_BYTES = 64 * 1024


class RunDirectoryError(ArecallError):
    """The run (or sweep) directory cannot be written: one line naming it and why."""

    def __init__(self, directory: str | os.PathLike[str], exc: OSError, what: str = "run") -> None:
        reason = exc.strerror or type(exc).__name__
        super().__init__(f"{directory}: cannot write the {what} directory: {reason}")


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable(directory: str | os.PathLike[str], what: str = "run") -> None:
    """Refuse ``directory`` if a run cannot write there, creating nothing.

    The test is a write: a file of `PROBE_BYTES` is written, flushed to the file system and
    removed, in ``directory`` if it exists, else in its nearest existing ancestor (where Hydra
    will create it). A read-only file system, a missing permission, a full disk or a file-size
    limit below `PROBE_BYTES` is one `RunDirectoryError`.

    Examples
    --------
    >>> import tempfile
    >>> check_writable(tempfile.mkdtemp() + "/new/run")
    >>> check_writable("/proc/arecall-run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.cli.run_directory.RunDirectoryError: /proc/arecall-run: cannot write the run directory: ...
    """  # noqa: E501 (a doctest's expected line)
    target = Path(directory).absolute()
    where = _existing_ancestor(target)
    try:
        if not where.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(where))
        fd, name = tempfile.mkstemp(prefix=".arecall-probe-", dir=where)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(b"\0" * PROBE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            with suppress(OSError):
                os.unlink(name)
    except OSError as exc:
        raise RunDirectoryError(target, exc, what) from None


@contextmanager
def undo_on_failure(directory: str | os.PathLike[str]) -> Iterator[None]:
    """Inside the block Hydra sets ``directory`` up; if that raises OSError, undo it, then say so.

    Whatever the block created is removed: the directory and the parents it made, or, in a
    directory that existed, the entries that were not there before (``.hydra/``, the log).
    The error is re-raised as a `RunDirectoryError` naming ``directory``.
    """
    target = Path(directory).absolute()
    top = _existing_ancestor(target)
    before = set(os.listdir(target)) if target.is_dir() else None
    try:
        yield
    except OSError as exc:
        if before is None:
            made = target
            while made.parent != top and made.parent != made:
                made = made.parent
            shutil.rmtree(made, ignore_errors=True)
        else:
            for name in set(os.listdir(target)) - before:
                entry = target / name
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    with suppress(OSError):
                        entry.unlink()
        raise RunDirectoryError(target, exc) from None
