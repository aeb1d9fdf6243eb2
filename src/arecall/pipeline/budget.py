"""Memory a configuration will need, estimated before anything is allocated.

Why: an absurd value (``evaluation.ks=[1000000000]``, ``corpus.n_docs=1000000000000``) used to
run for a while and die in a ``MemoryError`` traceback trying to allocate hundreds of GiB. Here
the dominant arrays are sized from the configuration and compared with the memory the machine
has free; past it, one `ConfigProblem` names the key and gives the estimate.

The estimates count only arrays that are certainly allocated, so they are lower bounds: a
configuration refused here could not have run. What they count:

* **Placed lists** (`arecall.core.placed_lists.place_all`): four int32 arrays of queries × K
  per principal (`LIST_CELL` bytes per cell). The filter stage places them by blocks of
  principals and writes them to disk, and score and prove read a block at a time, so what must
  fit in memory is one principal's lists (a block holds at least one principal). K larger than
  the number of documents is allowed (Precision@K and the returned share are defined for it; the
  lists are padded); it is refused only when this does not fit.
* **The corpus a source builds**, as its schema declares it (`SourceSchema.memory`; the
  synthetic generator counts its texts, ids, judgments and grants:
  `arecall.data.sources.synthetic.SyntheticSpec.allocated`), and the sizes its settings fix
  (`SourceSchema.sizes`, with the authorization model's `ProfilesSchema.principal_count`): the
  budget asks the source and the model, whichever they are.
* **The vector experiment's corpus** (``vector_search.corpus``): the float32 document and
  query vectors.
* **Resamples** (`arecall.core.significance`): the bootstrap's resampled means, their sorted
  copy and the randomization test's null distribution, float64 each, per resample
  (`arecall.core.significance.resamples_bytes`); ``evaluation.significance.resamples`` here,
  ``arecall evaluate --resamples`` there (`check_resamples_memory`).

`check_config_memory` runs with the typed configuration check (composition and ``params.yaml``),
where sizes the configuration does not fix (a corpus read from files) count as 1 — a lower
bound. `check_lists_memory` runs at the start of the rank and filter stages with the corpus's
real sizes, before they write anything. An estimate under `FLOOR` never reads the machine's
memory, so ordinary configurations behave the same on every machine.

Examples
--------
>>> size_text(384 * 10**9), size_text(20 * 2**30), size_text(3 * 2**20)
('357.6 GiB', '20.0 GiB', '3.0 MiB')
>>> list_bytes(n_principals=4, n_queries=24, k_max=10)
15360
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arecall.core.schema import ConfigProblem
from arecall.data.sources.schema import Sizes

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig
    from arecall.vector.schema import VectorsCorpusConfig

__all__ = [
    "FLOOR",
    "LIST_CELL",
    "Sizes",
    "available_memory",
    "check_config_memory",
    "check_lists_memory",
    "check_resamples_memory",
    "config_sizes",
    "list_bytes",
    "require_memory",
    "size_text",
]

#: Bytes per (principal, query, K) cell of the placed lists: post, post_rank, pre, pre_rank.
LIST_CELL = 4 * 4
#: Estimates below this are not checked (and the machine's memory is not read).
FLOOR = 256 << 20
_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size_text(n_bytes: float) -> str:
    """A byte count in binary units with one decimal (``1.4 TiB``).

    Examples
    --------
    >>> size_text(512), size_text(1536), size_text(8 * 10**12)
    ('512 bytes', '1.5 KiB', '7.3 TiB')
    """
    value, unit = float(n_bytes), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} bytes" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom() -> int | None:
    """What a cgroup v2 memory limit (a container's) leaves this process, if one is set."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            entries = [line.strip().split(":", 2) for line in fh]
        rel = next(path for hid, _, path in entries if hid == "0")
        directory = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = (directory / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(int(limit) - int((directory / "memory.current").read_text()), 0)
    except (OSError, ValueError, StopIteration):
        return None


def available_memory() -> int | None:
    """Bytes this process can still allocate without swapping; None when it cannot be told.

    psutil's ``virtual_memory().available`` when psutil is installed, else Linux's
    ``MemAvailable``; a container's cgroup limit lowers it.

    Examples
    --------
    >>> free = available_memory()
    >>> free is None or free > 0
    True
    """
    try:
        import psutil

        free: int | None = int(psutil.virtual_memory().available)
    except Exception:  # not installed, or no answer on this platform
        free = _meminfo_available()
    headroom = _cgroup_headroom()
    if headroom is not None:
        free = headroom if free is None else min(free, headroom)
    return free


def require_memory(
    need: int, key: str, subject: str, purpose: str, value: Any = None, *, plural: bool = False
) -> None:
    """Refuse, naming ``key``, when ``need`` bytes exceed the memory available.

    The message reads ``key: <subject> needs about <size> <purpose>; <size> available``
    (``need`` for a ``plural`` subject).

    Examples
    --------
    >>> require_memory(10, "evaluation.ks", "K = 5", "for the placed lists")  # under FLOOR
    """
    if need < FLOOR:
        return
    free = available_memory()
    if free is None or need <= free:
        return
    verb = "need" if plural else "needs"
    raise ConfigProblem(
        key,
        f"{subject} {verb} about {size_text(need)} {purpose}; {size_text(free)} available",
        value,
        got=False,
    )


def list_bytes(*, n_principals: int, n_queries: int, k_max: int) -> int:
    """Bytes of the placed lists for these sizes (see the module docstring)."""
    return LIST_CELL * n_principals * n_queries * k_max


def check_lists_memory(cfg: ExperimentConfig, *, n_queries: int, exact: bool = True) -> None:
    """Refuse a K whose placed lists for one principal do not fit in memory (``evaluation.ks``).

    Why one principal: the stages place, score and prove the lists by blocks of principals
    (at least one each) and keep the whole lists on disk, never in memory. ``exact`` says
    ``n_queries`` is the corpus's own (a stage), not a lower bound (composition).

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> check_lists_memory(default_config(), n_queries=24)
    """
    ks = cfg.evaluation.ks
    k_max = max(ks)
    queries = max(n_queries, 1)
    shape = f"{queries} quer{'ies' if queries != 1 else 'y'}"
    if not exact:
        shape = f"at least {shape}"
    require_memory(
        list_bytes(n_principals=1, n_queries=queries, k_max=k_max),
        "evaluation.ks",
        f"K = {k_max}",
        f"for one principal's placed lists ({shape} × K × {LIST_CELL} bytes)",
        ks,
    )


def config_sizes(cfg: ExperimentConfig) -> Sizes:
    """The sizes a checked text configuration fixes (corpus and authorization model).

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> config_sizes(default_config(["profiles=open"]))
    Sizes(docs=40, queries=24, principals=1)
    >>> config_sizes(default_config(["corpus=beir", "corpus.path=/data/beir", "profiles=random",
    ...                              "profiles.n_principals=7"]))
    Sizes(docs=None, queries=None, principals=7)
    """
    sizes = cfg.corpus.sizes()
    return replace(sizes, principals=cfg.profiles.principal_count(sizes.principals))


def check_resamples_memory(n_resamples: int, key: str) -> None:
    """Refuse a number of resamples whose arrays cannot fit in memory, naming ``key``.

    Examples
    --------
    >>> check_resamples_memory(9999, "--resamples")
    """
    from arecall.core.significance import resamples_bytes

    require_memory(
        resamples_bytes(n_resamples),
        key,
        f"{n_resamples} resamples",
        "for the bootstrap and the randomization test",
        n_resamples,
        plural=True,
    )


def check_config_memory(cfg: ExperimentConfig) -> None:
    """Refuse a checked configuration whose dominant arrays cannot fit in memory.

    Runs with the schema check, before any stage: the corpus a configuration generates and the
    placed lists (sizes it does not fix count as 1).

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> check_config_memory(default_config())
    """
    check_resamples_memory(
        cfg.evaluation.significance.resamples, "evaluation.significance.resamples"
    )
    _vectors_memory("vector_search.corpus", cfg.vector_search.corpus)
    need = cfg.corpus.memory()
    if need is not None:
        require_memory(
            need.bytes, f"corpus.{need.key}", need.subject, need.purpose, need.value, plural=True
        )
    sizes = config_sizes(cfg)
    check_lists_memory(
        cfg,
        n_queries=sizes.queries or 1,
        exact=sizes.queries is not None,
    )


def _vectors_memory(prefix: str, corpus: VectorsCorpusConfig) -> None:
    n, dims = corpus.n_docs, corpus.dims
    require_memory(
        4 * dims * (n + corpus.n_queries),
        f"{prefix}.n_docs",
        f"{n} × {dims} vectors",
        "(float32, with the queries')",
        n,
        plural=True,
    )
