"""One ``dvc exp run`` at a time in a workspace: a second one is refused before it touches it.

A workspace experiment runs in the files of the repository: DVC writes its params.yaml, its
stages write reports/ and dvc.lock. DVC holds its experiment lock on the workspace only while it
prepares an experiment (``WorkspaceQueue.put``: stash the workspace, write params.yaml, stash
that), not while the stages run; a second ``dvc exp run`` started then stashed and reset the
first one's files under its running stages, and three concurrent ones mixed each other's
parameters, all failed, and left params.yaml, reports/ and dvc.lock mixed.

arecall's code runs inside a workspace experiment's ``dvc`` process while DVC composes the
config (DVC imports `arecall.conf`, Hydra's config module), which is inside that preparation,
under DVC's lock. `hold_workspace` then adds a claim of its own on the workspace to DVC's
experiment lock file, in DVC's format, held as long as the process lives (released at exit; a
killed process's claim is removed by DVC itself, which checks the pid). Every later
``dvc exp run`` in the workspace — ``--queue`` and ``--temp`` too, since they also stash the
workspace — is refused by DVC before it stashes anything, with the claim's text, which says
to wait or to queue. Queued experiments (``dvc exp run --run-all``) run in copies of their own
and are not held back.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

__all__ = ["WORKSPACE", "hold_workspace", "refusal"]

#: The name DVC's experiment lock uses for the workspace (``WorkspaceQueue.put``'s writes).
WORKSPACE = "workspace"


def refusal(argv: list[str]) -> str:
    """What a second ``dvc exp run`` is told: who holds the workspace, and what to do instead.

    Examples
    --------
    >>> print(refusal(["/venv/bin/dvc", "exp", "run", "-n", "a", "-S", "profiles=open"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    arecall: error: experiment 'dvc exp run -n a -S profiles=open' is running in this workspace;
    a second one would mix their params.yaml, reports/ and dvc.lock: wait for it, or queue
    experiments to run side by side (dvc exp run --queue -S ..., then dvc exp run --run-all)
    """
    command = " ".join(["dvc", *argv[1:]])
    return (
        f"arecall: error: experiment '{command}' is running in this workspace; a second one "
        "would mix their params.yaml, reports/ and dvc.lock: wait for it, or queue experiments "
        "to run side by side (dvc exp run --queue -S ..., then dvc exp run --run-all)"
    )


def _preparing_workspace_experiment() -> Any:
    """DVC's workspace queue preparing an experiment up the stack, or None.

    Exactly ``WorkspaceQueue``: ``--temp`` (a subclass) and ``--queue`` stash the workspace
    only while preparing, then run elsewhere, and need no claim beyond DVC's own.
    """
    try:
        from dvc.repo.experiments.queue.workspace import WorkspaceQueue
    except ImportError:
        return None
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if type(owner) is WorkspaceQueue and frame.f_code.co_name in ("put", "_stash_exp"):
            return owner
        frame = frame.f_back  # type: ignore[assignment]
    return None


def hold_workspace() -> bool:
    """Claim the workspace for this process if it is a ``dvc exp run`` preparing to run there.

    Returns whether it did. Called when DVC imports `arecall.conf`; anywhere else (``arecall
    run``, a DVC stage, ``--queue``) it does nothing.
    """
    queue = _preparing_workspace_experiment()
    if queue is None:
        return False
    from dvc.repo.experiments.utils import EXEC_TMP_DIR
    from dvc.rwlock import _edit_rwlock

    repo = queue.repo
    lock_dir = os.path.join(repo.tmp_dir, EXEC_TMP_DIR)
    hardlink = bool(repo.config["core"].get("hardlink_lock", False))
    info = {"pid": os.getpid(), "cmd": refusal(sys.argv)}
    with _edit_rwlock(lock_dir, repo.fs, hardlink) as lock:
        if info not in lock["read"][WORKSPACE]:
            lock["read"][WORKSPACE].append(info)

    def release() -> None:
        with _edit_rwlock(lock_dir, repo.fs, hardlink) as lock:
            readers = lock["read"].get(WORKSPACE, [])
            if info in readers:
                readers.remove(info)
            if not readers:
                lock["read"].pop(WORKSPACE, None)

    atexit.register(release)
    return True
