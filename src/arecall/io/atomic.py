"""Write-then-rename, so a failed stage never leaves a half-written artifact behind.

DVC accepts whatever sits at an output path when a stage exits 0, and a reader of reports/ should
never see a truncated file; every artifact arecall writes goes through these helpers.

What sits at the path decides how it is written (a rename replaces whatever it lands on, so it is
used only where that is what the user meant):

* **Nothing, or a regular file**: write-then-rename. A new file gets the mode a plain
  ``open(path, "w")`` would give (``0o666`` less the umask), not the ``0o600`` of the temporary
  file; a file that exists keeps its mode (and, where the process may set it, its owner).
* **A symbolic link** is followed: the file it points to is replaced as above, and the link
  stays a link (a dangling link's target is created).
* **Anything else** — a character device (``/dev/null``, ``/dev/full``, a terminal), a FIFO, a
  socket, ``/proc/self/fd/1`` pointing at a pipe — is written through: the content is produced
  in a temporary file elsewhere, then copied into the path opened for writing. The node is never
  replaced; a device that refuses the bytes (``/dev/full``) is one `ArecallError` line.

No temporary file outlives its write:

* It is named ``.<target name>.<pid>.<random>.tmp`` beside the target, so it is recognisably
  arecall's and says which process owns it.
* An exception in the block (including ``KeyboardInterrupt``) removes it. SIGTERM and SIGHUP,
  whose default action ends the process without unwinding, are handled while their handler is
  still the default one: the live temporary files are removed, then the signal is delivered again
  with the default action (same exit status). A handler someone else installed (``arecall run``
  turns SIGTERM into an exception) is left alone; its exception unwinds the block.
* kill -9 cannot be caught: the next write to the same target removes the temporary files of
  processes that no longer exist (a live process's file is left alone; it may still be writing).
* A storage failure — disk full, file-size limit, read-only or unwritable directory, a file where
  a directory should be — is one `ArecallError` naming the target; the target keeps its previous
  content.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from arecall.core.errors import ArecallError

__all__ = [
    "atomic_path",
    "current_umask",
    "npz_member",
    "remove_stale",
    "temporary_directory",
    "write_json",
    "write_npz",
    "write_npz_pieces",
    "write_parquet",
    "write_parquet_groups",
    "write_text",
    "write_with",
]

_UMASK_LOCK = threading.Lock()
#: Temporary files being written by this process (removed by the signal handler and at exit).
_LIVE: set[str] = set()
#: Signals whose default action ends the process without unwinding Python frames.
_FATAL = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
#: A temporary file from before the pid was part of the name is stale once this old (seconds).
LEGACY_AGE = 3600
#: What the OS says when it will not store a file: the user's to fix, not a bug.
_STORAGE_ERRORS = frozenset(
    getattr(errno, name)
    for name in (
        "ENOSPC",
        "EDQUOT",
        "EFBIG",
        "EROFS",
        "EACCES",
        "EPERM",
        "ENOTDIR",
        "EISDIR",
        "EEXIST",
        "EIO",
        "ENAMETOOLONG",
    )
    if hasattr(errno, name)
)


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


# -- temporary files that outlive their write ---------------------------------------------------


def _remove_live() -> None:
    """Remove the live temporary files this process created (a forked child inherits the set)."""
    mine = f".{os.getpid()}."
    for name in list(_LIVE):
        if mine in os.path.basename(name):
            _remove(name)
    _LIVE.clear()


def _remove(name: str) -> None:
    """Remove a temporary file, or a temporary directory with what it holds."""
    if os.path.isdir(name) and not os.path.islink(name):
        shutil.rmtree(name, ignore_errors=True)
        return
    with suppress(OSError):
        os.unlink(name)


def _on_fatal_signal(signum: int, frame: FrameType | None) -> None:
    """Remove this process's temporary files, then die of the signal as the default would."""
    _remove_live()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _guard_signals() -> None:
    """Handle each fatal signal whose handler is still the default one (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _FATAL:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _on_fatal_signal)


atexit.register(_remove_live)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user's counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    return True


def remove_stale(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files of ``path`` left by processes that no longer exist.

    ``.<name>.<pid>.<random>.tmp`` goes when no process ``pid`` exists; a file of the form
    before the pid was recorded (``.<name>.<random>.tmp``) goes once it is `LEGACY_AGE` seconds
    old. Anything else, and another target's files, stay.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / ".x.json.999999999.abcd1234.tmp").write_text("partial")
    >>> [p.name for p in remove_stale(d / "x.json")]
    ['.x.json.999999999.abcd1234.tmp']
    """
    target = Path(path)
    prefix = f".{target.name}."
    ours = re.compile(re.escape(prefix) + r"(?:(\d+)\.)?[a-z0-9_]+\.tmp")
    removed: list[Path] = []
    try:
        entries = [e for e in os.scandir(target.parent) if e.name.startswith(prefix)]
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = ours.fullmatch(entry.name)
        if match is None:
            continue
        pid = match.group(1)
        try:
            stale = (
                not _alive(int(pid))
                if pid is not None
                else now - entry.stat(follow_symlinks=False).st_mtime > LEGACY_AGE
            )
            if stale:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(Path(entry.path))
        except (OSError, OverflowError):
            continue  # gone already, or not ours to remove
    return removed


