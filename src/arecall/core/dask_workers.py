"""What arecall sets on the Dask workers it runs blocks on (`WorkerTuning`).

Why: a block costs more per pair on a Dask worker than in one process for two reasons that
come from how workers are started, not from the block (issue 36, measured in benchmark 7):

* Dask's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``, which pins glibc's
  mmap threshold at 128 KiB: every block temporary is mapped and unmapped afresh
  (`tune_allocator` resets the thresholds);
* Dask's statistical profiler wakes the worker's event loop every 10 ms while a task runs,
  walks the running thread's stack under the GIL and stores it: a cost per second of wall
  time, so it grows as a loaded machine stretches the block's wall time (about 0.03 s of CPU
  per second of a running task, doubling the event loop's own cost).

`arecall.core.engine.DaskEngine` and the Hydra launcher register `WorkerTuning` on the
cluster they connect to, so every worker there, and every worker that joins later, gets it:
the user's ``dask worker`` processes need no setting. The profiler stays off for the
worker's life (its dashboard profile page stays empty); a user who wants it for other work
runs arecall on workers of their own.

Imported only once Dask is known to be installed (the ``cluster`` extra).
"""

from __future__ import annotations

from typing import Any

from distributed import WorkerPlugin

__all__ = ["PROFILER_CALLBACKS", "WORKER_TUNING", "WorkerTuning", "register", "tune_allocator"]

#: glibc's mallopt parameters, and the values a worker takes: glibc's own dynamic maximum for
#: the mmap threshold (32 MiB on 64-bit), and twice that for trimming.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_BYTES, _TRIM_BYTES = 32 << 20, 64 << 20
_tuned: bool | None = None


def tune_allocator() -> bool:
    """Give this process's allocator the thresholds a block's temporaries need; True if set.

    Why: Dask's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``, and setting any
    malloc threshold turns off glibc's dynamic mmap threshold, which then stays at 128 KiB:
    every temporary array larger than that is mapped fresh and unmapped when freed, so each
    block pays page faults on memory a plain process reuses. Setting the mmap threshold to
    glibc's dynamic maximum and trimming above it restores the local engine's behaviour and
    still returns large frees to the system. Once per process; not glibc: nothing to do.
    """
    global _tuned
    if _tuned is None:
        _tuned = False
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            _tuned = bool(
                libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)
                and libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES)
            )
        except (OSError, AttributeError):  # not glibc
            _tuned = False
    return _tuned


#: The name the plugin is registered under (one per cluster, whoever registers it).
WORKER_TUNING = "arecall-worker-tuning"

#: A worker's periodic callbacks that make up Dask's statistical profiler: the 10 ms sampler
#: and the 1 s cycle that files its samples.
PROFILER_CALLBACKS = ("profile", "profile-cycle")


class WorkerTuning(WorkerPlugin):
    """On each worker: the allocator tuned, and the statistical profiler stopped.

    The profiler's callbacks are taken out of the worker's ``periodic_callbacks``, not only
    stopped: a worker joining the cluster runs its plugins' ``setup`` before it starts its
    periodic callbacks, which would start them again.

    Examples
    --------
    >>> class Callback:
    ...     running = True
    ...     def stop(self):
    ...         self.running = False
    >>> class Worker:
    ...     periodic_callbacks = {"profile": Callback(), "heartbeat": Callback()}
    >>> worker = Worker()
    >>> sampler = worker.periodic_callbacks["profile"]
    >>> WorkerTuning().setup(worker)
    >>> sorted(worker.periodic_callbacks), sampler.running
    (['heartbeat'], False)
    """

    name = WORKER_TUNING
    idempotent = True  # registered again by another client: nothing to redo

    def setup(self, worker: Any) -> None:
        tune_allocator()
        for key in PROFILER_CALLBACKS:
            callback = worker.periodic_callbacks.pop(key, None)
            if callback is not None:
                callback.stop()


def register(client: Any) -> None:
    """Register `WorkerTuning` on ``client``'s cluster (its workers now and later)."""
    client.register_plugin(WorkerTuning(), name=WORKER_TUNING)
