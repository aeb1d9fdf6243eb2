"""The ``profiles`` group's schemas: one dataclass per authorization model, defaults here.

``conf/profiles/<name>.yaml`` composes the matching schema (``defaults: [base_<name>]``); the
registry (`arecall.data.authorization.MODELS`) names each model's schema, and the models read
typed values (``cfg.selectivity``) with no default repeated in code. What only the corpus
can tell (a principal or domain it declares) is checked by the model itself. Each schema also
says how many principals its settings fix (`ProfilesSchema.principal_count`), for the memory
budget (`arecall.pipeline.budget`), which asks the model instead of knowing each.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from arecall.core.schema import NON_NEGATIVE, POSITIVE, interval, setting

__all__ = [
    "LEVELS",
    "AclFileProfiles",
    "ClearanceProfiles",
    "CorpusProfiles",
    "DomainsProfiles",
    "OpenProfiles",
    "ProfilesSchema",
    "RandomProfiles",
]

#: The default sensitivity levels, lowest first.
LEVELS = ("internal", "confidential", "restricted")


@dataclass
class ProfilesSchema:
    """What every authorization model's schema has: its name, and the principals it fixes.

    Examples
    --------
    >>> ProfilesSchema("mine").principal_count(declared=4)
    4
    """

    name: str = ""

    def principal_count(self, declared: int | None) -> int | None:
        """Principals the model evaluates, given those the corpus declares (None: unknown
        before the data is read). Default: the corpus's."""
        return declared


@dataclass
class CorpusProfiles(ProfilesSchema):
    """``profiles=corpus``: the principals and grants the corpus declares (deny by default).

    Attributes
    ----------
    principals : list of str or None
        null: all of them; or the principals to keep, in this order.
    """

    name: str = "corpus"
    principals: list[str] | None = setting(None, nonempty=True)  # noqa: RUF009 (a dataclass field)

    def principal_count(self, declared: int | None) -> int | None:
        """Those named, else the corpus's."""
        return len(self.principals) if self.principals else declared


@dataclass
class OpenProfiles(ProfilesSchema):
    """``profiles=open``: one principal authorized for everything (ARecall@K = Recall@K)."""

    name: str = "open"

    def principal_count(self, declared: int | None) -> int | None:
        """One, ``everyone``."""
        return 1


@dataclass
class DomainsProfiles(ProfilesSchema):
    """``profiles=domains``: principals granted whole domains (the documents' ``domain``).

    Attributes
    ----------
    grants : mapping or None
        ``{principal: [domain, ...]}``; null: the corpus's principals and the domains they hold.
    """

    name: str = "domains"
    grants: dict[str, list[str]] | None = None

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """A grants mapping, when given, names at least one principal."""
        if self.grants is not None and not self.grants:
            yield "grants", "must be null or a non-empty mapping principal -> list of domains", {}

    def principal_count(self, declared: int | None) -> int | None:
        """Those granted, else the corpus's."""
        return len(self.grants) if self.grants else declared


@dataclass
class ClearanceProfiles(DomainsProfiles):
    """``profiles=clearance`` (ABAC): the document's domain granted AND sensitivity ≤ clearance.

    Attributes
    ----------
    levels : list of str
        Distinct sensitivity levels, lowest first.
    grants : mapping or None
        ``{principal: [domain, ...]}``; null: as ``profiles=domains``.
    clearances : mapping or None
        ``{principal: level}``; null: the corpus's principals' ``clearance`` column.
    """

    name: str = "clearance"
    levels: list[str] = setting(list(LEVELS), nonempty=True)  # noqa: RUF009 (a dataclass field)
    clearances: dict[str, str] | None = None

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """Levels are distinct non-empty names; every clearance given is one of them."""
        yield from super().problems()
        if len(set(self.levels)) != len(self.levels) or not all(self.levels):
            yield "levels", "must be a list of distinct level names, lowest first", self.levels
        for principal, level in (self.clearances or {}).items():
            if level not in self.levels:
                yield (
                    f"clearances.{principal}",
                    f"must be one of profiles.levels ({', '.join(self.levels)})",
                    level,
                )


@dataclass
class RandomProfiles(ProfilesSchema):
    """``profiles=random``: each principal sees each document with probability ``selectivity``.

    Attributes
    ----------
    n_principals : int
        Principals ``r0``, ``r1``, ….
    selectivity : float
        Probability of a grant, in (0, 1].
    seed : int
        Seeds the draws.
    """

    name: str = "random"
    n_principals: int = setting(4, POSITIVE)
    selectivity: float = setting(0.1, interval(0.0, 1.0, low_open=True))
    seed: int = setting(0, NON_NEGATIVE)

    def principal_count(self, declared: int | None) -> int | None:
        """``n_principals``."""
        return self.n_principals


@dataclass
class AclFileProfiles(ProfilesSchema):
    """``profiles=acl_file``: grants from a TSV file ``doc_id<TAB>principal-or-group``.

    Attributes
    ----------
    path : str or None
        The ACL file (required).
    groups : str or None
        Optional TSV ``principal<TAB>group``: a grant to a group is a grant to its members.
    """

    name: str = "acl_file"
    path: str | None = None
    groups: str | None = None

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """The ACL file is required."""
        if not self.path:
            yield "path", "required for profiles=acl_file (a TSV file)", self.path

    def principal_count(self, declared: int | None) -> int | None:
        """Unknown until the file is read."""
        return None
