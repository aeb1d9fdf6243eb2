"""What ``evaluate`` accepts, made into what it computes on: qrels, an ACL, cutoffs, a run.

Why a module: `arecall.evaluate.evaluate` takes a run as a `Run`, a ranx-style dict, a TREC
file (or a pipe) or a retriever callable; qrels as `Qrels`, a dict or a file; an ACL as an
`Acl`, a dict or a file (with a groups file). Each is turned into one form here, with one error
style, so the rest of the package sees only `Qrels`, `Acl` and a `RunSource`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError
from arecall.io.acl import Acl, load_acl
from arecall.io.text import BLOCK, check_file
from arecall.io.trec import Qrels, Run, T, Ties, load_qrels, read_run, read_run_with

__all__ = [
    "DEFAULTS",
    "Defaults",
    "RunSource",
    "SearchFunction",
    "as_acl",
    "as_qrels",
    "parse_ks",
    "run_source",
]

#: A search as a callable: a query id to its ranked doc ids (or ``(doc_id, score)`` pairs), what
#: `evaluate` accepts in place of a run. Not `arecall.retrievers.Retriever`, the pipeline's
#: fitted-retriever protocol.
SearchFunction = Callable[[str], Iterable[Any]]


@dataclass(frozen=True)
class Defaults:
    """``evaluate``'s defaults, in one place: the function and the command line read them here.

    Attributes
    ----------
    ks : tuple of int
        Cutoffs (the seed's table's).
    placement : str
        Which list ARecall@K describes.
    ties : str
        Order of equal scores (doc id ascending; see `arecall.io.trec`).
    confidence, n_resamples, seed
        The paired bootstrap interval and randomization test of the gap.
    """

    ks: tuple[int, ...] = (1, 3, 5, 10)
    placement: str = "post"
    ties: Ties = "docid"
    confidence: float = 0.95
    n_resamples: int = 9999
    seed: int = 0


DEFAULTS = Defaults()


def parse_ks(k: Iterable[int] | str) -> tuple[int, ...]:
    """Cutoffs as a sorted tuple of distinct positive ints (``"1,3,5"`` is accepted).

    Examples
    --------
    >>> parse_ks("10,1,5"), parse_ks([3])
    ((1, 5, 10), (3,))
    """
    items = [x.strip() for x in k.split(",")] if isinstance(k, str) else list(k)
    out = []
    for item in items:
        try:
            value = int(item)
            if isinstance(item, float | str) and str(value) != str(item).strip():
                raise ValueError
        except (TypeError, ValueError):
            raise ArecallError(f"k: {item!r} is not a positive integer") from None
        if value <= 0:
            raise ArecallError(f"k: {item!r} is not a positive integer")
        out.append(value)
    if not out:
        raise ArecallError("k: no cutoffs given")
    return tuple(sorted(set(out)))


def as_qrels(qrels: Any) -> Qrels:
    """`Qrels` from `Qrels`, ``{qid: {docid: rel}}`` or a qrels file."""
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, Mapping):
        return Qrels.from_dict(qrels)
    return load_qrels(qrels)


def as_acl(acl: Any, principals: Sequence[str] | None, groups: Any) -> Acl | None:
    """An `Acl` from an `Acl`, ``{principal: doc ids}`` or an ACL file (and groups file)."""
    if acl is None:
        if principals is not None or groups is not None:
            raise ArecallError("principals or groups were given without an ACL")
        return None
    if isinstance(acl, Acl):
        if groups is not None:
            raise ArecallError("groups apply when reading an ACL file, not to an Acl object")
        return acl if principals is None else acl.select(principals)
    if isinstance(acl, Mapping):
        return Acl.from_mapping(acl, principals)
    if principals is not None and not list(principals):
        raise ArecallError("principals: an empty list names nobody to evaluate")
    return load_acl(acl, groups=groups, principals=principals)


@dataclass(eq=False)
class RunSource:
    """Where a run's blocks of queries come from, and how to read them again.

    A file is read a block at a time (`arecall.io.trec.read_run`); an in-memory run is one
    block. ``path`` is set for a file (messages name it); a pipe can be read once, so when
    its rankings may be wanted again (`Evaluation.worst`) it is copied while it is read.
    """

    path: Path | None
    memory: Run | None = None
    ties: Ties = "docid"
    block: int = BLOCK
    keep: bool = False
    _copy: Path | None = field(default=None, repr=False)

    @property
    def rereadable(self) -> bool:
        """Whether the blocks can be read a second time (a file, not a pipe, or a kept copy)."""
        return self.memory is not None or self._readable() is not None

    def _readable(self) -> Path | None:
        if self._copy is not None:
            return self._copy
        if self.path is not None and self.path.is_file():
            return self.path
        return None

    def blocks(self, *, partitioned: bool = False, workers: int = 2) -> Iterator[Run]:
        """The run's blocks of whole queries, in file order."""
        for run, _ in self.blocks_with(None, partitioned=partitioned, workers=workers):
            yield run

    def blocks_with(
        self, then: Callable[[Run], T] | None, *, partitioned: bool = False, workers: int = 2
    ) -> Iterator[tuple[Run, T | None]]:
        """Each block with ``then(block)``, computed in the thread that read the block."""
        if self.memory is not None:
            yield self.memory, then(self.memory) if then is not None else None
            return
        assert self.path is not None
        path = self.path if not partitioned else self._readable()
        if path is None:
            raise ArecallError(f"{self.path}: a pipe is read once and cannot be read again")
        if self.keep and not self.path.is_file() and self._copy is None:
            path = self._spool()
        yield from read_run_with(
            path,
            then,
            ties=self.ties,
            block=self.block,
            partitioned=partitioned,
            workers=workers,
        )

    def _spool(self) -> Path:
        """Copy a pipe to a temporary file (read once, so it can be read again)."""
        assert self.path is not None
        handle, name = tempfile.mkstemp(prefix="arecall-run-", suffix=".trec")
        with os.fdopen(handle, "wb") as out, open(self.path, "rb") as pipe:
            shutil.copyfileobj(pipe, out, 1 << 20)
        self._copy = Path(name)
        return self._copy

    def reread(self, query_ids: set[str]) -> dict[str, list[str]]:
        """The rankings of ``query_ids``, read again (for `Evaluation.worst`)."""
        if self.memory is not None:
            return {q: self.memory.ranking(q) for q in query_ids}
        path = self._readable()
        if path is None:
            raise ArecallError(
                f"{self.path}: a pipe is read once; evaluate it with keep_run=True to list "
                "what the worst pairs returned"
            )
        found: dict[str, list[str]] = {}
        try:
            blocks = list(self._pick(path, query_ids, partitioned=False))
        except ArecallError:  # not grouped: the partitioned read finds them too
            blocks = list(self._pick(path, query_ids, partitioned=True))
        for qid, ranking in blocks:
            found[qid] = ranking
        return found

    def _pick(
        self, path: Path, query_ids: set[str], *, partitioned: bool
    ) -> Iterator[tuple[str, list[str]]]:
        for block in read_run(path, ties=self.ties, block=self.block, partitioned=partitioned):
            for qid in query_ids.intersection(block.query_ids.to_pylist()):
                yield qid, block.ranking(qid)

    def close(self) -> None:
        if self._copy is not None:
            with contextlib.suppress(FileNotFoundError):
                self._copy.unlink()
            self._copy = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def run_source(
    run: Any, qrels: Qrels, ties: Ties, *, block: int = BLOCK, keep: bool = False
) -> RunSource:
    """A `RunSource` for what ``evaluate`` was given as the run."""
    if isinstance(run, Run):
        return RunSource(None, memory=run)
    if isinstance(run, Mapping):
        return RunSource(None, memory=Run.from_dict(run, ties=ties))
    if isinstance(run, str | os.PathLike):
        return RunSource(check_file(run), ties=ties, block=block, keep=keep)
    if callable(run):
        rankings = {}
        for qid in qrels.query_ids.to_pylist():
            ranked = list(run(qid))
            if ranked:
                rankings[qid] = ranked
        if not rankings:
            raise ArecallError("the retriever returned nothing for every judged query")
        name = getattr(run, "__name__", "retriever")
        return RunSource(None, memory=Run.from_rankings(rankings, name=name))
    raise ArecallError(
        f"cannot evaluate a {type(run).__name__}: expected a Run, a {{qid: {{docid: score}}}} "
        "dict, a TREC run path or a callable query_id -> ranked doc ids"
    )
