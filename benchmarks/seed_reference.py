"""The seed's reference algorithm over any `arecall.data.collection.Collection`.

authorized-recall 0.1.0's experiment loop, with the seed package's own `TfIdfIndex` and metric
functions, run on a collection's documents, queries, qrels and ACL. Used by the benchmark and by
the test that holds arecall's numbers to the seed's on synthetic corpora. Dev-only: it imports
the seed package, which arecall itself never does.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from authorized_recall import (
    TfIdfIndex,
    authorized_recall_at_k,
    ndcg_at_k,
    post_filter,
    pre_filter,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    unusable_fraction_at_k,
)

from arecall.data.collection import Collection


def seed_reference(collection: Collection, ks: tuple[int, ...]) -> dict[str, Any]:
    """Mean metrics per K exactly as the seed's ``experiment.run`` computes them."""
    docs = dict(zip(collection.documents["doc_id"], collection.documents["text"], strict=True))
    index = TfIdfIndex(docs)
    relevant_of: dict[str, list[str]] = defaultdict(list)
    for q, d in zip(collection.qrels["query_id"], collection.qrels["doc_id"], strict=True):
        relevant_of[q].append(d)
    grants: dict[str, set[str]] = defaultdict(set)
    for p, d in zip(collection.acl["principal"], collection.acl["doc_id"], strict=True):
        grants[p].add(d)
    names = ("recall", "arecall_post", "arecall_pre", "precision", "ndcg", "unusable")
    rows: dict[int, dict[str, list[float]]] = {
        k: {n: [] for n in (*names, "post_nz", "pre_nz")} for k in ks
    }
    mrr = []
    for qid, text in zip(collection.queries["query_id"], collection.queries["text"], strict=True):
        relevant = relevant_of[qid]
        ranking = index.rank(text, k=len(docs))
        mrr.append(reciprocal_rank(ranking, relevant))
        for principal in collection.principals["principal"]:
            ok = grants[principal].__contains__
            nonempty = any(ok(d) for d in relevant)
            for k in ks:
                r = rows[k]
                r["recall"].append(recall_at_k(ranking, relevant, k))
                r["precision"].append(precision_at_k(ranking, relevant, k))
                r["ndcg"].append(ndcg_at_k(ranking, relevant, k))
                r["unusable"].append(unusable_fraction_at_k(ranking, ok, k))
                post = authorized_recall_at_k(post_filter(ranking, ok, k), relevant, ok, k)
                pre = authorized_recall_at_k(pre_filter(ranking, ok, k), relevant, ok, k)
                r["arecall_post"].append(post)
                r["arecall_pre"].append(pre)
                if nonempty:
                    r["post_nz"].append(post)
                    r["pre_nz"].append(pre)
    out: dict[str, Any] = {"mrr": statistics.mean(mrr), "k": {}}
    for k in ks:
        r = rows[k]
        row = {n: statistics.mean(r[n]) for n in names}
        row["arecall_post_nonempty"] = statistics.mean(r["post_nz"]) if r["post_nz"] else None
        row["arecall_pre_nonempty"] = statistics.mean(r["pre_nz"]) if r["pre_nz"] else None
        row["n_nonempty"] = len(r["pre_nz"])
        out["k"][str(k)] = row
    return out
