"""One registry shape for every family of named components a config chooses between.

Corpus sources (``corpus.name``), authorization models (``profiles.name``), retrievers
(``retriever.name``) and vector stores (``index.store``) are each a `Registry`: name →
`Registered`. An entry says what the rest of arecall needs to know about a component without
importing it — the schema its config section is checked against, what it answers, the
libraries whose versions can change what it computes — and names its factory as a
``"module:attribute"`` path that `Registered.load` imports on first use. So checking a
configuration, which every stage process does first, loads no implementation and no heavy
library (faiss, scipy, scikit-learn), and a stage that only checks a section does not depend on
the code that section would run (tests/pipeline/test_dvc_stage_deps.py follows each
``load()`` to the modules it imports).

Every list about a family is read from its registry when it is needed: the config check's
options and schemas, the placements a store answers, the retrievers with dense embeddings, the
vector cache's libraries. Adding a component is its own module plus one `Registered` line.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass
... class LoudConfig:
...     name: str = "loud"
...     volume: int = 11
>>> SPEAKERS = Registry(
...     "speaker",
...     Registered("loud", "builtins:dict", schema=LoudConfig, answers=("music",)),
...     Registered("quiet", "builtins:list", libraries=("numpy",)),
... )
>>> SPEAKERS["loud"].load()(volume=3), sorted(SPEAKERS.schemas())
({'volume': 3}, ['loud'])
>>> SPEAKERS.answering("music"), SPEAKERS.libraries()
(['loud'], ('numpy',))
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Registered", "Registry", "lazy_attributes"]


@dataclass(frozen=True)
class Registered:
    """One named component of a family.

    Attributes
    ----------
    name : str
        What a config calls it (``retriever.name: bm25``).
    factory : str or callable
        What builds it: ``"package.module:attribute"`` (``attribute`` may be dotted, e.g.
        ``BM25.from_config``), imported by `load` when first needed; or the object itself (a
        component defined at run time, in a notebook or a test).
    schema : type or None
        The dataclass its config section is checked against (`arecall.core.schema`), from a
        module as light as the check; None: no settings, the section is passed as given.
    answers : tuple of str
        What it answers, known before it is imported: a store's placements, a retriever's
        outputs (``scores``, ``embeddings``).
    libraries : tuple of str
        Distributions whose versions can change what it computes (a cache keyed on results
        reads them).
    """

    name: str
    factory: str | Callable[..., Any]
    schema: type | None = None
    answers: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def load(self) -> Any:
        """The factory itself, its module imported now if it was named by path.

        Examples
        --------
        >>> Registered("json", "json:dumps").load()([1])
        '[1]'
        """
        if not isinstance(self.factory, str):
            return self.factory
        module, _, path = self.factory.partition(":")
        target: Any = importlib.import_module(module)
        for part in path.split("."):
            target = getattr(target, part)
        return target


class Registry(dict[str, Registered]):
    """Name → `Registered` for one family; ``kind`` names the family in messages.

    A dict, so a plugin or a test registers a component with one assignment (or
    ``monkeypatch.setitem``) and every list read from the registry knows it at once.

    Examples
    --------
    >>> stores = Registry("store", Registered("a", "builtins:dict"))
    >>> stores["b"] = Registered("b", "builtins:list")
    >>> stores.known()
    'a, b'
    >>> stores["c"] = Registered("d", "builtins:list")
    Traceback (most recent call last):
    ...
    ValueError: store 'd' registered under another name, 'c'
    """

    def __init__(self, kind: str, *entries: Registered) -> None:
        super().__init__()
        self.kind = kind
        for entry in entries:
            self[entry.name] = entry

    def __setitem__(self, name: str, entry: Registered) -> None:
        if entry.name != name:
            raise ValueError(f"{self.kind} {entry.name!r} registered under another name, {name!r}")
        super().__setitem__(name, entry)

    def known(self) -> str:
        """The registered names, sorted, as a message lists them."""
        return ", ".join(sorted(self))

    def schemas(self) -> dict[str, type]:
        """Name → schema, for the components that have settings."""
        return {name: e.schema for name, e in self.items() if e.schema is not None}

    def answering(self, what: str) -> list[str]:
        """The names of the components that answer ``what``, sorted."""
        return sorted(name for name, e in self.items() if what in e.answers)

    def libraries(self, *names: str) -> tuple[str, ...]:
        """The libraries of ``names`` (default: every component), each once, in order."""
        chosen = names or tuple(self)
        return tuple(dict.fromkeys(lib for n in chosen if n in self for lib in self[n].libraries))


def lazy_attributes(module: str, lazy: Mapping[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` (PEP 562) that imports each name of ``lazy`` (name → the
    module defining it) on first use, then keeps it as a plain attribute of ``module``.

    Why: a package that names its parts (``arecall.vector.stores.FaissStore``) would otherwise
    import them all, faiss and scipy with them, wherever only its registry is read.

    Examples
    --------
    >>> import types, sys
    >>> sys.modules["demo_pkg"] = types.ModuleType("demo_pkg")
    >>> getter = lazy_attributes("demo_pkg", {"dumps": "json"})
    >>> getter("dumps")([1]), sys.modules["demo_pkg"].dumps is getter("dumps")
    ('[1]', True)
    >>> getter("loads")
    Traceback (most recent call last):
    ...
    AttributeError: module 'demo_pkg' has no attribute 'loads'
    """

    def __getattr__(name: str) -> Any:
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name]), name)
            setattr(sys.modules[module], name, value)  # once imported, a plain attribute
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
