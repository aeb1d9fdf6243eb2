"""What a user's output holds is what they need: no noise from libraries, each table once.

A progress bar only on a terminal; an empty table is a header, not a DVC warning; a sweep prints
each distinct table once; Dask's INFO log stays out of a sweep's output; ``evaluate --engine
dask`` sends no large task graph.
"""

from __future__ import annotations

from tests.helpers import FAST_PROOF, ROOT, fast_config


class _Scorer:
    def score(self, texts):
        import scipy.sparse as sp

        return sp.csr_matrix((len(texts), 3))


def test_the_rank_stages_bar_is_drawn_on_a_terminal_only(capsys):
    """A redirected stderr (a log file, CI) gets no tqdm updates: they were 150 per run."""
    from arecall.core.rank_blocks import _score_chunks

    chunks = list(_score_chunks(_Scorer(), ["q"] * 50, 5))
    assert len(chunks) == 10
    assert capsys.readouterr().err == ""


def test_an_index_free_run_writes_its_index_table_as_a_header_dvc_does_not_warn_about(tmp_path):
    """``index=none`` wrote an empty index_search.csv, which DVC reports as a warning on every
    repro (2× make repro, 4× dvc exp run, 12× --run-all): now the header of the real table."""
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.run import run_all
    from arecall.pipeline.stages.index_search import index_search

    none = Layout.run(tmp_path / "none")
    index_search({"index": {"name": "none"}}, none)
    measured = Layout.run(tmp_path / "exact")
    run_all(fast_config("index=exact", "retriever=dense_lsa", "retriever.n_components=8"), measured)
    header = measured.index_csv.read_text().splitlines()[0]
    assert none.index_csv.read_text() == header + "\n"


def test_a_vector_experiment_left_off_writes_headers_and_a_line_saying_so(tmp_path):
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages.vectors import OFF, vector_search

    layout = Layout.run(tmp_path)
    assert vector_search({"vector_search": {"enabled": False}}, layout) is None
    for name in ("vector_csv", "vector_curve"):  # the committed tables' own headers
        header = (ROOT / "reports" / getattr(layout, name).name).read_text().splitlines()[0]
        assert getattr(layout, name).read_text() == header + "\n"
    assert layout.vector_table.read_text() == OFF
    assert layout.vector_plot.read_bytes()[:4] == b"\x89PNG"


def test_a_text_run_neither_runs_nor_prints_the_vector_experiment(tmp_path, arecall, monkeypatch):
    from arecall.pipeline.stages import vectors

    ran: list[int] = []
    monkeypatch.setattr(vectors, "_compute", lambda *a: ran.append(1))
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    assert ran == [] and "selectivity" not in proc.stdout and "arecall: vectors" not in proc.stdout
