"""A collection read back from disk authorizes exactly what the one written did, and holds its
grants as integer codes (the stages after rank load the ACL whole: at 37.5 million grants as
strings it took 4.45 GiB)."""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.data.collection import Collection


@st.composite
def collections(draw: st.DrawFn) -> Collection:
    """Small collections whose ACL rows come in any order, with repeats, and leave some
    principals and documents without a grant."""
    n_docs = draw(st.integers(1, 12))
    n_principals = draw(st.integers(1, 6))
    docs = [f"d{i}" for i in draw(st.permutations(range(n_docs)))]
    principals = [f"p{i}" for i in range(n_principals)]
    grants = draw(
        st.lists(st.tuples(st.sampled_from(principals), st.sampled_from(docs)), max_size=40)
    )
    return Collection.build(
        documents=pd.DataFrame({"doc_id": docs, "text": ["t"] * n_docs}),
        queries=pd.DataFrame({"query_id": ["q1"], "text": ["t"]}),
        qrels=pd.DataFrame({"query_id": ["q1"], "doc_id": [docs[0]], "relevance": [1.0]}),
        principals=pd.DataFrame({"principal": principals}),
        acl=pd.DataFrame(grants, columns=["principal", "doc_id"], dtype=str),
    )


def _same_matrix(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.shape == b.shape and a.dtype == b.dtype
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
        assert getattr(a, part).dtype == getattr(b, part).dtype


@settings(max_examples=40, deadline=None)
@given(built=collections(), text=st.booleans())
def test_a_loaded_collection_authorizes_exactly_what_the_saved_one_did(
    built: Collection, text: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        built.save(tmp)
        loaded = Collection.load(tmp, text=text)
    _same_matrix(loaded.acl_matrix(), built.acl_matrix())
    _same_matrix(loaded.relevance_matrix(), built.relevance_matrix())
    np.testing.assert_array_equal(loaded.principal_names, built.principal_names)
    np.testing.assert_array_equal(loaded.doc_ids, built.doc_ids)


def test_a_loaded_acl_holds_each_grant_as_two_integer_codes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    built = Collection.build(
        documents=pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["t"] * 3}),
        queries=pd.DataFrame({"query_id": ["q1"], "text": ["t"]}),
        qrels=pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "relevance": [1.0]}),
        principals=pd.DataFrame({"principal": ["p", "r"]}),
        acl=pd.DataFrame({"principal": ["r", "p", "r"], "doc_id": ["c", "a", "a"]}),
    )
    built.save(tmp_path)
    acl = Collection.load(tmp_path, text=False).acl
    for column in ("principal", "doc_id"):
        assert isinstance(acl[column].dtype, pd.CategoricalDtype), acl[column].dtype
