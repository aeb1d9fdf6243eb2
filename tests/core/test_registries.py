"""A new authorization model or retriever is one function or class plus one registry line.

Each is registered here the way a newcomer would (one ``MODELS`` / ``RETRIEVERS`` line) and
then reached through the same entry point the pipeline uses, with a config section as
``default_config`` composes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.registry import Registered
from arecall.data import authorization
from arecall.data.authorization import MODELS, acl_from_masks, apply_profiles
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.retrievers import RETRIEVERS, make_retriever


def first_half(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """A whole authorization model: one principal granted the first half of the documents."""
    n = len(collection.documents)
    mask = np.arange(n) < n // 2
    return replace(
        collection,
        principals=pd.DataFrame({"principal": ["half"]}),
        acl=acl_from_masks([mask], ["half"], collection.documents["doc_id"]),
    )


def test_a_model_registered_in_one_line_runs_through_apply_profiles(monkeypatch) -> None:
    monkeypatch.setitem(MODELS, "first_half", Registered("first_half", first_half))  # the line
    discovery = load_corpus({"name": "discovery"})
    out = apply_profiles(discovery, {"name": "first_half"})
    assert list(out.principal_names) == ["half"]
    granted = np.asarray(out.acl_matrix().todense())[0].astype(bool)
    assert granted.tolist() == (np.arange(len(granted)) < len(granted) // 2).tolist()


def test_an_unregistered_model_is_refused_naming_the_key() -> None:
    with pytest.raises(
        ArecallError, match=r"^profiles.name: unknown authorization model 'first_half'"
    ):
        apply_profiles(load_corpus({"name": "discovery"}), {"name": "first_half"})


def test_every_model_is_one_module_with_an_authorize_function() -> None:
    for name, entry in MODELS.items():
        fn = entry.load()
        assert fn.__module__ == f"{authorization.__name__}.{name}", name
        assert fn.__name__ == "authorize"


class Constant:
    """A whole retriever: every document scores 1 for every query."""

    def fit(self, documents: Sequence[str]) -> Constant:
        self.n_docs = len(documents)
        return self

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        return sp.csr_matrix(np.ones((len(queries), self.n_docs)))


def test_a_retriever_registered_in_one_line_runs_through_make_retriever(monkeypatch) -> None:
    registered = Registered("constant", lambda cfg: Constant())
    monkeypatch.setitem(RETRIEVERS, "constant", registered)  # the one registry line
    assert "constant" not in RETRIEVERS.schemas()  # no schema: a retriever without settings
    retriever = make_retriever({"name": "constant"}).fit(["a", "b", "c"])
    assert retriever.score(["q"]).toarray().tolist() == [[1.0, 1.0, 1.0]]


def test_what_each_retriever_answers_is_what_it_does() -> None:
    """The config check reads a retriever's ``embeddings`` from its entry without building it:
    the entry must say exactly whether the retriever embeds."""
    for name, entry in RETRIEVERS.items():
        embeds = hasattr(make_retriever({"name": name}), "embed_documents")
        assert embeds == ("embeddings" in entry.answers), name
        assert "scores" in entry.answers, name
