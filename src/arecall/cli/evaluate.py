"""``arecall evaluate`` and ``arecall fuse``: the evaluation library on TREC files, from a shell.

Why a separate module: these commands work on the user's own files and must not pay for (or
depend on) the pipeline's Hydra/DVC machinery; ``arecall.cli`` dispatches to `evaluate_main`
and `fuse_main`. Both return an exit status instead of exiting: 0 on success, 2 on a user error
(one ``arecall: error: ...`` line on stderr naming the file and line, no traceback, no output
file touched — every file is written atomically and only after everything was computed).
mlflow is imported only for ``--mlflow``, which logs through
`arecall.tracking.evaluate.log_evaluation` (the one code path of every store write).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from arecall.core.engine import ENGINES, make_engine
from arecall.core.errors import ArecallError, print_error
from arecall.core.placed_lists import PLACEMENTS
from arecall.core.schema import ConfigProblem
from arecall.core.significance import resamples_problem
from arecall.evaluate.evaluation import Evaluation, compare, evaluate, parse_ks
from arecall.evaluate.fusion import fuse_runs, reorderings_on_reload
from arecall.io.atomic import write_text
from arecall.io.trec import TIES, load_run, save_run

if TYPE_CHECKING:  # pandas loads only for the outputs that need it
    import pandas as pd

__all__ = ["evaluate_main", "fuse_main"]


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    """The keyword defaults of a library function: the flags default to them, so each default
    has one place (the function a Python user calls) and the shell cannot drift from it."""
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


_EVALUATE = _defaults(evaluate)
_FUSE = _defaults(fuse_runs)
_TIES = _defaults(load_run)["ties"]

_ORDER_NOTE = (
    "Runs are ranked by score descending; equal scores by doc id ascending (--ties docid, the "
    "seed's and verity's convention) or descending (--ties trec_eval: trec_eval's "
    "comp_sim_docno). The rank column is ignored, as trec_eval and ranx ignore it."
)


def _wrap(*paragraphs: str) -> str:
    return "\n\n".join(textwrap.fill(p, width=79) for p in paragraphs)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one ArecallError line like every other user error."""

    def error(self, message: str) -> NoReturn:
        raise ArecallError(f"{self.prog}: {message} (see --help)")


