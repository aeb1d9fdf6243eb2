"""What sits at an output path is respected (issue 38, item 0): a device, a FIFO or a link is
never replaced by a regular file; a refused write is one line; a replaced file keeps its mode.

Found with ``arecall evaluate --out /dev/full`` exiting 0 and leaving /dev/full a regular file.
The devices here are made in a temporary directory (``mknod`` needs root; a pseudo-terminal is
the device any user may open), never the system's own /dev nodes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from arecall.cli.evaluate import evaluate_main
from arecall.core.errors import ArecallError
from arecall.io.atomic import write_text

RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 b 2 0.7 sys\n"
QRELS = "q1 0 a 1\n"


@pytest.fixture
def argv(tmp_path: Path) -> list[str]:
    (tmp_path / "run.trec").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    return ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]


def _device(path: Path, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), made at ``path``."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD); the pseudo-terminal test covers devices")
    return path


def test_a_null_device_receives_the_report_and_stays_a_device(tmp_path, argv, capsys) -> None:
    null = _device(tmp_path / "null", 3)
    assert evaluate_main([*argv, "--out", str(null), "--rows", str(null)]) == 0
    assert stat.S_ISCHR(null.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "qrels.txt", "run.trec"]


def test_a_full_device_is_one_line_exit_2_and_stays_a_device(tmp_path, argv, capsys) -> None:
    full = _device(tmp_path / "full", 7)
    assert evaluate_main([*argv, "--out", str(full)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"arecall: error: {full}: cannot write: {os.strerror(errno.ENOSPC)}"]
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_terminal_receives_the_report(argv, capsys) -> None:
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        assert evaluate_main([*argv, "--format", "csv", "--out", name]) == 0
        os.set_blocking(master, False)
        received = os.read(master, 1 << 16).replace(b"\r\n", b"\n").decode()
        assert stat.S_ISCHR(os.stat(name).st_mode)
    finally:
        os.close(master)
        os.close(slave)
    assert received.startswith("k,recall,precision")


def test_a_fifo_receives_the_report_and_stays_a_fifo(tmp_path, argv, capsys) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert evaluate_main([*argv, "--format", "json", "--out", str(fifo)]) == 0
    reader.join(timeout=30)
    assert received and received[0].startswith(b"{")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_link_to_a_pipe_writes_into_the_pipe(tmp_path, argv, capsys) -> None:
    """``--out`` a link to /proc/self/fd/N (here the write end of a pipe), as a shell's
    ``/dev/stdout`` is: the bytes go down the pipe and the link stays a link."""
    read_end, write_end = os.pipe()
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{write_end}")
    try:
        assert evaluate_main([*argv, "--format", "csv", "--out", str(link)]) == 0
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            received = pipe.read()
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)
    assert received.startswith(b"k,recall")
    assert link.is_symlink()


def test_a_link_to_a_file_replaces_the_file_and_stays_a_link(tmp_path, argv, capsys) -> None:
    target = tmp_path / "reports" / "summary.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "summary.txt"
    link.symlink_to(target)
    assert evaluate_main([*argv, "--out", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("run: sys")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.txt"]


def test_a_dangling_link_creates_its_target(tmp_path) -> None:
    link = tmp_path / "out.txt"
    link.symlink_to(tmp_path / "made" / "there.txt")
    write_text(link, "x\n")
    assert link.is_symlink() and (tmp_path / "made" / "there.txt").read_text() == "x\n"


def test_a_replaced_file_keeps_its_mode(tmp_path) -> None:
    target = tmp_path / "secret.json"
    target.write_text("{}\n")
    target.chmod(0o600)
    write_text(target, '{"a": 1}\n')
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == '{"a": 1}\n'


def test_a_directory_at_the_path_is_one_line(tmp_path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(ArecallError) as err:
        write_text(tmp_path / "out", "x")
    assert str(err.value) == f"{tmp_path / 'out'}: cannot write: {os.strerror(errno.EISDIR)}"
