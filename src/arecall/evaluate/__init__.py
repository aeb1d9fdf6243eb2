"""Evaluating an external system's runs: authorized metrics over TREC runs, and run fusion.

Modules, in the order an evaluation runs: `inputs` (what is given, coerced), `kernels` (one
block of queries, vectorised), `pairs` (the per-pair counts: kept, tallied or spilled),
`result` (`Evaluation`), `report` (the text table), `evaluation` (`evaluate`, `compare`), and
`fusion` (reciprocal rank fusion).

Examples
--------
>>> from arecall.evaluate import evaluate
>>> ev = evaluate({"q1": {"a": 2.0, "b": 1.0}}, {"q1": {"b": 1}}, k=[1, 2])
>>> ev.summary()["k"]["2"]["recall"]
1.0
"""

from arecall.evaluate.evaluation import Evaluation, compare, evaluate
from arecall.evaluate.fusion import fuse_runs

__all__ = ["Evaluation", "compare", "evaluate", "fuse_runs"]
