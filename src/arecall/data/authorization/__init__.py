"""Authorization models: which principals are evaluated and what each may use.

The Hydra group ``profiles`` selects one by ``profiles.name``. Every model produces the
collection's ``principals`` and ``acl`` tables; the ACL is deny-by-default (a document absent
from a principal's grants is not authorized), and nothing downstream knows how it was made. That
is what lets one corpus be measured under several access-control regimes and the numbers be
compared: only the predicate A_p changes.

* ``corpus`` — what the corpus declares (the default). ``profiles.principals`` may name a subset.
* ``open`` — one principal, ``everyone``, authorized for every document: A ≡ 1, so ARecall@K
  must equal Recall@K (a claim the prove stage checks on the run's own data).
* ``domains`` — the seed's model: a principal is granted whole domains (the documents'
  ``domain`` column). ``profiles.grants`` maps principal → domains; when null, the corpus's own
  principals keep the domains they hold: their ``domains`` column if the corpus declares one
  (``corpus=synthetic`` does), otherwise every domain *all* of whose documents the corpus's ACL
  grants them (for the discovery corpus this gives back the seed's profiles exactly). A partial
  grant never widens into a whole-domain one.
* ``clearance`` — attribute-based: grant iff the principal holds the document's domain (as for
  ``domains``) *and* the document's ``sensitivity`` ≤ the principal's ``clearance`` in the order
  ``profiles.levels`` (internal < confidential < restricted). A label outside ``levels`` is an
  error, not a silent deny, because it would change the metric without a trace.
* ``random`` — ``n_principals`` principals ``r0``, …; each sees each document independently with
  probability ``selectivity`` (seeded): the authorization analogue of a selectivity sweep.
* ``acl_file`` — a TSV of ``doc_id<TAB>principal-or-group`` lines, with an optional TSV of
  ``principal<TAB>group`` lines that expands group grants to members (see
  `arecall.data.authorization.helpers.read_acl`, which expands them with
  `arecall.io.acl.load_acl`, the expansion ``arecall evaluate`` uses).

Each model is one module of this package with a function ``authorize(collection, cfg)``, and one
line in `MODELS`; its schema (defaults, types, ranges) is one line in
`arecall.data.authorization.config.PROFILES`. `apply_profiles` checks the section against it,
so a model reads ``cfg["key"]`` and never repeats a default. The building blocks the models share
(ACL tables from integer codes, domains, grants) are in `arecall.data.authorization.helpers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from arecall.core.errors import ArecallError
from arecall.data.authorization import acl_file, clearance, corpus, domains, open, random
from arecall.data.authorization.config import LEVELS, PROFILES, profiles_section
from arecall.data.authorization.helpers import (
    acl_frame,
    acl_from_masks,
    principal_domains,
    read_acl,
)
from arecall.data.collection import Collection

__all__ = [
    "LEVELS",
    "MODELS",
    "acl_frame",
    "acl_from_masks",
    "apply_profiles",
    "principal_domains",
    "read_acl",
]

#: Authorization model name -> ``authorize(collection, cfg)``; one line per model.
MODELS: dict[str, Callable[[Collection, Mapping[str, Any]], Collection]] = {
    "corpus": corpus.authorize,
    "open": open.authorize,
    "domains": domains.authorize,
    "clearance": clearance.authorize,
    "random": random.authorize,
    "acl_file": acl_file.authorize,
}


def apply_profiles(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """Return ``collection`` with the principals and ACL of the ``profiles`` config section.

    Examples
    --------
    >>> from arecall.data.sources import load_corpus
    >>> c = apply_profiles(load_corpus({"name": "discovery"}), {"name": "open"})
    >>> list(c.principal_names), int(c.acl_matrix().sum())
    (['everyone'], 40)
    """
    name = cfg.get("name")
    if name not in MODELS:
        known = ", ".join(sorted(MODELS))
        raise ArecallError(f"profiles.name: unknown authorization model {name!r} (known: {known})")
    # a model with a schema reads typed values with the defaults filled in; one without (a model
    # registered without a schema line) gets the section as given
    section = profiles_section(cfg) if name in PROFILES else dict(cfg)
    return MODELS[str(name)](collection, section)