# -- storage failures ---------------------------------------------------------------------------


def _cannot_write(target: Path, exc: OSError) -> ArecallError:
    """One line for a write the OS refused, naming the file."""
    parent = target.parent
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and not parent.is_dir():
        blocker = next((p for p in (parent, *parent.parents) if p.exists()), parent)
        return ArecallError(f"{target}: cannot write: {blocker} is not a directory")
    reason = os.strerror(exc.errno) if exc.errno is not None else str(exc)
    return ArecallError(f"{target}: cannot write: {reason}")


def _is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _STORAGE_ERRORS


def _existing(target: Path) -> os.stat_result | None:
    """``target``'s status, following symbolic links; None when nothing (or a dangling link) is
    there."""
    try:
        return target.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _cannot_write(target, exc) from None


def _keep_identity(tmp: Path, previous: os.stat_result | None) -> None:
    """Give the new file the mode (and owner, where allowed) of the one it replaces."""
    if previous is None:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp made it 0600
        return
    os.chmod(tmp, stat.S_IMODE(previous.st_mode))
    mine = tmp.stat()
    if (mine.st_uid, mine.st_gid) != (previous.st_uid, previous.st_gid):
        with suppress(OSError):  # only root (or the owner, for the group) may hand it back
            os.chown(tmp, previous.st_uid, previous.st_gid)


