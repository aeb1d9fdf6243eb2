"""recall_loss has verity's semantics; ARecall@K and U@K follow authorized-recall's definitions."""

from __future__ import annotations

import numpy as np
import verity
from hypothesis import given
from hypothesis import strategies as st

from arecall.vector.index import Hits
from arecall.vector.oracle import authorized_recall, recall_loss, score_hits, unusable_at_k

ids = st.lists(st.integers(0, 30), max_size=12, unique=True)


def _results(items: list[int]) -> list[object]:
    return [verity.SearchResult(id=f"d{i}", score=0.0) for i in items]


@given(ids, ids)
def test_recall_loss_agrees_with_verity(approx: list[int], exact: list[int]) -> None:
    assert recall_loss(approx, exact) == verity.recall_loss(_results(approx), _results(exact))


def test_recall_loss_examples() -> None:
    assert recall_loss([], []) == (1.0, 0)
    assert recall_loss([1, 2], []) == (1.0, 0)
    assert recall_loss([], [1, 2]) == (0.0, 2)
    assert recall_loss([3, 1, 2], [1, 2]) == (1.0, 0)
    assert recall_loss(["a"], ["a", "b", "c", "d"]) == (0.25, 3)


def test_authorized_recall_definition() -> None:
    allowed = np.array([True, False, True, True])
    assert authorized_recall([0], [0, 1, 2], allowed) == 0.5  # R_A = {0, 2}
    assert authorized_recall([], [1], allowed) == 1.0  # R_A empty → 1 by definition
    assert authorized_recall([1], [1], np.ones(4, bool)) == 1.0


def test_unusable_counts_unauthorized_in_unfiltered_top_k() -> None:
    hits = Hits(np.array([[0, 1, 2, 3], [3, 2, -1, -1]]), np.zeros((2, 4), np.float32))
    allowed = np.array([True, False, True, False])
    assert unusable_at_k(hits, allowed, 4) == (2 / 4 + 1 / 4) / 2


def test_score_hits_short_is_against_oracle_length() -> None:
    oracle = Hits(np.array([[0, 1, 2], [4, -1, -1]]), np.zeros((2, 3), np.float32))
    got = Hits(np.array([[0, 2, -1], [4, -1, -1]]), np.zeros((2, 3), np.float32))
    allowed = np.array([True, True, True, False, True])
    score = score_hits(got, oracle, allowed, 3, oracle)
    assert score.returned == 1.5
    assert score.recall == (2 / 3 + 1.0) / 2
    assert score.short == 0.5  # the second query had only one authorized answer
    assert score.arecall == score.recall


def test_recall_loss_strips_faiss_padding() -> None:
    # A faiss -1 slot is padding, not a result: three real ids of four expected is short by 1.
    assert recall_loss([1, 2, 3, -1], [1, 2, 3, 4]) == (0.75, 1)
    assert recall_loss([-1, -1], [1, 2]) == (0.0, 2)
    assert recall_loss([np.int64(5), np.int64(-1)], [5, 6]) == (0.5, 1)


def test_recall_loss_counts_a_duplicate_once() -> None:
    assert recall_loss([1, 1, 1, 1], [1, 2, 3, 4]) == (0.25, 3)
    assert recall_loss(["a", "a"], ["a", "b"]) == (0.5, 1)


@given(ids, ids, st.integers(0, 4), st.integers(0, 4))
def test_padding_and_duplicates_never_hide_a_shortfall(
    approx: list[int], exact: list[int], pads: int, dups: int
) -> None:
    noisy = approx + [-1] * pads + approx[:dups]
    assert recall_loss(noisy, exact) == recall_loss(approx, exact)
