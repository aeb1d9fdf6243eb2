"""Keep a closing worker of the launcher's own cluster from printing a heartbeat traceback.

A Dask worker that is closing can have a heartbeat to the scheduler in flight; when the worker
(or the scheduler) closes that connection, distributed logs "Failed to communicate with
scheduler during heartbeat." with a traceback, from the worker's process onto the terminal
that ran ``arecall run`` (dask/distributed#7105). Nothing is lost: the sweep has finished. In
one test run under load it followed a local sweep's one-line error for a bad point, so the
user saw a traceback for a clean shutdown. Only the cluster the launcher starts itself gets
this plugin; a user's own cluster logs as its owner configured it. A heartbeat failure while
a worker is running still prints.

Imported only once Dask is known to be installed (it is the ``cluster`` extra).
"""

from __future__ import annotations

import logging
from typing import Any

from distributed import WorkerPlugin
from distributed.core import Status

#: What distributed's ``Worker.heartbeat`` logs when the scheduler connection fails.
HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"

#: A worker in these states has stopped working: its heartbeat failing is its own shutdown.
_STOPPING = frozenset({Status.closing, Status.closing_gracefully, Status.closed, Status.failed})


class ClosingHeartbeatFilter(logging.Filter):
    """Drops ``HEARTBEAT_FAILED`` records logged while ``worker`` is stopping.

    Examples
    --------
    >>> class Worker:
    ...     status = Status.closing
    >>> worker = Worker()
    >>> quiet = ClosingHeartbeatFilter(worker)
    >>> def record(msg):
    ...     return logging.LogRecord("distributed.worker", logging.ERROR, "", 0, msg, None, None)
    >>> quiet.filter(record(HEARTBEAT_FAILED + ".")), quiet.filter(record("other"))
    (False, True)
    >>> worker.status = Status.running
    >>> quiet.filter(record(HEARTBEAT_FAILED + "."))
    True
    """

    def __init__(self, worker: Any) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        stopping = getattr(self.worker, "status", None) in _STOPPING
        return not (stopping and record.getMessage().startswith(HEARTBEAT_FAILED))


class QuietClose(WorkerPlugin):
    """Installs :class:`ClosingHeartbeatFilter` on ``distributed.worker`` in each worker's
    process (``Client.register_plugin``). It is never taken off: the heartbeat it guards
    against fails as the worker closes, and the process ends with the worker."""

    name = "arecall-quiet-close"

    def __init__(self) -> None:
        self._filter: ClosingHeartbeatFilter | None = None

    def setup(self, worker: Any) -> None:
        self._filter = ClosingHeartbeatFilter(worker)
        logging.getLogger("distributed.worker").addFilter(self._filter)
