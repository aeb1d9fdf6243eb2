"""Runs whose process died: who owns a run, whether that process lives, closing the orphans.

A process killed with SIGKILL cannot end its run. Every run carries its owner in its tags — the
host, the pid, and on Linux the pid's identity (``arecall.process``: the boot id and the
process's start time in clock ticks since boot, field 22 of ``/proc/<pid>/stat``) — and the next
writer on that host closes KILLED each RUNNING run whose owner is gone (`close_orphans`).

Whether the owner lives is decided without the wall clock: the start ticks are counted from
boot and never move, and a pid reused by another process has other ticks (a reboot, another boot
id). Process start times as seconds since the epoch (psutil's ``create_time``: boot time read
from the wall clock, plus the ticks) move with the clock: on a busy machine they moved about
17 s after an event-loop stall, and a live sweep's parent run was closed as an orphan. That
comparison remains only for runs written before ``arecall.process`` existed, or off Linux.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["close_orphans", "host", "owner_alive", "owner_tags", "process_identity"]

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host() -> str:
    """This host's name, as a run's ``arecall.host`` tag holds it (whose orphans to close)."""
    return socket.gethostname()


def _boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """``pid``'s state letter and start ticks from ``/proc/<pid>/stat`` (None: no such process).

    The command name (field 2) may hold spaces and parentheses: the fields are counted from the
    last ``)``. Raises `PermissionError` where /proc hides other users' processes.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], fields[19]  # field 3 (state), field 22 (starttime)


def process_identity(pid: int | None = None) -> str | None:
    """``<boot id>/<start ticks>`` of ``pid`` (default: this process); None off Linux.

    The same process has the same identity for its whole life, whatever the clock does; another
    process with the same pid, now or after a reboot, has another.

    Examples
    --------
    >>> import os
    >>> mine = process_identity()
    >>> mine is None or mine == process_identity(os.getpid())
    True
    """
    boot = _boot_id()
    try:
        found = _stat(os.getpid() if pid is None else pid)
    except (OSError, ValueError, IndexError):
        return None
    if boot is None or found is None:
        return None
    return f"{boot}/{found[1]}"


def owner_tags() -> dict[str, str]:
    """The tags that name this process as a run's owner: host, pid and (Linux) identity.

    Examples
    --------
    >>> import os
    >>> owner_tags()["arecall.pid"] == str(os.getpid())
    True
    """
    tags = {"arecall.pid": str(os.getpid()), "arecall.host": host()}
    identity = process_identity()
    if identity is not None:
        tags["arecall.process"] = identity
    return tags


def owner_alive(tags: Mapping[str, str], started_ms: int) -> bool:
    """Whether the process a run's tags name as its owner lives (on this host).

    With ``arecall.process``: the same boot and a live, non-zombie process at that pid with the
    same start ticks. Without it (an older run, a host without /proc): the pid lives and did not
    start after the run (``started_ms``), by the wall clock.

    Examples
    --------
    >>> owner_alive(owner_tags(), 0)
    True
    """
    pid = int(tags["arecall.pid"])
    recorded, boot = tags.get("arecall.process"), _boot_id()
    if recorded and boot is not None:
        recorded_boot, _, ticks = recorded.partition("/")
        if recorded_boot != boot:
            return False  # the machine rebooted since: every process of that boot is gone
        try:
            found = _stat(pid)
        except PermissionError:
            return True  # hidden from us (hidepid): it exists; not ours to close
        except (OSError, ValueError, IndexError):
            return _alive_by_clock(pid, started_ms)
        return found is not None and found[0] not in ("Z", "X") and found[1] == ticks
    return _alive_by_clock(pid, started_ms)


def _alive_by_clock(pid: int, started_ms: int) -> bool:
    """The check for runs without an identity: ``pid`` lives and did not start after the run."""
    if pid == os.getpid():
        return True
    try:
        import psutil
    except ImportError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        # a pid reused by a process started after the run is not the run's owner
        return bool(proc.create_time() * 1000 <= started_ms + 1000)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def close_orphans(client: Any, experiment_ids: Sequence[str]) -> list[str]:
    """End KILLED the RUNNING runs of this host whose process is gone; return their ids.

    A process killed with SIGKILL cannot end its run; the next writer on the same host does, with
    the tag ``arecall.orphaned`` as evidence (the run's ``arecall.pid`` and ``arecall.host``).

    Examples
    --------
    >>> import tempfile
    >>> from arecall.tracking.store import open_store
    >>> with open_store(f"sqlite:///{tempfile.mkdtemp()}/mlflow.db", orphans=False) as client:
    ...     close_orphans(client, ["0"])
    []
    """
    if not experiment_ids:
        return []
    here = host().replace("'", "\\'")
    runs = client.search_runs(
        list(experiment_ids),
        filter_string=f"attributes.status = 'RUNNING' and tags.`arecall.host` = '{here}'",
    )
    closed = []
    for run in runs:
        tags = run.data.tags
        try:
            pid = int(tags.get("arecall.pid", ""))
        except ValueError:
            continue
        if owner_alive(tags, int(run.info.start_time or 0)):
            continue
        client.set_tag(
            run.info.run_id,
            "arecall.orphaned",
            f"process {pid} on {host()} ended without closing the run; closed by {os.getpid()}",
        )
        client.set_terminated(run.info.run_id, "KILLED")
        closed.append(run.info.run_id)
    return closed
