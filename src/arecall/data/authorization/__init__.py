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
  `arecall.data.authorization.acl_file.read_acl`, which expands them with
  `arecall.io.acl.load_acl`, the expansion ``arecall evaluate`` uses).

Each model is one module of this package with a function ``authorize(collection, cfg)`` and
one line in the registry `MODELS` (`arecall.core.registry`): its function, imported on first use,
and its schema (defaults, types, ranges) from `arecall.data.authorization.schema`.
`apply_profiles` checks the section against it, so a model reads ``cfg.key`` and never
repeats a default. The building blocks the models share (ACL tables from integer codes,
domains, grants) are in `arecall.data.authorization.helpers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arecall.core.errors import ArecallError
from arecall.core.registry import Registered, Registry, lazy_attributes
from arecall.core.schema import select
from arecall.data.authorization.schema import (
    LEVELS,
    AclFileProfiles,
    ClearanceProfiles,
    CorpusProfiles,
    DomainsProfiles,
    OpenProfiles,
    ProfilesSchema,
    RandomProfiles,
)

if TYPE_CHECKING:
    from arecall.data.authorization.acl_file import read_acl
    from arecall.data.authorization.helpers import acl_frame, acl_from_masks, principal_domains
    from arecall.data.collection import Collection

__all__ = [
    "LEVELS",
    "MODELS",
    "acl_frame",
    "acl_from_masks",
    "apply_profiles",
    "principal_domains",
    "profiles_section",
    "read_acl",
]

#: Authorization model name -> its ``authorize(collection, cfg)`` and schema; one line each.
MODELS = Registry(
    "authorization model",
    Registered("corpus", "arecall.data.authorization.corpus:authorize", CorpusProfiles),
    Registered("open", "arecall.data.authorization.open:authorize", OpenProfiles),
    Registered("domains", "arecall.data.authorization.domains:authorize", DomainsProfiles),
    Registered("clearance", "arecall.data.authorization.clearance:authorize", ClearanceProfiles),
    Registered("random", "arecall.data.authorization.random:authorize", RandomProfiles),
    Registered("acl_file", "arecall.data.authorization.acl_file:authorize", AclFileProfiles),
)

# The building blocks, imported on first use: the registry is read by every config check, and
# the helpers load scipy.
_LAZY = {
    "acl_frame": "arecall.data.authorization.helpers",
    "acl_from_masks": "arecall.data.authorization.helpers",
    "principal_domains": "arecall.data.authorization.helpers",
    "read_acl": "arecall.data.authorization.acl_file",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


def profiles_section(cfg: Any) -> ProfilesSchema:
    """The ``profiles`` section checked against its model's schema, defaults filled in.

    Examples
    --------
    >>> profiles_section({"name": "random", "seed": 3})
    RandomProfiles(name='random', n_principals=4, selectivity=0.1, seed=3)
    >>> profiles_section({"name": "random", "selectivity": 0})
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: profiles.selectivity: must be a number in (0, 1], got 0
    """
    return select(MODELS.schemas(), cfg, "profiles", "authorization model")


def apply_profiles(collection: Collection, cfg: ProfilesSchema | Mapping[str, Any]) -> Collection:
    """Return ``collection`` with the principals and ACL of the ``profiles`` config section.

    ``cfg`` is the checked section (its model's schema instance, as the stages pass it) or a
    plain one, checked here.

    Examples
    --------
    >>> from arecall.data.sources import load_corpus
    >>> c = apply_profiles(load_corpus({"name": "discovery"}), {"name": "open"})
    >>> list(c.principal_names), int(c.acl_matrix().sum())
    (['everyone'], 40)
    """
    name = cfg.name if isinstance(cfg, ProfilesSchema) else cfg.get("name")
    if not isinstance(name, str) or name not in MODELS:
        raise ArecallError(
            f"profiles.name: unknown authorization model {name!r} (known: {MODELS.known()})"
        )
    # a model with a schema reads typed values with the defaults filled in; one without (a model
    # registered without a schema) gets the section as given
    section = profiles_section(cfg) if MODELS[name].schema is not None else cfg
    made: Collection = MODELS[name].load()(collection, section)
    return made
