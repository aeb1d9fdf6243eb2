"""The result of ``evaluate``: per-query and per-pair tables, the summary, the worst pairs.

Why a module: `Evaluation` is what users hold and query after an evaluation; it reads the
per-query values and the per-pair store (`arecall.evaluate.pairs`) and never recomputes a
measure. Floats come from the kernels' integer counts through `arecall.evaluate.pairs.
pair_values`, one definition for every table and summary.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from arecall.core.errors import ArecallError
from arecall.core.measures import EVALUATE, column
from arecall.core.significance import delta_significance_counts, exact_mean
from arecall.evaluate.kernels import AUTHORIZED_MEASURES, STANDARD_MEASURES
from arecall.evaluate.pairs import Retained, Spill, Tallies, pair_values
from arecall.evaluate.report import format_table
from arecall.io.acl import Acl
from arecall.io.atomic import atomic_path
from arecall.io.ids import index_in
from arecall.io.trec import Qrels, Run

if TYPE_CHECKING:  # pandas loads when a table is asked for, not to print a summary
    import pandas as pd

__all__ = ["Core", "Evaluation"]

#: Per-pair rows built at a time when they are written out.
_ROWS_AT_ONCE = 1 << 20


@dataclass(eq=False)
class Core:
    """What an evaluation computed: per judged query (eval order), and the pairs' store."""

    query_ids: list[str]
    present: np.ndarray  # returned by the run
    depth: np.ndarray
    n_relevant: np.ndarray
    standard: dict[str, np.ndarray]  # measure -> (n_queries, n_ks)
    run_queries_not_judged: int = 0
    retained: Retained | None = None
    tallies: Tallies | None = None
    spill: Spill | None = None


