"""Compile ranx's numba kernels once, into ranx's own on-disk cache (``make install`` runs it).

ranx (the dev-only oracle of ``tests/evaluate/test_evaluation_vs_ranx.py``) compiles its metrics with numba
on first use and caches them beside its sources: 90 s of one core on a fresh venv, which
``make test`` would otherwise pay on every clean clone. This runs the very calls that test
makes — ranx's public path from dicts, and its kernels on a pre-sorted numba list — so every
signature the suite needs is compiled here, at install time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `tests` a package

from arecall.io.trec import Run

from tests.evaluate._ranx_oracle import random_case, ranx_on_dicts, ranx_on_order


def main() -> None:
    start = time.perf_counter()
    run, qrels = random_case(0, ties=False)
    ranx_on_dicts(run, qrels)
    run, qrels = random_case(100, ties=True)
    ranx_on_order(Run.from_dict(run), qrels)
    print(f"ranx's numba kernels compiled and cached in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
