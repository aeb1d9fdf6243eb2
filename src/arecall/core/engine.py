"""Where per-principal work runs: in this process (`LocalEngine`) or on a Dask cluster
(`DaskEngine`), sharded by blocks of principals.

Why: the score and prove stages and ``arecall evaluate`` with an ACL do the same arithmetic for
every (principal, query) pair, and principals are independent of each other. An evaluation with
10,000 principals and a million queries (10^10 pairs) outgrows one process; cutting the
principals into blocks lets each block run anywhere. A block function returns a summary that
merges exactly (``arecall evaluate``: integer tallies per block; the pipeline's score stage:
exact sums and Δ histograms, its rows written to a part file; prove: first counterexamples;
filter: the name of its part file), from which every mean, the bootstrap and the randomization
test are computed, so nothing per pair comes back — or, for `arecall.core.scoring.score_pairs`,
arrays that concatenate in block order to exactly the arrays one process computes; either way
results are byte-identical whatever the engine and block size.

Block sizes come from memory: a caller says how many bytes of temporaries one principal needs
(``per_principal``), and each engine fits as many principals in a block as its budget holds —
`LocalEngine` `LOCAL_BLOCK_BYTES`, `DaskEngine` a quarter of a worker thread's memory limit, up to
the same `LOCAL_BLOCK_BYTES`.

A worker computes a pair at the local engine's cost: `DaskEngine` registers
`arecall.core.dask_workers.WorkerTuning` on the cluster it connects to (the allocator tuned,
Dask's statistical profiler off), so workers started by hand need no setting.

The API is one call, `Engine.map_blocks`: ``fn(start, stop, block, **shared)`` for every block
of principals, results in block order. ``shared`` holds what every block needs (the ranking, the
relevance keys, the run's arrays): the Dask engine scatters it once to every worker
(``broadcast=True``) and passes futures, so it is not shipped with each task; ``block_data``
gives each block its own slice (its principals' lists or ACL rows), shipped with its task only.

Dask is imported only when a `DaskEngine` is made (``evaluation.engine=dask``): the local
engine, the default, costs nothing.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from arecall.core.errors import ArecallError

__all__ = [
    "ENGINES",
    "DaskEngine",
    "Engine",
    "LocalEngine",
    "blocks_of",
    "engine_from_config",
    "make_engine",
    "realigned",
]

#: The engine names ``evaluation.engine`` and ``arecall evaluate --engine`` accept.
ENGINES = ("local", "dask")

#: Principals per block when neither the engine nor the caller says.
DEFAULT_BLOCK = 16

#: Bytes of a block's temporaries on this machine's engine (several blocks may run at once).
LOCAL_BLOCK_BYTES = 1 << 28

#: A Dask worker thread gives a block this share of its memory limit (the rest: the shared
#: data, the block's inputs, the result while it is sent, the allocator's slack).
WORKER_SHARE = 4

#: Blocks per worker thread a Dask map cuts at least (when the principals allow): work for
#: every worker, and a lost worker's share rerun in small pieces.
BLOCKS_PER_THREAD = 4

#: The least and most a block of a Dask worker holds, whatever its memory limit says. The most
#: is the local engine's block: larger blocks only cost more per pair (measured: blocks of
#: 750 and 1,500 principals took 10–20% more CPU per pair than blocks of 250, the size 256 MiB
#: holds, in benchmark 7), so a worker with memory to spare runs the same blocks as one process.
WORKER_BLOCK_BYTES = (1 << 26, LOCAL_BLOCK_BYTES)

BlockFn = Callable[..., Any]


def blocks_of(n: int, size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` cutting ``range(n)`` into blocks of ``size`` (the last shorter).

    Examples
    --------
    >>> blocks_of(5, 2)
    [(0, 2), (2, 4), (4, 5)]
    >>> blocks_of(0, 3)
    []
    """
    if size < 1:
        raise ArecallError(f"block size must be a positive integer, got {size}")
    return [(s, min(s + size, n)) for s in range(0, n, size)]


