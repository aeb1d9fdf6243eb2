"""What a run says about where it came from: its code, its config, its entry point and command.

A run's tags let it be matched to a commit (and whether the tree was dirty), to a DVC experiment
and to every other run of the same config (`config_hash`, the same whichever entry point ran it),
and say which entry point made it and the command a user typed (`source_tags`): the MLflow UI
shows the entry point in its Source column (``mlflow.source.name``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "COMMAND_ENV",
    "ENTRY_ENV",
    "command_line",
    "config_hash",
    "provenance",
    "source_tags",
]

#: The command a user typed and the entry point it is, set by ``arecall run`` for its sweep's
#: points (joblib and Dask workers inherit them; their own ``sys.argv`` is the worker's).
COMMAND_ENV, ENTRY_ENV = "ARECALL_COMMAND", "ARECALL_ENTRY"

#: Sections that never change a pipeline run's results: where it runs and where it is logged,
#: and the vector experiment, which is a run of its own (nested, with its own hash).
_NOT_RESULTS = ("hydra", "tracking", "vector_search")


def config_hash(cfg: Mapping[str, Any]) -> str:
    """A short, stable hash of everything in the config that can change a pipeline's results.

    ``hydra`` (run directories), ``tracking`` (where results go) and ``vector_search`` (the
    vector experiment: its own run) are left out, so the same experiment has the same hash
    whichever entry point ran it, with or without the vector experiment beside it.

    Examples
    --------
    >>> a = config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": True}})
    >>> a == config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": False}})
    True
    >>> a == config_hash({"corpus": {"name": "discovery"}, "vector_search": {"enabled": True}})
    True
    >>> len(a)
    12
    """
    from arecall.io.digest import json_digest

    return json_digest({k: v for k, v in cfg.items() if k not in _NOT_RESULTS})[:12]


def command_line() -> str:
    """The command that made this run, as the user typed it.

    $ARECALL_COMMAND when an entry point set it (a sweep's points), else this process's
    command line with the program's name, not its path.

    Examples
    --------
    >>> import os, sys
    >>> os.environ[COMMAND_ENV] = "arecall run -m retriever=tfidf,bm25"
    >>> command_line()
    'arecall run -m retriever=tfidf,bm25'
    >>> del os.environ[COMMAND_ENV]
    """
    import shlex

    given = os.environ.get(COMMAND_ENV)
    if given:
        return given
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return shlex.join([program, *sys.argv[1:]])


def source_tags(entry: str, command: str | None = None) -> dict[str, str]:
    """Which entry point made a run (``arecall.entry``, and MLflow's Source column) and how.

    Examples
    --------
    >>> source_tags("dvc exp run --queue", "dvc exp run --run-all")  # doctest: +ELLIPSIS
    {'arecall.entry': 'dvc exp run --queue', 'arecall.command': 'dvc exp run --run-all', ...}
    """
    return {
        "arecall.entry": entry,
        "arecall.command": command if command is not None else command_line(),
        "mlflow.source.name": entry,
        "mlflow.source.type": "LOCAL",
    }


def provenance(cfg: Mapping[str, Any], root: str | Path = ".") -> dict[str, str]:
    """Tags that let a run be matched to its code and experiment.

    The git commit (DVC's baseline revision inside an experiment's temporary workspace) and
    whether the tree had uncommitted changes, the config hash, and the DVC experiment's name
    when DVC runs it (the entry point and command: `source_tags`).
    """
    import subprocess

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    tags = {"arecall.config_hash": config_hash(cfg)}
    commit = os.environ.get("DVC_EXP_BASELINE_REV") or git("rev-parse", "HEAD")
    if commit:
        tags["mlflow.source.git.commit"] = commit
        status = git("status", "--porcelain", "--untracked-files=no")
        if status is not None:
            tags["arecall.git_dirty"] = str(bool(status)).lower()
    if os.environ.get("DVC_EXP_NAME"):
        tags["arecall.dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    return tags
