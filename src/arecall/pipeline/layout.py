"""Where each artifact of a run lives.

DVC and ``arecall run`` write the same files under two roots: the repository (``data/`` not in
git, ``reports/`` committed) or one directory per run. Every stage reads and writes through a
`Layout`, so no stage knows which of the two it is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layout"]


@dataclass(frozen=True)
class Layout:
    """Where each artifact lives: intermediate data under ``data``, reports under ``reports``.

    Examples
    --------
    >>> Layout.run("/tmp/r1").metrics.as_posix()
    '/tmp/r1/metrics.json'
    >>> Layout.dvc().ranking.as_posix()
    'data/rank/ranking.npz'
    """

    data: Path
    reports: Path

    @classmethod
    def dvc(cls, root: str | Path = ".") -> Layout:
        """The repository layout DVC tracks: data/ (not in git) and reports/ (committed)."""
        return cls(data=Path(root) / "data", reports=Path(root) / "reports")

    @classmethod
    def run(cls, directory: str | Path) -> Layout:
        """One directory per ``arecall run``: reports at its top, data in ``data/``."""
        return cls(data=Path(directory) / "data", reports=Path(directory))

    corpus = property(lambda self: self.data / "corpus")
    ranking = property(lambda self: self.data / "rank" / "ranking.npz")
    #: how the rank stage stored the ranking (head + tails or ranked to the needed depth)
    rank_info = property(lambda self: self.data / "rank" / "rank.json")
    lists = property(lambda self: self.data / "filter" / "lists.npz")
    pairs = property(lambda self: self.data / "score" / "pairs.parquet")
    metrics = property(lambda self: self.reports / "metrics.json")
    proof = property(lambda self: self.reports / "proof.json")
    tables = property(lambda self: self.reports / "tables.md")
    curve = property(lambda self: self.reports / "arecall_at_k.csv")
    plot = property(lambda self: self.reports / "arecall_at_k.png")
    vector_table = property(lambda self: self.reports / "vector_search.md")
    vector_csv = property(lambda self: self.reports / "vector_search.csv")
    vector_curve = property(lambda self: self.reports / "vector_curve.csv")
    vector_plot = property(lambda self: self.reports / "vector_search.png")
    index_table = property(lambda self: self.reports / "index_search.md")
    index_csv = property(lambda self: self.reports / "index_search.csv")
    headline = property(lambda self: self.reports / "headline.json")
    track_record = property(lambda self: self.data / "track" / "run.json")

    REPORTS = (
        "metrics",
        "proof",
        "tables",
        "curve",
        "plot",
        "vector_table",
        "vector_csv",
        "vector_curve",
        "vector_plot",
        "index_table",
        "index_csv",
        "headline",
    )

    def report_files(self) -> dict[str, Path]:
        """The report files that exist (and are logged to MLflow), by name."""
        return {n: getattr(self, n) for n in self.REPORTS if getattr(self, n).is_file()}