class Evaluation:
    """The result of `arecall.evaluate.evaluate`: per-query(-principal) rows, a summary, the
    worst pairs.

    Attributes
    ----------
    ks : tuple of int
    placement : str
    principals : tuple of str
        Empty without an ACL.
    run : Run or None
        The run, when it was given in memory (a file is read a block at a time, not kept).
    run_name : str
    per_query : pandas.DataFrame
        One row per judged query: ``query_id``, ``n_relevant``, ``depth`` (results in the
        run) and ``<measure>@<k>`` for every standard measure.
    per_pair : pandas.DataFrame or None
        With an ACL, one row per (principal, query): ``n_authorized_relevant`` and
        ``<measure>@<k>`` for ``arecall``, ``arecall_post``, ``arecall_pre``, ``gap``,
        ``unusable``.
    """

    def __init__(
        self,
        run: Run | None,
        run_name: str,
        qrels: Qrels,
        acl: Acl | None,
        ks: tuple[int, ...],
        placement: str,
        core: Core,
        significance: Mapping[str, Any],
        rankings: Callable[[set[str]], dict[str, list[str]]] | None = None,
    ) -> None:
        self.run, self.run_name, self.qrels, self.acl = run, run_name, qrels, acl
        self.ks, self.placement = ks, placement
        self.principals: tuple[str, ...] = acl.principals if acl is not None else ()
        self._core = core
        self._significance = dict(significance)
        self._rankings = rankings

    # tables ----------------------------------------------------------------------------------

    @cached_property
    def per_query(self) -> pd.DataFrame:
        import pandas as pd

        c = self._core
        data: dict[str, Any] = {
            "query_id": c.query_ids,
            "n_relevant": c.n_relevant,
            "depth": c.depth,
        }
        for m in STANDARD_MEASURES:
            for j, k in enumerate(self.ks):
                data[column(m, k)] = c.standard[m][:, j]
        return pd.DataFrame(data)

    @cached_property
    def per_pair(self) -> pd.DataFrame | None:
        if self.acl is None:
            return None
        return self._pair_frame(self._pair_counts(0, len(self.principals)), 0)

    def _pair_counts(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """The counts of principals ``start … stop − 1`` over every evaluated query."""
        c = self._core
        if c.retained is not None:
            return {n: v[start:stop] for n, v in c.retained.counts.items()}
        if c.spill is None:
            raise ArecallError(
                f"{len(self.principals) * len(c.query_ids)} pairs were tallied, not kept (too "
                "many, or computed on a cluster): evaluate with keep_pairs=True for per-pair values"
            )
        return c.spill.read(start, stop)

    def _pair_frame(self, counts: Mapping[str, np.ndarray], start: int) -> pd.DataFrame:
        import pandas as pd

        c = self._core
        n_p, nq = counts["n_auth"].shape
        data: dict[str, Any] = {
            "principal": np.repeat(
                np.asarray(self.principals[start : start + n_p], dtype=object), nq
            ),
            "query_id": np.tile(np.asarray(c.query_ids, dtype=object), n_p),
            "n_relevant": np.tile(c.n_relevant, n_p),
            "n_authorized_relevant": counts["n_auth"].astype(np.int64).ravel(),
            "depth": np.tile(c.depth, n_p),
        }
        for m in AUTHORIZED_MEASURES:
            for j, k in enumerate(self.ks):
                data[column(m, k)] = pair_values(m, counts, j, k, self.placement).ravel()
        return pd.DataFrame(data)

    def _pair_frames(self) -> Any:
        """`per_pair` a slice of principals at a time (each slice a DataFrame)."""
        n_p, nq = len(self.principals), max(len(self._core.query_ids), 1)
        step = max(1, _ROWS_AT_ONCE // nq)
        for start in range(0, n_p, step):
            stop = min(start + step, n_p)
            yield self._pair_frame(self._pair_counts(start, stop), start)

    @property
    def rows(self) -> pd.DataFrame:
        """`per_pair` with an ACL, else `per_query`."""
        return self.per_pair if self.per_pair is not None else self.per_query

    def write_rows(self, path: Any) -> None:
        """Write `rows` as CSV to ``path`` (atomically), a slice of principals at a time."""
        with atomic_path(path) as tmp:
            if self.acl is None:
                self.per_query.to_csv(tmp, index=False)
                return
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                header = True
                for frame in self._pair_frames():
                    frame.to_csv(fh, index=False, header=header)
                    header = False
                if header:  # no principal: the header alone, as an empty table has
                    self._pair_frame(self._pair_counts(0, 0), 0).to_csv(fh, index=False)

    def values(self, measure: str, k: int) -> np.ndarray:
        """Per-query (standard measure) or per-pair (authorized measure) values at ``k``."""
        j = self._k_index(k)
        if measure in STANDARD_MEASURES:
            return self._core.standard[measure][:, j]
        if measure in AUTHORIZED_MEASURES and self.acl is not None:
            counts = self._pair_counts(0, len(self.principals))
            return pair_values(measure, counts, j, k, self.placement).ravel()
        raise ArecallError(f"unknown measure {measure!r} for this evaluation")

    def _k_index(self, k: int) -> int:
        if k not in self.ks:
            raise ArecallError(f"k={k} was not evaluated (ks: {', '.join(map(str, self.ks))})")
        return self.ks.index(k)

    # summary ---------------------------------------------------------------------------------

    @cached_property
    def _summary(self) -> dict[str, Any]:
        c = self._core
        out: dict[str, Any] = {
            "run": self.run_name,
            "queries": len(c.query_ids),
            "queries_without_relevant": int(np.count_nonzero(c.n_relevant == 0)),
            "queries_missing_from_run": int(np.count_nonzero(~c.present)),
            "run_queries_not_judged": c.run_queries_not_judged,
        }
        n_pairs = len(self.principals) * len(c.query_ids)
        if self.acl is not None:
            n_nonempty = self._n_nonempty()
            out.update(
                placement=self.placement,
                principals=list(self.principals),
                pairs=n_pairs,
                pairs_without_authorized_relevant=n_pairs - n_nonempty,
            )
        out["k"] = {}
        for j, k in enumerate(self.ks):
            row: dict[str, Any] = {
                m: float(c.standard[m][:, j].mean()) if len(c.query_ids) else None
                for m in STANDARD_MEASURES
            }
            if self.acl is not None:
                deeper = int(np.count_nonzero(c.depth > k)) * len(self.principals)
                assert c.tallies is not None  # kept or not, the summary reads the tallies
                self._tallied_row(row, c.tallies, j, k, deeper)
            out["k"][str(k)] = row
        return out

    def _n_nonempty(self) -> int:
        assert self._core.tallies is not None
        return self._core.tallies.nonempty()

    def _tallied_row(
        self, row: dict[str, Any], tallies: Tallies, j: int, k: int, deeper: int
    ) -> None:
        for m in AUTHORIZED_MEASURES:
            values, counts = tallies.histogram(m, j, k, self.placement)
            row[m] = exact_mean(values, counts) if counts.sum() else None
            if EVALUATE[m].restricted:
                values, counts = tallies.histogram(m, j, k, self.placement, nonempty=True)
                row[EVALUATE[m].nonempty_key] = exact_mean(values, counts) if counts.sum() else None
        n_nonempty = tallies.nonempty()
        row["n_nonempty"] = n_nonempty
        row["n_deeper"] = deeper
        if self._significance.get("enabled", True) and tallies.n_pairs:
            sig = {"gap": self._delta_counts(*tallies.histogram("gap", j, k, self.placement))}
            if n_nonempty:
                histogram = tallies.histogram("gap", j, k, self.placement, nonempty=True)
                sig["gap_nonempty"] = self._delta_counts(*histogram)
            row["significance"] = sig

    def _options(self) -> dict[str, Any]:
        return {name: self._significance[name] for name in ("confidence", "n_resamples", "seed")}

    def _delta_counts(self, values: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
        return delta_significance_counts(values, counts, **self._options())

    def summary(self) -> dict[str, Any]:
        """Means per K and the counts behind them, as a JSON-ready dict.

        Top level: ``run``, ``queries``, ``queries_without_relevant`` (scored 0, in the means),
        ``queries_missing_from_run`` (scored 0), ``run_queries_not_judged`` (ignored); with an
        ACL also ``placement``, ``principals``, ``pairs`` and
        ``pairs_without_authorized_relevant``. ``k`` maps each cutoff (as a string) to the mean
        of every measure; with an ACL also the ``*_nonempty`` restricted means, ``n_nonempty``,
        ``n_deeper`` (pairs whose run is deeper than K, where the gap can be nonzero) and
        ``significance`` → ``gap`` / ``gap_nonempty`` → paired bootstrap CI and randomization
        p-value of Δ = pre − post (`arecall.core.significance.delta_significance`).
        """
        return copy.deepcopy(self._summary)

    def summary_frame(self) -> pd.DataFrame:
        """The per-K means as a DataFrame (one row per K), significance flattened."""
        import pandas as pd

        rows = []
        for k, row in self._summary["k"].items():
            flat = {"k": int(k)}
            for key, value in row.items():
                if key == "significance":
                    for name, sig in value.items():
                        for part in ("low", "high", "p_value"):
                            flat[f"{name}_{part}"] = sig[part]
                else:
                    flat[key] = value
            rows.append(flat)
        return pd.DataFrame(rows)

    def table(self) -> str:
        """The summary as fixed-width text, in the layout of the seed's table."""
        return format_table(self._summary)

    # debugging -------------------------------------------------------------------------------

    def worst(self, n: int = 5, k: int | None = None) -> pd.DataFrame:
        """The ``n`` lowest-scoring pairs at ``k`` (default: the largest K), to debug first.

        Ranked by ``arecall@k`` with an ACL (over pairs with R_A ≠ ∅), else by ``recall@k``
        (over queries with relevant documents); ties by query id then principal. Columns:
        ``query_id``, ``principal`` (with an ACL), the measure, ``n_relevant``, ``returned``
        (the ids the principal gets at K under the placement) and ``missed`` (relevant — and
        authorized — ids not returned, most relevant first).

        Examples
        --------
        >>> from arecall.evaluate import evaluate
        >>> ev = evaluate({"q": {"a": 2.0, "b": 1.0}}, {"q": {"b": 1, "c": 1}}, k=[1])
        >>> ev.worst(1)[["query_id", "recall@1", "returned", "missed"]].to_dict("records")
        [{'query_id': 'q', 'recall@1': 0.0, 'returned': ['a'], 'missed': ['b', 'c']}]
        """
        import pandas as pd

        k = self.ks[-1] if k is None else k
        self._k_index(k)
        if self.acl is not None:
            measure, count = column("arecall", k), "n_authorized_relevant"
            keys = ["query_id", "principal"]
            frames = self._pair_frames()
        else:
            measure, count = column("recall", k), "n_relevant"
            keys = ["query_id"]
            frames = iter([self.per_query])
        picked: pd.DataFrame | None = None
        for frame in frames:  # the n lowest of each slice of principals, then of those
            best = frame[frame[count] > 0].sort_values([measure, *keys], kind="stable").head(n)
            both = best if picked is None else pd.concat([picked, best], ignore_index=True)
            picked = both.sort_values([measure, *keys], kind="stable").head(n)
        assert picked is not None
        rankings = self._ranked(set(picked["query_id"].astype(str)))
        returned, missed = [], []
        for _, r in picked.iterrows():
            got, miss = self._lists(rankings.get(str(r["query_id"]), []), r, k)
            returned.append(got)
            missed.append(miss)
        cols = [*keys, measure, count]
        out = picked[cols].reset_index(drop=True)
        out["returned"] = returned
        out["missed"] = missed
        return out

    def _ranked(self, query_ids: set[str]) -> dict[str, list[str]]:
        if self.run is not None:
            return {q: self.run.ranking(q) for q in query_ids}
        if self._rankings is None:
            raise ArecallError("the run's rankings are not available to list the worst pairs")
        return self._rankings(query_ids)

    def _lists(self, ranking: list[str], r: Any, k: int) -> tuple[list[str], list[str]]:
        judged = self.qrels_for(str(r["query_id"]))
        principal = r.get("principal")
        relevant = sorted((d for d, g in judged.items() if g >= 1), key=lambda d: (-judged[d], d))
        if self.acl is None or principal is None:
            got = ranking[:k]
        else:
            ok = self.acl.allowed(str(principal))
            relevant = [d for d in relevant if d in ok]
            if self.placement == "pre":
                got = [d for d in ranking if d in ok][:k]
            elif self.placement == "post":
                got = [d for d in ranking[:k] if d in ok]
            else:
                got = ranking[:k]
        returned = set(got)
        return got, [d for d in relevant if d not in returned]

    def qrels_for(self, qid: str) -> dict[str, int]:
        """The judgments of one query (empty if it has none)."""
        g = int(index_in(pa.array([qid], type=pa.string()), self.qrels.query_ids)[0])
        if g < 0:
            return {}
        lo, hi = int(self.qrels.offsets[g]), int(self.qrels.offsets[g + 1])
        docs = self.qrels.doc_ids.take(pa.array(self.qrels.doc_codes[lo:hi])).to_pylist()
        return dict(zip(docs, self.qrels.relevance[lo:hi].tolist(), strict=True))
