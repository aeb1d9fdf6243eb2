"""Authorization models: which principals are evaluated and what each may use.

The Hydra group ``profiles`` selects one by ``profiles.name``. Every model produces the
collection's ``principals`` and ``acl`` tables; the ACL is deny-by-default (a document absent
from a principal's grants is not authorized), and nothing downstream knows how it was made.

* ``corpus`` — what the corpus declares (the default). ``profiles.principals`` may name a subset.
* ``open`` — one principal, ``everyone``, authorized for every document: A ≡ 1, so ARecall@K
  must equal Recall@K (a claim the prove stage checks on the run's own data).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from arecall.collection import Collection
from arecall.errors import ArecallError

__all__ = ["MODELS", "apply_profiles"]


def _corpus(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    wanted: Sequence[str] | None = cfg.get("principals")
    if wanted is None:
        return collection
    if isinstance(wanted, str) or not all(isinstance(p, str) for p in wanted) or not wanted:
        raise ArecallError("profiles.principals: must be null or a non-empty list of names")
    known = set(collection.principal_names)
    for i, name in enumerate(wanted):
        if name not in known:
            raise ArecallError(
                f"profiles.principals[{i}]: unknown principal {name!r} "
                f"(the corpus declares: {', '.join(sorted(known))})"
            )
    order = {name: i for i, name in enumerate(wanted)}
    principals = collection.principals[collection.principals["principal"].isin(order)]
    principals = principals.sort_values("principal", key=lambda s: s.map(order))
    acl = collection.acl[collection.acl["principal"].isin(order)]
    return replace(
        collection, principals=principals.reset_index(drop=True), acl=acl.reset_index(drop=True)
    )


def _open(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    return replace(
        collection,
        principals=pd.DataFrame({"principal": ["everyone"]}),
        acl=pd.DataFrame({"principal": "everyone", "doc_id": collection.doc_ids}),
    )


MODELS = {"corpus": _corpus, "open": _open}


def apply_profiles(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """Return ``collection`` with the principals and ACL of the ``profiles`` config section.

    Examples
    --------
    >>> from arecall.corpora import load_corpus
    >>> c = apply_profiles(load_corpus({"name": "discovery"}), {"name": "open"})
    >>> list(c.principal_names), int(c.acl_matrix().sum())
    (['everyone'], 40)
    """
    name = cfg.get("name")
    if name not in MODELS:
        known = ", ".join(sorted(MODELS))
        raise ArecallError(f"profiles.name: unknown authorization model {name!r} (known: {known})")
    return MODELS[str(name)](collection, cfg)
