"""``arecall compare``: the runs of an experiment side by side, drawn for the user.

Runs come from MLflow (ids, a sweep's parent run standing for its points, a filter such as
``params.corpus.name = 'x'``) or from DVC (experiment names) as `Point`\\ s
(`arecall.compare.points`); the comparison is one Markdown table and one figure
(`arecall.compare.render`), written as ``comparison.md`` and ``comparison.png`` and, for a
sweep's parent run, logged to it: at the top of its artifacts, where MLflow's Compare and the
run page show them, and as its description. Every ``arecall run -m`` sweep ends by comparing its
own points this way (`compare_sweep`), so its parent run holds the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arecall.compare.points import Point, dvc_points, mlflow_points
from arecall.compare.render import figure, table

__all__ = ["Comparison", "Point", "compare", "compare_sweep", "dvc_points", "mlflow_points"]

#: The files a comparison writes (and logs to a sweep's parent run).
TABLE, FIGURE = "comparison.md", "comparison.png"


@dataclass(frozen=True)
class Comparison:
    """What `compare` made: the table's text and the files written (none for ``out=None``)."""

    table: str
    files: tuple[Path, ...]


def compare(points: Sequence[Point], out: str | Path | None, *, what: str = "run") -> Comparison:
    """Draw ``points``' comparison; write ``comparison.md`` and ``comparison.png`` into ``out``.

    Examples
    --------
    >>> import tempfile
    >>> row = {"recall": 0.8, "arecall_post": 0.5, "arecall_pre": 0.9}
    >>> made = compare([Point("a", {"retriever.name": "bm25"}, {"k": {"5": row}})],
    ...                tempfile.mkdtemp())
    >>> [f.name for f in made.files], made.table.startswith("| run | retriever |")
    (['comparison.md', 'comparison.png'], True)
    """
    from arecall.core.errors import ArecallError
    from arecall.io.atomic import write_text, write_with

    if not points:
        raise ArecallError("compare: no runs with results to compare")
    text = table(points, what=what)
    if out is None:
        return Comparison(text, ())
    where = Path(out)
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_text(where / TABLE, text)
        write_with(where / FIGURE, lambda tmp: figure(points, tmp))
    except OSError as exc:
        raise ArecallError(f"{where}: cannot write the comparison: {exc.strerror}") from None
    return Comparison(text, (where / TABLE, where / FIGURE))


def log_comparison(uri: str, run_id: str, made: Comparison) -> None:
    """Log a comparison to ``run_id`` (a sweep's parent): its files at the top of the run's
    artifacts, and its table as the run's description."""
    from arecall.tracking.store import open_store

    with open_store(uri, orphans=False) as client:
        for path in made.files:
            client.log_artifact(run_id, str(path))
        client.set_tag(run_id, "mlflow.note.content", made.table)


def compare_sweep(uri: str, parent_run_id: str, out: str | Path) -> Comparison | None:
    """Compare a sweep's finished points, write the comparison into ``out`` and log it to the
    parent run; None when no point finished (there is nothing to compare)."""
    from arecall.tracking.store import open_store

    with open_store(uri, orphans=False) as client:
        points, _ = mlflow_points(client, [parent_run_id])
    if not points:
        return None
    made = compare(points, out)
    log_comparison(uri, parent_run_id, made)
    return made