def _guard(main: Callable[[list[str]], int], argv: Sequence[str]) -> int:
    try:
        return main(list(argv))
    except ArecallError as exc:
        return print_error(exc)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def _count(text: str) -> int:
    """A whole number, also written as ``1e4``; argparse names the flag on failure."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise ValueError(text) from None
    if isinstance(value, float) and not (value.is_integer() and abs(value) < 2**63):
        raise ValueError(text)
    return int(value)


def _names(text: str, flag: str) -> list[str]:
    names = [x.strip() for x in text.split(",")]
    if not names or not all(names):
        raise ArecallError(f"{flag}: expected a comma-separated list of names, got {text!r}")
    if len(set(names)) != len(names):
        raise ArecallError(f"{flag}: a name is listed twice in {text!r}")
    return names


# -- arecall evaluate ----------------------------------------------------------------------------


def _evaluate_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="arecall evaluate",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_wrap(
            "Standard measures of a TREC run against TREC or BEIR qrels (the same values as "
            "ranx and trec_eval), and with an ACL the authorized view per principal: Authorized "
            "Recall@K after (post) and before (pre) filtering, their gap with a bootstrap CI "
            "and a randomization p-value, and U@K, the unauthorized share of the first K."
        ),
        epilog=_wrap(
            _ORDER_NOTE,
            "Files: run lines 'qid Q0 docid rank score tag'; qrels lines 'qid 0 docid rel' "
            "(TREC) or 'query-id<TAB>corpus-id<TAB>score' after a header (BEIR), rel >= 1 "
            "relevant; ACL lines 'doc_id<TAB>principal' (deny by default: an "
            "unlisted document is authorized to nobody); groups lines 'principal<TAB>group' "
            "(ACL lines may then name groups).",
            "Conventions: judged queries with nothing relevant score 0 on the standard "
            "measures and stay in the means (ranx/trec_eval) and are counted; a query-"
            "principal pair with nothing relevant authorized has ARecall 1 (the seed's "
            "convention), and the restricted means over the other pairs are shown with their "
            "count.",
        ),
    )
    p.add_argument("--run", required=True, help="TREC run file")
    p.add_argument("--qrels", required=True, help="qrels file, TREC or BEIR (format detected)")
    p.add_argument("--acl", help="ACL TSV: doc_id<TAB>principal (or group)")
    p.add_argument("--groups", help="groups TSV: principal<TAB>group")
    p.add_argument(
        "--principals",
        help="comma-separated principals; ACL names outside the "
        "list (and its groups) are errors. Default: every principal in the ACL",
    )
    ks = ",".join(map(str, _EVALUATE["k"]))
    p.add_argument("--k", default=ks, help=f"cutoffs (default: {ks})")
    p.add_argument(
        "--placement",
        choices=PLACEMENTS,
        default=None,
        help="which list ARecall@K and --worst describe: post = filter after top-K, "
        f"pre = filter before, as-is = the run unfiltered (default {_EVALUATE['placement']})",
    )
    p.add_argument("--ties", choices=TIES, default=_TIES, help="order of equal scores")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument(
        "--compare-run",
        metavar="RUN",
        help="a second run: paired Δ = RUN − COMPARE_RUN per measure and K, with "
        "bootstrap CI and randomization p-value",
    )
    p.add_argument(
        "--worst",
        type=int,
        default=0,
        metavar="N",
        help="also list the N lowest-scoring queries / pairs at the largest K, with "
        "what was returned and what was missed",
    )
    p.add_argument("--rows", metavar="CSV", help="write per-query (per-pair with an ACL) rows")
    p.add_argument("--out", metavar="FILE", help="write the report here instead of stdout")
    p.add_argument(
        "--resamples",
        type=_count,
        default=_EVALUATE["n_resamples"],
        help=f"bootstrap / randomization resamples (default {_EVALUATE['n_resamples']})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=_EVALUATE["seed"],
        help=f"seed of the resampling (default {_EVALUATE['seed']})",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="where the per-principal measures run: this process (default) or a Dask "
        "cluster, sharded by blocks of principals (same figures either way; needs --acl)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="the Dask scheduler for --engine dask, e.g. tcp://127.0.0.1:8786",
    )
    p.add_argument(
        "--block-principals",
        type=int,
        default=0,
        metavar="N",
        help="principals per block (one cluster task each); 0: sized automatically",
    )
    p.add_argument(
        "--mlflow",
        action="store_true",
        help="log the summary as an MLflow run to MLFLOW_TRACKING_URI, else "
        "sqlite:///mlflow.db in the working directory",
    )
    return p


def _plain(value: Any) -> Any:
    """numpy scalars to Python ones, so JSON keeps every digit."""
    return value.item() if hasattr(value, "item") and not isinstance(value, list) else value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _render(
    fmt: str,
    ev: Evaluation,
    comparison: pd.DataFrame | None,
    worst: pd.DataFrame | None,
    names: tuple[str, str],
) -> str:
    if fmt == "json":
        data: dict[str, Any] = ev.summary()
        if comparison is not None:
            data["comparison"] = {"a": names[0], "b": names[1], "rows": _records(comparison)}
        if worst is not None:
            data["worst"] = _records(worst)
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        blocks = [ev.summary_frame().to_csv(index=False)]
        if comparison is not None:
            blocks.append(comparison.to_csv(index=False))
        if worst is not None:
            blocks.append(
                worst.assign(
                    returned=worst["returned"].map(" ".join), missed=worst["missed"].map(" ".join)
                ).to_csv(index=False)
            )
        return "\n".join(blocks)
    text = ev.table()
    if comparison is not None:
        text += f"\npaired comparison, Δ = A − B (A: {names[0]}, B: {names[1]}):\n"
        shown = comparison.copy()
        text += shown.to_string(index=False, float_format=lambda x: f"{x:.4f}") + "\n"
    if worst is not None:
        text += "\nworst pairs:\n"
        for r in _records(worst):
            who = f" principal {r['principal']}" if "principal" in r else ""
            measure = next(key for key in r if "@" in key)
            text += (
                f"  query {r['query_id']}{who}: {measure} = {r[measure]:.4f}\n"
                f"    returned: {' '.join(r['returned']) or '(nothing)'}\n"
                f"    missed:   {' '.join(r['missed']) or '(nothing)'}\n"
            )
    return text


def _evaluate(argv: list[str]) -> int:
    args = _evaluate_parser().parse_args(argv)
    if args.acl is None:
        for flag, value in (
            ("--principals", args.principals),
            ("--groups", args.groups),
            ("--placement", args.placement),
        ):
            if value is not None:
                raise ArecallError(f"{flag} needs --acl")
    if args.worst < 0:
        raise ArecallError(f"--worst: expected N >= 0, got {args.worst}")
    problem = resamples_problem(args.resamples, _EVALUATE["confidence"])
    if problem is not None:
        raise ArecallError(f"--resamples: {problem}, got {args.resamples}")
    from arecall.pipeline.budget import check_resamples_memory  # before any file is read

    try:
        check_resamples_memory(args.resamples, "--resamples")
    except ConfigProblem as exc:
        raise ArecallError(str(exc)) from None
    if args.block_principals < 0:
        raise ArecallError(f"--block-principals: expected N >= 0, got {args.block_principals}")
    if args.engine == "dask" and args.acl is None:
        raise ArecallError("--engine dask needs --acl (it shards the principals)")
    if args.engine == "dask" and not args.scheduler:
        raise ArecallError("--engine dask needs --scheduler ADDRESS, e.g. tcp://127.0.0.1:8786")
    if args.scheduler and args.engine != "dask":
        raise ArecallError("--scheduler needs --engine dask")
    try:
        ks = parse_ks(args.k)
    except ArecallError as exc:
        raise ArecallError(f"--{exc}") from None
    principals = _names(args.principals, "--principals") if args.principals is not None else None
    options: dict[str, Any] = dict(
        acl=args.acl,
        k=ks,
        principals=principals,
        groups=args.groups,
        placement=args.placement or _EVALUATE["placement"],
        ties=args.ties,
        n_resamples=args.resamples,
        seed=args.seed,
        # every pair's values are read again for rows, a comparison and the worst pairs
        keep_pairs=bool(args.rows or args.compare_run or args.worst),
    )
    started = int(time.time() * 1000)
    with make_engine(
        args.engine, args.scheduler, args.block_principals, scheduler_setting="--scheduler"
    ) as engine:
        ev = evaluate(args.run, args.qrels, **options, keep_run=bool(args.worst), engine=engine)
        summary = ev.summary()
        comparison = None
        if args.compare_run is not None:
            other = evaluate(
                args.compare_run,
                ev.qrels,
                **{**options, "acl": ev.acl, "principals": None, "groups": None},
                engine=engine,
            )
            comparison = compare(ev, other, n_resamples=args.resamples, seed=args.seed)
    ended = int(time.time() * 1000)
    worst = ev.worst(args.worst) if args.worst else None
    report = _render(args.format, ev, comparison, worst, (args.run, args.compare_run or ""))
    if args.rows:
        ev.write_rows(args.rows)
    if args.out:
        write_text(args.out, report)
    else:
        sys.stdout.write(report)
    if args.mlflow:
        params = {
            "run": args.run,
            "qrels": args.qrels,
            "acl": args.acl or "",
            "groups": args.groups or "",
            "principals": ",".join(ev.principals),
            "k": ",".join(map(str, ks)),
            "placement": ev.placement,
            "ties": args.ties,
            "compare_run": args.compare_run or "",
        }
        from arecall.tracking.evaluate import log_evaluation
        from arecall.tracking.run import logged_line
        from arecall.tracking.store import TrackingError

        table = (
            report
            if args.format == "table"
            else _render("table", ev, comparison, worst, (args.run, args.compare_run or ""))
        )
        inputs = {"run": args.run, "qrels": args.qrels, "acl": args.acl}
        try:
            run_id, uri = log_evaluation(
                summary,
                ev.summary_frame(),
                params=params,
                comparison=comparison,
                report=table,
                inputs={**inputs, "compare_run": args.compare_run},
                times=(started, ended),
            )
        except TrackingError as exc:  # the report is out already: say where, as `run` does
            raise ArecallError(
                f"{exc}; the report is in {args.out or 'stdout'}; nothing was logged "
                "(run again with --mlflow to log it)"
            ) from None
        print(logged_line(run_id, uri), file=sys.stderr)
    return 0


def evaluate_main(argv: list[str]) -> int:
    """``arecall evaluate``: parse ``argv``, evaluate, print or write the report.

    Returns 0 on success and 2 on a user error (printed as one ``arecall: error:`` line).

    Examples
    --------
    >>> evaluate_main(["--run", "/nonexistent.trec", "--qrels", "/nonexistent.txt"])
    2
    """
    return _guard(_evaluate, argv)


# -- arecall fuse --------------------------------------------------------------------------------


def _fuse_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="arecall fuse",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_wrap(
            "Reciprocal rank fusion of TREC runs: each document scores the sum over runs of "
            "weight / (smoothing + rank); ties by (-score, -number of runs, doc id). Writes a "
            "TREC run that 'arecall evaluate' reads."
        ),
        epilog=_wrap(f"{_ORDER_NOTE} A source's rank is the position in that order."),
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files to fuse")
    p.add_argument("--out", required=True, metavar="FUSED", help="fused TREC run to write")
    p.add_argument(
        "--smoothing",
        type=float,
        default=_FUSE["smoothing"],
        help=f"the k in 1 / (k + rank), at least 1 (default {_FUSE['smoothing']})",
    )
    p.add_argument("--weights", help="comma-separated weights, one per RUN (default all 1)")
    p.add_argument("--limit", type=int, help="keep the top N fused results per query")
    p.add_argument(
        "--name", default=_FUSE["name"], help=f"tag of the fused run (default {_FUSE['name']})"
    )
    p.add_argument("--ties", choices=TIES, default=_TIES, help="order of equal scores")
    p.add_argument(
        "--contributions",
        metavar="TSV",
        help="also write query_id, doc_id, source run, rank for every fused result",
    )
    return p


def _fuse(argv: list[str]) -> int:
    args = _fuse_parser().parse_args(argv)
    if not args.smoothing >= 1:
        raise ArecallError(f"--smoothing must be at least 1, got {args.smoothing}")
    if args.limit is not None and args.limit < 1:
        raise ArecallError(f"--limit must be a positive integer, got {args.limit}")
    if len(set(args.runs)) != len(args.runs):
        raise ArecallError("a RUN is given twice; each source must be a different file")
    weights = None
    if args.weights is not None:
        parts = [x.strip() for x in args.weights.split(",")]
        if len(parts) != len(args.runs):
            raise ArecallError(
                f"--weights: {len(parts)} weights for {len(args.runs)} runs; give one per run"
            )
        try:
            weights = dict(zip(args.runs, (float(x) for x in parts), strict=True))
        except ValueError:
            raise ArecallError(f"--weights: not a list of numbers: {args.weights!r}") from None
    runs = {path: load_run(path, ties=args.ties) for path in args.runs}
    fused = fuse_runs(
        runs, smoothing=args.smoothing, weights=weights, limit=args.limit, name=args.name
    )
    contributions = None
    if args.contributions:
        contributions = fused.contributions.to_csv(sep="\t", index=False)
    save_run(fused.run, args.out)
    if contributions is not None:
        write_text(args.contributions, contributions)
    moved = reorderings_on_reload(fused.run, ties=args.ties)
    print(
        f"fused {len(runs)} runs: {fused.run.n_queries} queries, {len(fused.run)} results "
        f"-> {args.out}",
        file=sys.stderr,
    )
    if moved:
        print(
            f"note: {moved} places have equal fused scores ordered by number of runs; "
            "re-reading orders them by doc id",
            file=sys.stderr,
        )
    return 0


def fuse_main(argv: list[str]) -> int:
    """``arecall fuse RUN... --out FUSED``: fuse runs and write the result as a TREC run.

    Returns 0 on success and 2 on a user error (printed as one ``arecall: error:`` line).

    Examples
    --------
    >>> fuse_main(["/nonexistent.trec", "--out", "/tmp/never-written.trec", "--smoothing", "0"])
    2
    """
    return _guard(_fuse, argv)
