"""Write-then-rename, so a failed stage never leaves a half-written artifact behind.

DVC accepts whatever sits at an output path when a stage exits 0, and a reader of reports/ should
never see a truncated file; every artifact arecall writes goes through these helpers. The file
ends with the mode a plain ``open(path, "w")`` would give (``0o666`` less the umask), not the
``0o600`` of the temporary file it was written as.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_path",
    "current_umask",
    "write_json",
    "write_npz",
    "write_parquet",
    "write_text",
    "write_with",
]

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the OS allows.

    Linux reports it in ``/proc/self/status``; elsewhere it is read by setting and restoring it
    under a lock (``os.umask`` is the only portable way, and it briefly changes the mask).

    Examples
    --------
    >>> 0 <= current_umask() <= 0o777
    True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("ok")
    >>> (d / "x.txt").read_text()
    'ok'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp made it 0600
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Atomically write ``text`` (UTF-8, ``\\n`` line endings) to ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Atomically write ``data`` as indented JSON (insertion order; NaN refused)."""
    write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], None]) -> None:
    """Atomically produce ``path`` by calling ``writer(tmp_path)`` (e.g. a Parquet writer)."""
    with atomic_path(path) as tmp:
        writer(tmp)


def write_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> None:
    """Atomically write plain arrays as an uncompressed ``.npz`` with fixed zip timestamps.

    ``numpy.savez`` stamps each member with the current time, which would change the file's
    hash (and so ``dvc.lock``) on every run; here equal arrays give equal bytes. The result reads
    back with ``numpy.load(path, allow_pickle=False)``.
    """

    def _write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for name in sorted(arrays):
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array(
                        fh, np.ascontiguousarray(arrays[name]), allow_pickle=False
                    )

    write_with(path, _write)


def write_parquet(path: str | os.PathLike[str], frame: Any) -> None:
    """Atomically write a pandas DataFrame as Parquet (no index column)."""
    write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))