@contextmanager
def _temporary(directory: Path | None, target: Path) -> Iterator[Path]:
    """A live temporary file for ``target`` (beside it, or in the system's temp directory)."""
    _guard_signals()
    try:
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            remove_stale(target)
        fd, name = tempfile.mkstemp(
            prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        # Nothing of the caller's has run yet: whatever the OS says here is about creating a
        # file where the user pointed (a directory such as /proc answers ENOENT).
        raise _cannot_write(target, exc) from None
    _LIVE.add(name)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        with suppress(FileNotFoundError):
            tmp.unlink()
        _LIVE.discard(name)


@contextmanager
def temporary_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A live temporary directory beside ``path`` for the pieces of its write, removed with all
    it holds when the block ends — or, like a temporary file, on SIGTERM/SIGHUP, and after a
    kill -9 by the next write to ``path`` (`remove_stale`: it is named as the files are).

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "ranking.npz"
    >>> with temporary_directory(target) as d:
    ...     _ = (d / "part.npz").write_bytes(b"x")
    ...     d.name.startswith(".ranking.npz.")
    True
    >>> d.exists()
    False
    """
    target = Path(path)
    _guard_signals()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
        name = tempfile.mkdtemp(
            prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:
        raise _cannot_write(target, exc) from None
    _LIVE.add(name)
    try:
        yield Path(name)
    finally:
        _remove(name)
        _LIVE.discard(name)


def _write_through(tmp: Path, target: Path) -> None:
    """Copy the finished temporary file into a node that is not a regular file."""
    with tmp.open("rb") as source, open(target, "wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path; publish it at ``path`` only if the block succeeds.

    A regular file (or nothing) at ``path`` is replaced by a rename, keeping the previous file's
    mode; a symbolic link is followed; a device, FIFO or socket is written through, never
    replaced (see the module docstring). The temporary file is removed however the block ends
    (signals and kill -9 as described there); a storage failure (disk full, read-only, a device
    that refuses the bytes …) is one `ArecallError` naming ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("ok")
    >>> (d / "x.txt").read_text(), [p.name for p in d.iterdir()]
    ('ok', ['x.txt'])
    >>> (d / "link").symlink_to("x.txt")
    >>> with atomic_path(d / "link") as tmp:
    ...     _ = tmp.write_text("new")
    >>> (d / "link").is_symlink(), (d / "x.txt").read_text()
    (True, 'new')
    """
    given = Path(path)
    previous = _existing(given)
    special = previous is not None and not stat.S_ISREG(previous.st_mode)
    if previous is not None and stat.S_ISDIR(previous.st_mode):
        raise ArecallError(f"{given}: cannot write: {os.strerror(errno.EISDIR)}")
    # the file a link points to is the one replaced; the link stays
    target = Path(os.path.realpath(given)) if given.is_symlink() and not special else given
    with _temporary(None if special else target.parent, target) as tmp:
        try:
            yield tmp
            if not special:
                _keep_identity(tmp, previous)
                os.replace(tmp, target)
        except OSError as exc:
            if _is_storage_error(exc):
                raise _cannot_write(given, exc) from None
            raise
        if special:
            try:
                _write_through(tmp, given)
            except OSError as exc:  # whatever the node answers (ENOSPC, EPIPE, ENXIO …)
                raise _cannot_write(given, exc) from None


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
    held = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    write_npz_pieces(path, {name: (a.dtype, a.shape, _whole(a)) for name, a in held.items()})


def _whole(array: np.ndarray) -> Callable[[], Iterable[np.ndarray]]:
    """``array`` as the one piece of a `write_npz_pieces` member."""
    return lambda: [array]


#: One member of `write_npz_pieces`: its dtype, shape, and a callable giving its pieces.
NpzMember = tuple[Any, tuple[int, ...], Callable[[], Iterable[np.ndarray]]]


def write_npz_pieces(path: str | os.PathLike[str], members: Mapping[str, NpzMember]) -> None:
    """`write_npz`'s bytes, each array written from consecutive pieces (C order).

    Why: joining a ranking made in blocks needs one array's pieces in memory at a time, not
    every array whole; the file is byte-identical to `write_npz` of the joined arrays.
    A member's pieces must add up to its shape (checked: nothing half-written otherwise).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> x = np.arange(5)
    >>> write_npz(d / "a.npz", {"x": x})
    >>> write_npz_pieces(d / "b.npz", {"x": (x.dtype, x.shape, lambda: [x[:2], x[2:]])})
    >>> (d / "a.npz").read_bytes() == (d / "b.npz").read_bytes()
    True
    """

    def _write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for name in sorted(members):
                dtype, shape, pieces = members[name]
                dtype = np.dtype(dtype)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array_header_1_0(
                        fh,
                        {
                            "descr": np.lib.format.dtype_to_descr(dtype),
                            "fortran_order": False,
                            "shape": tuple(shape),
                        },
                    )
                    written = 0
                    for piece in pieces():
                        data = np.ascontiguousarray(piece, dtype=dtype)
                        fh.write(data.tobytes())
                        written += data.size
                    if written != int(np.prod(shape, dtype=np.int64)):
                        raise ValueError(f"{name}: pieces held {written} items, shape {shape}")

    write_with(path, _write)


def npz_member(path: str | os.PathLike[str], name: str) -> np.ndarray:
    """Member ``name`` of an uncompressed ``.npz`` (what `write_npz` writes), memory-mapped.

    Why: a block of principals needs its rows of an array of every principal's lists; mapped,
    it reads those rows from the file and nothing else (``numpy.load`` of an ``.npz`` reads a
    member whole). The one reader of a member's rows: the pipeline's blocks use it wherever
    they run (a Dask worker reads the file itself, on a filesystem it shares).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> write_npz(d / "a.npz", {"x": np.arange(6).reshape(3, 2)})
    >>> npz_member(d / "a.npz", "x")[1:].tolist()
    [[2, 3], [4, 5]]
    """
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{name}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ArecallError(f"{path}: member {name!r} is compressed; cannot map it")
        with open(path, "rb") as fh:
            fh.seek(info.header_offset)
            local = fh.read(30)
            if local[:4] != b"PK\x03\x04":
                raise ArecallError(f"{path}: member {name!r} has no local header; not an npz")
            skip = int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
            fh.seek(info.header_offset + 30 + skip)
            version = np.lib.format.read_magic(fh)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(fh)
            offset = fh.tell()
    if fortran or dtype.hasobject:
        raise ArecallError(f"{path}: member {name!r} is not a plain C-order array")
    if not int(np.prod(shape, dtype=np.int64)):
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))


def write_parquet(path: str | os.PathLike[str], frame: Any) -> None:
    """Atomically write a pandas DataFrame as Parquet (no index column)."""
    write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_parquet_groups(path: str | os.PathLike[str], frames: Iterable[Any]) -> None:
    """Atomically write pandas DataFrames as one Parquet file, each frame one row group.

    Why: a table too large for memory is written a group at a time; frames of pyarrow's row
    group size (the last shorter) give the bytes `write_parquet` writes for them joined, since
    ``DataFrame.to_parquet`` is pyarrow's ``write_table`` of the same schema cut into groups of
    that size. Every frame must have the first one's schema (checked).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    def _write(tmp: Path) -> None:
        writer = None
        try:
            for frame in frames:
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="snappy")
                elif not table.schema.equals(writer.schema, check_metadata=True):
                    raise ValueError(f"{path}: a row group's schema differs from the first's")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError(f"{path}: no frames to write")

    write_with(path, _write)
