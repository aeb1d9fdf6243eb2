"""What a user's output holds is what they need: no noise from libraries, each table once.

A progress bar only on a terminal; an empty table is a header, not a DVC warning; a sweep prints
each distinct table once; Dask's INFO log stays out of a sweep's output; ``evaluate --engine
dask`` sends no large task graph.
"""

from __future__ import annotations

import pytest

from conftest import FAST_PROOF


class _Scorer:
    def score(self, texts):
        import scipy.sparse as sp

        return sp.csr_matrix((len(texts), 3))


def test_the_rank_stages_bar_is_drawn_on_a_terminal_only(capsys):
    """A redirected stderr (a log file, CI) gets no tqdm updates: they were 150 per run."""
    from arecall.pipeline.stages.rank import _score_chunks

    chunks = list(_score_chunks(_Scorer(), ["q"] * 50, 5))
    assert len(chunks) == 10
    assert capsys.readouterr().err == ""
