"""``arecall compare``: MLflow runs or DVC experiments side by side, as a table and a figure.

``arecall compare RUN_ID…`` (a sweep's parent run stands for its points), ``arecall compare
--filter "params.corpus.name = 'x'"`` (MLflow's search syntax, in ``--experiment``) or
``arecall compare --dvc [NAME…]`` (default: every experiment ``dvc exp show`` lists). Prints the
table; writes ``comparison.md`` and ``comparison.png`` into ``--out`` (``-``: print only); logs
both to a sweep's parent run when given one. ``make exps`` is ``arecall compare --dvc --out -``.
On a terminal (or with ``COLUMNS`` set) the printed table is drawn to fit its width; the files
hold it whole.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from arecall.core.errors import ArecallError

__all__ = ["compare_main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArecallError(f"compare: {message} (see arecall compare --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="arecall compare",
        description="Compare pipeline runs: one Markdown table (config choices side by side, "
        "the headline per K, the gap's confidence interval, the best value per K bold) and one "
        "figure (ARecall@K pre and post against K, one line per run; Recall@K dashed).",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN_ID",
        help="MLflow run ids; a sweep's parent run stands for its points, and gets the "
        "comparison logged to it",
    )
    p.add_argument(
        "--filter",
        metavar="EXPR",
        help="MLflow runs matching a search filter, e.g. \"params.corpus.name = 'synthetic'\"",
    )
    p.add_argument(
        "--experiment",
        default="arecall",
        help="the MLflow experiment --filter searches (default: arecall)",
    )
    p.add_argument(
        "--dvc",
        nargs="*",
        metavar="NAME",
        help="DVC experiments by name instead (none named: every one `dvc exp show` lists, "
        "with the baseline and the workspace)",
    )
    p.add_argument(
        "--out",
        default="outputs/comparison",
        help="where comparison.md and comparison.png go (default: outputs/comparison; "
        "'-': print the table only)",
    )
    return p


def compare_main(argv: Sequence[str]) -> int:
    """Run ``arecall compare``; return the exit status (user errors raise `ArecallError`).

    Examples
    --------
    >>> compare_main([])
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: compare: name MLflow runs (RUN_ID…, --filter) or DVC experiments (--dvc)
    """  # noqa: E501 (a doctest's expected line)
    from arecall.compare import compare, log_comparison, mlflow_points
    from arecall.compare.points import dvc_points
    from arecall.compare.render import table

    args = _parser().parse_args(list(argv))
    from_mlflow = bool(args.runs) or args.filter is not None
    if from_mlflow and args.dvc is not None:
        raise ArecallError("compare: MLflow runs or DVC experiments (--dvc), not both")
    if not from_mlflow and args.dvc is None:
        raise ArecallError(
            "compare: name MLflow runs (RUN_ID…, --filter) or DVC experiments (--dvc)"
        )
    out = None if args.out == "-" else args.out
    parent = None
    if args.dvc is not None:
        points, pending = dvc_points(".", args.dvc)
        what = "experiment"
    else:
        from arecall.tracking.store import open_store, tracking_uri

        uri = tracking_uri(".")
        with open_store(uri, orphans=False) as client:
            points, parent = mlflow_points(
                client, args.runs, filter_string=args.filter, experiment=args.experiment
            )
        pending, what = [], "run"
    made = compare(points, out, what=what)
    width = _terminal_width()
    print(made.table if width is None else table(points, what=what, width=width), end="")
    if pending:
        print(f"\nwithout results yet (queued, running or failed): {', '.join(pending)}")
    if made.files:
        print(f"\ncomparison: {', '.join(str(f) for f in made.files)}", file=sys.stderr)
    if parent is not None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="arecall-compare-") as tmp:
            log_comparison(uri, parent, made if made.files else compare(points, tmp))
        print(f"mlflow: logged the comparison to run {parent} in {uri}", file=sys.stderr)
    return 0


def _terminal_width() -> int | None:
    """The columns the printed table must fit: the terminal's, or ``COLUMNS``; None when the
    output is a file or a pipe with no ``COLUMNS`` (the table is then printed whole)."""
    import os
    import shutil

    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        return None
    return shutil.get_terminal_size().columns
