"""What a run says about where it came from: its code, its config, its command.

A run's tags let it be matched to a commit (and whether the tree was dirty), to a DVC experiment
and to every other run of the same config (`config_hash`, the same whichever entry point ran it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["config_hash", "provenance"]


def config_hash(cfg: Mapping[str, Any]) -> str:
    """A short, stable hash of everything in the config that can change a result.

    ``hydra`` (run directories) and ``tracking`` (where results go) are left out, so the same
    experiment has the same hash whichever entry point ran it.

    Examples
    --------
    >>> a = config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": True}})
    >>> a == config_hash({"corpus": {"name": "discovery"}, "tracking": {"enabled": False}})
    True
    >>> len(a)
    12
    """
    from arecall.io.digest import json_digest

    return json_digest({k: v for k, v in cfg.items() if k not in ("hydra", "tracking")})[:12]


def provenance(cfg: Mapping[str, Any], root: str | Path = ".") -> dict[str, str]:
    """Tags that let a run be matched to its code and experiment.

    The git commit (DVC's baseline revision inside an experiment's temporary workspace) and
    whether the tree had uncommitted changes, the config hash, the command line, and the DVC
    experiment's name when DVC runs it.
    """
    import shlex
    import subprocess

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    tags = {"arecall.config_hash": config_hash(cfg), "arecall.command": shlex.join(sys.argv)}
    commit = os.environ.get("DVC_EXP_BASELINE_REV") or git("rev-parse", "HEAD")
    if commit:
        tags["mlflow.source.git.commit"] = commit
        status = git("status", "--porcelain", "--untracked-files=no")
        if status is not None:
            tags["arecall.git_dirty"] = str(bool(status)).lower()
    if os.environ.get("DVC_EXP_NAME"):
        tags["arecall.dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    return tags