@dataclass
class Engine:
    """Runs a function over blocks of principals; subclasses decide where.

    Attributes
    ----------
    block : int or None
        Principals per block; ``None`` takes the caller's ``size`` (each kernel knows how many
        principals keep its temporaries small).
    """

    block: int | None = None

    def spans(
        self, n: int, size: int | None = None, per_principal: int | None = None
    ) -> list[tuple[int, int]]:
        """The blocks ``map_blocks`` cuts ``range(n)`` into: the engine's fixed block, else as
        many principals as `block_bytes` holds at ``per_principal`` bytes each, else ``size``.

        Examples
        --------
        >>> LocalEngine().spans(5, 2), LocalEngine(block=4).spans(5, 2)
        ([(0, 2), (2, 4), (4, 5)], [(0, 4), (4, 5)])
        >>> LocalEngine().spans(5, per_principal=LOCAL_BLOCK_BYTES // 3)
        [(0, 3), (3, 5)]
        """
        if not self.block and per_principal:
            size = max(1, self.block_bytes() // max(int(per_principal), 1))
        return blocks_of(n, self.block or size or DEFAULT_BLOCK)

    def block_bytes(self) -> int:
        """Bytes of temporaries one block may hold (what ``per_principal`` is divided into)."""
        return LOCAL_BLOCK_BYTES

    def map_blocks(
        self,
        fn: BlockFn,
        n: int,
        *,
        shared: Mapping[str, Any] | None = None,
        block_data: Callable[[int, int], Any] | None = None,
        size: int | None = None,
        per_principal: int | None = None,
    ) -> list[Any]:
        """``[fn(start, stop, block_data(start, stop), **shared) for each block]``, in order.

        Parameters
        ----------
        fn : callable
            A module-level function (a Dask worker imports it by name).
        n : int
            Number of principals.
        shared : mapping, optional
            Keyword arguments every block gets, sent once per worker.
        block_data : callable, optional
            ``(start, stop) -> data`` of one block (``None`` when omitted), sent with its task.
        size : int, optional
            Principals per block unless the engine fixes it (`Engine.block`).
        per_principal : int, optional
            Bytes of temporaries one principal needs: the engine sizes blocks from its memory
            (`Engine.spans`), unless it fixes the block.

        Examples
        --------
        >>> def size(start, stop, data, *, scale):
        ...     return (stop - start) * scale
        >>> LocalEngine().map_blocks(size, 5, shared={"scale": 10}, size=2)
        [20, 20, 10]
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what the engine holds (a cluster connection)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class LocalEngine(Engine):
    """Every block in this process, one after the other."""

    def map_blocks(
        self,
        fn: BlockFn,
        n: int,
        *,
        shared: Mapping[str, Any] | None = None,
        block_data: Callable[[int, int], Any] | None = None,
        size: int | None = None,
        per_principal: int | None = None,
    ) -> list[Any]:
        kwargs = dict(shared or {})
        return [
            fn(s, e, None if block_data is None else block_data(s, e), **kwargs)
            for s, e in self.spans(n, size, per_principal)
        ]


def realigned(value: Any) -> Any:
    """``value`` with every numpy array in it (in dicts, lists, tuples, object attributes and
    scipy sparse matrices) copied to aligned memory if it is not aligned.

    Why: arrays a Dask worker unpickles from network frames can be unaligned, and numpy's
    gathers on unaligned int64 arrays run several times slower (measured 4×). Copying once, when
    the worker receives the data, restores the speed.

    Examples
    --------
    >>> raw = np.frombuffer(bytearray(8 * 4 + 1), dtype=np.int64, count=4, offset=1)
    >>> raw.flags.aligned, realigned({"x": [raw]})["x"][0].flags.aligned
    (False, True)
    """
    if isinstance(value, np.ndarray):
        return value if value.flags.aligned else np.array(value, copy=True)
    if isinstance(value, dict):
        return {k: realigned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(realigned(v) for v in value)
    if hasattr(value, "__dict__") and not isinstance(value, type):
        for name, attribute in vars(value).items():
            if isinstance(attribute, np.ndarray) and not attribute.flags.aligned:
                object.__setattr__(value, name, np.array(attribute, copy=True))
    return value


class _Aligned:
    """Holds ``value`` so that every process that unpickles it gets it `realigned`.

    The holder, not the bare value, is what workers store: when the scheduler replicates a
    scattered value to another worker, it is pickled as this holder again, so the copy there
    is realigned too (a bare array would travel as raw, possibly unaligned, frames).
    """

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _unpickle_aligned, (self.value,)


def _unpickle_aligned(value: Any) -> _Aligned:
    return _Aligned(realigned(value))


#: How many times `DaskEngine.map_blocks` scatters its shared data again after the cluster lost
#: every copy of it (workers killed mid-map), before it gives up with one line.
_RESCATTERS = 2


def _run_block(fn: BlockFn, start: int, stop: int, data: _Aligned, **shared: _Aligned) -> Any:
    """A block on a worker: unwrap the held data and call ``fn`` (the allocator tuned once,
    should the worker not have run `arecall.core.dask_workers.WorkerTuning`)."""
    from arecall.core.dask_workers import tune_allocator

    tune_allocator()
    return fn(start, stop, data.value, **{k: v.value for k, v in shared.items()})


class DaskEngine(Engine):
    """Blocks as tasks on a Dask distributed cluster (``distributed.Client(scheduler)``).

    Connecting registers `arecall.core.dask_workers.WorkerTuning` on the cluster: each worker,
    and each that joins later, tunes its allocator and stops Dask's statistical profiler, the
    two things that made a worker's pair cost more than the local engine's.

    ``shared`` is scattered once with ``broadcast=True`` (one copy per worker), each block's own
    data to one worker, and the tasks get their futures (nothing large goes through the task
    graph); results are gathered in block order. Pure, deterministic block functions
    make the result equal to `LocalEngine`'s, byte for byte — and make a rerun safe: if every
    worker holding the shared data dies, Dask cancels the blocks that need it, and the
    engine scatters it again and reruns those blocks (up to ``_RESCATTERS`` times).

    Parameters
    ----------
    scheduler : str
        The scheduler's address, e.g. ``tcp://127.0.0.1:8786``.
    block : int, optional
        Principals per block (default: the kernel's own size).
    timeout : float
        Seconds to wait for the scheduler.
    setting : str
        How the caller spells the address's setting, for its errors: the config's key, or
        ``--scheduler`` on ``arecall evaluate``'s command line.
    """

    def __init__(
        self,
        scheduler: str,
        block: int | None = None,
        timeout: float = 30.0,
        setting: str = "evaluation.engine.scheduler",
    ) -> None:
        super().__init__(block=block)
        if not scheduler:
            raise ArecallError(
                f"{setting}: the dask engine needs a scheduler address, e.g. tcp://127.0.0.1:8786"
            )
        try:
            from distributed import Client
        except ImportError:  # pragma: no cover - the extra is not installed
            raise ArecallError(
                "evaluation.engine.name=dask needs Dask distributed: pip install 'arecall[cluster]'"
            ) from None
        try:
            self.client = Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ArecallError(
                f"{setting}: cannot reach the Dask scheduler at {scheduler}: {exc}"
            ) from None
        self.scheduler = scheduler
        try:  # every worker, now and joining later: the allocator tuned, the profiler off
            from arecall.core.dask_workers import register

            register(self.client)
        except Exception as exc:  # the scheduler went away while connecting (any error)
            self.client.close()
            raise self._lost(exc) from None
        self._block_bytes: int | None = None
        #: Per `map_blocks` call: tasks, bytes scattered once (× workers), bytes of the blocks'
        #: own data (scattered, each to one worker) and bytes gathered back (dask's
        #: ``sizeof``) — what a capacity plan needs.
        self.shipped: list[dict[str, int]] = []

    def spans(
        self, n: int, size: int | None = None, per_principal: int | None = None
    ) -> list[tuple[int, int]]:
        """`Engine.spans`, and when blocks are sized from memory (``per_principal``), at least
        `BLOCKS_PER_THREAD` blocks per worker thread: memory alone would give a large
        cluster one block to run while the other workers wait."""
        spans = super().spans(n, size, per_principal)
        if self.block or not per_principal or not spans:  # a size the caller or user fixed
            return spans
        workers = self._scheduler_info().get("workers", {}).values()
        threads = sum(int(w.get("nthreads") or 1) for w in workers)
        wanted = max(1, -(-n // (BLOCKS_PER_THREAD * max(threads, 1))))
        widest = max(e - s for s, e in spans)
        return spans if widest <= wanted else blocks_of(n, wanted)

    def block_bytes(self) -> int:
        """A quarter of the smallest worker thread's memory limit (`WORKER_SHARE`), within
        `WORKER_BLOCK_BYTES` (at most the local engine's block); `LOCAL_BLOCK_BYTES` when the
        workers have no limit."""
        if self._block_bytes is None:
            limits = [
                int(w.get("memory_limit") or 0) // max(int(w.get("nthreads") or 1), 1)
                for w in self._scheduler_info().get("workers", {}).values()
            ]
            known = [x for x in limits if x > 0]
            if not known:
                self._block_bytes = LOCAL_BLOCK_BYTES
            else:
                low, high = WORKER_BLOCK_BYTES
                self._block_bytes = min(max(min(known) // WORKER_SHARE, low), high)
        return self._block_bytes

    def _scheduler_info(self) -> dict[str, Any]:
        try:
            info: dict[str, Any] = self.client.scheduler_info()
        except Exception as exc:
            raise self._lost(exc) from None
        return info

    def _lost(self, exc: BaseException) -> ArecallError:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return ArecallError(
            f"evaluation.engine: lost the Dask scheduler at {self.scheduler} "
            f"({type(exc).__name__}{': ' + first if first else ''}); nothing was written"
        )

    def map_blocks(
        self,
        fn: BlockFn,
        n: int,
        *,
        shared: Mapping[str, Any] | None = None,
        block_data: Callable[[int, int], Any] | None = None,
        size: int | None = None,
        per_principal: int | None = None,
    ) -> list[Any]:
        spans = self.spans(n, size, per_principal)
        if not spans:
            return []
        from distributed.client import FutureCancelledError

        try:
            results, sent = self._map(fn, spans, shared, block_data)
        except (ArecallError, FutureCancelledError):
            raise
        except (OSError, TimeoutError) as exc:  # CommClosedError is an OSError
            raise self._lost(exc) from None
        except Exception as exc:
            if getattr(self.client, "status", "running") not in ("running", "connecting"):
                raise self._lost(exc) from None
            raise
        from dask.sizeof import sizeof

        ordered = [results[i] for i in range(len(spans))]
        self.shipped.append(
            {
                "tasks": len(spans),
                "workers": len(self.client.nthreads()),
                "shared_bytes": sum(sizeof(v) for v in (shared or {}).values()),
                "task_bytes": sent,
                "result_bytes": sum(sizeof(r) for r in ordered),
            }
        )
        return ordered

    def _as_completed(self, futures: list[Any]) -> Any:
        """``futures`` in the order they finish."""
        from distributed import as_completed

        with self.client.as_current():  # as_completed asks for "the" client: this one
            return as_completed(futures)

    def _map(
        self,
        fn: BlockFn,
        spans: list[tuple[int, int]],
        shared: Mapping[str, Any] | None,
        block_data: Callable[[int, int], Any] | None,
    ) -> tuple[dict[int, Any], int]:
        """Every block's result by block index, each kept once; bytes of the blocks' data."""
        from dask.sizeof import sizeof
        from distributed.client import FutureCancelledError

        names = list(shared or {})
        results: dict[int, Any] = {}
        sent = 0
        lost: BaseException | None = None
        for attempt in range(_RESCATTERS + 1):
            todo = [i for i in range(len(spans)) if i not in results]
            status = getattr(self.client, "status", "running")
            if status != "running" or "scheduler" in str(getattr(lost, "reason", "")):
                raise self._lost(lost or RuntimeError(f"the client is {status}"))
            # Scattered data is not in the graph: when every worker holding it dies, Dask
            # forgets it and cancels the blocks that need it (dask/distributed#3149). The
            # blocks are pure, so scattering again and rerunning the lost ones is the fix;
            # shipping the arrays inside the graph instead would route them through the
            # scheduler.
            scattered = (
                self.client.scatter(
                    [_Aligned((shared or {})[k]) for k in names], broadcast=True, hash=False
                )  # a list: each value one future, whatever its type (a tuple is not split)
                if names
                else []
            )
            futures = dict(zip(names, scattered, strict=True))
            call = uuid.uuid4().hex  # a fresh key per call: never a previous call's result
            # Each block's own data is scattered too, not put in the graph: in the graph it
            # travels through the scheduler, which warns about a large graph (an ACL's rows:
            # "Sending large graph of size 23.85 MiB") and holds it all in memory.
            held: dict[int, Any] = {}
            if block_data is not None:
                blocks = {i: block_data(*spans[i]) for i in todo}
                if attempt == 0:
                    sent += sum(sizeof(b) for b in blocks.values())
                placed = self.client.scatter([_Aligned(blocks[i]) for i in todo], hash=False)
                held = dict(zip(todo, placed, strict=True))
                del blocks
            if attempt:  # told once the cluster took the data again (not when it is gone)
                print(
                    f"arecall: warning: the Dask cluster at {self.scheduler} lost {len(todo)} of "
                    f"{len(spans)} blocks of {getattr(fn, '__name__', 'work')} with their workers "
                    "(a worker died); running them again",
                    file=sys.stderr,
                )
            tasks = {}
            for i in todo:
                s, e = spans[i]
                tasks[i] = self.client.submit(
                    _run_block,
                    fn,
                    s,
                    e,
                    held.get(i, _Aligned(None)),
                    **futures,
                    pure=False,
                    key=f"arecall-{getattr(fn, '__name__', 'block')}-{s}-{e}-{call}",
                )
            index = {task.key: i for i, task in tasks.items()}
            try:
                # each result taken as it completes and released at once: a worker holds a
                # finished block only until this process has it, never until the last one
                for task in self._as_completed(list(tasks.values())):
                    i = index[task.key]
                    try:
                        value = task.result()
                    except FutureCancelledError as exc:
                        lost = exc
                        continue
                    results.setdefault(i, value)  # one result per block, however often it ran
                    task.release()
                    if i in held:
                        held.pop(i).release()
            finally:
                for task in tasks.values():
                    task.release()
                for future in (*futures.values(), *held.values()):
                    future.release()
            if len(results) == len(spans):
                return results, sent
        raise ArecallError(
            f"evaluation.engine: the Dask cluster at {self.scheduler} lost the shared data "
            f"{_RESCATTERS + 1} times (every worker holding it died): {lost!r}"
        )

    def close(self) -> None:
        self.client.close()


def make_engine(
    name: str = "local",
    scheduler: str | None = None,
    block: int | None = None,
    *,
    scheduler_setting: str = "evaluation.engine.scheduler",
) -> Engine:
    """The engine ``evaluation.engine`` / ``--engine`` names (``block`` 0 or None: automatic);
    an error about the scheduler names ``scheduler_setting``, as the caller's user wrote it.

    Examples
    --------
    >>> make_engine("local", block=8)
    LocalEngine(block=8)
    >>> make_engine("spark")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: evaluation.engine.name: expected one of local, dask, ...
    """
    size = int(block) if block else None
    if size is not None and size < 0:
        raise ArecallError(f"evaluation.engine.block_principals: expected N >= 0, got {block}")
    if name == "local":
        return LocalEngine(block=size)
    if name == "dask":
        return DaskEngine(scheduler or "", block=size, setting=scheduler_setting)
    raise ArecallError(
        f"evaluation.engine.name: expected one of {', '.join(ENGINES)}, got {name!r}"
    )


def engine_from_config(engine: EngineSettings) -> Engine:
    """The engine the checked ``evaluation.engine`` section names: ``name``, ``scheduler``,
    ``block_principals`` (`arecall.pipeline.schema.EngineConfig`).

    Examples
    --------
    >>> from arecall.pipeline.schema import EngineConfig
    >>> engine_from_config(EngineConfig())
    LocalEngine(block=None)
    >>> engine_from_config(EngineConfig(name="local", block_principals=3))
    LocalEngine(block=3)
    """
    return make_engine(engine.name, engine.scheduler or None, engine.block_principals)


class EngineSettings(Protocol):
    """What `engine_from_config` reads of the ``evaluation.engine`` section."""

    name: str
    scheduler: str
    block_principals: int
