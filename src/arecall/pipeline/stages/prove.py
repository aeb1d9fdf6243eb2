"""Stage `prove`: the seed's claims (a property search) and this run's own lists, checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arecall.core.engine import engine_from_config
from arecall.core.errors import ArecallError
from arecall.core.ranking import Ranking
from arecall.data.collection import Collection
from arecall.io.atomic import write_json
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.proof import check_properties, check_run_file, failures
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["prove"]


def prove(cfg: ExperimentConfig, layout: Layout) -> dict[str, Any]:
    """Check the seed's claims (Hypothesis) and this run's own lists; fail on a counterexample.

    The scores are computed again here, not read from the score stage's table: the data claims
    check what the batch code yields on this run's lists, independently of what score wrote.
    The per-principal work runs on the engine ``evaluation.engine`` names, each block reading
    its lists from the filter stage's file and sending back its first counterexamples only.
    """
    results = check_properties(cfg.evaluation.proof.max_examples)
    collection = Collection.load(layout.corpus, text=False)
    with engine_from_config(cfg.evaluation.engine) as engine:
        results += check_run_file(
            layout.lists,
            Ranking.load(layout.ranking),
            collection.relevance_matrix(),
            collection.acl_matrix(),
            ks_of(cfg),
            query_ids=collection.query_ids,
            principals=collection.principal_names,
            doc_ids=collection.doc_ids,
            engine=engine,
        )
    failed = failures(results)
    if failed:
        first = failed[0]
        raise ArecallError(
            f"prove: claim {first.claim!r} ({first.statement}) fails: "
            f"counterexample {first.counterexample}"
        )
    proof = {"passed": True, "claims": [r.as_dict() for r in results]}
    write_json(layout.proof, proof)
    return proof


if __name__ == "__main__":
    raise SystemExit(run_stage(prove))
