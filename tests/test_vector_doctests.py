"""The Examples sections of the vector modules run (the cheap ones; experiment/bench are
exercised at full size by their own tests)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "arecall.vector.generator",
    "arecall.vector.index",
    "arecall.vector.oracle",
    "arecall.vector.placement",
    "arecall.vector.stores",
    "arecall.vector.stores.base",
    "arecall.vector._checks",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
